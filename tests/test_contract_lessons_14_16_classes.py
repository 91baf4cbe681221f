"""Contract 4 on lessons 14-16's helpers: each class of wrong answer a probe found, fixed where it lives.

Values read from meta tensors, saved results in the shapes the bench writes, a cache factory passed as an
object, silent wrong answers (a paged sequence shared by two layers, unknown names, a basis that is not
orthonormal), size checks that name the right argument, and memory checks that count every (T, T) matrix.
Each test failed before its fix. The checkers' forms and hints are in test_exercises_lesson14..16.py.
"""

from __future__ import annotations

import copy
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tqdm.auto import tqdm  # noqa: E402

from attention_utils import checks, devices, results  # noqa: E402
from attention_utils.explorers import lesson14 as explorers14, lesson15 as explorers15, lesson16 as explorers16  # noqa: E402
from attention_utils.inference import batched_generation, quantized_cache, weight_formats  # noqa: E402
from attention_utils.inference import paged_cache as pc  # noqa: E402
from attention_utils.inference.cache_quality import cache_quality  # noqa: E402
from attention_utils.inference.kv_cache import KVCache  # noqa: E402
from attention_utils.inference.latent_attention import LatentAttention  # noqa: E402
from attention_utils.recurrent import delta_rule, linear_attention, recall  # noqa: E402
from contract_helpers import assert_contract_error  # noqa: E402
from tiny_models import tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def llama():
    return tiny_llama(d_model=16, num_heads=4, num_kv_heads=2, seed=0).float()  # vocab 30, context 64, head_dim 4


@pytest.fixture(scope="module")
def text():
    return torch.randint(0, 30, (1, 12), generator=torch.Generator().manual_seed(1))


def meta(*shape: int) -> torch.Tensor:
    return torch.rand(*shape, device="meta")


# ---- values read from meta tensors: skipped where they only guard, refused where the work needs them ----

@pytest.mark.parametrize("form", ["parallel", "recurrent", "chunked"])
def test_normalized_linear_attention_runs_on_meta(form):
    out = getattr(linear_attention, f"linear_attention_{form}")(meta(1, 4, 3), meta(1, 4, 3), meta(1, 4, 2), normalize=True)
    assert out.is_meta and out.shape == (1, 4, 2)


def test_dequantize_names_codes_on_another_device_than_their_scale():
    codes, scale, offset = quantized_cache.quantize(torch.randn(4, 8), 8, -1)
    assert_contract_error(lambda: quantized_cache.dequantize(codes, scale.to("meta"), offset.to("meta")), "codes",
                          "codes.to('meta')", kind=TypeError)
    assert_contract_error(lambda: quantized_cache.dequantize(codes.to("meta"), scale, offset), "codes", kind=TypeError)
    assert quantized_cache.dequantize(codes.to("meta"), scale.to("meta"), offset.to("meta")).is_meta


def test_generate_batch_runs_a_model_on_meta():
    model = tiny_llama(d_model=16, num_heads=4, num_kv_heads=2, seed=0).float().to("meta")
    result = batched_generation.generate_batch(model, [[1, 2], [3]], 2, KVCache(model.config.num_layers))
    assert result.tokens.shape == (2, 4) and result.tokens.is_meta


def test_a_bar_chart_of_meta_magnitudes_is_refused():
    assert_contract_error(lambda: explorers15.draw_key_magnitudes(meta(2, 4), 0), "magnitudes", "meta")


# ---- saved results: what the bench writes is read; a field missing or null is named with the fix ----

@pytest.fixture()
def saved_model():
    return results.load_saved(results.SAVED_MODEL)


def without_transformers(saved: dict) -> dict:
    """What `make bench --model` writes where transformers is not installed: no rows of it, and the reason."""
    saved = copy.deepcopy(saved)
    saved["timings"] = [row for row in saved["timings"] if row["format"] != "transformers float32"]
    saved["transformers_error"] = "transformers could not load the file: No module named 'transformers'"
    return saved


def test_results_written_without_transformers_are_read(saved_model):
    saved = without_transformers(saved_model)
    lines = results.model_verdict_lines(saved)
    assert "transformers was not measured" in lines[1] and len(lines) == 7
    assert "没有测量 transformers" in results.model_verdict_lines(saved, "zh")[1]
    assert "transformers" not in results.model_format_table(saved) and "int8" in results.model_format_table(saved)
    assert results.model_verdicts(saved)["passes"]["transformers"] is False
    results.model_batch_table(saved)
    plt.close(explorers14.draw_roofline(saved, ("int8", 1)))


def test_a_length_the_bench_did_not_measure_is_named(saved_model):
    assert_contract_error(lambda: results.model_decode_lines(saved_model, length=100), "length", "128")
    saved = results.load_saved(results.SAVED_DECODE)
    assert_contract_error(lambda: results.decode_split(saved, "gqa", length=[128]), "length")


@pytest.mark.parametrize("edit, field", [(lambda r: r["timings"][0].pop("ms"), "'ms'"),
                                         (lambda r: r["roofs"].update(bandwidth_gb_s=None), "['roofs']['bandwidth_gb_s']"),
                                         (lambda r: r["quality"]["int8"].update(perplexity=None), "['perplexity']")])
def test_a_missing_or_null_field_is_named_with_the_fix(saved_model, edit, field):
    edit(saved_model)
    for call in (lambda: results.model_verdict_lines(saved_model), lambda: results.model_format_table(saved_model),
                 lambda: explorers14.draw_roofline(saved_model)):
        try:
            drawn = call()
        except ValueError as error:
            message = str(error)
            assert field in message and "make bench" in message and "git checkout -- figures/" in message
            assert_contract_error(call, "results")
            return
        if isinstance(drawn, plt.Figure):
            plt.close(drawn)
    raise AssertionError(f"no reader noticed the edit of {field}")


def test_the_whole_results_passed_as_a_row_is_refused(saved_model):
    assert_contract_error(lambda: results.roofline_point(saved_model), "row", "model_timing", kind=ValueError)
    assert_contract_error(lambda: results.roofline_point([1, 2]), "row", kind=TypeError)
    row = results.model_timing(saved_model, "float32")
    assert results.roofline_point(row)["intensity"] == row["flops"] / (row["weight_bytes"] + row["cache_bytes"])


# ---- a cache factory passed as an object: "pass `lambda: ...`" before calling it ----

@pytest.mark.parametrize("make_cache, said", [(quantized_cache.quantized_kv_cache, "quantized_kv_cache itself needs arguments"),
                                              (KVCache, "KVCache itself needs arguments"),
                                              (KVCache(2), "was given a cache")])
def test_a_factory_passed_as_an_object_is_told_to_pass_a_lambda(make_cache, said):
    tokens = torch.randint(0, 30, (1, 8), generator=torch.Generator().manual_seed(1))
    message = assert_contract_error(
        lambda: cache_quality(object(), tokens, make_cache, torch.zeros(1, 8, 30), 2), "make_cache", "lambda: ", said)
    assert "lambda: " in message.splitlines()[1]


# ---- silent before: one paged sequence written by two layers ----

def test_one_paged_sequence_for_two_layers_is_refused(llama, text):
    pool = pc.PagedCache(8, 2, 4, page_size=4)
    sequence = pool.new_sequence()
    assert_contract_error(lambda: pc.paged_kv_cache([pool, pool], [sequence, sequence]), "sequences", "own sequence")
    first, second = pc.PagedLayerCache(pool, sequence), pc.PagedLayerCache(pool, sequence)  # built by hand
    keys = torch.randn(1, 2, 3, 4)
    first.update(keys, keys)
    assert_contract_error(lambda: second.update(keys, keys), "sequences", "another layer")
    assert pool.lengths[sequence] == 3  # refused before writing


def test_a_paged_cache_of_one_pool_for_every_layer_matches_the_plain_cache(llama, text):
    pool = pc.PagedCache(16, 2, 4, page_size=4)
    paged = llama(text, cache=pc.paged_kv_cache([pool] * llama.config.num_layers))
    assert torch.allclose(paged, llama(text, cache=KVCache(llama.config.num_layers)), atol=1e-5)


# ---- memory checks count every (T, T) matrix a form holds ----

def test_the_delta_rule_counts_the_eight_matrices_it_holds(monkeypatch):
    monkeypatch.setattr(devices, "memory_of", lambda device: 10**9)  # a machine of 1 GB
    long = meta(1, 6000, 2)  # 8 × 6000² × 4 bytes = 1.15 GB; 2 × would be 0.29 GB
    # by hand: 8 × T² × 4 ≤ 10⁹ for T ≤ 5,590
    assert_contract_error(lambda: delta_rule.delta_rule_parallel(long, long, long, 0.5), "num_tokens", "at most about 5,590")
    assert linear_attention.linear_attention_parallel(long, long, long).shape == (1, 6000, 2)  # 2 × 6000² × 4 fits


# ---- the argument named: the size that is too large, and a progress bar where the contract allows one ----

def test_latent_attention_names_the_latent_dim_that_is_too_large():
    assert_contract_error(lambda: LatentAttention(576, 8, 2, 8, 10**8), "latent_dim", "at most")


def test_recall_grid_takes_a_shared_progress_bar(monkeypatch):
    monkeypatch.setattr(recall, "train_recall", lambda *args, progress, **kwargs: progress.update(1))
    monkeypatch.setattr(recall, "recall_accuracy", lambda *args: 0.5)
    bar = tqdm(total=2, file=io.StringIO())  # shown nowhere; close() would set bar.disable
    rows = recall.recall_grid(recall.RecallTask(num_keys=32), 8, (0,), 1, (2,), {"softmax": ("softmax",)}, progress=bar)
    assert len(rows) == 1 and bar.n == 1 and not bar.disable
    assert_contract_error(lambda: recall.recall_grid(recall.RecallTask(num_keys=32), 8, (0,), 1, (2,), progress="yes"),
                          "progress", kind=TypeError)


# ---- silent before: names a figure does not know ----

POINT = {"method": "quantized", "label": "int8", "bytes_per_token": 100.0, "perplexity": 12.0}
ROW = {"model": "linear", "seed": 0, "pairs": 2, "key_size": 4, "accuracy": 0.5, "kept_floats": 16}


def test_a_point_of_an_unknown_method_is_refused():
    assert_contract_error(lambda: explorers15.draw_quality_bytes([{**POINT, "method": "quantised"}]), "points", "'quantised'")
    plt.close(explorers15.draw_quality_bytes([POINT]))


def test_a_reference_model_not_in_the_rows_is_refused():
    rows = [ROW, {**ROW, "model": "softmax"}]
    assert_contract_error(lambda: explorers16.draw_state_sizes(rows, reference="softmx"), "reference", "'softmax'")
    plt.close(explorers16.draw_state_sizes(rows, reference="softmax"))


def test_a_basis_that_is_not_orthonormal_is_refused():
    orthonormal = torch.linalg.qr(torch.randn(2, 8, 8, dtype=torch.float64)).Q.float()
    checks.check_orthonormal(orthonormal, "key_basis")
    checks.check_orthonormal(meta(2, 8, 8), "key_basis")  # no values to read: skipped
    scaled = orthonormal.clone()
    scaled[..., 5] *= 2  # by hand: column 5 has length 2, so (Bᵀ B)[5, 5] = 4, off by 3
    checks.check_orthonormal(scaled, "key_basis", columns=4)  # only the first 4 columns are used
    assert_contract_error(lambda: checks.check_orthonormal(scaled, "key_basis"), "key_basis", "off by 3")


def test_a_null_read_by_a_reader_inside_another_is_named(saved_model):
    saved_model["timings"][3]["ms"] = None  # model_verdict_lines reads it through model_timing
    assert_contract_error(lambda: results.model_verdict_lines(saved_model), "results", "['timings'][3]['ms']")


def test_a_format_whose_quality_is_missing_is_named(saved_model):
    del saved_model["quality"]["int8"]  # the table showed dashes for it
    assert_contract_error(lambda: results.model_format_table(saved_model), "results", "'int8'", "make bench")


def test_a_decode_variant_not_measured_is_named():
    saved = results.load_saved(results.SAVED_DECODE)
    assert_contract_error(lambda: results.decode_split(saved, "gqq"), "variant", "'mqa'")


def test_int8_rows_on_another_device_than_their_scale_are_named():
    values, scale = weight_formats.quantize_rows(torch.randn(3, 4))
    assert_contract_error(lambda: weight_formats.dequantize_rows(values, scale.to("meta")), "scale", kind=TypeError)
