"""Lesson 10's package side: the tasks, the tiny model, positions, permutation equivariance and training."""

import math

import pytest
import torch

from attention_utils import tasks, training
from attention_utils.tiny_model import CachedTinyModel, TinyAttentionModel, silence_head, sinusoidal_positions
from contract_helpers import assert_contract_error

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


# --- grouped-query and latent layers (lesson 15) ----------------------------------------------


def copy_shared_weights(source: TinyAttentionModel, target: TinyAttentionModel) -> None:
    """Embeddings, positions and read-out of `source` into `target`; the attention layers are left alone."""
    with torch.no_grad():
        for name in ("token_embedding.weight", "readout.weight", "readout.bias"):
            target.get_parameter(name).copy_(source.get_parameter(name))
        if source.position_embedding is not None:  # rotary models have no table
            target.position_embedding.copy_(source.position_embedding)


@pytest.mark.parametrize("positions", ["learned", "rotary"])
@pytest.mark.parametrize("causal", [True, False])
def test_grouped_layers_equal_multi_head_layers_whose_heads_repeat_the_shared_rows(positions, causal):
    """A GQA model and an MHA model whose key and value rows of heads 0, 1 are kv head 0's, of heads 2, 3 kv head 1's."""
    torch.manual_seed(0)
    grouped = TinyAttentionModel(16, 8, d_model=32, num_heads=4, positions=positions, causal=causal, num_kv_heads=2).double()
    plain = TinyAttentionModel(16, 8, d_model=32, num_heads=4, positions=positions, causal=causal).double()
    copy_shared_weights(grouped, plain)
    g, p = grouped.layers[0], plain.layers[0]
    with torch.no_grad():
        for name in ("W_query", "out_proj"):
            getattr(p, name).load_state_dict(getattr(g, name).state_dict())
        for name in ("W_key", "W_value"):  # rows 8h .. 8h + 7 of head h come from kv head h // 2
            rows = getattr(g, name).weight.view(2, 8, 32)
            getattr(p, name).weight.copy_(rows[[0, 0, 1, 1]].reshape(32, 32))
    tokens = torch.randint(0, 16, (3, 8))
    (logits, maps), (expected_logits, expected_maps) = grouped.run(tokens), plain.run(tokens)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=1e-12)
    torch.testing.assert_close(maps, expected_maps, rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_a_latent_as_wide_as_the_model_can_be_multi_head_attention(causal):
    """latent_dim = d_model, W_down = I, W_up_key = W_key, W_up_value = W_value: the MLA model computes MHA."""
    torch.manual_seed(1)
    latent = TinyAttentionModel(16, 8, d_model=32, num_heads=4, num_layers=2, causal=causal, latent_dim=32).double()
    plain = TinyAttentionModel(16, 8, d_model=32, num_heads=4, num_layers=2, causal=causal).double()
    copy_shared_weights(plain, latent)
    with torch.no_grad():
        for m, p in zip(latent.layers, plain.layers):
            m.W_down.weight.copy_(torch.eye(32))
            for mine, theirs in (("W_query", "W_query"), ("W_up_key", "W_key"), ("W_up_value", "W_value"),
                                 ("out_proj", "out_proj")):
                getattr(m, mine).load_state_dict(getattr(p, theirs).state_dict())
    tokens = torch.randint(0, 16, (3, 8))
    (logits, maps), (expected_logits, expected_maps) = latent.run(tokens), plain.run(tokens)
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=1e-12)
    torch.testing.assert_close(maps, expected_maps, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind, expected", [({}, 64), ({"num_kv_heads": 4}, 64), ({"num_kv_heads": 2}, 32),
                                            ({"num_kv_heads": 1}, 16), ({"latent_dim": 16}, 16), ({"latent_dim": 5}, 5)])
def test_cache_numbers_per_token_by_hand(kind, expected):
    # 4 heads of 8: keys and values of every head 2 x 4 x 8 = 64; 2 kv heads 2 x 2 x 8 = 32; 1 kv head 16; a latent itself
    model = TinyAttentionModel(16, 8, d_model=32, num_heads=4, **kind)
    assert model.cache_numbers_per_token == expected


def test_a_latent_layer_caches_what_the_model_says():
    """The latent layer, run through a LatentCache, holds cache_numbers_per_token float32 numbers per token."""
    from attention_utils.inference.latent_attention import LatentCache

    model = TinyAttentionModel(16, 8, d_model=32, num_heads=4, latent_dim=12)
    cache = LatentCache()
    with torch.no_grad():
        model.layers[0](torch.randn(2, 5, 32), cache=cache)
    assert cache.nbytes == 2 * 5 * model.cache_numbers_per_token * 4


@pytest.mark.parametrize("kind", [{"num_kv_heads": 1}, {"latent_dim": 16}])
def test_grouped_and_latent_tiny_models_learn_the_reverse_task(kind):
    torch.manual_seed(0)
    model = TinyAttentionModel(16, 8, d_model=32, num_heads=4, causal=False, **kind)
    losses = training.train(model, REVERSE, steps=150, seed=0, progress=False, learning_rate=1e-2).losses
    # about ln 16 = 2.8 at the start; guessing among the sequence's own 8 tokens would still be ln 8 = 2.1
    assert losses[0] > 2.5 and losses[-1] < 0.3


@pytest.mark.parametrize("call, name", [
    (lambda: TinyAttentionModel(16, 8, num_heads=4, num_kv_heads=2, latent_dim=8), "latent_dim"),
    (lambda: TinyAttentionModel(16, 8, num_heads=4, num_kv_heads=3), "num_kv_heads"),
    (lambda: TinyAttentionModel(16, 8, num_heads=4, num_kv_heads=2, positions="alibi"), "num_kv_heads"),
    (lambda: TinyAttentionModel(16, 8, num_heads=4, latent_dim=8, positions="rotary"), "latent_dim"),
    (lambda: TinyAttentionModel(16, 8, latent_dim=0), "latent_dim"),
    (lambda: TinyAttentionModel(16, 8, latent_dim=2.5), "latent_dim"),
    (lambda: TinyAttentionModel(16, 8, latent_dim=True), "latent_dim"),
    (lambda: TinyAttentionModel(16, 8, num_kv_heads="2"), "num_kv_heads"),
    (lambda: TinyAttentionModel(16, 8, latent_dim=10**15), "latent_dim"),
    (lambda: silence_head(TinyAttentionModel(16, 8, num_heads=2, num_kv_heads=1), 0, 1).__enter__(), "num_kv_heads"),
    (lambda: CachedTinyModel(TinyAttentionModel(16, 8, latent_dim=8)), "latent_dim"),
])
def test_bad_layer_kinds_get_one_bilingual_refusal(call, name):
    assert_contract_error(call, name)
