"""Lesson 16's recall grid: small models trained on associative recall, four seeds each, saved for the lesson to read.

Four parts, each a RecallTask and a set of models (d_model 32, one head):
- capacity: up to 24 pairs of 64 keys, with queries and keys of d_k = 8 or 16, so a state of
  d_k × 32 numbers meets more pairs than it has key directions; softmax attention with all tokens,
  and within a window that keeps as many numbers as the d_k = 8 states; a hybrid (linear under
  softmax within that window, which cannot recall alone), and two linear layers as its depth-matched control;
- cliff: 16 keys, up to 16 pairs, with d_k = 16 (a direction for every key) or 8 (two keys a direction);
- rebind: every key bound again to a new value before the questions (the delta rule's overwrite);
- boundary: an earlier document of other pairs before a boundary token (the gate's forgetting), 16 keys in d_k = 8,
  so the two documents together can hold twice as many keys as the state has directions.
Every model trains 1,600 steps at a peak learning rate of 3e-3: at 400 steps and 1e-2 the delta rule stayed on a
plateau with more of the seeds, and 3,200 steps lowered held-out recall. One seed in four still stalls on rebind
and boundary, which is why the lesson reads an ordering only where the seeds agree. 13-38 s per model on one core,
31 minutes in all.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ...recurrent.recall import MODELS, RecallTask, recall_grid
from ...results import SAVED_RECALL, load_saved
from .harness import environment
from .report import save_json

D_MODEL = 32
SMALL_KEYS = 8
# A window that keeps at most as many numbers as a state of d_k × d_model: each token keeps a key and a value.
MATCHED_WINDOW = SMALL_KEYS * D_MODEL // (SMALL_KEYS + D_MODEL)  # 256 // 40 = 6 tokens, 240 numbers


@dataclass(frozen=True)
class RecallRun:
    """One model trained on one part's task with the grid's seeds, then scored at each number of pairs."""

    part: str
    name: str
    kinds: tuple[str, ...]
    key_size: int | None = None
    window: int | None = None


@dataclass(frozen=True)
class RecallWorkload:
    """The tasks of the parts, the pairs each is scored at, the runs, seeds, training steps and peak learning rate."""

    tasks: dict
    pairs: dict
    runs: tuple[RecallRun, ...]
    seeds: tuple[int, ...]
    steps: int
    learning_rate: float = 1e-2


def _capacity_runs() -> tuple[RecallRun, ...]:
    runs = [RecallRun("capacity", kind, MODELS[kind], size) for size in (SMALL_KEYS, 2 * SMALL_KEYS)
            for kind in ("linear", "delta")]
    runs += [RecallRun("capacity", "softmax", MODELS["softmax"], SMALL_KEYS),
             RecallRun("capacity", "window", MODELS["softmax"], SMALL_KEYS, MATCHED_WINDOW),
             RecallRun("capacity", "hybrid_window", MODELS["hybrid"], SMALL_KEYS, MATCHED_WINDOW),
             RecallRun("capacity", "two_linear", ("linear", "linear"), SMALL_KEYS)]
    return tuple(runs)


def _cliff_runs() -> tuple[RecallRun, ...]:
    return tuple(RecallRun("cliff", kind, MODELS[kind], size) for size in (SMALL_KEYS, 2 * SMALL_KEYS)
                 for kind in ("linear", "delta"))


def _variant_runs(part: str) -> tuple[RecallRun, ...]:
    size = D_MODEL if part == "rebind" else SMALL_KEYS
    return tuple(RecallRun(part, kind, MODELS[kind], size) for kind in ("softmax", "linear", "delta", "gated_delta"))


RECALL_FULL = RecallWorkload(
    tasks={"capacity": dict(num_keys=64, most_pairs=24), "cliff": dict(num_keys=16, most_pairs=16),
           "rebind": dict(num_keys=64, most_pairs=8, rebind=True),
           "boundary": dict(num_keys=16, most_pairs=8, boundary=True)},
    pairs={"capacity": (4, 8, 12, 16, 24), "cliff": (2, 4, 8, 12, 16), "rebind": (2, 4, 8), "boundary": (2, 4, 6, 8)},
    runs=_cliff_runs() + _variant_runs("rebind") + _variant_runs("boundary") + _capacity_runs(),
    seeds=(0, 1, 2, 3), steps=1600, learning_rate=3e-3)
RECALL_QUICK = replace(RECALL_FULL, runs=tuple(run for run in RECALL_FULL.runs if run.name == "delta"), steps=5)


def run_recall(workload: RecallWorkload, out: Path, quick: bool, only: tuple[str, ...] = ()) -> dict:
    """Train every run (or those of the parts in `only`), saving after each so a stopped grid keeps its rows."""
    path = out / "recall.json" if quick else SAVED_RECALL
    out.mkdir(parents=True, exist_ok=True)
    results = {"environment": environment(1), "workload": _described(workload), "rows": [], "seconds": {}}
    if only and path.exists():  # keep the other parts' rows
        kept = load_saved(path)
        results["rows"] = [row for row in kept["rows"] if row["part"] not in only]
        results["seconds"] = {key: value for key, value in kept["seconds"].items() if key.split("/")[0] not in only}
    for run in workload.runs:
        if only and run.part not in only:
            continue
        began = time.perf_counter()
        task = RecallTask(**workload.tasks[run.part])
        rows = recall_grid(task, D_MODEL, workload.seeds, workload.steps, workload.pairs[run.part], {run.name: run.kinds},
                           progress=False, key_size=run.key_size, window=run.window,
                           learning_rate=workload.learning_rate)
        results["rows"] += [{"part": run.part, "layers": list(run.kinds), **row} for row in rows]
        results["seconds"][f"{run.part}/{run.name}/{run.key_size}"] = round(time.perf_counter() - began)
        save_json(results, path)
        print(f"{run.part} {run.name} d_k={run.key_size} window={run.window}: "
              + " ".join(f"{r['pairs']}:{r['accuracy']:.2f}" for r in rows), flush=True)
    return results


def _described(workload: RecallWorkload) -> dict:
    """The workload as JSON: tasks, pairs, runs, seeds, steps, and the model width."""
    return {"d_model": D_MODEL, "tasks": workload.tasks, "pairs": {k: list(v) for k, v in workload.pairs.items()},
            "runs": [asdict(run) for run in workload.runs], "seeds": list(workload.seeds), "steps": workload.steps,
            "batch_size": 64, "learning_rate": workload.learning_rate}
