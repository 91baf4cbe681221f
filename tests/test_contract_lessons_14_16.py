"""The input contract on the helpers lessons 14 and 15 added: each odd input gets a bilingual refusal naming the argument.

Each case comes from throwing a few hundred odd inputs (None, strings, bools, numpy and 0-d torch numbers,
wrong ranks, empty and huge sizes, NaN, another dtype, a cache of another shape) at the API the lessons
import; before the fix each one raised torch's or Python's own error, ran for minutes, allocated what
the machine cannot hold, or gave a silent wrong answer. Lesson 16's modules are in test_contract_recurrent.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from attention_utils import tasks, training
from attention_utils.explorers import lesson14 as explorers14, lesson15 as explorers15
from attention_utils.inference import paged_cache as pc
from attention_utils.inference.batched_generation import generate_batch
from attention_utils.inference.cache_quality import cache_quality, logits_through_cache, perplexity
from attention_utils.inference.decode_cost import forward_cost
from attention_utils.inference.decode_profile import matmul_share, profile_calls
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.latent_attention import LatentAttention, LatentCache
from attention_utils.inference.low_rank_cache import LowRankLayerCache, fit_bases, fit_basis, low_rank_kv_cache
from attention_utils.inference.quantized_cache import check_bits, dequantize, pack_int4, quantize, unpack_int4
from attention_utils.inference.weight_formats import Int8Linear, quantize_rows, to_format
from attention_utils.results import SAVED, SAVED_MODEL, decode_table, load_saved, model_batch_table, model_format_table
from attention_utils.tiny_model import TinyAttentionModel
from contract_helpers import assert_contract_error
from tiny_models import tiny_llama


class SmolSizes:
    d_model, num_layers, num_heads, num_kv_heads, head_dim, d_ff, vocab_size = 576, 30, 9, 3, 64, 1536, 49152


@pytest.fixture(scope="module")
def llama():
    return tiny_llama(d_model=16, num_heads=4, num_kv_heads=2, seed=0).float()  # vocab 30, context 64


@pytest.fixture(scope="module")
def text():
    return torch.randint(0, 30, (1, 12), generator=torch.Generator().manual_seed(1))


# lesson 14: decode_cost, decode_profile, weight_formats, batched_generation

def test_bytes_per_number_takes_numpy_and_torch_numbers():
    numpy_and_torch = forward_cost(SmolSizes, 1, 100, bytes_per_weight=np.float32(2), bytes_per_value=torch.tensor(2.0))
    assert numpy_and_torch == forward_cost(SmolSizes, 1, 100, bytes_per_weight=2, bytes_per_value=2)


def test_bytes_per_number_says_its_bound():
    assert_contract_error(lambda: forward_cost(SmolSizes, 1, bytes_per_weight=100), "bytes_per_weight", "below 64")


def test_profile_calls_needs_a_function_of_no_arguments_and_bounds_repeats():
    assert_contract_error(lambda: profile_calls(lambda x: x), "call", kind=TypeError)
    assert_contract_error(lambda: profile_calls(lambda: None, 10**9), "repeats", kind=ValueError)


@pytest.mark.parametrize("bad", [None, "abc", [1, 2], 3.0])
def test_matmul_share_needs_a_profile(bad):
    assert_contract_error(lambda: matmul_share(bad), "events", kind=TypeError)


def test_matmul_share_of_no_events_names_them():
    assert_contract_error(lambda: matmul_share([]), "events", "no CPU time", kind=ValueError)


def test_quantize_rows_of_no_columns_and_of_float64_beyond_float32():
    values, scale = quantize_rows(torch.zeros(3, 0))
    assert values.shape == (3, 0) and torch.equal(scale, torch.ones(3))
    assert_contract_error(lambda: quantize_rows(torch.full((2, 3), 1e300, dtype=torch.float64)), "weight", kind=ValueError)


def test_int8_linear_names_its_argument():
    assert_contract_error(lambda: Int8Linear(nn.Linear(4, 3)), "linear", "bias", kind=TypeError)
    layer = Int8Linear(nn.Linear(8, 4, bias=False))
    assert_contract_error(lambda: layer(torch.randn(2, 5)), "x", kind=ValueError)
    assert_contract_error(lambda: layer(torch.randn(2, 8, dtype=torch.float64)), "x", kind=TypeError)


def test_int8_refuses_a_model_with_biases_by_name():
    assert_contract_error(lambda: to_format(TinyAttentionModel(10, 8), "int8"), "model", "layers.0.out_proj", kind=ValueError)


def test_generate_batch_of_no_new_tokens_gives_logits_of_the_vocabulary_width(llama):
    assert generate_batch(llama, [[1, 2, 3], [4]], 0, KVCache(2)).logits.shape == (2, 0, 30)


def test_generate_batch_refuses_before_the_first_step(llama):
    called = []
    handle = llama.register_forward_hook(lambda *args: called.append(1))
    try:
        assert_contract_error(lambda: generate_batch(llama, [[1, 2]], 70, KVCache(2)), "new_tokens", kind=ValueError)
        assert_contract_error(lambda: generate_batch(llama, [[1, 30]], 2, KVCache(2)), "prompts", kind=ValueError)
        assert_contract_error(lambda: generate_batch(llama, [[1, 2], [3]], 2, KVCache(2), pad_id=30), "pad_id",
                              kind=ValueError)
    finally:
        handle.remove()
    assert not called


def test_generate_batch_needs_a_model_that_takes_a_padding_mask():
    model = TinyAttentionModel(30, 16)
    assert_contract_error(lambda: generate_batch(model, [[1, 2]], 2, KVCache(1)), "model", kind=TypeError)


# lesson 15: quantized, low-rank and paged caches, latent attention, cache quality

@pytest.mark.parametrize("bad", [8.0, True, torch.tensor([8, 4]), "8", 3])
def test_bits_are_8_or_4_as_an_integer(bad):
    assert_contract_error(lambda: check_bits(bad), "bits")


def test_quantize_checks_dim_empty_groups_and_overflow():
    x = torch.randn(2, 3)
    assert_contract_error(lambda: quantize(x, 8, 5), "dim", kind=ValueError)
    assert_contract_error(lambda: quantize(x, 8, "a"), "dim", kind=TypeError)
    codes, scale, offset = quantize(torch.zeros(3, 0), 8, 1)
    assert codes.shape == (3, 0) and scale.shape == offset.shape == (3, 1)
    assert_contract_error(lambda: quantize(torch.tensor([-60000.0, 60000.0], dtype=torch.float16), 8, -1), "x",
                          "float16", kind=ValueError)


def test_codes_are_checked():
    assert_contract_error(lambda: pack_int4(torch.tensor([16, 1], dtype=torch.uint8)), "codes", kind=ValueError)
    assert_contract_error(lambda: pack_int4(torch.ones(3, 5, dtype=torch.uint8)), "codes", kind=ValueError)
    assert_contract_error(lambda: pack_int4(torch.ones(3, 4)), "codes", kind=TypeError)
    assert_contract_error(lambda: dequantize(None, torch.ones(1), torch.zeros(1)), "codes", kind=TypeError)


BASIS = fit_basis(torch.randn(1, 2, 20, 8, generator=torch.Generator().manual_seed(2)))  # (2 kv heads, 8, 8)


def test_low_rank_cache_arguments():
    assert_contract_error(lambda: fit_bases(None), "cache", kind=TypeError)
    assert_contract_error(lambda: LowRankLayerCache(BASIS, BASIS, 100), "rank", "head_dim=8", kind=ValueError)
    assert_contract_error(lambda: LowRankLayerCache(BASIS, BASIS[:, :4, :4], 2), "value_basis", kind=ValueError)
    assert_contract_error(lambda: low_rank_kv_cache([], 4), "bases", kind=TypeError)


@pytest.mark.parametrize("keys", [None, torch.randn(1, 2, 3, 4), torch.randn(1, 3, 3, 8)], ids=["None", "head_dim 4", "3 heads"])
def test_low_rank_cache_refuses_keys_of_another_shape(keys):
    assert_contract_error(lambda: LowRankLayerCache(BASIS, BASIS, 4).update(keys, keys), "keys")


def test_paged_cache_sizes_dtype_and_sequences():
    assert_contract_error(lambda: pc.pages_needed(None), "lengths", kind=TypeError)
    assert_contract_error(lambda: pc.PagedCache(10**12, 2, 4), "num_pages", "at most", kind=ValueError)
    assert_contract_error(lambda: pc.PagedCache(4, 2, 4, dtype=torch.int64), "dtype", kind=TypeError)
    pages = pc.PagedCache(4, 2, 4, page_size=2)
    sequence = pages.new_sequence()
    assert_contract_error(lambda: pages.fork(True), "sequence", kind=TypeError)  # True is not sequence 1
    keys, values = pages.gather(sequence)  # a new sequence holds nothing yet
    assert keys.shape == values.shape == (2, 0, 4)


@pytest.mark.parametrize("queries", [torch.randn(2, 5, 4), torch.randn(3, 1, 4), torch.randn(2, 1, 4, dtype=torch.float64)],
                         ids=["5 queries for 3 tokens", "3 heads over 2", "float64"])
def test_paged_attention_checks_its_queries(queries):
    pages = pc.PagedCache(4, 2, 4, page_size=2)
    sequence = pages.new_sequence()
    pages.append(sequence, torch.randn(2, 3, 4), torch.randn(2, 3, 4))
    assert_contract_error(lambda: pc.paged_attention(queries, pages, sequence), "queries", kind=ValueError)


def test_paged_layer_caches_name_their_arguments():
    pages = pc.PagedCache(4, 2, 4, page_size=2)
    assert_contract_error(lambda: pc.paged_attention(torch.randn(2, 1, 4), None, 1), "cache", kind=TypeError)
    assert_contract_error(lambda: pc.PagedLayerCache(None), "pages", kind=TypeError)
    assert_contract_error(lambda: pc.PagedLayerCache(pages, 99), "sequence", kind=ValueError)
    batch_of_two = torch.randn(2, 2, 1, 4)
    assert_contract_error(lambda: pc.PagedLayerCache(pages).update(batch_of_two, batch_of_two), "keys", kind=ValueError)
    assert_contract_error(lambda: pc.paged_kv_cache([]), "pools", kind=TypeError)
    assert_contract_error(lambda: pc.paged_kv_cache([pages, pages], [1]), "sequences", kind=ValueError)


@pytest.mark.parametrize("bad", ["x", 0, float("nan")])
def test_latent_attention_checks_rotary_base(bad):
    assert_contract_error(lambda: LatentAttention(16, 8, 4, 4, 6, 2, rotary_base=bad), "rotary_base")


def test_latent_attention_refuses_a_mask_too_large_for_memory():
    assert_contract_error(lambda: LatentAttention(16, 10**7, 4, 4, 6), "context_length", "at most", kind=ValueError)


def test_latent_attention_names_a_weight_that_holds_nan():
    layer = LatentAttention(16, 8, 4, 4, 6)
    with torch.no_grad():
        layer.W_up_value.weight[0, 0] = float("nan")
    assert_contract_error(lambda: layer(torch.randn(1, 3, 16)), "W_up_value", kind=ValueError)


def test_a_latent_cache_checks_what_it_is_given():
    assert_contract_error(lambda: LatentCache().update(None, None), "latents", kind=TypeError)


def test_logits_through_cache_needs_a_new_cache(llama, text):
    assert_contract_error(lambda: logits_through_cache(llama, text, None, 4), "cache", kind=TypeError)
    filled = KVCache(2)
    with torch.no_grad():
        llama(text, cache=filled)
    assert_contract_error(lambda: logits_through_cache(llama, text, filled, 4), "cache", kind=ValueError)
    assert_contract_error(lambda: logits_through_cache(llama, text.tolist(), KVCache(2), 4), "tokens", kind=TypeError)


def test_perplexity_checks_what_it_scores(text):
    logits = torch.randn(1, 12, 30)
    assert_contract_error(lambda: perplexity(logits, text, 11), "first", kind=ValueError)  # nothing left: NaN before
    assert_contract_error(lambda: perplexity(logits, text[:, :5]), "tokens", kind=ValueError)
    assert_contract_error(lambda: perplexity(logits.long(), text), "logits", kind=TypeError)


def test_cache_quality_checks_its_arguments(llama, text):
    with torch.no_grad():
        reference = llama(text)
    assert_contract_error(lambda: cache_quality(llama, text, None, reference, 4), "make_cache", kind=TypeError)
    assert_contract_error(lambda: cache_quality(llama, text, lambda: KVCache(2), reference.expand(2, -1, -1), 4),
                          "reference", kind=ValueError)
    assert_contract_error(lambda: cache_quality(llama, text, lambda: KVCache(2), reference, 11), "prefill", kind=ValueError)


# the tiny model's new layers, training and the explorers

def test_a_snapshot_of_other_layers_names_num_kv_heads_and_latent_dim():
    task = tasks.ReverseTask(4, 6)
    run = training.train(TinyAttentionModel(6, 4, num_heads=2, num_kv_heads=1), task, 2, 0, progress=False)
    assert_contract_error(lambda: run.restore(TinyAttentionModel(6, 4, num_heads=2), -1), "num_kv_heads", "latent_dim",
                          kind=ValueError)


@pytest.mark.parametrize("kwargs, kind", [({}, "MultiHeadAttention"), ({"num_heads": 4, "num_kv_heads": 2}, "GroupedQueryAttention"),
                                          ({"latent_dim": 6}, "LatentAttention"), ({"positions": "alibi"}, "ALiBiAttention")])
def test_each_setting_builds_its_layer_kind(kwargs, kind):
    model = TinyAttentionModel(10, 8, num_layers=2, **kwargs)
    assert [type(layer).__name__ for layer in model.layers] == [kind, kind]


def test_the_explorers_name_a_bad_highlight():
    points = [{"method": "full", "label": "float32", "bytes_per_token": 1000.0, "perplexity": 10.0}]
    assert_contract_error(lambda: explorers15.draw_quality_bytes(points, 9), "highlight", kind=ValueError)
    assert_contract_error(lambda: explorers14.draw_roofline(load_saved(SAVED_MODEL), ("int4", 1)), "highlight",
                          kind=ValueError)


# a second round of odd inputs over the same helpers

def test_profile_calls_refuses_a_module_that_needs_its_input():
    assert_contract_error(lambda: profile_calls(nn.Linear(2, 2)), "call", kind=TypeError)


@pytest.mark.parametrize("prompts, pad_id, name", [([[1, 2**70]], 0, "prompts[0] token"), ([[1, 2], [3]], 2**70, "pad_id")],
                         ids=["id", "pad_id"])
def test_token_ids_beyond_int64_are_refused(prompts, pad_id, name):
    from attention_utils.inference.batched_generation import left_pad
    assert_contract_error(lambda: left_pad(prompts, pad_id), name, "2**63 - 1", kind=ValueError)


def test_a_low_rank_cache_refuses_keys_of_another_dtype_and_fits_a_basis_to_many_vectors():
    cache = LowRankLayerCache(BASIS.double(), BASIS.double(), 4)
    assert_contract_error(lambda: cache.update(torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)), "keys", kind=TypeError)
    many = torch.randn(1, 1, 200_000, 4) * torch.tensor([4.0, 3.0, 2.0, 1.0])  # a full SVD's U would be 200,000² float64 (320 GB): the reduced one needs none
    basis = fit_basis(many)[0]
    torch.testing.assert_close(basis.T @ basis, torch.eye(4), atol=1e-5, rtol=0)
    # the leading directions are those of X^T X's largest eigenvalues (a second method: eigh, not an SVD)
    rows = many[0, 0].double()
    eigenvalues, eigenvectors = torch.linalg.eigh(rows.T @ rows)
    top = eigenvectors[:, eigenvalues.argsort(descending=True)[:2]]
    torch.testing.assert_close((basis[:, :2] @ basis[:, :2].T).double(), top @ top.T, atol=1e-4, rtol=0)
    few = torch.randn(1, 1, 2, 4)  # fewer vectors than head_dim: still head_dim orthonormal directions
    basis = fit_basis(few)[0]
    torch.testing.assert_close(basis.T @ basis, torch.eye(4), atol=1e-5, rtol=0)


def test_logits_through_cache_needs_a_model_that_takes_a_cache(text):
    assert_contract_error(lambda: logits_through_cache(TinyAttentionModel(30, 16), text, KVCache(1), 4), "model",
                          kind=TypeError)


def test_the_explorers_of_lesson_15_check_their_inputs():
    assert_contract_error(lambda: explorers15.show_quality_bytes([]), "points", kind=TypeError)
    assert_contract_error(lambda: explorers15.draw_key_magnitudes(torch.ones(4), 0), "magnitudes", kind=ValueError)


def test_a_missing_saved_timing_is_named():
    from attention_utils.results import model_timing
    assert_contract_error(lambda: model_timing(load_saved(SAVED_MODEL), "int4"), "fmt", kind=ValueError)


def test_a_paged_kv_cache_counts_what_it_holds_and_keeps_no_graph(llama, text):
    pools = [pc.PagedCache(16, 2, 4, 4) for _ in range(2)]
    paged, plain = pc.paged_kv_cache(pools), KVCache(2)
    with torch.no_grad():
        llama(text, cache=paged)
        llama(text, cache=plain)
    assert paged.nbytes == plain.nbytes == 2 * 2 * 2 * 4 * 12 * 4  # K and V, layers, kv heads, head_dim, tokens, bytes
    keys = torch.randn(2, 3, 4, requires_grad=True)
    pools[0].append(pools[0].new_sequence(), keys, keys.detach())
    assert not pools[0].keys.requires_grad


def test_an_int8_linear_alone_checks_its_input_for_nan():
    layer = Int8Linear(nn.Linear(8, 4, bias=False))
    assert_contract_error(lambda: layer(torch.full((2, 8), float("nan"))), "x", kind=ValueError)
    inside = to_format(nn.Sequential(nn.Linear(8, 4, bias=False)), "int8")  # the model checks once: its layers do not
    assert inside[0].check_input is False


def test_saved_rows_that_do_not_exist_are_named():
    from attention_utils.results import model_rows
    assert_contract_error(lambda: model_rows(load_saved(SAVED_MODEL), "int4"), "weights", kind=ValueError)


def test_dequantized_needs_a_module():
    from attention_utils.inference.weight_formats import dequantized
    assert_contract_error(lambda: dequantized(None), "model", kind=TypeError)


def test_a_perplexity_of_no_sequence_is_refused():
    assert_contract_error(lambda: perplexity(torch.zeros(0, 5, 7), torch.zeros(0, 5, dtype=torch.long)), "tokens",
                          kind=ValueError)  # it was NaN


def test_key_magnitudes_of_no_head_are_refused():
    assert_contract_error(lambda: explorers15.draw_key_magnitudes(torch.ones(0, 4), 0), "magnitudes", kind=ValueError)


# a sixth round: every argument replaced in turn by the same pool of odd values

@pytest.mark.parametrize("format, compute", [(np.ones((2, 3)), None), (torch.ones(2, 3, dtype=torch.long), None),
                                             ("int8", torch.randn(3)), ("int8", np.ones((2, 3)))], ids=["format numpy", "format tensor",
                                                                                                       "compute tensor", "compute numpy"])
def test_to_format_names_a_format_or_compute_that_is_an_array(llama, format, compute):
    assert_contract_error(lambda: to_format(llama, format, compute), "format" if compute is None else "compute")


def test_pools_and_lengths_name_their_bad_element():
    assert_contract_error(lambda: pc.pages_needed(torch.randn(3)), "lengths[0]", kind=TypeError)
    assert_contract_error(lambda: pc.paged_kv_cache([1, 2]), "pools", kind=TypeError)


def test_dequantize_needs_the_scale_and_offset_of_its_codes():
    codes, scale, offset = quantize(torch.randn(2, 8, 4), 8, -1)
    assert_contract_error(lambda: dequantize(codes, scale[:1, :3], offset), "scale", "broadcast", kind=ValueError)
    assert_contract_error(lambda: dequantize(codes, scale, offset.double()), "offset", kind=TypeError)


def test_a_latent_cache_keeps_one_dtype():
    assert_contract_error(lambda: LatentCache().update(torch.randn(1, 5, 6), torch.randn(1, 5, 2).double()),
                          "rotary_keys", kind=TypeError)


def test_a_prefill_longer_than_the_text_is_refused(llama, text):
    assert_contract_error(lambda: logits_through_cache(llama, text, KVCache(2), text.shape[1] + 1), "prefill",
                          kind=ValueError)


def test_saved_results_are_read_with_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="make bench"):
        load_saved(tmp_path / "missing.json")
    (tmp_path / "cut.json").write_text('{"rows": [', encoding="utf-8")
    assert_contract_error(lambda: load_saved(tmp_path / "cut.json"), "cut.json", "JSON", kind=ValueError)
    assert_contract_error(lambda: load_saved(tmp_path), str(tmp_path), kind=ValueError)
    assert_contract_error(lambda: load_saved(3), "path", kind=TypeError)
    assert load_saved(str(SAVED_MODEL)) == load_saved(SAVED_MODEL)


def test_results_of_another_bench_are_named():
    """Lesson 8's results given to lesson 14's figure (or None) are refused by what they are, not by a KeyError."""
    other = load_saved(SAVED)
    for call in (lambda: explorers14.draw_roofline(other), lambda: explorers14.point_summary(other, "int8", 1),
                 lambda: model_format_table(other), lambda: decode_table(load_saved(SAVED_MODEL))):
        assert_contract_error(call, "results", "load_saved", kind=ValueError)
    assert_contract_error(lambda: explorers14.show_roofline(None), "results", kind=TypeError)


def test_key_magnitudes_of_no_token_and_points_off_the_axes_are_refused():
    assert_contract_error(lambda: explorers15.key_magnitudes(torch.randn(1, 3, 0, 8)), "keys", kind=ValueError)
    point = {"method": "full", "label": "float32", "bytes_per_token": 100.0, "perplexity": 10.0}
    for bad in ({"bytes_per_token": 0}, {"bytes_per_token": -5.0}, {"perplexity": float("nan")}, {"perplexity": "10"}):
        assert_contract_error(lambda: explorers15.draw_quality_bytes([point | bad]), "bytes_per_token", kind=ValueError)


def test_paged_attention_names_an_overflow():
    pool = pc.PagedCache(2, 1, 4)
    sequence = pool.new_sequence()
    huge = torch.full((1, 2, 4), 1e20)
    pool.append(sequence, huge, torch.randn(1, 2, 4))
    with pytest.raises(ValueError, match="overflowed torch.float32"):
        pc.paged_attention(huge, pool, sequence)


def test_an_int8_linear_takes_any_layout_and_rows_of_nothing():
    linear = nn.Linear(16, 3, bias=False)
    x = torch.randn(16, 2, 3).permute(1, 2, 0)  # last dimension not contiguous
    torch.testing.assert_close(Int8Linear(linear)(x), x @ Int8Linear(linear).weight.T)
    assert Int8Linear(nn.Linear(0, 3, bias=False))(torch.randn(2, 0)).abs().max() == 0


def test_latent_attention_runs_on_meta():
    """Shapes without values, as every module of the package (the rotary tables are built on the input's device)."""
    assert LatentAttention(8, 8, 2, 4, 3, 2).to("meta")(torch.randn(1, 3, 8, device="meta")).shape == (1, 3, 8)


def test_a_latent_cache_refuses_rotary_keys_of_another_width():
    cache = LatentCache()
    cache.update(torch.randn(1, 3, 4), torch.randn(1, 3, 2))
    assert_contract_error(lambda: cache.update(torch.randn(1, 1, 4), torch.randn(1, 1, 6)), "rotary_keys", kind=ValueError)


def test_unpack_int4_needs_a_dimension():
    assert_contract_error(lambda: unpack_int4(torch.tensor(3, dtype=torch.uint8)), "packed", kind=ValueError)


def test_key_magnitudes_are_drawn_for_at_most_100_heads_and_never_negative():
    for bad in (torch.rand(101, 4), -torch.rand(2, 4)):
        assert_contract_error(lambda: explorers15.draw_key_magnitudes(bad, 0), "magnitudes", kind=ValueError)


def test_the_roofline_needs_its_roofs():
    saved = load_saved(SAVED_MODEL)
    for missing in ("roofs", "environment"):
        cut = {key: value for key, value in saved.items() if key != missing}
        assert_contract_error(lambda: explorers14.draw_roofline(cut), "results", missing, kind=ValueError)


def test_a_table_in_another_language_is_refused():
    for bad, kind in (("fr", ValueError), (None, TypeError)):
        assert_contract_error(lambda: model_format_table(load_saved(SAVED_MODEL), bad), "language", kind=kind)


def test_a_table_of_chosen_rows_names_what_it_cannot_show():
    saved = load_saved(SAVED_MODEL)
    assert_contract_error(lambda: model_format_table(saved, rows=("float33",)), "rows", "'float33'", "float32", kind=ValueError)
    assert_contract_error(lambda: model_format_table(saved, rows="float32"), "rows", "tuple", kind=TypeError)
    chosen = model_format_table(saved, rows=("float32", "matmul floor"), quality=False).splitlines()
    assert [line.split()[0] for line in chosen[1:]] == ["float32", "matmul"] and "perplexity" not in chosen[0]
    assert_contract_error(lambda: model_batch_table(saved, rows=("q5",)), "rows", "'q5'", kind=ValueError)
    assert model_batch_table(saved, rows=("float32",)).splitlines()[0].split("  ")[-1].strip() == "float32 (ms/step, tokens/s)"
    assert_contract_error(lambda: explorers14.draw_roofline(saved, rows=("q5",)), "rows", "'q5'", kind=ValueError)


def test_odd_sizes_ids_and_bases_found_by_the_third_probe(text, llama):
    class OddHeads(SmolSizes):
        num_kv_heads = 5
    assert_contract_error(lambda: forward_cost(OddHeads, 1), "config.num_kv_heads", kind=ValueError)
    assert_contract_error(lambda: pc.pages_needed(iter([3, 4])), "lengths", kind=TypeError)  # an endless iterator would hang
    logits = llama(text)
    assert perplexity(logits, text.int()) == pytest.approx(perplexity(logits, text))
    assert_contract_error(lambda: LowRankLayerCache(BASIS.double(), BASIS, 2), "value_basis", kind=TypeError)


def test_the_figures_of_lesson_15_bound_their_points_and_bars():
    point = {"method": "full", "label": "float32", "bytes_per_token": 100.0, "perplexity": 10.0}
    assert_contract_error(lambda: explorers15.draw_quality_bytes([point] * 201), "points", kind=TypeError)
    assert_contract_error(lambda: explorers15.draw_key_magnitudes(torch.ones(1, 100_000), 0), "magnitudes", kind=ValueError)


def test_a_pool_of_pages_lives_on_a_device():
    assert_contract_error(lambda: pc.PagedCache(2, 1, 4, device="cuda:7"), "device", kind=ValueError)
    pool = pc.PagedCache(2, 1, 4, device="meta")  # shapes only: what a GPU pool does, without a GPU
    sequence = pool.new_sequence()
    pool.append(sequence, torch.randn(1, 3, 4, device="meta"), torch.randn(1, 3, 4, device="meta"))
    assert pool.gather(sequence)[0].shape == (1, 3, 4) and pool.gather(sequence)[0].is_meta
    cpu_pool = pc.PagedCache(2, 1, 4)
    meta = torch.randn(1, 3, 4, device="meta")
    assert_contract_error(lambda: cpu_pool.append(cpu_pool.new_sequence(), meta, meta), "keys", "device=", kind=TypeError)
