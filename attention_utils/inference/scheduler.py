"""A small server: requests arrive over time and a scheduler decides, step by step, who runs (lesson 17).

Each step runs the model once over a ragged batch (ragged_step): one new token for every running
sequence that decodes, and prompt tokens for those that prefill. Three policies share this loop:

- "one": one request at a time, in arrival order;
- "static": a batch of up to `max_batch` requests starts together, and no new request joins
  until every one of them has finished (a finished request's slot stays empty);
- "continuous" (iteration-level scheduling, Orca, Yu et al. 2022): a finished request leaves at
  once and a waiting one takes its slot at the next step.

Memory is a fixed number of pages (the paged cache of lesson 15). A request is admitted while its
prompt's pages, and one more to grow into, are free; when a step needs more pages than are free, the
request admitted last is preempted: its pages are freed and it waits again, to be recomputed from its prompt and the tokens it
already has (vLLM's recompute). With `chunk`, a step feeds at most `chunk` tokens, decode tokens
first: a long prompt is split into chunks mixed with decode steps (chunked prefill, Sarathi, Agrawal
et al. 2023). With `prefix_cache`, full pages are kept after their request ends, keyed by a hash of
their tokens and of every token before them (vLLM's automatic prefix caching), and a later request
that starts with the same tokens reads them instead of computing them again.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from ..arguments import check_flag
from ..checks import bilingual, check_size, shown
from .batched_generation import check_prompts
from .generation import check_reach
from .paged_cache import PagedCache
from .ragged_step import LayerPools, check_ragged_model, ragged_forward

POLICIES = ("one", "static", "continuous")


@dataclass(frozen=True)
class Request:
    """A prompt (token ids), how many tokens to generate, and the step at which it arrives."""

    prompt: tuple[int, ...]
    max_new_tokens: int
    arrival: int = 0


@dataclass
class Served:
    """What happened to one request: its new tokens, when it arrived and when each token came (perf_counter seconds)."""

    request: Request
    tokens: list[int] = field(default_factory=list)
    arrived_at: float = 0.0
    token_times: list[float] = field(default_factory=list)
    computed_tokens: int = 0  # tokens it fed to the model (a recomputed token counts again)
    cached_tokens: int = 0  # prompt tokens read from the prefix cache instead
    preemptions: int = 0
    logits: list[torch.Tensor] = field(default_factory=list)  # kept only with keep_logits

    @property
    def time_to_first_token(self) -> float:
        return self.token_times[0] - self.arrived_at

    @property
    def time_per_output_token(self) -> float:
        """Mean time between its tokens after the first (0 for a single token)."""
        gaps = len(self.token_times) - 1
        return (self.token_times[-1] - self.token_times[0]) / gaps if gaps else 0.0


@dataclass
class StepRecord:
    """One step: the requests it fed (index, tokens fed), the pages in use after it, and how long it took."""

    fed: list[tuple[int, int]]
    pages_in_use: int
    seconds: float


@dataclass
class _Live:
    """A request the scheduler holds: everything it must compute (prompt, then its tokens) and its sequence."""

    index: int
    served: Served
    sequence: int | None = None
    computed: int = 0  # tokens of `text` whose keys and values are in its pages
    registered: int = 0  # its full pages already offered to the prefix cache

    @property
    def text(self) -> list[int]:
        return list(self.served.request.prompt) + self.served.tokens


class PrefixCache:
    """Full pages kept after their request, keyed by a hash of their tokens and all tokens before them."""

    def __init__(self, pools: LayerPools) -> None:
        self.pools = pools
        self.entries: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # key -> (page, holding sequence), oldest first

    def keys(self, tokens: list[int]) -> list[bytes]:
        """One key per full page of `tokens`: the hash of the previous page's key and this page's tokens."""
        keys, previous, size = [], b"", self.pools.page_size
        for start in range(0, len(tokens) - size + 1, size):
            previous = hashlib.sha256(previous + repr(tokens[start:start + size]).encode()).digest()
            keys.append(previous)
        return keys

    def lookup(self, tokens: list[int]) -> list[int]:
        """Pages of the longest cached prefix of `tokens`, leaving at least its last token to compute."""
        pages = []
        for key in self.keys(tokens[:-1]):
            if key not in self.entries:
                break
            self.entries.move_to_end(key)
            pages.append(self.entries[key][0])
        return pages

    def offer(self, tokens: list[int], table: list[int], skip: int) -> int:
        """Keep the full pages of `tokens` (in `table`) after the first `skip`; returns how many full pages there are."""
        keys = self.keys(tokens)
        for key, page in list(zip(keys, table))[skip:]:
            if key not in self.entries:
                self.entries[key] = (page, self.pools.share([page]))
        return len(keys)

    def evictable(self) -> int:
        return sum(self.pools.holders(page) == 1 for page, _ in self.entries.values())

    def evict(self, pages: int) -> None:
        """Free up to `pages` pages that only the cache holds, least recently used first."""
        for key, (page, holder) in list(self.entries.items()):
            if pages <= 0:
                return
            if self.pools.holders(page) == 1:
                self.pools.free(holder)
                del self.entries[key]
                pages -= 1

    def clear(self) -> None:
        self.evict(len(self.entries))


class Scheduler:
    """Serves a list of requests on `model` with `num_pages` pages of `page_size` tokens (see the module's text)."""

    def __init__(self, model: nn.Module, num_pages: int, page_size: int = 16, policy: str = "continuous",
                 max_batch: int = 8, chunk: int | None = None, prefix_cache: bool = False,
                 keep_logits: bool = False, pool_kind: type = PagedCache) -> None:
        if policy not in POLICIES:
            raise ValueError(bilingual(f"policy must be one of {POLICIES}, got {shown(policy)}.",
                                       f"policy 必须是 {POLICIES} 之一，实际是 {shown(policy, True)}。"))
        self.model = check_ragged_model(model)
        self.pools = LayerPools(model, num_pages, page_size, pool_kind)
        self.policy = policy
        self.max_batch = 1 if policy == "one" else check_size(max_batch, "max_batch", maximum=4096)
        self.chunk = None if chunk is None else check_size(chunk, "chunk")
        self.prefix_cache = PrefixCache(self.pools) if check_flag(prefix_cache, "prefix_cache") else None
        self.keep_logits = check_flag(keep_logits, "keep_logits")
        self.steps: list[StepRecord] = []

    def run(self, requests: Sequence[Request]) -> list[Served]:
        """Serve every request to its end, step by step; returns what happened to each, in the order given."""
        requests = self.check_requests(requests)
        live = [_Live(i, Served(r)) for i, r in enumerate(requests)]
        pending = deque(sorted(live, key=lambda item: item.served.request.arrival))
        waiting: deque[_Live] = deque()
        running: list[_Live] = []
        step = 0
        while pending or waiting or running:
            if not waiting and not running:  # nothing to do until the next arrival: the clock jumps there
                step = max(step, pending[0].served.request.arrival)
            now = time.perf_counter()
            while pending and pending[0].served.request.arrival <= step:
                arriving = pending.popleft()
                arriving.served.arrived_at = now
                waiting.append(arriving)
            self._admit(waiting, running)
            pieces = self._plan(running, waiting)
            if pieces:  # empty only when the one request left was preempted (it is admitted again next step)
                self._step(pieces, now)
            running[:] = [item for item in running if not self._finish(item)]
            step += 1
        return [item.served for item in live]

    def _admit(self, waiting: deque[_Live], running: list[_Live]) -> None:
        """Start waiting requests while there is a free slot and their pages are free (static: only into an empty batch)."""
        if self.policy != "continuous" and running:
            return
        growth = sum(self.pools.pages_to_grow(item.sequence, len(item.text) - item.computed) for item in running)
        while waiting and len(running) < self.max_batch:  # room for the running requests' next tokens comes first
            item = waiting[0]
            text = item.text
            hits = self.prefix_cache.lookup(text) if self.prefix_cache else []
            needed = -(-len(text) // self.pools.page_size) - len(hits) + 1  # its pages, and one to grow into
            spare = self.prefix_cache.evictable() if self.prefix_cache else 0
            if needed + growth > self.pools.pages_free + spare - sum(1 for held in hits if self.pools.holders(held) == 1):
                return
            waiting.popleft()
            item.sequence = self.pools.share(hits) if hits else self.pools.new_sequence()
            item.computed, item.registered = len(hits) * self.pools.page_size, len(hits)
            item.served.cached_tokens += item.computed
            growth += needed
            running.append(item)

    def _plan(self, running: list[_Live], waiting: deque[_Live]) -> list[tuple[_Live, int]]:
        """Tokens each running request feeds this step, with pages for them (preempting the newest when short)."""
        while True:
            budget = self.chunk
            pieces = []
            for item in sorted(running, key=lambda it: it.computed < len(it.text) - 1):  # decoders first
                remaining = len(item.text) - item.computed
                count = remaining if budget is None else min(remaining, budget)
                if count:
                    pieces.append((item, count))
                    budget = None if budget is None else budget - count
            short = sum(self.pools.pages_to_grow(item.sequence, count) for item, count in pieces) - self.pools.pages_free
            if short > 0 and self.prefix_cache:
                self.prefix_cache.evict(short)
                short = sum(self.pools.pages_to_grow(item.sequence, count) for item, count in pieces) - self.pools.pages_free
            if short <= 0:
                return pieces
            victim = running.pop()  # the request admitted last gives its pages back and will be recomputed
            self.pools.free(victim.sequence)
            victim.sequence, victim.computed, victim.registered = None, 0, 0
            victim.served.preemptions += 1
            waiting.appendleft(victim)

    def _step(self, pieces: list[tuple[_Live, int]], started: float) -> None:
        """Run the model once over every piece; a piece that reaches the end of its text gives a new token."""
        fed = [(item.sequence, item.text[item.computed:item.computed + count]) for item, count in pieces]
        logits = ragged_forward(self.model, self.pools, fed)
        now = time.perf_counter()
        for (item, count), scores in zip(pieces, logits):
            item.computed += count
            item.served.computed_tokens += count
            if item.computed == len(item.text):
                item.served.tokens.append(int(scores.argmax()))
                item.served.token_times.append(now)
                if self.keep_logits:
                    item.served.logits.append(scores.clone())
            if self.prefix_cache:
                item.registered = self.prefix_cache.offer(item.text[:item.computed], self.pools.table(item.sequence),
                                                          item.registered)
        self.steps.append(StepRecord([(item.index, count) for item, count in pieces], self.pools.pages_in_use,
                                     now - started))

    def _finish(self, item: _Live) -> bool:
        """A request with all its tokens gives its pages back (the prefix cache keeps its own hold on full ones)."""
        if len(item.served.tokens) < item.served.request.max_new_tokens:
            return False
        self.pools.free(item.sequence)
        item.sequence = None
        return True

    def check_requests(self, requests: object) -> list[Request]:
        """Requests: a non-empty list of Request, each prompt of valid ids, each able to fit the pages alone."""
        if isinstance(requests, (str, bytes)) or not isinstance(requests, Sequence) or not requests or not all(
                isinstance(r, Request) for r in requests):
            raise TypeError(bilingual(
                f"requests must be a non-empty list of Request(prompt=[ids], max_new_tokens=n, arrival=step), "
                f"got {shown(requests)}.",
                f"requests 必须是非空的 Request(prompt=[编号], max_new_tokens=n, arrival=步) 列表，实际是 {shown(requests, True)}。"))
        check_prompts([list(r.prompt) for r in requests])
        vocab = self.model.config.vocab_size
        for index, r in enumerate(requests):
            check_size(r.max_new_tokens, f"requests[{index}].max_new_tokens")
            check_size(r.arrival, f"requests[{index}].arrival", minimum=0)
            check_reach(self.model, len(r.prompt), r.max_new_tokens)
            if max(r.prompt) >= vocab:
                raise ValueError(bilingual(
                    f"requests[{index}].prompt holds the token id {max(r.prompt)}, but the model's vocabulary has ids 0 "
                    f"to {vocab - 1}; encode it with this model's tokenizer.",
                    f"requests[{index}].prompt 里有词元编号 {max(r.prompt)}，而模型的词表只有 0 到 {vocab - 1}；"
                    "请用这个模型的分词器编码。"))
            alone = -(-(len(r.prompt) + r.max_new_tokens) // self.pools.page_size) + 1
            if alone > self.pools.num_pages:
                raise ValueError(bilingual(
                    f"requests[{index}] needs {alone} pages of {self.pools.page_size} tokens even alone (its prompt, its "
                    f"tokens and one to grow into), but there are {self.pools.num_pages}; give the scheduler more num_pages.",
                    f"requests[{index}] 即使单独运行也需要 {alone} 页（每页 {self.pools.page_size} 个词元：提示词、生成的词元，"
                    f"再加一页余量），而只有 {self.pools.num_pages} 页；请给调度器更大的 num_pages。"))
        return list(requests)


def serve(model: nn.Module, requests: Sequence[Request], policy: str = "continuous", num_pages: int = 256,
          **options: object) -> tuple[list[Served], Scheduler]:
    """Serve `requests` with a new Scheduler (see its arguments); returns each request's record and the scheduler."""
    scheduler = Scheduler(model, num_pages, policy=policy, **options)
    return scheduler.run(requests), scheduler
