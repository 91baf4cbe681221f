"""Speculative decoding: a cheap draft proposes k tokens and the model checks them all in one pass (lesson 18).

A decode step reads every weight to score one token (lesson 14), so scoring k + 1 tokens in one
pass costs little more than one. Greedy: keep the longest prefix of the draft that the model would
have chosen itself, then the model's own next token, so the output is plain greedy decoding token
for token. Sampled: accept a drafted token x with probability min(1, p(x) / q(x)), and at the first
refusal draw from max(0, p - q) instead (Leviathan et al. 2023; Chen et al. 2023): the tokens are then
distributed exactly as the model's own samples, whatever the draft.

A draft is any object with `propose(tokens, k)`: given the text so far as a list of ids, it returns at
most k ids that it guesses come next.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..checks import bilingual, check_real, check_size, shown
from .generation import check_logits, check_prompt, check_reach, takes_keywords
from .kv_cache import KVCache

MOST_DRAFTED = 64  # tokens one pass may check: more is never useful (lesson 18's acceptance falls long before)


@dataclass
class Speculation:
    """What speculative decoding leaves: every token (prompt first) and how the passes went."""

    tokens: torch.Tensor  # (1, prompt + new)
    passes: int  # calls of the model after the prefill; each checked one block of drafted tokens
    drafted: int  # tokens the draft proposed
    accepted: int  # of those, the ones the model kept
    history: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (proposed, kept) for every block checked


class PromptLookup:
    """Propose what followed the latest earlier place where the text's last `ngram` tokens appeared: no model, no cost.

    A shorter match is tried when the longest finds nothing; with no match at all it proposes nothing.
    """

    def __init__(self, ngram: int = 3) -> None:
        self.ngram = check_size(ngram, "ngram", maximum=MOST_DRAFTED)

    def propose(self, tokens: list[int], k: int) -> list[int]:
        for n in range(min(self.ngram, len(tokens) - 1), 0, -1):
            tail = tokens[-n:]
            for start in range(len(tokens) - n - 1, -1, -1):  # the latest earlier occurrence first
                if tokens[start:start + n] == tail:
                    return tokens[start + n:start + n + k]
        return []


class ModelDraft:
    """A cheaper model drafts greedily with its own KVCache, which forgets whatever the model did not keep."""

    def __init__(self, model: nn.Module, cache: KVCache) -> None:
        if not isinstance(model, nn.Module) or not takes_keywords(model, "cache"):
            raise TypeError(bilingual(f"model must be a torch module called as model(tokens, cache=cache), got {shown(model)}.",
                                      f"model 必须是可以这样调用的 torch 模块：model(tokens, cache=cache)，实际是 {shown(model, True)}。"))
        _check_empty_cache(cache, "the draft's cache", "草稿模型的缓存")
        self.model, self.cache, self.seen = model, cache, []  # seen: the tokens whose keys the draft's cache holds

    def propose(self, tokens: list[int], k: int) -> list[int]:
        return self.sample(tokens, k)[0]

    @torch.no_grad()
    def sample(self, tokens: list[int], k: int, temperature: float | None = None,
               generator: torch.Generator | None = None) -> tuple[list[int], torch.Tensor]:
        """k tokens and the draft's probabilities q (k, vocab) they were drawn from; greedy when temperature is None."""
        common = kept_prefix(self.seen, tokens)
        self.cache.truncate(common)
        self.seen, step, proposal, rows = tokens[:common], tokens[common:], [], []
        device = next(self.model.parameters()).device
        for _ in range(k):
            logits = self.model(torch.tensor([step], device=device), cache=self.cache)[0, -1].float()
            self.seen = self.seen + step
            rows.append(logits.softmax(-1) if temperature is None else (logits / temperature).softmax(-1))
            pick = logits.argmax() if temperature is None else torch.multinomial(rows[-1].cpu(), 1, generator=generator)
            step = [int(pick)]
            proposal += step
        return proposal, torch.stack(rows) if rows else torch.empty(0, 0, device=device)


def kept_prefix(seen: list[int], tokens: list[int]) -> int:
    """How many of a draft's `seen` tokens it may keep for the text `tokens`: the shared prefix, short of the last token,
    which goes in again so that its scores give the first proposal."""
    common = next((i for i, (a, b) in enumerate(zip(seen, tokens)) if a != b), min(len(seen), len(tokens)))
    return min(common, len(tokens) - 1)


def early_exit(model: nn.Module, layers: int) -> nn.Module:
    """The model's first `layers` blocks, then its final norm and output: a draft that shares every weight with it.

    Works with lesson 13's LlamaModel (any module with `blocks` and a dataclass `config` holding `num_layers`).
    """
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList) or not dataclasses.is_dataclass(getattr(model, "config", None)):
        raise TypeError(bilingual(f"model must be a LlamaModel (blocks and a config), got {shown(model)}.",
                                  f"model 必须是 LlamaModel（有 blocks 和 config），实际是 {shown(model, True)}。"))
    layers = check_size(layers, "layers")
    if layers > len(blocks):
        raise ValueError(bilingual(f"layers={layers} but the model has {len(blocks)} blocks; take at most that many.",
                                   f"layers={layers}，但模型只有 {len(blocks)} 个模块；最多取这么多层。"))
    shallow = copy.copy(model)  # the same parameters; only its list of blocks and its config are its own
    shallow._modules = dict(model._modules)
    shallow.blocks = nn.ModuleList(list(blocks)[:layers])
    shallow.config = dataclasses.replace(model.config, num_layers=layers)
    return shallow


@torch.no_grad()
def speculative_greedy(model: nn.Module, prompt: torch.Tensor, new_tokens: int, cache: KVCache, draft: object,
                       k: int = 4) -> Speculation:
    """Greedy decoding of one sequence in passes of one token plus up to k drafted ones; the tokens equal `generate`'s."""
    new_tokens, k = check_size(new_tokens, "new_tokens"), check_size(k, "k", minimum=0, maximum=MOST_DRAFTED)
    _check_one_sequence(prompt)
    if not callable(getattr(draft, "propose", None)):
        raise TypeError(bilingual(f"draft must have propose(tokens, k), like PromptLookup() or ModelDraft(...), got {shown(draft)}.",
                                  f"draft 必须有 propose(tokens, k) 方法，例如 PromptLookup() 或 ModelDraft(...)，实际是 {shown(draft, True)}。"))
    _check_empty_cache(cache, "cache", "cache")
    check_reach(model, prompt.shape[1], new_tokens)
    was_training = model.training
    model.eval()
    try:
        first = check_logits(model(prompt, cache=cache), prompt)[0, -1].argmax()
        tokens, stats = prompt[0].tolist() + [int(first)], [0, 0, 0, []]  # passes, drafted, accepted, history
        end = prompt.shape[1] + new_tokens
        while len(tokens) < end:
            room = min(k, end - len(tokens) - 1)  # a pass adds its accepted tokens and one more
            proposal = _checked_proposal(draft.propose(list(tokens), room), room)
            block = torch.tensor([tokens[-1:] + proposal], device=prompt.device)
            choices = check_logits(model(block, cache=cache), block)[0].argmax(-1).tolist()
            agree = next((i for i, (d, c) in enumerate(zip(proposal, choices)) if d != c), len(proposal))
            cache.truncate(cache.position - (len(proposal) - agree))  # forget the refused tokens' keys and values
            tokens += proposal[:agree] + [choices[agree]]
            stats = [stats[0] + 1, stats[1] + len(proposal), stats[2] + agree, stats[3] + [(len(proposal), agree)]]
    finally:
        model.train(was_training)
    return Speculation(torch.tensor([tokens], device=prompt.device), *stats)


@torch.no_grad()
def speculative_sample(model: nn.Module, prompt: torch.Tensor, new_tokens: int, cache: KVCache, draft: ModelDraft,
                       k: int = 4, temperature: float = 1.0, generator: torch.Generator | None = None) -> Speculation:
    """Sampling at `temperature` in passes: the draft samples k tokens from q, the model keeps what accept_or_resample keeps.

    The first pass is the prompt itself with k drafted tokens after it, so every token goes through the rule.
    The tokens are distributed as the model's own samples at that temperature, whatever the draft.
    """
    new_tokens, k = check_size(new_tokens, "new_tokens"), check_size(k, "k", minimum=0, maximum=MOST_DRAFTED)
    temperature = check_real(temperature, "temperature", "1.0", positive=True)
    _check_one_sequence(prompt)
    if not isinstance(draft, ModelDraft):
        raise TypeError(bilingual(f"draft must be a ModelDraft(model, KVCache(...)): sampling needs its probabilities, got {shown(draft)}.",
                                  f"draft 必须是 ModelDraft(model, KVCache(...))：采样要用到它给出的概率，实际是 {shown(draft, True)}。"))
    _check_empty_cache(cache, "cache", "cache")
    check_reach(model, prompt.shape[1], new_tokens)
    was_training = model.training
    model.eval()
    try:
        tokens, stats = prompt[0].tolist(), [-1, 0, 0, []]  # the first pass is the prefill: not counted in passes
        end = prompt.shape[1] + new_tokens
        while len(tokens) < end:
            room = min(k, end - len(tokens) - 1)
            proposal, q = draft.sample(list(tokens), room, temperature, generator) if room else ([], None)
            block = torch.tensor([tokens[cache.position:] + proposal], device=prompt.device)
            logits = check_logits(model(block, cache=cache), block)[0, -len(proposal) - 1:].float()
            p = (logits / temperature).softmax(-1).cpu()
            q = torch.empty(0, p.shape[1]) if q is None else q.cpu()
            kept = accept_or_resample(p, q, proposal, generator)
            cache.truncate(cache.position - (len(proposal) - len(kept) + 1))  # forget the refused tokens' keys and values
            tokens += kept
            stats = [stats[0] + 1, stats[1] + len(proposal), stats[2] + len(kept) - 1, stats[3] + [(len(proposal), len(kept) - 1)]]
    finally:
        model.train(was_training)
    return Speculation(torch.tensor([tokens], device=prompt.device), *stats)


def accept_or_resample(target: torch.Tensor, draft: torch.Tensor, drafted: Sequence[int],
                       generator: torch.Generator | None = None) -> list[int]:
    """The tokens one sampled pass keeps, from the model's probabilities `target` (k + 1, vocab) and the draft's (k, vocab).

    Drafted token i is kept with probability min(1, p_i(x) / q_i(x)); the first one refused is replaced by a
    draw from max(0, p_i - q_i), normalized; when all k are kept, one more is drawn from p_k.
    """
    drafted = [int(x) for x in drafted]
    _check_probabilities(target, draft, drafted)
    kept: list[int] = []
    for i, x in enumerate(drafted):
        if torch.rand((), generator=generator, dtype=target.dtype) * draft[i, x] < target[i, x]:  # u < p / q
            kept.append(x)
            continue
        residual = (target[i] - draft[i]).clamp(min=0)
        return kept + [int(torch.multinomial(residual / residual.sum(), 1, generator=generator))]
    return kept + [int(torch.multinomial(target[len(drafted)], 1, generator=generator))]


def _check_one_sequence(prompt: object) -> None:
    check_prompt(prompt)
    if prompt.shape[0] != 1:
        raise ValueError(bilingual(f"prompt must hold one sequence (batch 1), got {tuple(prompt.shape)}; decode each on its own.",
                                   f"prompt 只能有一个序列（批大小 1），实际形状是 {tuple(prompt.shape)}；请逐个序列解码。"))


def _check_empty_cache(cache: object, name: str, name_zh: str) -> None:
    if not isinstance(cache, KVCache) or cache.position != 0:
        raise (ValueError if isinstance(cache, KVCache) else TypeError)(bilingual(
            f"{name} must be a new, empty KVCache(num_layers) for its model, got {shown(cache)}.",
            f"{name_zh} 必须是为对应模型新建的空 KVCache(num_layers)，实际是 {shown(cache, True)}。"))


def _checked_proposal(proposal: object, room: int) -> list[int]:
    """A draft's answer: a list of whole token ids, at most `room` of them (the model checks the ids' range)."""
    try:
        ids = [int(x) for x in proposal]
    except (TypeError, ValueError):
        ids = None
    if ids is None or len(ids) > room:
        raise ValueError(bilingual(
            f"draft.propose must return a list of at most {room} token ids, got {shown(proposal)}.",
            f"draft.propose 必须返回一个最多 {room} 个词元编号的列表，实际是 {shown(proposal, True)}。"))
    return ids


def _check_probabilities(target: object, draft: object, drafted: list[int]) -> None:
    """target (k + 1, vocab) and draft (k, vocab): rows of probabilities; every drafted id has q > 0."""
    k = len(drafted)
    for name, p, rows in (("target", target, k + 1), ("draft", draft, k)):
        if not isinstance(p, torch.Tensor) or p.dim() != 2 or p.shape[0] != rows or not p.is_floating_point():
            raise ValueError(bilingual(
                f"{name} must be a float tensor of {rows} rows of probabilities (rows, vocab) for {k} drafted tokens, "
                f"got {shown(p)}.",
                f"{name} 必须是浮点张量，对 {k} 个草稿词元要有 {rows} 行概率 (rows, vocab)，实际是 {shown(p, True)}。"))
        if p.numel() and (bool((p < 0).any()) or not torch.allclose(p.sum(-1), torch.ones(rows, dtype=p.dtype), atol=1e-4)):
            raise ValueError(bilingual(f"each row of {name} must be probabilities: never negative, summing to 1 (softmax).",
                                       f"{name} 的每一行都必须是概率：不为负，和为 1（用 softmax 得到）。"))
    if target.shape[1] != draft.shape[1] or any(not 0 <= x < target.shape[1] or draft[i, x] <= 0 for i, x in enumerate(drafted)):
        raise ValueError(bilingual(
            "drafted must hold ids the draft could draw (draft[i, id] > 0), with target and draft over the same vocabulary.",
            "drafted 里必须是草稿模型可能抽到的编号（draft[i, id] > 0），而且 target 和 draft 的词表必须相同。"))
