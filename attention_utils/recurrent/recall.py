"""The small models of lesson 16 that learn multi-query associative recall (the task is in recall_task), and their grid.

Each model is an embedding, a one-token shift, one or two token-mixing layers (softmax attention,
optionally within a sliding window, linear attention, the delta rule or the gated delta rule) and a
read-out. `recall_grid` trains a set of them with several seeds and measures held-out recall.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..checks import bilingual, check_flag, check_heads, check_real, check_seed, check_size, check_tensor, shown
from ..devices import check_fits
from ..modules import MOST_MODULES
from ..tiny_model import check_model_fits, check_tokens
from ..training import check_progress, masked_loss, progress_bar
from .delta_rule import delta_rule_parallel
from .linear_attention import feature_map, linear_attention_parallel
from .recall_task import HELD_OUT_EVERY, RecallTask, check_pairs, sequence_length

__all__ = ["HELD_OUT_EVERY", "KINDS", "MODELS", "MODEL_NAMES", "Mixer", "RecallModel", "RecallTask", "recall_accuracy",
           "recall_grid", "train_recall"]
KINDS = ("softmax", "linear", "delta", "gated_delta")


def check_recall_setup(model: object, task: object) -> None:
    """A RecallModel and a RecallTask whose tokens it can read (its vocab_size at least the task's)."""
    if not isinstance(model, RecallModel):
        raise TypeError(bilingual(f"model must be a RecallModel, got {shown(model)}.",
                                  f"model 必须是 RecallModel，实际是 {shown(model, True)}。"))
    if not isinstance(task, RecallTask):
        raise TypeError(bilingual(f"task must be a RecallTask, got {shown(task)}; for example RecallTask(num_keys=32).",
                                  f"task 必须是 RecallTask，实际是 {shown(task, True)}；例如 RecallTask(num_keys=32)。"))
    if model.vocab_size < task.vocab_size:
        raise ValueError(bilingual(
            f"the task's tokens need vocab_size={task.vocab_size}, but model was built with vocab_size={model.vocab_size}; "
            "build it with RecallModel(task.vocab_size, ...).",
            f"任务的词元需要 vocab_size={task.vocab_size}，而 model 的 vocab_size={model.vocab_size}；"
            "请用 RecallModel(task.vocab_size, ...) 创建模型。"))
    if model.embedding.weight.is_meta:
        raise ValueError(bilingual(
            "model is on the meta device, where tensors hold no values to train or score; build it on 'cpu' (or move it "
            "with model.to_empty(device='cpu') and initialize it again).",
            "model 在 meta 设备上，那里的张量没有数值，无法训练或评分；请在 'cpu' 上创建它"
            "（或者用 model.to_empty(device='cpu') 移过去，再重新初始化）。"))


def _check_kinds(kinds: object) -> tuple[str, ...]:
    """A non-empty tuple or list of layer kinds from KINDS, at most MOST_MODULES of them."""
    if not isinstance(kinds, (tuple, list)) or not kinds:
        raise TypeError(bilingual(f"kinds must be a non-empty tuple of layer kinds from {KINDS}, got {shown(kinds)}.",
                                  f"kinds 必须是由 {KINDS} 中的层类型组成的非空元组，实际是 {shown(kinds, True)}。"))
    check_size(len(kinds), "len(kinds)", maximum=MOST_MODULES)
    for index, kind in enumerate(kinds):
        _check_kind(kind, f"kinds[{index}]")
    return tuple(kinds)


def _check_kind(kind: object, name: str = "kind") -> str:
    if kind not in KINDS:
        raise (TypeError if not isinstance(kind, str) else ValueError)(bilingual(
            f"{name} must be one of {KINDS}, got {shown(kind)}.", f"{name} 必须是 {KINDS} 之一，实际是 {shown(kind, True)}。"))
    return kind


class Mixer(nn.Module):
    """One token-mixing layer: softmax attention, linear attention, the delta rule or the gated delta rule.

    key_size is d_k per head (head_dim when None): a state is d_k × head_dim, so changing d_k alone
    changes the state's size while the model keeps its width. window (softmax only) lets each token
    see itself and the window − 1 tokens before it, so the cache never holds more than window tokens.
    """

    def __init__(self, kind: str, d_model: int, num_heads: int = 1, key_size: int | None = None,
                 window: int | None = None) -> None:
        super().__init__()
        _check_kind(kind)
        d_model, num_heads = check_size(d_model, "d_model"), check_size(num_heads, "num_heads")
        check_heads(d_model, num_heads, "d_model")
        key_size = None if key_size is None else check_size(key_size, "key_size")
        self.window = None if window is None or kind != "softmax" else check_size(window, "window")
        if key_size is not None:  # the queries and keys of every head: 2 x key_size numbers per head and input feature
            check_fits(key_size, "key_size", lambda k: 4 * d_model * num_heads * 2 * k)
        self.kind, self.num_heads, self.head_dim = kind, num_heads, d_model // num_heads
        self.key_size = self.head_dim if key_size is None else key_size  # d_k per head; values keep head_dim
        self.norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, num_heads * (2 * self.key_size + self.head_dim), bias=False)
        self.rates = nn.Linear(d_model, 2 * num_heads) if kind in ("delta", "gated_delta") else None
        if self.rates is not None:
            nn.init.constant_(self.rates.bias[num_heads:], 5.0)  # α ≈ 0.993 at first: remember, then learn to forget
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (b, T, d_model) plus what this layer reads from the tokens before each one (a residual connection)."""
        check_tensor(x, "x", ranks=(3,), last_dim=self.norm.normalized_shape[0], like=self.qkv.weight, last_name="d_model")
        b, length, d = x.shape
        h = self.norm(x)
        sizes = (self.num_heads * self.key_size,) * 2 + (self.num_heads * self.head_dim,)
        q, k, v = (part.view(b, length, self.num_heads, size // self.num_heads).transpose(1, 2)  # sizes, not -1: batch 0
                   for part, size in zip(self.qkv(h).split(sizes, dim=-1), sizes))  # (b, heads, T, d_k or d_v)
        if self.kind == "softmax" and self.window is not None:
            back = torch.arange(length)[:, None] - torch.arange(length)[None, :]  # how far back each key lies
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=((back >= 0) & (back < self.window)).to(x.device))
        elif self.kind == "softmax":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.kind == "linear":
            out = linear_attention_parallel(feature_map(q), feature_map(k), v, normalize=True)
        else:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # unit keys: β = 1 overwrites exactly
            beta, gate = torch.sigmoid(self.rates(h)).transpose(1, 2).chunk(2, dim=1)  # (b, heads, T) each
            out = delta_rule_parallel(q, k, v, beta, gate if self.kind == "gated_delta" else None)
        return x + self.out_proj(out.transpose(1, 2).reshape(b, length, d))

    def state_floats(self, length: int) -> int:
        """Numbers this layer keeps per sequence while decoding: the state (with linear attention's normalizer Σ φ(k)),
        or the cache after `length` tokens (at most `window` of them)."""
        length = check_size(length, "length", minimum=0)
        if self.kind == "softmax":
            return min(length, self.window or length) * self.num_heads * (self.key_size + self.head_dim)
        return self.num_heads * self.key_size * (self.head_dim + (self.kind == "linear"))


class RecallModel(nn.Module):
    """Embeddings, a one-token shift (each position also sees the token before it), mixing layers, a read-out.

    The shift is the short convolution every recent recurrent model has (DeltaNet, Mamba): it lets a
    single layer pair a value with the key just before it.
    """

    def __init__(self, vocab_size: int, d_model: int, kinds: tuple[str, ...], num_heads: int = 1,
                 key_size: int | None = None, window: int | None = None) -> None:
        super().__init__()
        self.vocab_size, self.d_model = check_size(vocab_size, "vocab_size"), check_size(d_model, "d_model")
        num_heads = check_size(num_heads, "num_heads")
        check_heads(self.d_model, num_heads, "d_model")
        key_size = None if key_size is None else check_size(key_size, "key_size")
        kinds = _check_kinds(kinds)
        check_model_fits(self.vocab_size, 1, self.d_model, len(kinds))  # the weights of lesson 10's model, about as many
        vocab_size, d_model = self.vocab_size, self.d_model  # plain ints from here on
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.shift = nn.Linear(d_model, d_model, bias=False)
        window = None if window is None else check_size(window, "window")  # for the softmax layers
        self.layers = nn.ModuleList(Mixer(kind, d_model, num_heads, key_size, window) for kind in kinds)
        self.norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (b, T, vocab_size)."""
        tokens = check_tokens(tokens, self.vocab_size, 1 << 20, self.embedding.weight.device)
        x = self.embedding(tokens)
        x = x + self.shift(F.pad(x, (0, 0, 1, 0))[:, :-1])  # x_t + W x_{t-1}
        for layer in self.layers:
            x = layer(x)
        return self.readout(self.norm(x))

    def state_floats(self, length: int) -> int:
        """Numbers kept per sequence while decoding, over all layers, after `length` tokens."""
        return sum(layer.state_floats(length) for layer in self.layers)


def train_recall(model: RecallModel, task: RecallTask, steps: int, seed: int, batch_size: int = 64,
                 learning_rate: float = 1e-2, progress: bool | tqdm = True) -> list[float]:
    """AdamW on fresh training batches (N drawn per batch), one thread; returns the losses."""
    check_recall_setup(model, task)
    steps, seed = check_size(steps, "steps", maximum=1_000_000), check_seed(seed)
    batch_size = check_size(batch_size, "batch_size")
    learning_rate = check_real(learning_rate, "learning_rate", "1e-2", positive=True)
    progress = check_progress(progress)
    generator = torch.Generator().manual_seed(seed)
    device = model.embedding.weight.device  # batches are drawn on the CPU (a CPU generator): each goes to the model
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    # A tenth of the steps to warm up; torch divides by zero when that is exactly one step (steps=10),
    # so ten steps get none, as fewer steps do.
    warm_up = 0.1 if steps != 10 else 0.05
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, learning_rate, total_steps=steps, pct_start=warm_up)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: a second thread only waits, and one thread repeats exactly
    bar = progress_bar(progress, steps)
    losses = []
    try:
        model.train()
        diverged = ValueError(bilingual(f"training diverged: lower learning_rate (now {learning_rate:g}).",
                                        f"训练发散了：请调小 learning_rate（现在是 {learning_rate:g}）。"))
        for step in range(steps):
            inputs, targets, scored = (t.to(device) for t in task.batch(batch_size, generator))
            try:
                loss = masked_loss(model(inputs), targets, scored)
            except ValueError:  # NaN weights, or a state that overflowed: what the last update left
                if step == 0:
                    raise  # the model was broken before training: its own message says how
                raise diverged from None
            if not math.isfinite(loss.item()):
                raise diverged
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            bar.update(1)
    finally:
        torch.set_num_threads(threads)
        model.eval()
        if bar is not progress:
            bar.close()
    return losses


@torch.no_grad()
def recall_accuracy(model: RecallModel, task: RecallTask, num_pairs: int, seed: int, batch_size: int = 500) -> float:
    """Share of asked keys answered with the right value, on held-out sequences with `num_pairs` pairs.

    One thread, as in training: on a busy 2-core machine a second thread waits for the first and
    made this step ten times slower or worse.
    """
    check_recall_setup(model, task)
    generator = torch.Generator().manual_seed(check_seed(seed))
    inputs, targets, scored = task.batch(batch_size, generator, num_pairs=num_pairs, held_out=True)
    device = model.embedding.weight.device  # the batch is drawn on the CPU (a CPU generator): move it to the model
    inputs, targets, scored = inputs.to(device), targets.to(device), scored.to(device)
    was_training, threads = model.training, torch.get_num_threads()
    model.eval()
    torch.set_num_threads(1)
    try:
        predictions = model(inputs).argmax(dim=-1)
    finally:
        torch.set_num_threads(threads)
        model.train(was_training)
    return (predictions[scored] == targets[scored]).float().mean().item()


# The five models of lesson 16: one mixing layer each, and the hybrid with a linear layer under a softmax layer.
MODELS = {
    "softmax": ("softmax",),
    "linear": ("linear",),
    "delta": ("delta",),
    "gated_delta": ("gated_delta",),
    "hybrid": ("linear", "softmax"),
}
MODEL_NAMES = {
    "softmax": ("softmax attention", "softmax 注意力"),
    "linear": ("linear attention", "线性注意力"),
    "delta": ("delta rule", "delta 规则"),
    "gated_delta": ("gated delta rule", "门控 delta 规则"),
    "hybrid": ("hybrid: linear + softmax", "混合：线性 + softmax"),
    # the bench's recall grid (course.bench.recall_grid): a window that keeps as many numbers as a state, and controls
    "window": ("softmax, memory-matched window", "softmax，与状态内存相同的窗口"),
    "hybrid_window": ("hybrid: linear + windowed softmax", "混合：线性 + 窗口 softmax"),
    "two_linear": ("two linear layers", "两层线性注意力"),
}


def recall_grid(task: RecallTask, d_model: int, seeds: tuple[int, ...], steps: int, pairs: tuple[int, ...],
                models: dict[str, tuple[str, ...]] = MODELS, progress: bool | tqdm = True, key_size: int | None = None,
                batch_size: int = 64, window: int | None = None, learning_rate: float = 1e-2) -> list[dict]:
    """Train every model with every seed, then measure held-out recall at each number of pairs; one row per measurement.

    key_size is d_k, the size of the queries and keys (d_model when None); the values keep d_model
    numbers, so a fixed state holds key_size × d_model numbers. batch_size and learning_rate are training's; window
    is the sliding window of every softmax layer (None: all tokens). `progress` is True, False or a tqdm bar that several
    grids share (each training step advances it by one).
    """
    _check_grid(task, d_model, seeds, steps, pairs, models, key_size, batch_size)
    window = None if window is None else check_size(window, "window")
    learning_rate = check_real(learning_rate, "learning_rate", "1e-2", positive=True)
    progress = check_progress(progress)
    rows = []
    bar = progress_bar(progress, len(seeds) * len(models) * steps)
    try:
        for seed in seeds:
            for name, kinds in models.items():
                torch.manual_seed(seed)  # the initial weights
                model = RecallModel(task.vocab_size, d_model, kinds, key_size=key_size, window=window)
                train_recall(model, task, steps, seed, batch_size=batch_size, learning_rate=learning_rate, progress=bar)
                for num_pairs in pairs:
                    length = sequence_length(num_pairs, task.rebind, task.boundary)
                    rows.append({"model": name, "seed": seed, "pairs": num_pairs, "key_size": model.layers[0].key_size,
                                 "window": window, "accuracy": recall_accuracy(model, task, num_pairs, seed),
                                 "kept_floats": model.state_floats(length)})
    finally:
        if bar is not progress:  # a bar passed in belongs to the caller
            bar.close()
    return rows


def _check_grid(task: object, d_model: object, seeds: object, steps: object, pairs: object, models: object,
                key_size: object, batch_size: object) -> None:
    """Everything recall_grid's rows need, checked before the first model trains (that takes minutes)."""
    if not isinstance(task, RecallTask):
        raise TypeError(bilingual(f"task must be a RecallTask, got {shown(task)}; for example RecallTask(num_keys=32).",
                                  f"task 必须是 RecallTask，实际是 {shown(task, True)}；例如 RecallTask(num_keys=32)。"))
    check_size(d_model, "d_model")
    if key_size is not None:
        check_size(key_size, "key_size")
    check_size(steps, "steps", maximum=1_000_000)
    check_size(batch_size, "batch_size")
    for name, values in (("seeds", seeds), ("pairs", pairs)):
        if not isinstance(values, (tuple, list)) or not values:
            raise TypeError(bilingual(f"{name} must be a non-empty tuple, such as {name}=(0, 1), got {shown(values)}.",
                                      f"{name} 必须是非空元组，例如 {name}=(0, 1)，实际是 {shown(values, True)}。"))
    for seed in seeds:
        check_seed(seed)
    for num_pairs in pairs:
        check_pairs(num_pairs, "pairs", task.pair_limit)
    if not isinstance(models, dict) or not models:
        raise TypeError(bilingual(f"models must be a non-empty dict of name: kinds, like MODELS, got {shown(models)}.",
                                  f"models 必须是非空字典，名字对应层类型，例如 MODELS，实际是 {shown(models, True)}。"))
    for kinds in models.values():
        _check_kinds(kinds)
