"""The input contract on lessons 11-13's helpers: every odd input gets a bilingual refusal that names the argument.

Each case here was found by throwing odd inputs (None, strings, floats, bools, NaN, wrong ranks,
numpy scalars) at the public helpers of the rotary, cache, window, generation and real-model
modules; before the fix each one raised torch's or Python's own error, or gave a silent answer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attention_utils as au
from attention_utils.inference import flex_window
from attention_utils.models import head_scores
from attention_utils.models.llama import model_inputs
from attention_utils.tiny_model import CachedTinyModel, TinyAttentionModel
from contract_helpers import assert_contract_error

NOT_A_SIZE = [None, "3", 3.5, True, float("nan"), torch.tensor([1, 2]), [1, 2]]
NOT_POSITIONS = [None, "3", 3, 2.5, np.int64(4), [0, 1, 2], torch.tensor([[0, 1]]), torch.tensor([0.0, 1.0]),
                 torch.tensor([True, False])]
NOT_MAPS = [None, 3.5, [1, 2], torch.tensor([1, 2]), torch.zeros(2, 3, dtype=torch.int64),
            torch.rand(2, 3, 4, 5), torch.full((1, 2, 4, 4), float("nan"))]


@pytest.mark.parametrize("bad", NOT_A_SIZE + [0, -1])
@pytest.mark.parametrize("name", ["num_layers", "num_kv_heads", "head_dim", "tokens", "bytes_per_value", "batch"])
def test_kv_cache_bytes_refuses_what_is_not_a_size(name, bad):
    sizes = dict(num_layers=2, num_kv_heads=3, head_dim=4, tokens=5, bytes_per_value=4, batch=1)
    if name == "tokens" and isinstance(bad, int) and bad == 0:
        assert au.kv_cache_bytes(**{**sizes, "tokens": 0}) == 0  # an empty cache is allowed and holds nothing
        return
    assert_contract_error(lambda: au.kv_cache_bytes(**{**sizes, name: bad}), name)


def test_kv_cache_bytes_takes_numpy_sizes_and_counts_by_hand():
    # 2 (keys and values) x 30 layers x 3 kv heads x 64 features x 1000 tokens x 4 bytes, worked out by hand
    assert au.kv_cache_bytes(np.int64(30), 3, torch.tensor(64), 1000) == 46_080_000


@pytest.mark.parametrize("bad", NOT_A_SIZE + [0, -2])
def test_repeat_kv_heads_refuses_a_bad_head_count(bad):
    assert_contract_error(lambda: au.repeat_kv_heads(torch.randn(1, 2, 5, 8), bad), "num_heads")


@pytest.mark.parametrize("bad", NOT_POSITIONS)
@pytest.mark.parametrize("which", ["query_positions", "key_positions"])
def test_hidden_by_window_refuses_what_are_not_positions(which, bad):
    good = torch.arange(4)
    positions = {"query_positions": good, "key_positions": good, which: bad}
    assert_contract_error(lambda: au.hidden_by_window(**positions, window=2), which)


def test_hidden_by_window_refuses_negative_positions():
    assert_contract_error(lambda: au.hidden_by_window(torch.tensor([-1, 0]), torch.arange(2)), "query_positions")


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return CachedTinyModel(TinyAttentionModel(vocab_size=10, context_length=32, d_model=16, num_heads=2,
                                              positions="rotary"))


@pytest.mark.parametrize("bad", [None, "model", 3, torch.zeros(2, 3), [1, 2]])
def test_generate_refuses_what_is_not_a_model(bad):
    assert_contract_error(lambda: au.generate(bad, torch.tensor([[1, 2, 3]]), 3), "model", kind=TypeError)


def test_generate_still_runs_a_module(tiny_model):
    assert au.generate(tiny_model, torch.tensor([[1, 2, 3]]), 2).tokens.shape == (1, 5)


@pytest.mark.parametrize("bad", NOT_MAPS)
@pytest.mark.parametrize("score", ["sink_share", "previous_token_score"])
def test_head_scores_refuse_what_are_not_maps(score, bad):
    assert_contract_error(lambda: getattr(head_scores, score)(bad), "maps")


@pytest.mark.parametrize("bad", NOT_MAPS)
def test_induction_score_refuses_what_are_not_maps(bad):
    assert_contract_error(lambda: head_scores.induction_score(bad, 2), "maps")


def test_induction_score_needs_two_copies_of_the_period():
    maps = torch.softmax(torch.randn(2, 3, 6, 6), dim=-1)
    assert_contract_error(lambda: head_scores.induction_score(maps, 4), "period", "8")


@pytest.mark.parametrize("bad", [None, 3.5, [1, 2], torch.tensor([1.0, 2.0]), torch.zeros(2, 2, 2)])
def test_strongest_refuses_what_is_not_a_table(bad):
    assert_contract_error(lambda: head_scores.strongest(bad), "scores")


def test_strongest_finds_the_largest_entry():
    table = torch.zeros(3, 4)
    table[2, 1] = 0.7
    assert head_scores.strongest(table) == (2, 1, pytest.approx(0.7))


@pytest.mark.parametrize(("low", "high", "name"), [(None, 10, "low"), (-1, 10, "low"), (5, 2.5, "high"), (9, 9, "low")])
def test_repeated_random_tokens_refuses_a_bad_range(low, high, name):
    assert_contract_error(lambda: head_scores.repeated_random_tokens(4, 0, low=low, high=high), name)


@pytest.mark.parametrize("bad", [None, "model", torch.zeros(2), "tiny"])
def test_head_measurements_refuse_a_model_that_is_not_lesson_13s(bad, tiny_model):
    model = tiny_model if bad == "tiny" else bad
    assert_contract_error(lambda: head_scores.attention_maps(model, torch.tensor([[1, 2]])), "model", kind=TypeError)
    assert_contract_error(lambda: head_scores.value_lengths(model, torch.tensor([[1, 2]])), "model", kind=TypeError)
    assert_contract_error(lambda: head_scores.silence_head(model, 0, 0).__enter__(), "model", kind=TypeError)


@pytest.mark.parametrize("bad", [None, 3, "halfs", ["halves"]])
@pytest.mark.parametrize("module", [au.MultiHeadAttention, au.FusedMultiHeadAttention])
def test_rotary_layout_is_checked_even_without_a_rotary_base(module, bad):
    assert_contract_error(lambda: module(8, 8, 10, 0.0, 4, rotary_layout=bad), "rotary_layout")


# ---- Contract 3 (issue 30): generation bounded before it starts, empty sizes, the tokenizer, FlexAttention's inputs

class Echo(torch.nn.Module):
    """A stand-in language model that states no context length: logits (b, T, 5) that always pick token 1."""

    def forward(self, tokens):
        return torch.nn.functional.one_hot(torch.ones_like(tokens), 5).float()


def test_generate_refuses_more_tokens_than_the_context_before_it_starts(tiny_model):
    prompt = torch.tensor([[1, 2, 3]])
    assert au.generate(tiny_model, prompt, 30).tokens.shape == (1, 33)  # reads 32 = context_length tokens: allowed
    assert_contract_error(lambda: au.generate(tiny_model, prompt, 31), "new_tokens", "context length is 32", "at most new_tokens=30")
    assert_contract_error(lambda: au.generate(tiny_model, prompt, 31, au.KVCache(1)), "new_tokens")
    assert_contract_error(lambda: au.generate(tiny_model, torch.ones(1, 40, dtype=torch.long), 1), "prompt", "32")


def test_generate_refuses_a_billion_tokens_of_the_real_model_at_once(smollm2):
    model, _ = smollm2
    message = assert_contract_error(lambda: au.generate(model, torch.tensor([[504]]), 10**9, au.KVCache(30)), "new_tokens")
    assert "8192" in message and "8,192" in message
    assert_contract_error(lambda: au.generate(model, torch.tensor([[504]]), 20_000), "new_tokens")


def test_generate_bounds_a_model_that_states_no_context():
    assert au.generate(Echo(), torch.tensor([[0]]), 3).tokens.tolist() == [[0, 1, 1, 1]]
    assert_contract_error(lambda: au.generate(Echo(), torch.tensor([[0]]), 10_001), "new_tokens", "10,000")


def test_zero_new_tokens_give_logits_of_the_vocabulary_width(tiny_model):
    assert au.generate(tiny_model, torch.tensor([[1, 2]]), 0).logits.shape == (1, 0, 10)  # the model states vocab_size
    assert au.generate(Echo(), torch.tensor([[0], [2]]), 0).logits.shape == (2, 0, 5)  # one run on the prompt tells it


@pytest.mark.parametrize("model", [torch.nn.Identity(), torch.nn.Flatten(0)])
def test_generate_names_a_model_whose_output_is_not_logits(model):
    assert_contract_error(lambda: au.generate(model, torch.tensor([[1, 2]]), 2), "model", "(batch, T, vocab)", kind=ValueError)


@pytest.mark.parametrize("bad", [torch.tensor([[1.0, 2.0]]), [[1, 2]], torch.tensor([1, 2]), torch.zeros(1, 0, dtype=torch.long),
                                 torch.tensor([[True]])])
def test_generate_checks_the_prompt(tiny_model, bad):
    assert_contract_error(lambda: au.generate(tiny_model, bad, 2), "prompt")


def test_the_real_model_on_a_batch_of_0(smollm2):
    model, _ = smollm2
    assert model(torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3, model.config.vocab_size)


def test_a_layer_cache_takes_0_new_tokens():
    cache, empty = au.LayerCache(), torch.randn(1, 2, 0, 4)
    keys, values, positions = cache.update(empty, empty)
    assert keys.shape == values.shape == (1, 2, 0, 4) and positions.numel() == 0 and cache.position == 0
    ring, token = au.LayerCache(), torch.randn(1, 2, 1, 4)
    for step in range(5):  # a window of 2 with 1 sink holds 3 tokens: full after three steps, then a ring buffer
        ring.update(token + step, token + step, window=2, sinks=1)
        ring.update(empty, empty, window=2, sinks=1)  # adding nothing changes nothing, not even the ring's next slot
    assert sorted(ring.positions.tolist()) == [0, 3, 4] and ring.position == 5
    assert_contract_error(lambda: ring.update(torch.randn(1, 3, 0, 4), torch.randn(1, 3, 0, 4), window=2, sinks=1), "kv_heads")


CODE_POINTS = [c for c in range(0, 0x110000, 251) if not 0xD800 <= c <= 0xDFFF]


def test_the_tokenizer_writes_every_character_or_names_it(smollm2):
    """Every 251st code point: it round-trips, or it is one the vocabulary has no byte token for, and says so."""
    _, tokenizer = smollm2
    refused = []
    for code in CODE_POINTS:
        text = f"a{chr(code)}b"
        try:
            assert tokenizer.decode(tokenizer.encode(text)) == text, hex(code)
        except ValueError as error:
            assert f"U+{code:04X}" in str(error) and "position 1" in str(error), str(error)
            refused.append(code)
    # exactly the characters whose UTF-8 holds a byte missing from SmolLM2's vocabulary: U+40000..U+BFFFF
    # (lead bytes 0xF1, 0xF2) and the control characters 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D
    assert refused == [c for c in CODE_POINTS if 0x40000 <= c <= 0xBFFFF or c in (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D)]
    assert_contract_error(lambda: tokenizer.encode("x\U00050000y"), "text", "U+50000", "0xF1")


@pytest.mark.parametrize("text", ["ab\ud800cd", "\udfff", "emoji cut in half: \ud83d"])
def test_the_tokenizer_refuses_a_lone_surrogate(smollm2, text):
    _, tokenizer = smollm2
    assert_contract_error(lambda: tokenizer.encode(text), "text", "surrogate")
    assert_contract_error(lambda: model_inputs(tokenizer, text), "prompt", "surrogate")


@pytest.mark.parametrize("bad", [None, "Ġt", [1, 2], ["a", 3]])
def test_a_tokenizer_is_built_from_lists_of_strings(bad):
    from attention_utils.models.bpe_tokenizer import ByteLevelBPE

    assert_contract_error(lambda: ByteLevelBPE(["a", "b"], bad), "merges", kind=TypeError)


def test_flex_window_attention_needs_a_block_mask_that_fits():
    from attention_utils.inference.flex_window import flex_window_attention, window_block_mask, window_mask_mod

    q = torch.randn(1, 2, 128, 8)
    assert_contract_error(lambda: flex_window_attention(q, q, q, None, compiled=False), "block_mask", "window_block_mask(128",
                          kind=TypeError)
    assert_contract_error(lambda: flex_window_attention(q, q, q, window_block_mask(256, 16), compiled=False), "block_mask",
                          "(256, 256)")
    mask = window_block_mask(128, 16)
    assert_contract_error(lambda: flex_window_attention(q, torch.randn(1, 2, 128, 4), q, mask, compiled=False), "head_dim")
    assert_contract_error(lambda: flex_window_attention(q, q, torch.randn(1, 3, 128, 8), mask, compiled=False), "values")
    assert_contract_error(lambda: flex_window_attention(q, q, q.double(), mask, compiled=False), "values", kind=TypeError)
    assert_contract_error(lambda: flex_window_attention(q, q, q, mask, compiled="yes"), "compiled", kind=TypeError)
    assert_contract_error(lambda: window_mask_mod(None), "window")


@pytest.mark.parametrize("device", ["tpu9", "cuda:7", "", "CPU", 3.0])
def test_a_window_mask_names_a_device_this_machine_lacks(device):
    assert_contract_error(lambda: au.sliding_window_mask(5, 2, device=device), "device")


def test_a_window_mask_on_meta_has_a_shape_and_no_values():
    assert au.sliding_window_mask(4, 2, device="meta").shape == (4, 4)


@pytest.mark.parametrize("empty", [torch.zeros(0, 0), torch.zeros(3, 0), torch.zeros(0, 9)])
def test_strongest_of_an_empty_table(empty):
    assert_contract_error(lambda: head_scores.strongest(empty), "scores", "empty")


@pytest.mark.parametrize("bad", [2**64, 2**70, -1, 1.5, None, True])
def test_repeated_random_tokens_takes_a_seed_as_every_seed(bad):
    assert_contract_error(lambda: head_scores.repeated_random_tokens(5, bad), "seed")


def test_repeated_random_tokens_takes_the_largest_seed():
    tokens = head_scores.repeated_random_tokens(3, 2**64 - 1)
    assert tokens.shape == (1, 6) and tokens[0, :3].tolist() == tokens[0, 3:].tolist()


def test_tiled_attention_refuses_a_second_derivative_clearly():
    q, k, v = (torch.randn(1, 2, 8, 4, requires_grad=True) for _ in range(3))
    (first,) = torch.autograd.grad(au.tiled_attention(q, k, v).sum(), q, create_graph=True)
    (plain,) = torch.autograd.grad(au.tiled_attention(q, k, v).sum(), q)
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    (expected,) = torch.autograd.grad(reference.sum(), q)
    assert torch.allclose(first, plain) and torch.allclose(plain, expected, atol=1e-5)  # the first derivative is right
    assert_contract_error(lambda: torch.autograd.grad(first.sum(), q), "tiled_attention", "second derivative")


# ---- found by a second round of odd inputs: sizes that cost time or memory are bounded, devices named

def test_a_kv_cache_of_a_billion_layers_is_refused_and_numpy_indices_count():
    assert_contract_error(lambda: au.KVCache(10**9), "num_layers", "1,024")
    cache = au.KVCache(np.int32(2))
    assert cache[np.int64(1)] is cache.layers[1]


def test_a_file_that_asks_for_too_large_a_model_is_refused(smollm2):
    from attention_utils.models.gguf_file import GGUFFile, read_gguf
    from attention_utils.models.llama import LlamaConfig

    real = read_gguf()
    for key, value, name in [("llama.block_count", 10**6, "llama.block_count"), ("llama.embedding_length", 10**7, "llama.embedding_length"),
                             ("llama.block_count", "30", "llama.block_count")]:
        changed = GGUFFile(real.path, {**real.metadata, key: value}, real.tensors, real.start)
        assert_contract_error(lambda: LlamaConfig.from_gguf(changed), name)


def test_the_real_model_names_tokens_on_another_device(smollm2):
    model, _ = smollm2
    assert_contract_error(lambda: model(torch.zeros(1, 2, dtype=torch.long, device="meta")), "tokens", "tokens.to('cpu')",
                          kind=TypeError)


@pytest.mark.parametrize("call", [lambda: au.sliding_window_mask(2**22, 4),
                                  lambda: flex_window.window_block_mask(2**23, 16)])
def test_a_window_mask_too_large_for_memory_says_how_large_it_can_be(call):
    assert_contract_error(call, "num_tokens", "at most about")


@pytest.mark.parametrize("period, high, name", [(2**40, 100, "period"), (3, 2**64, "high")])
def test_repeated_random_tokens_bounds_its_sizes(period, high, name):
    assert_contract_error(lambda: head_scores.repeated_random_tokens(period, 0, 0, high), name)


def test_tiled_attention_names_its_missing_forward_mode():
    q = torch.randn(1, 4, 3)
    assert_contract_error(lambda: torch.func.hessian(lambda x: au.tiled_attention(x, x, x).sum())(q), "tiled_attention",
                          "forward-mode")


def test_rotary_tables_need_a_tensor_of_positions_on_any_device():
    from attention_utils.rotary import apply_rotary, rotary_cos_sin
    assert_contract_error(lambda: rotary_cos_sin([0, 1, 2], 8), "positions", kind=TypeError)
    assert apply_rotary(torch.randn(1, 2, 5, 8, device="meta")).shape == (1, 2, 5, 8)


def test_alibi_bias_of_no_tokens_and_of_more_than_memory():
    from attention_utils.alibi import alibi_bias
    assert alibi_bias(0, torch.tensor([0.5, 0.25])).shape == (2, 0, 0)
    assert_contract_error(lambda: alibi_bias(10**7, torch.full((8,), 0.5)), "num_tokens", "at most", kind=ValueError)


@pytest.mark.parametrize("length, size, name", [(4, 0, "size"), (-1, 2, "length"), (4, 2.5, "size")])
def test_tiled_blocks_check_their_sizes(length, size, name):
    from attention_utils.tiled import blocks
    assert_contract_error(lambda: list(blocks(length, size)), name)


def test_a_llama_model_checks_its_config():
    from attention_utils.models.llama import LlamaConfig, LlamaModel
    sizes = dict(vocab_size=30, context_length=64, d_model=16, num_layers=2, num_heads=4, num_kv_heads=2, d_ff=24,
                 rotary_base=1e4, norm_eps=1e-5)
    assert_contract_error(lambda: LlamaModel(None), "config", kind=TypeError)
    for bad, name in (({"vocab_size": 0}, "vocab_size"), ({"norm_eps": -1.0}, "norm_eps"), ({"num_layers": 2000}, "num_layers")):
        assert_contract_error(lambda: LlamaModel(LlamaConfig(**(sizes | bad))), name, kind=ValueError)


def test_generate_refuses_logits_of_nan():
    from attention_utils.inference.generation import generate

    class Broken(torch.nn.Module):
        def forward(self, tokens):
            return torch.full((*tokens.shape, 5), float("nan"))

    assert_contract_error(lambda: generate(Broken(), torch.tensor([[1, 2, 3]]), 1), "model", "NaN", kind=ValueError)


@pytest.mark.parametrize("merges, control", [(["a b"], ()), (["a b c"], ()), (["a "], ()), ([], ("",))])
def test_a_tokenizer_refuses_merges_and_control_tokens_it_cannot_use(merges, control):
    """A merge must join two tokens into a token (else encode fails later with a KeyError); a control token is text."""
    from attention_utils.models.bpe_tokenizer import ByteLevelBPE, byte_alphabet
    tokens = list(byte_alphabet().values()) + [""]
    name = "merge" if merges else "control_tokens"
    assert_contract_error(lambda: ByteLevelBPE(tokens, merges, control), name, kind=ValueError)


def test_rotary_positions_and_sizes_beyond_their_range():
    from attention_utils.rotary import apply_rotary, halves_order, ntk_base, rotary_cos_sin
    assert_contract_error(lambda: rotary_cos_sin(torch.tensor([0.0, float("nan")]), 8), "positions", kind=ValueError)
    assert_contract_error(lambda: apply_rotary(torch.randn(1, 2, 5, 8), 2**70), "positions", kind=ValueError)
    assert_contract_error(lambda: ntk_base(10000.0, 8, 1e308), "factor", kind=ValueError)
    assert_contract_error(lambda: halves_order(2**40), "head_dim", kind=ValueError)


def test_alibi_slopes_for_more_heads_than_anyone_builds():
    from attention_utils.alibi import alibi_slopes
    assert_contract_error(lambda: alibi_slopes(10**9), "num_heads", kind=ValueError)


def test_the_explorers_of_lessons_11_to_13_check_what_they_draw():
    from attention_utils.explorers import lesson11, lesson12, lesson13
    assert_contract_error(lambda: lesson11.draw_turned_tokens(torch.randn(3, 2), ["a"]), "tokens", kind=ValueError)
    assert_contract_error(lambda: lesson11.draw_length_accuracy({"a": [0.5, 0.6]}, [1, 2, 3], 0.1), "lengths",
                          kind=ValueError)
    assert_contract_error(lambda: lesson12.draw_cache_growth([1, 2, 3], [1, 2]), "nbytes", kind=ValueError)
    assert_contract_error(lambda: lesson12.draw_generation(10, 6, 10, 4, 0, 100), "step", kind=ValueError)
    assert_contract_error(lambda: lesson12.show_generation(new_tokens=0), "new_tokens", kind=ValueError)
    assert_contract_error(lambda: lesson12.step_rows(-1, 4, 2, 0), "step", kind=ValueError)
    assert_contract_error(lambda: lesson13.draw_sinks(torch.full((2, 3), float("nan"))), "share", kind=ValueError)
    assert_contract_error(lambda: lesson13.show_attention(None, None), "model", kind=TypeError)


def test_the_model_file_reader_refuses_a_pipe_and_an_alignment_not_a_power_of_two(tmp_path):
    import os
    import struct
    from attention_utils.models.gguf_file import read_gguf
    pipe = tmp_path / "pipe.gguf"
    os.mkfifo(pipe)
    assert_contract_error(lambda: read_gguf(pipe), "path", "not a regular file", kind=ValueError)  # never waits
    key, value = b"general.alignment", struct.pack("<II", 4, 3)  # a uint32 setting of 3
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key + value
    (tmp_path / "odd.gguf").write_bytes(header)
    assert_contract_error(lambda: read_gguf(tmp_path / "odd.gguf"), "general.alignment", "power of two", kind=ValueError)


def test_a_long_context_is_not_refused_for_a_mask_never_built():
    """Llama 3.2's files state 131,072 tokens; the fused module keeps no (T, T) mask, so it builds at any length."""
    assert au.FusedMultiHeadAttention(16, 16, 131_072, 0.0, 2).context_length == 131_072


def test_generate_names_a_model_without_a_cache_and_reads_numpy_sizes():
    from attention_utils.inference.generation import generate, stated_sizes
    from attention_utils.inference.kv_cache import KVCache

    class NoCache(torch.nn.Module):
        context_length = np.int64(6)

        def forward(self, tokens):
            return torch.zeros(*tokens.shape, 5)

    assert_contract_error(lambda: generate(NoCache(), torch.tensor([[1, 2]]), 1, KVCache(1)), "cache", kind=TypeError)
    assert stated_sizes(NoCache())[0] == 6
    assert_contract_error(lambda: generate(NoCache(), torch.tensor([[1, 2]]), 6), "new_tokens", kind=ValueError)


def test_check_writable_and_attention_maps_name_their_input(smollm2):
    model, tokenizer = smollm2
    assert_contract_error(lambda: tokenizer.check_writable(123), "text", kind=TypeError)
    assert_contract_error(lambda: head_scores.attention_maps(model, torch.zeros(0, 3, dtype=torch.long)), "tokens",
                          kind=ValueError)


def test_loops_of_tiles_and_positions_are_bounded():
    from attention_utils.tiled import online_softmax, tiled_attention
    x = torch.randn(1, 3000, 2)
    assert_contract_error(lambda: tiled_attention(x, x, x, block_size=1), "block_size", kind=ValueError)
    assert_contract_error(lambda: online_softmax(torch.zeros(200_000)), "scores", "stable_softmax", kind=ValueError)


def test_alibi_bias_refuses_negative_slopes_and_counts_its_distances():
    from attention_utils.alibi import alibi_bias
    assert_contract_error(lambda: alibi_bias(3, torch.tensor([-1.0])), "slopes", kind=ValueError)
    assert_contract_error(lambda: alibi_bias(70_000, torch.tensor([1.0], dtype=torch.float16)), "num_tokens",
                          kind=ValueError)  # 39 GB of int64 distances before the float16 penalty


def test_rotary_positions_of_any_integer_kind():
    from attention_utils.rotary import apply_rotary
    x = torch.randn(2, 5, 8)
    expected = apply_rotary(x, 3)
    torch.testing.assert_close(apply_rotary(x, torch.tensor(3)), expected)
    for dtype in (torch.int16, torch.uint8):
        torch.testing.assert_close(apply_rotary(x, torch.arange(3, 8, dtype=dtype)), expected)
    assert_contract_error(lambda: apply_rotary(x, torch.arange(3.0, 8.0)), "positions", kind=TypeError)


def test_flex_attention_refuses_gradients_and_meta_on_the_cpu():
    mask = flex_window.window_block_mask(8, window=4, block_size=8)
    x = torch.randn(1, 1, 8, 4)
    assert_contract_error(lambda: flex_window.flex_window_attention(x.requires_grad_(), x, x, mask, compiled=False),
                          "queries", "no_grad", kind=ValueError)
    meta = torch.randn(1, 1, 8, 4, device="meta")
    assert_contract_error(lambda: flex_window.flex_window_attention(meta, meta, meta, mask, compiled=False), "queries",
                          kind=ValueError)
