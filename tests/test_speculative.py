"""Speculative decoding against independent references: plain greedy decoding, a cache that never saw the refused
tokens, and the exact two-token distribution of a model with a chi-square test."""

from __future__ import annotations

import pytest
import torch

from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache, LayerCache
from attention_utils.inference.paged_cache import PagedCache, paged_kv_cache
from attention_utils.inference.quantized_cache import quantized_kv_cache
from attention_utils.inference.speculative import (ModelDraft, PromptLookup, accept_or_resample, early_exit,
                                                   speculative_greedy)
import tiny_models
from contract_helpers import assert_contract_error

VOCAB = 30


@pytest.fixture(scope="module")
def model():
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=1)


@pytest.fixture(scope="module")
def other():
    """Another tiny model over the same vocabulary: a draft the model often refuses."""
    return tiny_models.tiny_llama(d_model=16, num_heads=2, num_kv_heads=1, seed=2)


def prompt_of(seed: int, length: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(seed))


DRAFTS = {
    "prompt lookup": lambda model, other: PromptLookup(2),
    "another model": lambda model, other: ModelDraft(other, KVCache(2)),
    "the model itself": lambda model, other: ModelDraft(model, KVCache(2)),
    "early exit": lambda model, other: ModelDraft(early_exit(model, 1), KVCache(1)),
}


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("k", [0, 2, 5])
def test_greedy_speculation_gives_exactly_the_tokens_of_plain_greedy_decoding(draft, k, model, other):
    for seed in range(2):
        prompt = prompt_of(seed, 5 + seed)
        plain = generate(model, prompt, 20, KVCache(2)).tokens
        run = speculative_greedy(model, prompt, 20, KVCache(2), DRAFTS[draft](model, other), k=k)
        assert torch.equal(run.tokens, plain)
        assert run.accepted <= run.drafted <= k * run.passes
        assert run.passes + run.accepted == 19  # the prefill chose the first token; each pass adds accepted + 1


def test_a_perfect_draft_is_always_accepted_and_a_refused_one_costs_a_pass_per_token(model):
    prompt = prompt_of(7, 6)
    itself = speculative_greedy(model, prompt, 21, KVCache(2), ModelDraft(model, KVCache(2)), k=4)
    assert (itself.passes, itself.drafted, itself.accepted) == (4, 16, 16)  # 20 after the first, in 4 passes of 4 + 1
    plain = generate(model, prompt, 17, KVCache(2)).tokens[0].tolist()

    class NeverRight:
        def propose(self, tokens, k):  # a token other than the one greedy decoding puts next (read off `plain`)
            return [(plain[len(tokens)] + 1) % VOCAB] * k

    run = speculative_greedy(model, prompt, 17, KVCache(2), NeverRight(), k=3)
    assert run.tokens[0].tolist() == plain
    assert (run.passes, run.accepted) == (16, 0)  # every draft refused: one token a pass, as plain decoding


def test_after_speculation_the_cache_equals_one_that_never_saw_the_refused_tokens(model, other):
    prompt = prompt_of(3, 6)
    cache = KVCache(2)
    run = speculative_greedy(model, prompt, 15, cache, ModelDraft(other, KVCache(2)), k=4)
    assert run.drafted > run.accepted  # some tokens were refused, so some keys were written and then forgotten
    clean = KVCache(2)
    with torch.no_grad():
        model(run.tokens[:, :-1], cache=clean)  # every token but the last, which no pass has read yet
    assert cache.position == clean.position == run.tokens.shape[1] - 1
    for kept, fresh in zip(cache.layers, clean.layers):
        torch.testing.assert_close(kept.keys, fresh.keys)
        torch.testing.assert_close(kept.values, fresh.values)


def test_truncate_forgets_the_newest_tokens_and_refuses_what_it_cannot_do():
    layer = LayerCache()
    keys = torch.randn(1, 2, 6, 4)
    layer.update(keys, keys)
    layer.truncate(4)
    assert layer.position == 4 and layer.nbytes == 2 * 2 * 4 * 4 * 4
    new = torch.randn(1, 2, 1, 4)
    seen, _, positions = layer.update(new, new)
    torch.testing.assert_close(seen, torch.cat([keys[:, :, :4], new], 2))
    assert positions.tolist() == [0, 1, 2, 3, 4]
    assert_contract_error(lambda: layer.truncate(9), "tokens=9", kind=ValueError)
    windowed = LayerCache()
    windowed.update(keys, keys, window=3)
    assert_contract_error(lambda: windowed.truncate(2), "window", kind=ValueError)
    quantized = quantized_kv_cache(1)
    assert_contract_error(lambda: quantized.truncate(0), "QuantizedLayerCache", kind=ValueError)
    paged = paged_kv_cache([PagedCache(2, 2, 4)])
    assert_contract_error(lambda: paged.truncate(0), "PagedLayerCache", kind=ValueError)


def test_prompt_lookup_proposes_what_followed_the_latest_match():
    draft = PromptLookup(ngram=2)
    assert draft.propose([1, 2, 3, 4, 1, 2, 5, 6, 1, 2], 3) == [5, 6, 1]  # the later "1 2" wins
    assert draft.propose([1, 2, 3, 9, 3], 2) == [9, 3]  # no "9 3" before: the one-token match "3"
    assert draft.propose([1, 2, 3], 4) == []


def test_bad_drafts_and_arguments_are_named(model):
    prompt = prompt_of(0, 4)
    assert_contract_error(lambda: speculative_greedy(model, prompt, 5, KVCache(2), "lookup"), "draft", kind=TypeError)

    class TooMany:
        def propose(self, tokens, k):
            return [1] * (k + 1)

    assert_contract_error(lambda: speculative_greedy(model, prompt, 5, KVCache(2), TooMany(), k=2), "draft.propose")
    assert_contract_error(lambda: speculative_greedy(model, prompt.repeat(2, 1), 5, KVCache(2), PromptLookup()),
                          "prompt")
    assert_contract_error(lambda: early_exit(model, 3), "layers=3")
    assert_contract_error(lambda: ModelDraft(model, "cache"),
                          "cache", kind=TypeError)


# The sampling rule: two tokens drawn through it, against the model's exact two-token distribution.

def probabilities(model, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """p(x1) (vocab,) and p(x2 | x1) (vocab, vocab) after the prompt, exactly, from the model's softmax."""
    with torch.no_grad():
        first = model(prompt)[0, -1].softmax(-1)
        longer = torch.cat([prompt.repeat(VOCAB, 1), torch.arange(VOCAB)[:, None]], 1)
        second = model(longer)[:, -1].softmax(-1)
    return first, second


def two_tokens(target, draft, rule, generator) -> tuple[int, int]:
    """Draft two tokens from q, keep what the rule keeps, and finish with a one-token pass when only one was kept."""
    (p1, p2), (q1, q2) = target, draft
    x1 = int(torch.multinomial(q1, 1, generator=generator))
    x2 = int(torch.multinomial(q2[x1], 1, generator=generator))
    uniform = torch.full((VOCAB,), 1 / VOCAB, dtype=p1.dtype)  # the third row only picks a third token
    kept = rule(torch.stack([p1, p2[x1], uniform]), torch.stack([q1, q2[x1]]), [x1, x2], generator)
    if len(kept) == 1:  # refused at the first token: the next pass drafts the second token afresh
        y = int(torch.multinomial(q2[kept[0]], 1, generator=generator))
        kept += rule(torch.stack([p2[kept[0]], uniform]), q2[kept[0]][None], [y], generator)[:1]
    return kept[0], kept[1]


def chi_square_p_value(counts: torch.Tensor, expected: torch.Tensor) -> float:
    """Pearson's test, cells with an expected count under 5 pooled into one; p from the chi-square tail."""
    small = expected < 5
    pooled = [counts[small].sum()[None], expected[small].sum()[None]] if small.any() else [counts[:0], expected[:0]]
    observed, wanted = torch.cat([counts[~small], pooled[0]]), torch.cat([expected[~small], pooled[1]])
    statistic = ((observed - wanted) ** 2 / wanted).sum()
    degrees = observed.numel() - 1
    return float(torch.special.gammaincc(torch.tensor(degrees / 2, dtype=torch.float64), statistic / 2))


def resample_from_the_model(target, draft, drafted, generator):
    """The biased shortcut: at a refusal, draw from p itself instead of from max(0, p - q)."""
    kept = []
    for i, x in enumerate(drafted):
        if torch.rand((), generator=generator, dtype=target.dtype) * draft[i, x] < target[i, x]:
            kept.append(x)
            continue
        return kept + [int(torch.multinomial(target[i], 1, generator=generator))]
    return kept + [int(torch.multinomial(target[len(drafted)], 1, generator=generator))]


@pytest.mark.parametrize("rule, should_pass", [(accept_or_resample, True), (resample_from_the_model, False)])
def test_sampled_tokens_follow_the_models_own_distribution(rule, should_pass, model, other):
    """10,000 pairs, fixed seed: the rule passes at a false-alarm rate of 0.1%; the shortcut fails with p < 1e-6."""
    prompt = prompt_of(11, 5)
    target, draft = probabilities(model, prompt), probabilities(other, prompt)
    exact = (target[0][:, None] * target[1]).flatten() * 10_000  # expected count of each pair (x1, x2)
    generator = torch.Generator().manual_seed(2024)
    counts = torch.zeros(VOCAB * VOCAB, dtype=torch.float64)
    for _ in range(10_000):
        x1, x2 = two_tokens(target, draft, rule, generator)
        counts[x1 * VOCAB + x2] += 1
    p_value = chi_square_p_value(counts, exact)
    assert (p_value > 1e-3) if should_pass else (p_value < 1e-6), p_value


def test_the_rule_refuses_rows_that_are_not_probabilities():
    p, q = torch.full((2, 4), 0.25), torch.full((1, 4), 0.25)
    assert_contract_error(lambda: accept_or_resample(p * 2, q, [1]), "target")
    assert_contract_error(lambda: accept_or_resample(p[:1], q, [1]), "target")
    assert_contract_error(lambda: accept_or_resample(p, torch.tensor([[1.0, 0, 0, 0]]), [2]), "drafted")
    assert accept_or_resample(p, q, [3], torch.Generator().manual_seed(0))[0] == 3  # p = q: always accepted
