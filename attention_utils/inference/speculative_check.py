"""Is the sampling rule exact? Draw the next two tokens through it many times and compare with the model's own odds.

For a real vocabulary the exact two-token distribution p(x1) p(x2 | x1) has too many cells, so both the model
and the draft sample with top-k (each keeps its own `top_k` likeliest tokens, renormalized): a distribution
the model really samples from in practice, and one small enough to compute exactly with one batched pass.
Pearson's chi-square test then compares the counts with the exact expected counts (lesson 18).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import bilingual, check_size
from .speculative import accept_or_resample


@dataclass
class TwoTokens:
    """Top-k probabilities of the next two tokens, over a small list of token ids that holds every possible one."""

    ids: list[int]  # column i is token ids[i]
    p1: torch.Tensor  # (n,) the model's first token
    p2: torch.Tensor  # (n, n) row x1: the model's second token after x1
    q1: torch.Tensor  # the same for the draft
    q2: torch.Tensor

    @property
    def exact(self) -> torch.Tensor:
        """(n, n) the model's exact probability of each pair (x1, x2)."""
        return self.p1[:, None] * self.p2


@torch.no_grad()
def two_token_tables(model: nn.Module, draft: nn.Module, prompt: torch.Tensor, top_k: int = 8,
                     temperature: float = 1.0) -> TwoTokens:
    """The model's and the draft's top-k two-token probabilities after `prompt` (1, T), from two batched passes each."""
    top_k = check_size(top_k, "top_k")
    first = {name: _top_k(m(prompt)[0, -1], top_k, temperature) for name, m in (("p", model), ("q", draft))}
    starts = sorted({int(i) for probs in first.values() for i in probs.nonzero()})  # every x1 either could produce
    longer = torch.cat([prompt.repeat(len(starts), 1), torch.tensor(starts)[:, None]], 1)
    second = {name: _top_k(m(longer)[:, -1], top_k, temperature) for name, m in (("p", model), ("q", draft))}
    ids = sorted(set(starts) | {int(i) for probs in second.values() for i in probs.nonzero()[:, 1]})
    n, where = len(ids), torch.tensor(ids)
    rows = {name: torch.full((n, n), 1.0 / n, dtype=torch.float64) for name in second}  # x1 that never occurs: any row
    for name, probs in second.items():
        rows[name][[ids.index(x) for x in starts]] = probs[:, where]
    return TwoTokens(ids, first["p"][where], rows["p"], first["q"][where], rows["q"])


def draw_two_tokens(tables: TwoTokens, rule: Callable = accept_or_resample,
                    generator: torch.Generator | None = None) -> tuple[int, int]:
    """One speculative draw of two tokens (columns of `tables`): the draft proposes two, the rule keeps some,
    and when it kept only the first, the next pass drafts the second afresh and the rule checks it."""
    t = tables
    x1 = int(torch.multinomial(t.q1, 1, generator=generator))
    x2 = int(torch.multinomial(t.q2[x1], 1, generator=generator))
    extra = torch.full_like(t.p1, 1 / len(t.p1))  # the row of a third token: drawn after two are kept, then dropped
    kept = rule(torch.stack([t.p1, t.p2[x1], extra]), torch.stack([t.q1, t.q2[x1]]), [x1, x2], generator)
    if len(kept) == 1:
        y = int(torch.multinomial(t.q2[kept[0]], 1, generator=generator))
        kept += rule(torch.stack([t.p2[kept[0]], extra]), t.q2[kept[0]][None], [y], generator)[:1]
    return kept[0], kept[1]


def draw_pairs(tables: TwoTokens, draws: int, generator: torch.Generator | None = None, resample: bool = True) -> torch.Tensor:
    """Counts (n, n) of `draws` pairs drawn as draw_two_tokens does, all at once; resample=False draws from p at a refusal
    instead of from max(0, p - q): the shortcut that biases the output."""
    t, draws = tables, check_size(draws, "draws")

    def pick(rows: torch.Tensor) -> torch.Tensor:
        return torch.multinomial(rows, 1, generator=generator)[:, 0]

    def after_refusal(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        rest = (p - q).clamp(min=0) if resample else p
        total = rest.sum(-1, keepdim=True)
        return torch.where(total > 0, rest / total.clamp(min=1e-300), p)  # p = q: never refused, any row will do

    def checked(p: torch.Tensor, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The token the rule leaves at one position: x when kept, else a draw after the refusal."""
        u = torch.rand(len(x), generator=generator, dtype=p.dtype)
        kept = u * q.gather(1, x[:, None])[:, 0] < p.gather(1, x[:, None])[:, 0]
        return torch.where(kept, x, pick(after_refusal(p, q))), kept

    p1, q1 = t.p1.expand(draws, -1), t.q1.expand(draws, -1)
    x1 = pick(q1)
    x2 = pick(t.q2[x1])
    first, kept = checked(p1, q1, x1)
    second_kept, _ = checked(t.p2[x1], t.q2[x1], x2)  # used where the first was kept: same pass
    fresh = pick(t.q2[first])  # where the first was refused: the next pass drafts the second afresh
    second_fresh, _ = checked(t.p2[first], t.q2[first], fresh)
    second = torch.where(kept, second_kept, second_fresh)
    counts = torch.zeros(len(t.ids), len(t.ids), dtype=torch.float64)
    counts.index_put_((first, second), torch.ones(draws, dtype=torch.float64), accumulate=True)
    return counts


def chi_square_p_value(counts: torch.Tensor, expected: torch.Tensor) -> float:
    """Pearson's test: cells expected under 5 times are pooled into one; a draw in a cell of probability 0 gives p = 0."""
    counts, expected = counts.flatten().double(), expected.flatten().double()
    if counts.shape != expected.shape:
        raise ValueError(bilingual(f"counts and expected must have the same cells, got {counts.numel()} and {expected.numel()}.",
                                   f"`counts` 和 `expected` 的格子数必须相同，实际是 {counts.numel()} 和 {expected.numel()}。"))
    if counts[expected == 0].sum() > 0:
        return 0.0
    small = (expected > 0) & (expected < 5)
    big = expected >= 5
    observed = torch.cat([counts[big], counts[small].sum()[None]]) if small.any() else counts[big]
    wanted = torch.cat([expected[big], expected[small].sum()[None]]) if small.any() else expected[big]
    statistic = ((observed - wanted) ** 2 / wanted).sum()
    degrees = torch.tensor((observed.numel() - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(degrees, statistic / 2))


def _top_k(logits: torch.Tensor, top_k: int, temperature: float) -> torch.Tensor:
    """Softmax over each row's top_k logits at this temperature, zero elsewhere, in float64."""
    logits = logits.double() / temperature
    kept = logits.topk(min(top_k, logits.shape[-1]), dim=-1)
    return torch.zeros_like(logits).scatter(-1, kept.indices, kept.values.softmax(-1))
