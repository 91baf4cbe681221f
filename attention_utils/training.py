"""Train the tiny model of lesson 10 on one task, keeping the loss curve and snapshots of its weights.

Everything random comes from generators seeded by `seed`: the same seed gives the same batches,
the same held-out sequences and (on one machine) the same numbers. A snapshot holds the weights,
not the maps, so an explorer can show the map of any input at any saved step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import nn
from tqdm.auto import tqdm

from .checks import check_size
from .language import text
from .tasks import Batch
from .tiny_model import TinyAttentionModel

HELD_OUT_OFFSET = 1_000_003  # held-out sequences come from their own random stream, never the training stream


class Task(Protocol):
    """Anything with a `batch(batch_size, generator)` method, like tasks.ReverseTask and tasks.RepeatTask."""

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch: ...


@dataclass
class TrainingRun:
    """What training leaves behind: the loss after every step and copies of the weights at a few steps."""

    losses: list[float] = field(default_factory=list)
    snapshot_steps: list[int] = field(default_factory=list)
    snapshots: list[dict[str, torch.Tensor]] = field(default_factory=list)  # state_dict copies

    def restore(self, model: TinyAttentionModel, index: int) -> TinyAttentionModel:
        """Load snapshot `index` (0 = untrained, -1 = trained) into `model` and return it."""
        model.load_state_dict(self.snapshots[index])
        return model


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the scored positions only: (b, T, V) logits, (b, T) targets and mask."""
    return nn.functional.cross_entropy(logits[scored], targets[scored])


def train(
    model: TinyAttentionModel,
    task: Task,
    steps: int,
    seed: int,
    snapshots: int = 10,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    progress: bool = True,
) -> TrainingRun:
    """AdamW on fresh random batches; copies the weights `snapshots` times, evenly spaced, plus step 0."""
    check_size(steps, "steps")
    check_size(snapshots, "snapshots")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    keep = {round(i * steps / snapshots) for i in range(snapshots)}  # 0 = untrained; the last one after the loop
    run = TrainingRun()

    def take_snapshot(step: int) -> None:
        run.snapshot_steps.append(step)
        run.snapshots.append({name: value.detach().clone() for name, value in model.state_dict().items()})

    threads = torch.get_num_threads()
    # Tensors this small gain nothing from a second thread, which only waits (4-8 times slower on a busy
    # 2-core machine); one thread also gives the same numbers whatever thread count the notebook set.
    torch.set_num_threads(1)
    try:
        model.train()
        for step in tqdm(range(steps), desc=text("training", "训练"), disable=not progress):
            if step in keep:
                take_snapshot(step)
            inputs, targets, scored = task.batch(batch_size, generator)
            loss = masked_loss(model(inputs), targets, scored)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.losses.append(loss.item())
        take_snapshot(steps)
    finally:
        torch.set_num_threads(threads)
        model.eval()
    return run


def held_out_batch(task: Task, seed: int, batch_size: int = 1000) -> Batch:
    """Fresh sequences from a random stream training never reads (seeded with seed + HELD_OUT_OFFSET)."""
    return task.batch(batch_size, torch.Generator().manual_seed(seed + HELD_OUT_OFFSET))


def accuracy(model: TinyAttentionModel, batch: Batch) -> float:
    """Share of scored positions where the model's most likely token is the right one."""
    inputs, targets, scored = batch
    predictions, _ = model.predict(inputs)
    return (predictions[scored] == targets[scored]).float().mean().item()
