"""Train the tiny model of lesson 10 on one task, keeping the loss curve and snapshots of its weights.

Everything random comes from generators seeded by `seed`: the same seed gives the same batches,
the same held-out sequences and (on one machine) the same numbers. A snapshot holds the weights,
not the maps, so an explorer can show the map of any input at any saved step. A run whose loss
or weights stop being finite stops at once, puts the untrained weights back, and keeps the
losses so far on the error it raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn
from tqdm import tqdm as std_tqdm
from tqdm.auto import tqdm

from .checks import bilingual, cannot_read, check_flag, check_index, check_real, check_seed, check_size, check_tensor, shown
from .language import text
from .tasks import Batch
from .tiny_model import TinyAttentionModel, check_tokens

HELD_OUT_OFFSET = 1_000_003  # held-out sequences come from their own random stream, never the training stream
SEEDS = 2**64  # torch.manual_seed takes 0 .. 2**64 - 1; the held-out seed wraps around within them
MOST_STEPS = 1_000_000  # lesson 10 trains for 400 to 1500 steps; a million takes hours


class Task(Protocol):
    """Anything with a `batch(batch_size, generator)` method, like tasks.ReverseTask and tasks.RepeatTask."""

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch: ...


class TrainingDiverged(ValueError):
    """Training stopped because the loss or the weights stopped being finite; `run` holds the steps before."""

    def __init__(self, message: str, run: TrainingRun) -> None:
        super().__init__(message)
        self.run = run


@dataclass
class TrainingRun:
    """What training leaves behind: the loss after every step and copies of the weights at a few steps."""

    losses: list[float] = field(default_factory=list)
    snapshot_steps: list[int] = field(default_factory=list)
    snapshots: list[dict[str, torch.Tensor]] = field(default_factory=list)  # state_dict copies

    def restore(self, model: TinyAttentionModel, index: int) -> TinyAttentionModel:
        """Load snapshot `index` (0 = untrained, -1 = trained) into `model` and return it."""
        check_model(model)
        index = check_index(index, "index", len(self.snapshots), "快照数", from_end=True)
        snapshot = self.snapshots[index]
        _check_same_shapes(model, snapshot, index)
        model.load_state_dict(snapshot)
        return model


def _check_same_shapes(model: TinyAttentionModel, snapshot: dict[str, torch.Tensor], index: int) -> None:
    """A snapshot fits only a model built with the same sizes and the same causal setting."""
    own = model.state_dict()
    differences = [name for name in own.keys() | snapshot.keys()
                   if name not in own or name not in snapshot or own[name].shape != snapshot[name].shape]
    if differences:
        name = sorted(differences)[0]
        have = tuple(own[name].shape) if name in own else "none"
        saved = tuple(snapshot[name].shape) if name in snapshot else "none"
        raise ValueError(
            bilingual(
                f"snapshot {index} comes from a model of other sizes: {name} is {saved} there and {have} in `model`; "
                "build the model with the same vocab_size, context_length, d_model, num_heads, num_layers, positions, "
                "num_kv_heads and latent_dim.",
                f"快照 {index} 来自一个大小不同的模型：{name} 在快照里是 {saved}，在 `model` 里是 {have}；"
                "请用相同的 vocab_size、context_length、d_model、num_heads、num_layers、positions、num_kv_heads 和 "
                "latent_dim 创建模型。",
            )
        )
    masks = [name for name in own if name.endswith(".mask")]
    if any(not cannot_read(own[n]) and not torch.equal(own[n].cpu(), snapshot[n].cpu()) for n in masks):
        raise ValueError(
            bilingual(
                f"snapshot {index} comes from a model with causal={not model.causal}, but `model` has "
                f"causal={model.causal}; build it with causal={not model.causal}.",
                f"快照 {index} 来自 causal={not model.causal} 的模型，而 `model` 的 causal={model.causal}；"
                f"请用 causal={not model.causal} 创建模型。",
            )
        )


def check_model(model: object) -> TinyAttentionModel:
    """Training and accuracy need a TinyAttentionModel (token ids in, logits out) that holds values."""
    if not isinstance(model, TinyAttentionModel):
        raise TypeError(
            bilingual(
                f"model must be a TinyAttentionModel (token ids in, one logit per token out), got "
                f"{type(model).__name__}; build one with TinyAttentionModel(vocab_size, context_length).",
                f"model 必须是 TinyAttentionModel（输入词元编号，每个词元输出一组 logits），实际是 "
                f"{type(model).__name__}；请用 TinyAttentionModel(vocab_size, context_length) 创建。",
            )
        )
    if model.token_embedding.weight.is_meta:
        raise ValueError(
            bilingual(
                "model is on the meta device, where tensors hold no values; build it on 'cpu' (or move it with "
                "model.to_empty(device='cpu') and initialize it).",
                "model 在 meta 设备上，那里的张量没有数值；请在 'cpu' 上创建它"
                "（或用 model.to_empty(device='cpu') 移过去再初始化）。",
            )
        )
    return model


def check_task(task: object) -> Task:
    """A task is anything with a batch(batch_size, generator) method, like tasks.ReverseTask."""
    if isinstance(task, type) or not callable(getattr(task, "batch", None)):
        raise TypeError(
            bilingual(
                f"task must have a batch(batch_size, generator) method, like tasks.ReverseTask(), got "
                f"{shown(task)}; build it with ReverseTask() or RepeatTask() (note the brackets).",
                f"task 必须带有 batch(batch_size, generator) 方法，例如 tasks.ReverseTask()，实际是 {shown(task, True)}；"
                "请用 ReverseTask() 或 RepeatTask() 创建（注意括号）。",
            )
        )
    return task


def check_batch(batch: object, model: TinyAttentionModel, name: str = "batch") -> Batch:
    """(inputs, targets, scored): token ids and targets (b, T) the model can read, and a boolean mask that scores some."""
    parts = tuple(batch) if isinstance(batch, (tuple, list)) else ()
    if len(parts) != 3 or not all(isinstance(p, torch.Tensor) for p in parts):
        raise TypeError(
            bilingual(
                f"{name} must be (inputs, targets, scored), three tensors as task.batch(...) or held_out_batch(...) "
                f"returns them, got {type(batch).__name__}.",
                f"{name} 必须是 (inputs, targets, scored) 三个张量，即 task.batch(...) 或 held_out_batch(...) 的返回值，"
                f"实际是 {type(batch).__name__}。",
            )
        )
    inputs, targets, scored = parts
    if any(part.is_meta for part in parts):
        raise ValueError(
            bilingual(
                f"{name} is on the meta device, where tensors hold no values to score; make it on 'cpu'.",
                f"{name} 在 meta 设备上，那里的张量没有可以计分的数值；请在 'cpu' 上生成。",
            )
        )
    inputs = check_tokens(inputs, model.vocab_size, model.context_length, inputs.device, "inputs")
    targets = _check_targets(targets, scored, inputs.shape, model.vocab_size, name)
    return inputs, targets, scored


def _check_targets(targets: object, scored: object, shape: torch.Size, vocab_size: int, name: str) -> torch.Tensor:
    """Targets are token ids of shape `shape` (returned as int64); scored is a boolean mask of that shape, not all False."""
    if not isinstance(scored, torch.Tensor) or scored.dtype != torch.bool:
        kind = scored.dtype if isinstance(scored, torch.Tensor) else type(scored).__name__
        raise TypeError(
            bilingual(
                f"scored (in {name}) must be a boolean tensor, True where the answer counts, got {kind}; "
                "an integer tensor would pick rows instead. Convert it with scored.bool().",
                f"scored（{name} 中）必须是布尔张量，True 表示该位置计分，实际是 {kind}；"
                "整数张量会被当作行号来取数。请用 scored.bool() 转换。",
            )
        )
    targets = check_tokens(targets, vocab_size, shape[-1], None, "targets")  # ids of the same vocabulary
    if targets.shape != shape or scored.shape != shape:
        raise ValueError(
            bilingual(
                f"targets and scored (in {name}) must both have shape {tuple(shape)}, got {tuple(targets.shape)} "
                f"and {tuple(scored.shape)}.",
                f"targets 和 scored（{name} 中）的形状都必须是 {tuple(shape)}，实际是 {tuple(targets.shape)} "
                f"和 {tuple(scored.shape)}。",
            )
        )
    if not cannot_read(scored) and not scored.any():
        raise ValueError(
            bilingual(
                f"scored (in {name}) is False everywhere, so there is nothing to measure; score one position or more.",
                f"scored（{name} 中）处处为 False，没有可以计分的位置；请至少让一个位置计分。",
            )
        )
    return targets


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the scored positions only: (b, T, V) logits, (b, T) targets and mask."""
    check_tensor(logits, "logits", ranks=(3,))  # (batch, T, vocab_size), as the model returns it
    targets = _check_targets(targets, scored, logits.shape[:2], logits.shape[-1], "masked_loss")
    if scored.device != logits.device or targets.device != logits.device:
        raise TypeError(
            bilingual(
                f"logits are on {logits.device}, so targets and scored must be there too; move them with .to('{logits.device}').",
                f"logits 在 {logits.device} 上，targets 和 scored 也必须在那里；请用 .to('{logits.device}') 移过去。",
            )
        )
    return nn.functional.cross_entropy(logits[scored], targets[scored])


def _check_task_fits(task: Task, model: TinyAttentionModel) -> None:
    """A task's tokens and sequences must fit the model's vocabulary and context (when the task says its sizes)."""
    for task_size, model_size in (("vocab_size", "vocab_size"), ("length", "context_length")):
        wanted, have = getattr(task, task_size, None), getattr(model, model_size)
        if isinstance(wanted, int) and wanted > have:
            raise ValueError(
                bilingual(
                    f"task has {task_size}={wanted} but model was built with {model_size}={have}; "
                    f"build the model with {model_size}={wanted} or more.",
                    f"task 的 {task_size}={wanted}，而 model 的 {model_size}={have}；"
                    f"请用 {model_size}={wanted} 或更大的值创建模型。",
                )
            )


def check_progress(progress: object) -> object:
    """True or False (make a bar or not), or an existing tqdm bar to advance by one per step."""
    if isinstance(progress, std_tqdm):  # tqdm.auto's bar in a notebook is a subclass of it too
        return progress
    try:
        return check_flag(progress, "progress")
    except TypeError:
        raise TypeError(
            bilingual(
                f"progress must be True, False or a tqdm progress bar to share, got {shown(progress)}.",
                f"progress 只能是 True、False 或一个共用的 tqdm 进度条，实际是 {shown(progress, True)}。",
            )
        ) from None


def progress_bar(progress: bool | tqdm, total: int) -> tqdm:
    """A training bar of `total` steps (hidden when progress is False), or the shared bar passed in.

    It redraws at most twice a second: in JupyterLab every redraw of a bar is work for the browser
    (lesson 16's Run All cost the browser 16 CPU-seconds with tqdm's ten redraws a second, 6 with two).
    """
    if not isinstance(progress, bool):
        return progress
    return tqdm(total=total, desc=text("training", "训练"), disable=not progress, mininterval=0.5)


def train(
    model: TinyAttentionModel,
    task: Task,
    steps: int,
    seed: int,
    snapshots: int = 10,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    progress: bool | tqdm = True,
) -> TrainingRun:
    """AdamW on fresh random batches; copies the weights `snapshots` times, evenly spaced, plus step 0.

    `progress` is True (a bar of its own), False (none) or a tqdm bar that several runs share: each
    step advances it by one. When the loss or the weights stop being finite, the weights of step 0
    are put back and TrainingDiverged (a ValueError) is raised; its `run` holds the losses so far.
    """
    check_model(model)
    check_task(task)
    _check_task_fits(task, model)
    steps = check_size(steps, "steps", maximum=MOST_STEPS)
    seed = check_seed(seed)
    snapshots = check_size(snapshots, "snapshots")
    batch_size = check_size(batch_size, "batch_size")
    learning_rate = check_real(learning_rate, "learning_rate", "3e-3", positive=True)
    progress = check_progress(progress)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise ValueError(
            bilingual(
                "model has no parameter that requires grad, so there is nothing to train; "
                "unfreeze them with model.requires_grad_(True).",
                "model 没有需要梯度的参数，没有可训练的东西；请用 model.requires_grad_(True) 解冻。",
            )
        )
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(trainable, lr=learning_rate)
    # 0 = untrained; the last one after the loop; with more snapshots than steps, every step is kept
    keep = set(range(steps)) if snapshots >= steps else {round(i * steps / snapshots) for i in range(snapshots)}
    device = model.token_embedding.weight.device
    run = TrainingRun()

    def take_snapshot(step: int) -> None:
        run.snapshot_steps.append(step)
        run.snapshots.append({name: value.detach().clone() for name, value in model.state_dict().items()})

    def diverged(step: int) -> TrainingDiverged:
        model.load_state_dict(run.snapshots[0])  # the weights train was given, not the broken ones
        low_precision = model.token_embedding.weight.element_size() < 4
        dtype_en = " or train in float32 (model.float())" if low_precision else ""
        dtype_zh = "，或改用 float32 训练（model.float()）" if low_precision else ""
        return TrainingDiverged(
            bilingual(
                f"training diverged at step {step}: lower learning_rate (now {learning_rate:g}){dtype_en}. "
                "The model has its weights from before train again; the losses so far are in error.run.losses.",
                f"训练在第 {step} 步发散了：请调小 learning_rate（现在是 {learning_rate:g}）{dtype_zh}。"
                "模型已恢复为训练前的权重；此前的损失保存在 error.run.losses 中。",
            ),
            run,
        )

    threads = torch.get_num_threads()
    # Tensors this small gain nothing from a second thread, which only waits (4-8 times slower on a busy
    # 2-core machine); one thread also gives the same numbers whatever thread count the notebook set.
    torch.set_num_threads(1)
    bar = progress_bar(progress, steps)
    try:
        model.train()
        for step in range(steps):
            if step in keep:
                take_snapshot(step)
            inputs, targets, scored = check_batch(task.batch(batch_size, generator), model, "task.batch(...)")
            inputs, targets, scored = inputs.to(device), targets.to(device), scored.to(device)
            try:
                logits = model(inputs)
            except ValueError:  # the weights the last step left hold NaN, or overflow: a diverged run
                if step == 0:
                    raise  # the model was broken before training: its own message says how
                raise diverged(step) from None
            loss = masked_loss(logits, targets, scored)
            if not math.isfinite(loss.item()):
                raise diverged(step)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.losses.append(loss.item())
            bar.update(1)
        if not all(torch.isfinite(p).all() for p in trainable):
            raise diverged(steps)  # the last step broke the weights, with no forward after it to notice
        take_snapshot(steps)
    finally:
        torch.set_num_threads(threads)
        model.eval()
        if bar is not progress:
            bar.close()
    return run


def held_out_batch(task: Task, seed: int, batch_size: int = 1000) -> Batch:
    """Fresh sequences from a random stream training never reads (seeded with seed + HELD_OUT_OFFSET)."""
    check_task(task)
    seed = check_seed(seed)
    batch_size = check_size(batch_size, "batch_size")
    return task.batch(batch_size, torch.Generator().manual_seed((seed + HELD_OUT_OFFSET) % SEEDS))


def accuracy(model: TinyAttentionModel, batch: Batch) -> float:
    """Share of scored positions where the model's most likely token is the right one."""
    check_model(model)
    inputs, targets, scored = check_batch(batch, model)
    device = model.token_embedding.weight.device
    predictions, _ = model.predict(inputs.to(device))
    scored, targets = scored.to(device), targets.to(device)
    return (predictions[scored] == targets[scored]).float().mean().item()
