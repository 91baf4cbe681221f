"""Sampled speculative decoding, the two-token check and the cost model, against references made without them:
the model's exact softmax, the chi-square tail in closed form, and hand-computed sums."""

from __future__ import annotations

import math

import pytest
import torch

from attention_utils.inference.decode_cost import forward_cost
from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.speculative import ModelDraft, PromptLookup, speculative_greedy, speculative_sample
from attention_utils.inference.speculative_check import chi_square_p_value, draw_two_tokens, two_token_tables
from attention_utils.inference.speculative_cost import (acceptance_rate, expected_tokens, predicted_speedup,
                                                        roofline_pass_cost, verification_cost)
import tiny_models
from contract_helpers import assert_contract_error
from test_speculative import VOCAB, probabilities, prompt_of, resample_from_the_model


@pytest.fixture(scope="module")
def model():
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=1)


@pytest.fixture(scope="module")
def other():
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=2)


def test_the_sampled_loop_draws_pairs_as_the_model_does(model, other):
    """1,000 runs of the whole loop (k = 2, three new tokens): the first two tokens against p(x1) p(x2 | x1), exact.
    Fixed seed; the false-alarm rate of p > 1e-3 is 0.1%."""
    prompt = prompt_of(11, 5)
    p1, p2 = probabilities(model, prompt)
    draws = 1_000
    generator = torch.Generator().manual_seed(7)
    counts = torch.zeros(VOCAB, VOCAB, dtype=torch.float64)
    for _ in range(draws):
        run = speculative_sample(model, prompt, 3, KVCache(2), ModelDraft(other, KVCache(2)), k=2, generator=generator)
        x1, x2 = run.tokens[0, 5:7].tolist()
        counts[x1, x2] += 1
    assert chi_square_p_value(counts, p1[:, None] * p2 * draws) > 1e-3


def test_the_model_as_its_own_draft_is_always_kept_and_the_cache_forgets_refusals(model, other):
    prompt = prompt_of(3, 6)
    itself = speculative_sample(model, prompt, 12, KVCache(2), ModelDraft(model, KVCache(2)), k=3,
                                generator=torch.Generator().manual_seed(0))
    assert itself.accepted == itself.drafted == 9 and itself.passes == 2  # p = q: u q < p always; 3 passes of 3 + 1
    cache = KVCache(2)
    run = speculative_sample(model, prompt, 15, cache, ModelDraft(other, KVCache(2)), k=4,
                             generator=torch.Generator().manual_seed(1))
    assert run.drafted > run.accepted
    clean = KVCache(2)
    with torch.no_grad():
        model(run.tokens[:, :-1], cache=clean)
    assert cache.position == clean.position
    for kept, fresh in zip(cache.layers, clean.layers):
        torch.testing.assert_close(kept.keys, fresh.keys)


def test_two_token_tables_equal_the_full_softmax_when_top_k_keeps_everything(model, other):
    prompt = prompt_of(5, 4)
    tables = two_token_tables(model, other, prompt, top_k=VOCAB)
    p1, p2 = probabilities(model, prompt)
    q1, _ = probabilities(other, prompt)
    assert tables.ids == list(range(VOCAB))
    torch.testing.assert_close(tables.p1, p1.double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(tables.p2, p2.double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(tables.q1, q1.double(), atol=1e-6, rtol=0)
    small = two_token_tables(model, other, prompt, top_k=3)
    assert int((small.p1 > 0).sum()) == 3 and bool(torch.allclose(small.exact.sum(), torch.tensor(1.0, dtype=torch.float64)))


@pytest.mark.parametrize("rule_name", ["exact", "no resampling"])
def test_draws_through_the_tables_pass_only_with_the_resampling_step(rule_name, model, other):
    """10,000 pairs with top-4 tables: the exact rule keeps p > 1e-3 (0.1% false alarms); the shortcut falls below 1e-6."""
    from attention_utils.inference.speculative import accept_or_resample

    rule = accept_or_resample if rule_name == "exact" else resample_from_the_model
    tables = two_token_tables(model, other, prompt_of(11, 5), top_k=4)
    n, generator = len(tables.ids), torch.Generator().manual_seed(99)
    counts = torch.zeros(n, n, dtype=torch.float64)
    for _ in range(10_000):
        x1, x2 = draw_two_tokens(tables, rule, generator)
        counts[x1, x2] += 1
    p_value = chi_square_p_value(counts, tables.exact * 10_000)
    assert (p_value > 1e-3) if rule_name == "exact" else (p_value < 1e-6), p_value


def test_chi_square_p_value_matches_the_closed_form_tail():
    """With 3 cells (2 degrees of freedom) the tail is exp(-x / 2)."""
    counts, expected = torch.tensor([30.0, 50.0, 20.0]), torch.tensor([40.0, 40.0, 20.0])
    x = (10**2 / 40) * 2
    assert chi_square_p_value(counts, expected) == pytest.approx(math.exp(-x / 2), rel=1e-9)
    assert chi_square_p_value(torch.tensor([1.0, 9.0]), torch.tensor([0.0, 10.0])) == 0.0  # a draw where p = 0


def test_the_cost_model_by_hand():
    assert expected_tokens(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_tokens(1.0, 4) == 5 and expected_tokens(0.0, 4) == 1
    assert predicted_speedup(0.5, 2, pass_cost=1.25, draft_cost=0.25) == pytest.approx(1.75 / (1.25 + 2 * 0.25))
    assert_contract_error(lambda: expected_tokens(1.5, 2), "alpha")
    assert_contract_error(lambda: predicted_speedup(0.5, 2, 1.0, -0.1), "draft_cost")


def test_roofline_pass_cost_follows_whichever_roof_binds():
    config = tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=1).config
    # memory-bound (infinite arithmetic): only the cache's bytes grow, by the keys and values of 4 more tokens
    c = roofline_pass_cost(config, 4, 10, bandwidth=1e9, flops_per_second=1e30)
    one, five = forward_cost(config, 1, 10), forward_cost(config, 5, 10)
    per_token_cache = 2 * config.num_layers * config.num_kv_heads * config.head_dim * 4  # keys and values, float32
    assert five.bytes - one.bytes == 4 * per_token_cache
    assert c == pytest.approx((one.bytes + 4 * per_token_cache) / one.bytes)
    # compute-bound (infinite bandwidth): about 5 times the FLOPs of one token (attention adds a little more)
    assert 5 <= roofline_pass_cost(config, 4, 10, bandwidth=1e30, flops_per_second=1e9) < 5.5


def test_acceptance_rate_counts_each_pass_up_to_its_first_refusal(model):
    prompt = prompt_of(7, 6)
    run = speculative_greedy(model, prompt, 21, KVCache(2), ModelDraft(model, KVCache(2)), k=4)
    assert acceptance_rate(run) == 1.0
    run.history, run.accepted = [(4, 1), (4, 4), (2, 0)], 5  # kept 1 then refused; all 4; refused at once
    assert acceptance_rate(run) == 5 / (5 + 2)
    assert acceptance_rate(speculative_greedy(model, prompt, 5, KVCache(2), PromptLookup(), k=0)) == 0.0


def test_verification_cost_times_every_k_and_leaves_the_prompt(model):
    prompt = prompt_of(2, 6)
    found = verification_cost(model, prompt, most=3, calls=2)
    assert sorted(found) == [0, 1, 2, 3] and all(ms > 0 for ms in found.values())
    assert_contract_error(lambda: verification_cost(torch.nn.Linear(2, 2), prompt), "model", kind=TypeError)


def test_the_sampled_loop_refuses_what_it_cannot_use(model):
    prompt = prompt_of(0, 4)
    assert_contract_error(lambda: speculative_sample(model, prompt, 5, KVCache(2), PromptLookup()), "draft", kind=TypeError)
    assert_contract_error(lambda: speculative_sample(model, prompt, 5, KVCache(2), ModelDraft(model, KVCache(2)),
                                                     temperature=0), "temperature")


@pytest.mark.parametrize("resample", [True, False])
def test_draw_pairs_all_at_once_passes_only_with_the_resampling_step(resample, model, other):
    """The batched draw of the same rule: 20,000 pairs; with resampling p > 1e-3 (0.1% false alarms), without p < 1e-6."""
    from attention_utils.inference.speculative_check import draw_pairs

    tables = two_token_tables(model, other, prompt_of(11, 5), top_k=4)
    counts = draw_pairs(tables, 20_000, torch.Generator().manual_seed(5), resample=resample)
    assert counts.sum() == 20_000
    p_value = chi_square_p_value(counts, tables.exact * 20_000)
    assert (p_value > 1e-3) if resample else (p_value < 1e-6), p_value
