"""Lesson 10's package side: the tasks, the tiny model, positions, permutation equivariance and training."""

import math

import pytest
import torch

from attention_utils import tasks, training
from attention_utils.tiny_model import TinyAttentionModel, silence_head, sinusoidal_positions

REVERSE = tasks.ReverseTask()
REPEAT = tasks.RepeatTask()


def trained_reverse(seed: int, positions: str = "learned", steps: int = 400) -> TinyAttentionModel:
    torch.manual_seed(seed)
    model = TinyAttentionModel(REVERSE.vocab_size, REVERSE.length, positions=positions, causal=False)
    training.train(model, REVERSE, steps=steps, seed=seed, progress=False)
    return model


@pytest.fixture(scope="module")
def reverse_model():
    return trained_reverse(seed=0)


# --- tasks -----------------------------------------------------------------------------------


def test_reverse_targets_are_the_inputs_backwards():
    inputs, targets, scored = REVERSE.batch(5, torch.Generator().manual_seed(1))
    for row, answer in zip(inputs.tolist(), targets.tolist()):
        assert answer == row[::-1]
        assert len(set(row)) == len(row)  # distinct tokens
    assert scored.all()


def test_repeat_targets_follow_the_earlier_occurrence():
    inputs, targets, scored = REPEAT.batch(20, torch.Generator().manual_seed(2))
    for row, answer, counted in zip(inputs.tolist(), targets.tolist(), scored.tolist()):
        assert answer[:-1] == row[1:]  # next-token targets
        for t, token in enumerate(row):
            earlier = [j for j in range(t) if row[j] == token]
            assert counted[t] == bool(earlier)  # scored exactly where the token was seen before
            if earlier:
                assert answer[t] == row[earlier[-1] + 1]  # the token that followed it last time


def test_encode_and_decode_round_trip():
    assert tasks.encode("bad", 16).tolist() == [[1, 0, 3]]
    assert tasks.decode(torch.tensor([7, 4, 11, 11, 14])) == "hello"


@pytest.mark.parametrize(
    "make",
    [
        lambda: tasks.ReverseTask(length=8, vocab_size=5),
        lambda: tasks.ReverseTask(length=1),
        lambda: tasks.ReverseTask(vocab_size=27),
        lambda: tasks.RepeatTask(length=6, longest=7),
        lambda: tasks.RepeatTask(shortest=5, longest=4),
        lambda: tasks.encode("abz", 16),
        lambda: tasks.encode("", 16),
        lambda: REVERSE.batch(0, torch.Generator()),
    ],
)
def test_bad_task_settings_are_refused(make):
    with pytest.raises(ValueError):
        make()


def test_fractional_sizes_are_refused():
    with pytest.raises(TypeError):
        tasks.ReverseTask(length=8.5)


# --- positions ---------------------------------------------------------------------------------


def test_sinusoidal_positions_match_the_formula_by_hand():
    table = sinusoidal_positions(5, 6)
    for t in range(5):
        for i in range(3):
            angle = t / 10000 ** (2 * i / 6)
            assert table[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert sinusoidal_positions(3, 5).shape == (3, 5)  # an odd width keeps its last sine column


# --- the model ------------------------------------------------------------------------------------


def test_shapes_and_weights():
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, d_model=24, num_heads=3, num_layers=2)
    tokens = torch.randint(0, 16, (4, 6))
    logits, maps = model.run(tokens)
    assert logits.shape == (4, 6, 16)
    assert maps.shape == (2, 4, 3, 6, 6)  # (layers, b, heads, T, T)
    assert torch.allclose(maps.sum(-1), torch.ones(2, 4, 3, 6))
    assert (maps.triu(diagonal=1) == 0).all()  # causal by default: nothing above the diagonal


def test_without_the_causal_mask_every_key_gets_weight():
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, causal=False)
    _, maps = model.run(torch.randint(0, 16, (2, 8)))
    above = torch.ones(8, 8, dtype=torch.bool).triu(diagonal=1)
    assert (maps[..., above] > 0).all()


def test_without_positions_and_mask_a_permutation_permutes_the_outputs():
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, positions="none", causal=False)
    tokens = torch.randint(0, 16, (3, 8))
    order = torch.randperm(8)
    logits, maps = model.run(tokens)
    logits_p, maps_p = model.run(tokens[:, order])
    assert torch.allclose(logits_p, logits[:, order], atol=1e-5)
    assert torch.allclose(maps_p, maps[..., order, :][..., order], atol=1e-6)  # rows and columns move


def test_positions_break_the_equivariance():
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, positions="sinusoidal", causal=False)
    tokens = torch.arange(8)[None]
    order = torch.arange(7, -1, -1)
    assert not torch.allclose(model(tokens[:, order]), model(tokens)[:, order], atol=1e-3)


def test_causal_mask_output_t_ignores_the_order_before_t():
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, positions="none", causal=True)
    tokens = torch.tensor([[3, 9, 1, 14, 5, 0, 7, 2]])
    shuffled_past = tokens[:, [2, 0, 1, 3, 4, 5, 6, 7]]  # tokens 0..2 reordered, 3.. in place
    same, changed = model(tokens), model(shuffled_past)
    assert torch.allclose(same[:, 3:], changed[:, 3:], atol=1e-5)  # same own token, same set of earlier tokens
    assert not torch.allclose(same[:, :3], changed[:, :3], atol=1e-3)  # outputs 0..2 see different prefixes
    reversed_all = tokens.flip(1)
    assert not torch.allclose(model(reversed_all), same.flip(1), atol=1e-3)  # not equivariant any more


@pytest.mark.parametrize(
    "tokens, error",
    [
        (torch.rand(2, 8), TypeError),
        ([[0, 1, 2]], TypeError),
        (torch.tensor([0, 1, 2]), ValueError),
        (torch.zeros(1, 9, dtype=torch.long), ValueError),
        (torch.tensor([[0, 16]]), ValueError),
        (torch.tensor([[-1, 0]]), ValueError),
    ],
)
def test_bad_tokens_are_refused(tokens, error):
    model = TinyAttentionModel(16, 8)
    with pytest.raises(error):
        model(tokens)


def test_bad_model_settings_are_refused():
    with pytest.raises(ValueError):
        TinyAttentionModel(16, 8, positions="rope")
    with pytest.raises(ValueError):
        TinyAttentionModel(16, 8, d_model=32, num_heads=3)
    with pytest.raises(ValueError):
        silence_head(TinyAttentionModel(16, 8), layer=0, head=2).__enter__()


# --- training ------------------------------------------------------------------------------------


def test_same_seed_same_losses():
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        model = TinyAttentionModel(REVERSE.vocab_size, REVERSE.length, causal=False)
        runs.append(training.train(model, REVERSE, steps=5, seed=3, progress=False).losses)
    assert runs[0] == runs[1] and len(runs[0]) == 5


def test_training_gives_the_thread_count_back():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        training.train(TinyAttentionModel(16, 8), REVERSE, steps=2, seed=0, progress=False)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_snapshots_hold_the_untrained_and_the_trained_weights():
    torch.manual_seed(0)
    model = TinyAttentionModel(REVERSE.vocab_size, REVERSE.length, causal=False)
    untrained = {name: value.clone() for name, value in model.state_dict().items()}
    run = training.train(model, REVERSE, steps=8, seed=0, snapshots=4, progress=False)
    assert run.snapshot_steps == [0, 2, 4, 6, 8]
    trained = {name: value.clone() for name, value in model.state_dict().items()}
    run.restore(model, 0)
    assert all(torch.equal(model.state_dict()[name], value) for name, value in untrained.items())
    run.restore(model, -1)
    assert all(torch.equal(model.state_dict()[name], value) for name, value in trained.items())


@pytest.mark.parametrize("seed", [1, 2])
def test_reverse_reaches_95_percent_for_other_seeds(seed):
    model = trained_reverse(seed)
    assert training.accuracy(model, training.held_out_batch(REVERSE, seed)) >= 0.95


def test_reverse_model_reads_the_mirror_position(reverse_model):
    assert training.accuracy(reverse_model, training.held_out_batch(REVERSE, 0)) >= 0.95
    _, maps = reverse_model.predict(tasks.encode("hgfedcba", REVERSE.vocab_size))
    strongest = maps[0, 0].sum(0).argmax(-1)  # both heads together: where each query looks most
    assert strongest.tolist() == list(range(7, -1, -1))  # by hand: position i reads position 7 - i


def test_silencing_every_head_drops_to_chance_and_restores(reverse_model):
    held_out = training.held_out_batch(REVERSE, 0)
    before = reverse_model.layers[0].W_value.weight.clone()
    with silence_head(reverse_model, 0, 0), silence_head(reverse_model, 0, 1):
        assert training.accuracy(reverse_model, held_out) < 0.35
    assert torch.equal(reverse_model.layers[0].W_value.weight, before)


def test_without_positions_reverse_stays_near_chance():
    model = trained_reverse(seed=0, positions="none")
    # chance is 1/7 (any other token of the sequence); the margin allows for noise
    assert training.accuracy(model, training.held_out_batch(REVERSE, 0)) < 0.35


def test_repeat_needs_two_layers_and_learns_the_previous_token_head():
    torch.manual_seed(0)
    model = TinyAttentionModel(REPEAT.vocab_size, REPEAT.length, num_heads=1, num_layers=2)
    training.train(model, REPEAT, steps=600, seed=0, progress=False)
    assert training.accuracy(model, training.held_out_batch(REPEAT, 0)) >= 0.95
    tokens = tasks.encode("abcdefgabcdefgab", REPEAT.vocab_size)
    _, maps = model.predict(tokens)
    first_round = maps[0, 0, 0].argmax(-1)[1 : REPEAT.longest + 1]  # layer 0, queries 1..7: where a pattern can start
    one_back = (first_round == torch.arange(REPEAT.longest)).sum().item()
    assert one_back >= REPEAT.longest - 1  # all, or all but one, look one step back
    induction = maps[1, 0, 0].argmax(-1)[7:]  # layer 1, second round on: the token after an earlier 'same token'
    assert all(tasks.decode(tokens[0, key]) == tasks.decode(tokens[0, query + 1]) for query, key in enumerate(induction, 7)
               if query + 1 < 16)
