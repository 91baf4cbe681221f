"""The input contract on lesson 16's modules: every odd input gets a bilingual refusal that names the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_utils.explorers import lesson16 as explorers16
from attention_utils.recurrent import (
    delta_rule_parallel,
    delta_rule_recurrent,
    delta_rule_step,
    feature_map,
    linear_attention_chunked,
    linear_attention_parallel,
    linear_attention_recurrent,
)
from attention_utils.recurrent import recall
from attention_utils.recurrent.linear_attention import state_bytes
from attention_utils.recurrent.recall import Mixer, RecallModel, RecallTask, recall_accuracy, train_recall
from contract_helpers import assert_contract_error

FORMS = [linear_attention_parallel, linear_attention_recurrent, linear_attention_chunked]
DELTA = [delta_rule_recurrent, delta_rule_parallel]
GOOD = (torch.rand(2, 5, 3), torch.rand(2, 5, 3), torch.rand(2, 5, 4))
NOT_A_TENSOR = [None, 3.0, [[1.0, 2.0]], np.ones((5, 3))]
BAD_TENSORS = NOT_A_TENSOR + [torch.ones(5, 3, dtype=torch.int64), torch.ones(5, 3, dtype=torch.bool),
                              torch.full((2, 5, 3), float("nan")), torch.rand(3), torch.rand(1, 1, 1, 5, 3)]
NOT_A_SIZE = [None, "3", 3.5, True, 0, -1]


def label(value: object) -> str:
    """A test id that is the same in every process, as pytest-xdist's workers need (a random tensor's repr is not)."""
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}-{str(value.dtype).removeprefix('torch.')}"
    return repr(value)


def replaced(index: int, bad: object) -> list:
    found = list(GOOD)
    found[index] = bad
    return found


@pytest.mark.parametrize("form", FORMS + DELTA, ids=lambda f: f.__name__)
@pytest.mark.parametrize("index, name", [(0, "queries"), (1, "keys"), (2, "values")])
@pytest.mark.parametrize("bad", BAD_TENSORS, ids=label)
def test_bad_tensors_are_refused(form, index, name, bad):
    extra = (0.5,) if form in DELTA else ()
    assert_contract_error(lambda: form(*replaced(index, bad), *extra), name)


@pytest.mark.parametrize("form", FORMS + DELTA, ids=lambda f: f.__name__)
def test_mismatched_shapes_are_refused(form):
    extra = (0.5,) if form in DELTA else ()
    q, k, v = GOOD
    assert_contract_error(lambda: form(q, torch.rand(2, 5, 2), v, *extra), "d_k")
    assert_contract_error(lambda: form(q, k, torch.rand(2, 6, 4), *extra), "values")
    assert_contract_error(lambda: form(q, torch.rand(3, 5, 3), v, *extra), "keys")
    assert_contract_error(lambda: form(q, k.double(), v, *extra), "keys", kind=TypeError)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [None, "yes", 1, np.ones(2)], ids=label)
def test_normalize_must_be_a_flag(form, bad):
    assert_contract_error(lambda: form(*GOOD, normalize=bad), "normalize")


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_normalize_needs_features_that_are_not_negative(form):
    q, k, v = GOOD
    assert_contract_error(lambda: form(q - 2, k, v, normalize=True), "queries", "feature_map")


@pytest.mark.parametrize("bad", NOT_A_SIZE, ids=label)
def test_chunk_size_must_be_a_size(bad):
    assert_contract_error(lambda: linear_attention_chunked(*GOOD, chunk_size=bad), "chunk_size")


@pytest.mark.parametrize("form", DELTA, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), torch.rand(2, 4), torch.rand(2, 5).double(), "0.5", None],
                         ids=label)
def test_beta_must_be_one_rate_per_token_in_range(form, bad):
    assert_contract_error(lambda: form(*GOOD, bad), "beta")


@pytest.mark.parametrize("form", DELTA, ids=lambda f: f.__name__)
@pytest.mark.parametrize("bad", [0.0, -0.5, 1.01, torch.zeros(2, 5), torch.rand(5)], ids=label)
def test_decay_must_be_in_0_to_1(form, bad):
    assert_contract_error(lambda: form(*GOOD, 0.5, bad), "decay")


def test_delta_rule_step_checks_its_tensors():
    state = torch.zeros(4, 3)
    assert_contract_error(lambda: delta_rule_step(state, torch.rand(2), torch.rand(4), 1.0), "key")
    assert_contract_error(lambda: delta_rule_step(state, torch.rand(3), torch.rand(5), 1.0), "value")
    assert_contract_error(lambda: delta_rule_step(None, torch.rand(3), torch.rand(4), 1.0), "state")


def test_feature_map_checks_its_input():
    assert_contract_error(lambda: feature_map([1.0, 2.0]), "x")


@pytest.mark.parametrize("name", ["num_layers", "num_heads", "d_k", "d_v", "bytes_per_value"])
@pytest.mark.parametrize("bad", NOT_A_SIZE, ids=label)
def test_state_bytes_refuses_what_is_not_a_size(name, bad):
    sizes = dict(num_layers=2, num_heads=3, d_k=4, d_v=5, bytes_per_value=2)
    assert_contract_error(lambda: state_bytes(**{**sizes, name: bad}), name)


def test_state_bytes_by_hand():
    assert state_bytes(1, 32, 128, 128, 2) == 1_048_576  # 32 x 128 x 128 numbers of 2 bytes


@pytest.mark.parametrize("sizes, name", [(dict(num_keys=30), "num_keys"), (dict(num_keys=0), "num_keys"),
                                         (dict(most_pairs=40), "most_pairs"), (dict(fewest_pairs=5, most_pairs=4), "fewest_pairs"),
                                         (dict(num_keys="8"), "num_keys")])
def test_recall_task_refuses_bad_sizes(sizes, name):
    assert_contract_error(lambda: RecallTask(**sizes), name)


def test_recall_batches_check_their_arguments():
    task = RecallTask(num_keys=8, most_pairs=4)
    generator = torch.Generator().manual_seed(0)
    assert_contract_error(lambda: task.batch(4, None), "generator", kind=TypeError)
    assert_contract_error(lambda: task.batch(0, generator), "batch_size")
    assert_contract_error(lambda: task.batch(4, generator, num_pairs=9), "num_pairs")
    assert_contract_error(lambda: task.batch(4, generator, held_out="yes"), "held_out")


def test_recall_model_refuses_unknown_layers_and_bad_tokens():
    assert_contract_error(lambda: RecallModel(16, 8, ("softmax", "mamba")), "kind")
    assert_contract_error(lambda: RecallModel(16, 8, ()), "kinds")
    assert_contract_error(lambda: RecallModel(16, 8, ("linear",), key_size=0), "key_size")
    assert_contract_error(lambda: RecallModel(16, 8, ("linear",), key_size=2.5), "key_size")
    model = RecallModel(16, 8, ("delta",))
    assert_contract_error(lambda: model(torch.tensor([[3, 16]])), "tokens")
    assert_contract_error(lambda: model(torch.rand(1, 4)), "tokens")


def test_training_checks_its_numbers():
    task, model = RecallTask(num_keys=8, most_pairs=2), RecallModel(16, 8, ("linear",))
    assert_contract_error(lambda: train_recall(model, task, 0, 0), "steps")
    assert_contract_error(lambda: train_recall(model, task, 2, -1), "seed")
    assert_contract_error(lambda: train_recall(model, task, 2, 0, learning_rate=0.0), "learning_rate")
    assert_contract_error(lambda: recall_accuracy(model, task, 2, "x"), "seed")


@pytest.mark.parametrize("name, bad", [("beta", -0.5), ("beta", 2.0), ("beta", "1"), ("beta", None), ("decay", 0.0),
                                       ("decay", 1.5), ("decay", float("nan"))], ids=label)
def test_delta_rule_step_checks_its_rates(name, bad):
    rates = {"beta": 1.0, "decay": 1.0, name: bad}
    assert_contract_error(lambda: delta_rule_step(torch.zeros(4, 3), torch.rand(3), torch.rand(4), **rates), name)


# Found by issue 30's probe of lessons 14-16: each failed (torch's error, a memory bomb, a silent answer) before its fix.

@pytest.mark.parametrize("form", DELTA, ids=lambda f: f.__name__)
@pytest.mark.parametrize("beta", [np.float32(0.5), torch.tensor(0.5), torch.tensor(0.5, dtype=torch.float64)], ids=label)
def test_beta_may_be_a_numpy_or_0d_torch_number(form, beta):
    assert torch.allclose(form(*GOOD, beta), form(*GOOD, 0.5))


def test_return_state_must_be_a_flag():
    assert_contract_error(lambda: delta_rule_recurrent(*GOOD, 0.5, return_state="yes"), "return_state", kind=TypeError)


@pytest.mark.parametrize("name, index, bad", [("key", 1, torch.rand(5, 3)), ("value", 2, torch.rand(5, 4)), ("beta", 3, torch.rand(7))],
                         ids=label)
def test_delta_rule_step_needs_one_of_each_per_state(name, index, bad):
    arguments = [torch.zeros(2, 4, 3), torch.rand(2, 3), torch.rand(2, 4), 0.5]
    arguments[index] = bad
    assert_contract_error(lambda: delta_rule_step(*arguments), name, kind=ValueError)


@pytest.mark.parametrize("form", [linear_attention_parallel, delta_rule_parallel], ids=lambda f: f.__name__)
def test_a_parallel_form_refuses_a_matrix_of_scores_too_large_for_memory(form):
    long = torch.rand(10**6, 1)  # 4 MB of inputs, 8 TB of (T, T) scores
    extra = (0.5,) if form is delta_rule_parallel else ()
    assert_contract_error(lambda: form(long, long, long, *extra), "num_tokens", "at most", kind=ValueError)


def test_recall_sizes_too_large_for_memory_are_refused():
    assert_contract_error(lambda: RecallTask(num_keys=4 * 10**9), "num_keys", "at most", kind=ValueError)
    assert_contract_error(lambda: RecallTask().batch(10**10, torch.Generator()), "batch_size", "at most", kind=ValueError)
    assert_contract_error(lambda: RecallModel(8, 10**9, ("linear",)), "d_model", "at most", kind=ValueError)
    assert_contract_error(lambda: RecallModel(8, 8, ("linear",) * 10**6), "len(kinds)", kind=ValueError)


def test_recall_model_heads_must_divide_d_model():
    assert_contract_error(lambda: RecallModel(8, 10, ("linear",), num_heads=3), "d_model", kind=ValueError)
    assert_contract_error(lambda: Mixer("softmax", 10, 3), "d_model", kind=ValueError)


def test_training_refuses_what_is_not_its_model_task_or_progress():
    task, model = RecallTask(num_keys=8, most_pairs=2), RecallModel(16, 8, ("linear",))
    assert_contract_error(lambda: train_recall(None, task, 1, 0), "model", kind=TypeError)
    assert_contract_error(lambda: train_recall(model, None, 1, 0), "task", kind=TypeError)
    assert_contract_error(lambda: train_recall(RecallModel(8, 8, ("linear",)), task, 1, 0), "vocab_size", kind=ValueError)
    before = [p.clone() for p in model.parameters()]
    assert_contract_error(lambda: train_recall(model, task, 1, 0, progress="yes"), "progress", kind=TypeError)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # refused before the first step


@pytest.mark.parametrize("name, bad", [("pairs", (0,)), ("pairs", (9,)), ("seeds", 5), ("models", {}),
                                       ("learning_rate", 0.0), ("learning_rate", "3e-3")], ids=label)
def test_recall_grid_refuses_before_it_trains(monkeypatch, name, bad):
    monkeypatch.setattr(recall, "train_recall", lambda *args, **kwargs: pytest.fail("trained before refusing"))
    arguments = dict(task=RecallTask(num_keys=8, most_pairs=2), d_model=8, seeds=(0,), steps=2, pairs=(1,),
                     models={"linear": ("linear",)}, progress=False)
    assert_contract_error(lambda: recall.recall_grid(**{**arguments, name: bad}), name)


def test_the_explorer_of_lesson_16_checks_its_sizes():
    assert_contract_error(lambda: explorers16.draw_states(12, 0, 3), "key_size", kind=ValueError)
    assert_contract_error(lambda: explorers16.draw_states(12, 8, "x"), "written", kind=TypeError)


@pytest.mark.parametrize("form, extra, name", [(linear_attention_recurrent, (), "queries"), (delta_rule_recurrent, (0.5,), "queries"),
                                               (linear_attention_chunked, (1,), "chunk_size")], ids=lambda v: getattr(v, "__name__", None))
def test_a_python_loop_over_a_million_steps_is_refused(form, extra, name):
    long = torch.rand(10**6, 1)  # at about 30 µs a step, a minute
    assert_contract_error(lambda: form(long, long, long, *extra), name, "100,000", kind=ValueError)


def test_the_explorer_of_lesson_16_checks_its_sliders():
    assert_contract_error(lambda: explorers16.show_states(num_pairs=0), "num_pairs", kind=ValueError)
    assert_contract_error(lambda: explorers16.show_states(key_size=9), "key_size", kind=ValueError)
    assert_contract_error(lambda: explorers16.show_states(written=20), "written", kind=ValueError)


# a third round: numbers that grow past the dtype

@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_linear_attention_names_scores_that_overflow(form):
    huge = torch.full((4, 3), 1e20)  # finite, but φ(q)·φ(k) = 3e40 is not a float32
    assert_contract_error(lambda: form(huge, huge, torch.ones(4, 2)), "queries", "float32")


@pytest.mark.parametrize("form", DELTA, ids=lambda f: f.__name__)
def test_a_delta_rule_state_that_grows_past_float32_is_named(form):
    keys = 10 * torch.nn.functional.normalize(torch.randn(60, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert_contract_error(lambda: form(torch.rand(60, 4), keys, torch.rand(60, 4), 1.0), "keys", "normalize", kind=ValueError)


def test_recall_training_that_diverges_says_so():
    task, model = RecallTask(num_keys=8, most_pairs=2), RecallModel(16, 16, ("linear",))
    assert_contract_error(lambda: train_recall(model, task, 30, 0, batch_size=8, learning_rate=1e6, progress=False),
                          "learning_rate", "diverged", kind=ValueError)


# a fourth round: helper methods and the figures of recall_grid's rows

@pytest.mark.parametrize("bad", [-5, "x", 2.5], ids=label)
def test_state_floats_needs_a_length(bad):
    assert_contract_error(lambda: RecallModel(16, 8, ("softmax",)).state_floats(bad), "length")


@pytest.mark.parametrize("draw", [explorers16.recall_table, explorers16.draw_recall, explorers16.state_size_table,
                                  explorers16.draw_state_sizes], ids=lambda f: f.__name__)
def test_the_figures_of_recall_need_recall_grids_rows(draw):
    assert_contract_error(lambda: draw([]), "rows", kind=TypeError)
    assert_contract_error(lambda: draw([{"model": "linear"}]), "rows", kind=TypeError)


def test_rows_of_a_model_of_ones_own_are_shown_by_its_name():
    rows = [{"model": "mine", "seed": 0, "pairs": 2, "key_size": 4, "accuracy": 0.5, "kept_floats": 16}]
    assert "mine" in explorers16.recall_table(rows)
    figure = explorers16.draw_state_sizes(rows)  # one model: one panel
    assert len(figure.axes) == 1
    import matplotlib.pyplot as plt
    plt.close(figure)


def test_a_mixer_checks_its_input_and_takes_a_batch_of_0():
    assert_contract_error(lambda: Mixer("linear", 8)(torch.randn(1, 3, 10)), "x", kind=ValueError)
    assert_contract_error(lambda: Mixer("softmax", 8)(torch.ones(1, 3, 8, dtype=torch.long)), "x", kind=TypeError)
    assert RecallModel(16, 8, ("delta",))(torch.zeros(0, 4, dtype=torch.long)).shape == (0, 4, 16)


def test_kinds_and_key_size_are_named():
    assert_contract_error(lambda: RecallModel(16, 8, [1, 2]), "kinds[0]", kind=TypeError)
    assert_contract_error(lambda: RecallModel(16, 8, ("linear",), key_size=10**12), "key_size", "at most", kind=ValueError)


def test_one_step_needs_its_state_key_and_value_in_one_dtype():
    state = torch.zeros(2, 3, 4)
    assert_contract_error(lambda: delta_rule_step(state, torch.rand(2, 4).double(), torch.rand(2, 3), 0.5), "key",
                          kind=TypeError)


@pytest.mark.parametrize("form", DELTA, ids=lambda f: f.__name__)
def test_meta_tensors_give_the_shape_without_reading_a_rate(form):
    queries, keys, values = (x.to("meta") for x in GOOD)
    assert form(queries, keys, values, 0.5, torch.full((2, 5), 0.9, device="meta")).shape == (2, 5, 4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_parallel_delta_rule_takes_half_precision(dtype):
    """torch has no CPU triangular solve in 16 bits: the parallel form solves in float32, and still equals the loop
    to the dtype's rounding (the float64 loop is the reference)."""
    generator = torch.Generator().manual_seed(3)
    queries, keys, values = (torch.randn(2, 9, d, generator=generator) for d in (4, 4, 3))
    keys = torch.nn.functional.normalize(keys, dim=-1)
    decay = torch.full((2, 9), 0.9)
    exact = delta_rule_recurrent(queries.double(), keys.double(), values.double(), 0.5, decay.double())
    found = delta_rule_parallel(queries.to(dtype), keys.to(dtype), values.to(dtype), 0.5, decay.to(dtype))
    assert found.dtype == dtype
    assert (found.double() - exact).abs().max() <= 8 * torch.finfo(dtype).eps * exact.abs().max()


@pytest.mark.parametrize("seed", [-1, 2**64, 1.5, "0"])
def test_the_state_explorer_checks_its_seed(seed):
    assert_contract_error(lambda: explorers16.recall_example(4, 8, seed), "seed")


def test_one_step_names_an_overflow_and_the_rate_out_of_range():
    assert_contract_error(lambda: delta_rule_step(torch.full((2, 3, 4), 3e38), torch.full((2, 4), 10.0), torch.randn(2, 3), 1.0),
                          "beta", "normalize the keys", kind=ValueError)
    message = assert_contract_error(
        lambda: delta_rule_step(torch.zeros(2, 3, 4), torch.rand(2, 4), torch.rand(2, 3), torch.tensor([0.1, 1.5])), "beta")
    assert "1.5" in message and "0.1" not in message


def test_recall_accuracy_gives_the_model_its_mode_back():
    task = RecallTask(num_keys=8, most_pairs=4)
    model = RecallModel(task.vocab_size, 8, ("delta",)).train()
    recall_accuracy(model, task, 2, seed=0, batch_size=4)
    assert model.training


ROW = {"model": "delta", "seed": 0, "pairs": 2, "key_size": 4, "accuracy": 0.5, "kept_floats": 16}


@pytest.mark.parametrize("bad", [{"accuracy": 1.5}, {"accuracy": float("nan")}, {"accuracy": "0.5"}, {"pairs": "2"},
                                 {"kept_floats": 0}, {"key_size": 2.0}])
def test_rows_with_values_recall_grid_never_writes_are_refused(bad):
    assert_contract_error(lambda: explorers16.state_size_table([ROW | bad]), "accuracy", kind=ValueError)


def test_the_recall_tables_and_figures_name_a_bad_language_or_reference():
    assert_contract_error(lambda: explorers16.recall_table([ROW], "fr"), "language", kind=ValueError)
    assert_contract_error(lambda: explorers16.draw_state_sizes([ROW], reference=5), "reference", kind=TypeError)


def test_a_step_on_meta_builds_its_rates_there():
    state, key, value = torch.zeros(2, 3, 4, device="meta"), torch.rand(2, 4, device="meta"), torch.rand(2, 3, device="meta")
    assert delta_rule_step(state, key, value, 0.5, 0.9).shape == (2, 3, 4)


def test_a_size_table_of_two_grids_with_other_pairs_shows_a_dash():
    rows = [ROW, ROW | {"model": "linear", "pairs": 4}]  # delta has no N = 4, linear no N = 2
    table = explorers16.state_size_table(rows)
    assert table.count("–") == 3  # delta's numbers kept at N = 4, delta at N = 4, linear at N = 2


def test_a_recall_model_on_meta_is_refused_before_training():
    task = RecallTask(num_keys=8, most_pairs=4)
    model = RecallModel(task.vocab_size, 8, ("delta",)).to("meta")
    assert_contract_error(lambda: train_recall(model, task, 2, seed=0, progress=False), "model", "meta", kind=ValueError)
    assert_contract_error(lambda: recall_accuracy(model, task, 2, seed=0), "model", "meta", kind=ValueError)


@pytest.mark.parametrize("name", ["rebind", "boundary"])
@pytest.mark.parametrize("bad", [None, "yes", 1, 0.0], ids=label)
def test_recall_task_variants_are_flags(name, bad):
    assert_contract_error(lambda: RecallTask(**{name: bad}), name, kind=TypeError)


def test_a_boundary_task_needs_keys_for_two_documents():
    """Two documents of distinct keys: 8 keys hold at most 4 pairs each."""
    assert_contract_error(lambda: RecallTask(num_keys=8, most_pairs=5, boundary=True), "most_pairs", "4", kind=ValueError)
    assert_contract_error(lambda: RecallTask(num_keys=8, most_pairs=4, boundary=True).batch(2, torch.Generator(), 5),
                          "num_pairs", "4", kind=ValueError)


@pytest.mark.parametrize("bad", [bad for bad in NOT_A_SIZE if bad is not None], ids=label)  # None: no window
def test_a_window_must_be_a_size(monkeypatch, bad):
    assert_contract_error(lambda: RecallModel(16, 8, ("softmax",), window=bad), "window")
    monkeypatch.setattr(recall, "train_recall", lambda *args, **kwargs: pytest.fail("trained before refusing"))
    assert_contract_error(lambda: recall.recall_grid(RecallTask(num_keys=8, most_pairs=2), 8, (0,), 2, (1,),
                                                     progress=False, window=bad), "window")
