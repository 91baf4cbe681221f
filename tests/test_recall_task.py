"""Lesson 16's recall task: the answers are in the context, and held-out sequences share no key–value pair with training."""

from __future__ import annotations

import pytest
import torch

from attention_utils.recurrent.recall import RecallModel, RecallTask, recall_accuracy, recall_grid, train_recall
from attention_utils.recurrent.recall_task import recall_sequence

pytestmark = pytest.mark.usefixtures("one_thread")


def pairs_in(inputs: torch.Tensor, num_keys: int) -> set[tuple[int, int]]:
    """Every (key, value) pair listed in the first half of each sequence, value counted from 0."""
    found = set()
    for row in inputs.tolist():
        listed = row[: len(row) // 2]
        found |= {(key, value - num_keys) for key, value in zip(listed[::2], listed[1::2])}
    return found


def test_held_out_sequences_share_no_pair_with_training():
    task = RecallTask(num_keys=16, most_pairs=8)
    generator = torch.Generator().manual_seed(0)
    training = set().union(*(pairs_in(task.batch(64, generator)[0], 16) for _ in range(50)))
    held_out = set().union(*(pairs_in(task.batch(64, generator, num_pairs=n, held_out=True)[0], 16) for n in range(1, 9)))
    assert training and held_out
    assert training.isdisjoint(held_out)
    assert len(training | held_out) == 16 * 16  # together they use every combination: the split hides none by accident
    assert all((key + value) % 4 == 0 for key, value in held_out)


@pytest.mark.parametrize("held_out", [False, True])
def test_every_scored_answer_is_the_value_listed_with_its_key(held_out):
    task = RecallTask(num_keys=12, most_pairs=6)
    inputs, targets, scored = task.batch(32, torch.Generator().manual_seed(1), num_pairs=5, held_out=held_out)
    assert inputs.shape == targets.shape == scored.shape == (32, 20)
    for row, target, mask in zip(inputs.tolist(), targets.tolist(), scored.tolist()):
        listed = dict(zip(row[:10:2], row[1:10:2]))
        assert len(listed) == 5  # the keys of a sequence are distinct
        asked = [position for position, on in enumerate(mask) if on]
        assert asked == list(range(10, 20, 2))  # each asked key, once
        assert sorted(row[p] for p in asked) == sorted(listed)  # every listed key is asked
        assert all(target[p] == listed[row[p]] for p in asked)
        assert all(token < 12 for token in row[::2]) and all(12 <= token < 24 for token in row[1::2])


def test_the_same_seed_gives_the_same_batches():
    task = RecallTask()
    first = task.batch(8, torch.Generator().manual_seed(5))
    second = task.batch(8, torch.Generator().manual_seed(5))
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_a_softmax_model_learns_a_few_pairs():
    """A short run on 1 to 4 pairs: well above the 1-in-16 guess on held-out sequences (a smoke test, not the lesson's table)."""
    task = RecallTask(num_keys=16, most_pairs=4)
    torch.manual_seed(0)
    model = RecallModel(task.vocab_size, 32, ("softmax",))
    losses = train_recall(model, task, 150, seed=0, learning_rate=1e-2, progress=False)
    assert losses[-1] < losses[0]
    assert recall_accuracy(model, task, 2, seed=1) > 0.5


def test_every_short_run_trains():
    """Each run of 1 to 20 steps trains (torch's one-cycle schedule divides by zero on a warm-up of exactly one step)."""
    task = RecallTask(num_keys=8, most_pairs=2)
    for steps in range(1, 21):
        torch.manual_seed(0)
        losses = train_recall(RecallModel(task.vocab_size, 8, ("linear",)), task, steps, 0, batch_size=4, progress=False)
        assert len(losses) == steps


def test_the_grid_has_a_row_per_model_seed_and_pair_count():
    task = RecallTask(num_keys=8, most_pairs=2)
    models = {"delta": ("delta",), "hybrid": ("linear", "softmax")}
    rows = recall_grid(task, 8, seeds=(0, 1), steps=2, pairs=(1, 2), models=models, progress=False)
    assert len(rows) == 2 * 2 * 2
    kept = {(r["model"], r["pairs"]): r["kept_floats"] for r in rows}
    assert kept["delta", 1] == kept["delta", 2] == 8 * 8  # one state of d_model x d_model
    assert kept["hybrid", 2] == 8 * (8 + 1) + 2 * (4 * 2) * 8  # the state and its normalizer, a key and a value per token


def test_the_key_size_sets_the_state_and_the_cache():
    """d_k = 4 with d_model 8: a state of 4 × 8 numbers; softmax keeps 4 + 8 numbers a token (counted by hand)."""
    task = RecallTask(num_keys=8, most_pairs=2)
    models = {"linear": ("linear",), "softmax": ("softmax",)}
    rows = recall_grid(task, 8, seeds=(0,), steps=2, pairs=(1, 2), models=models, progress=False, key_size=4)
    kept = {(r["model"], r["pairs"]): r["kept_floats"] for r in rows}
    assert kept["linear", 1] == kept["linear", 2] == 4 * 8 + 4  # the state and its normalizer Σ φ(k)
    assert kept["softmax", 2] == (4 * 2) * (4 + 8)
    assert {r["key_size"] for r in rows} == {4}


@pytest.mark.parametrize("kind", ["softmax", "linear", "delta"])
def test_queries_and_keys_take_the_key_size_and_values_keep_d_model(kind):
    torch.manual_seed(0)
    model = RecallModel(16, 8, (kind,), key_size=3)
    assert model.layers[0].qkv.weight.shape == (3 + 3 + 8, 8)
    assert model(torch.randint(0, 16, (2, 5))).shape == (2, 5, 16)


def test_a_rebound_key_is_answered_with_its_latest_value():
    """Hand-built: k3 v1, k0 v2, then k3 v5; asked k3 and k0 (num_keys 8, so value v is token 8 + v)."""
    pairs = torch.tensor([[[3, 1], [0, 2], [3, 5]]])
    inputs, targets, scored = recall_sequence(pairs, torch.tensor([[3, 0]]), num_keys=8)
    assert inputs.tolist() == [[3, 9, 0, 10, 3, 13, 3, 13, 0, 10]]
    assert scored.tolist() == [[False] * 6 + [True, False, True, False]]
    assert targets[scored].tolist() == [13, 10]  # v5 for k3, not v1; v2 for k0


def test_pairs_before_the_boundary_are_written_but_never_asked():
    """Hand-built: an earlier document k1 v4, the boundary token 16, then k2 v6; asked k2 (num_keys 8)."""
    inputs, targets, scored = recall_sequence(torch.tensor([[[2, 6]]]), torch.tensor([[2]]), 8,
                                              earlier=torch.tensor([[[1, 4]]]))
    assert inputs.tolist() == [[1, 12, 16, 2, 14, 2, 14]]
    assert scored.tolist() == [[False] * 5 + [True, False]]
    assert targets[scored].tolist() == [14]


def test_a_rebinding_task_writes_every_key_twice_with_two_values():
    task = RecallTask(num_keys=16, most_pairs=4, rebind=True)
    inputs, targets, scored = task.batch(32, torch.Generator().manual_seed(2), num_pairs=4, held_out=True)
    assert inputs.shape == (32, 6 * 4) and task.length == 24
    for row, target in zip(inputs.tolist(), targets.tolist()):
        first, second = dict(zip(row[:8:2], row[1:8:2])), dict(zip(row[8:16:2], row[9:16:2]))
        assert first.keys() == second.keys() and len(first) == 4  # the same four keys, bound again
        assert all(first[key] != second[key] for key in first)  # to another value
        assert all((key + value - 16) % 4 == 0 for key, value in second.items())  # still held out
        assert [target[p] for p in range(16, 24, 2)] == [second[row[p]] for p in range(16, 24, 2)]


def test_a_boundary_task_asks_only_the_document_after_the_boundary():
    task = RecallTask(num_keys=16, most_pairs=8, boundary=True)
    assert task.vocab_size == 33 and task.length == 6 * 8 + 1
    inputs, targets, scored = task.batch(16, torch.Generator().manual_seed(3), num_pairs=3)
    for row, target in zip(inputs.tolist(), targets.tolist()):
        assert row[6] == 32  # the boundary token after three earlier pairs
        earlier, later = dict(zip(row[:6:2], row[1:6:2])), dict(zip(row[7:13:2], row[8:13:2]))
        assert not earlier.keys() & later.keys()  # other keys
        assert sorted(row[13::2]) == sorted(later)
        assert all(target[p] == later[row[p]] for p in range(13, 19, 2))
    with pytest.raises(ValueError, match="8"):
        RecallTask(num_keys=16, most_pairs=9, boundary=True)  # two documents of 9 distinct keys need 18


def test_a_window_hides_what_lies_further_back():
    """With a window of 2 (and the one-token shift in front) the last output sees tokens 2 to 4 only; the cache holds 2."""
    torch.manual_seed(0)
    model = RecallModel(16, 8, ("softmax",), window=2).eval()
    tokens = torch.tensor([[1, 2, 3, 4, 5]])
    changed = torch.tensor([[9, 9, 3, 4, 5]])
    with torch.no_grad():
        assert torch.allclose(model(tokens)[0, -1], model(changed)[0, -1])
        assert not torch.allclose(model(tokens)[0, 2], model(changed)[0, 2])
    assert model.state_floats(5) == 2 * (8 + 8)
