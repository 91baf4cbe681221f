"""Multi-query associative recall (Arora et al. 2023, "Zoology"): the task lesson 16's models learn, and two variants.

A sequence lists N key–value pairs, then asks for every key again in a random order:

    k3 v7  k0 v2  k5 v1 | k0 v2  k5 v1  k3 v7
                          ^ answer v2 here

At each asked key the model must name its value, which only the first part of the sequence says.
Keys are tokens 0 .. num_keys − 1, values num_keys .. 2 num_keys − 1. Softmax attention keeps
every pair in its cache; a layer with a fixed state must squeeze all N pairs into it.

Two variants test what the delta rule and its gate were built for:
- rebind: after the N pairs, every key is written again with a new value, in a new order; the
  answer is the latest value (adding the two, as linear attention does, gives a mix of both);
- boundary: an earlier document of N pairs with other keys, then a boundary token, then the N
  pairs that are asked; the earlier pairs are never asked, so a state does best to forget them.

Held-out sequences use key–value combinations that training never shows: a pair (key k, value v)
is held out when (k + v) mod 4 == 0 (v counted from 0). So a model that answers held-out questions
reads the pairs from its context; it cannot have memorized them.

This task lives here, not beside lesson 10's tasks: those spell letters a–z with one token kind;
this one needs two vocabularies (keys and values) and a split of the pairs themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..checks import bilingual, check_flag, check_size
from ..devices import check_fits
from ..tasks import Batch

HELD_OUT_EVERY = 4  # (key + value) % 4 == 0: a quarter of the combinations never appear in training


@dataclass(frozen=True)
class RecallTask:
    """N key–value pairs, then every key again; the model names each key's value. N is drawn per batch.

    rebind: every key is bound a second time to a new value before the questions (the answer is the
    latest). boundary: an earlier document of N other pairs and a boundary token come first.
    """

    num_keys: int = 32
    most_pairs: int = 16
    fewest_pairs: int = 1
    rebind: bool = False
    boundary: bool = False

    def __post_init__(self) -> None:
        for name in ("num_keys", "most_pairs", "fewest_pairs"):
            object.__setattr__(self, name, check_size(getattr(self, name), name))
        for name in ("rebind", "boundary"):
            object.__setattr__(self, name, check_flag(getattr(self, name), name))
        if self.num_keys % HELD_OUT_EVERY:
            raise ValueError(bilingual(
                f"num_keys must be a multiple of {HELD_OUT_EVERY} (the held-out split takes one value in {HELD_OUT_EVERY} "
                f"for every key), got {self.num_keys}.",
                f"num_keys 必须是 {HELD_OUT_EVERY} 的倍数（留出划分为每个键留出 {HELD_OUT_EVERY} 个值中的 1 个），"
                f"实际是 {self.num_keys}。"))
        if not self.fewest_pairs <= self.most_pairs <= self.pair_limit:
            raise ValueError(bilingual(
                f"need fewest_pairs <= most_pairs <= {self.pair_limit} (the keys of a sequence are distinct"
                f"{', over both documents' if self.boundary else ''}), got {self.fewest_pairs}, {self.most_pairs}.",
                f"需要 fewest_pairs <= most_pairs <= {self.pair_limit}（一条序列里的键互不相同"
                f"{'，两个文档合起来也是' if self.boundary else ''}），实际是 {self.fewest_pairs}、{self.most_pairs}。"))
        check_fits(self.num_keys, "num_keys", lambda k: _batch_bytes(1, k, self.length))

    @property
    def vocab_size(self) -> int:
        """Keys, values, and the boundary token when there is one."""
        return 2 * self.num_keys + self.boundary

    @property
    def pair_limit(self) -> int:
        """The most pairs one document can have: every key once, or half of them when two documents share the keys."""
        return self.num_keys // 2 if self.boundary else self.num_keys

    @property
    def length(self) -> int:
        """The longest sequence: its writes (2 tokens each), then most_pairs questions with their answers."""
        return sequence_length(self.most_pairs, self.rebind, self.boundary)

    def batch(self, batch_size: int, generator: torch.Generator, num_pairs: int | None = None,
              held_out: bool = False) -> Batch:
        """(inputs, targets, scored), each (batch_size, length). Only the asked keys are scored: target = their value."""
        batch_size = check_size(batch_size, "batch_size")
        if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
            raise TypeError(bilingual(
                f"generator must be a CPU torch.Generator, got {type(generator).__name__}; "
                "for example torch.Generator().manual_seed(0).",
                f"generator 必须是 CPU 上的 torch.Generator，实际是 {type(generator).__name__}；"
                "例如 torch.Generator().manual_seed(0)。"))
        held_out = check_flag(held_out, "held_out")
        if num_pairs is None:
            num_pairs = int(torch.randint(self.fewest_pairs, self.most_pairs + 1, (), generator=generator))
        num_pairs = check_pairs(num_pairs, "num_pairs", self.pair_limit)
        length = sequence_length(num_pairs, self.rebind, self.boundary)
        check_fits(batch_size, "batch_size", lambda b: _batch_bytes(b, self.num_keys, length))
        drawn = torch.rand(batch_size, self.num_keys, generator=generator).argsort(dim=1)
        keys = drawn[:, :num_pairs]
        pairs = torch.stack([keys, self._values(keys, held_out, generator)], dim=-1)  # (b, N, 2), values from 0
        order = torch.rand(batch_size, num_pairs, generator=generator).argsort(dim=1)  # the order of the questions
        if self.rebind:
            again = pairs[..., 1] + HELD_OUT_EVERY * torch.randint(1, self.num_keys // HELD_OUT_EVERY, keys.shape,
                                                                  generator=generator)
            again = torch.stack([keys, again % self.num_keys], dim=-1)  # a new value of the same held-out kind
            reorder = torch.rand(batch_size, num_pairs, generator=generator).argsort(dim=1)
            pairs = torch.cat([pairs, again.gather(1, reorder[..., None].expand(-1, -1, 2))], dim=1)
        earlier = None
        if self.boundary:
            other = drawn[:, num_pairs : 2 * num_pairs]
            earlier = torch.stack([other, self._values(other, held_out, generator)], dim=-1)
        return recall_sequence(pairs, keys.gather(1, order), self.num_keys, earlier)

    def _values(self, keys: torch.Tensor, held_out: bool, generator: torch.Generator) -> torch.Tensor:
        """A value for each key: (key + value) % 4 is 0 for held-out pairs, 1, 2 or 3 for training pairs."""
        group = torch.randint(0, self.num_keys // HELD_OUT_EVERY, keys.shape, generator=generator)
        residue = (torch.zeros_like(keys) if held_out
                   else torch.randint(1, HELD_OUT_EVERY, keys.shape, generator=generator))
        return HELD_OUT_EVERY * group + (residue - keys) % HELD_OUT_EVERY


def recall_sequence(pairs: torch.Tensor, asked: torch.Tensor, num_keys: int,
                    earlier: torch.Tensor | None = None) -> Batch:
    """Lay out one batch: [earlier pairs, boundary token,] pairs, then each asked key followed by its latest value.

    pairs (b, W, 2) and earlier (b, M, 2) hold key ids and values counted from 0, in writing order;
    asked (b, N) are keys that pairs bind. Only pairs after the boundary answer a question; the
    boundary token is 2 num_keys. Returns (inputs, targets, scored) as RecallTask.batch does.
    """
    writes = pairs.shape[1]
    written = torch.arange(1, writes + 1).expand_as(pairs[..., 0])
    latest = ((pairs[..., 0][:, None, :] == asked[..., None]) * written[:, None, :]).argmax(dim=-1)  # (b, N): last write
    answers = pairs[..., 1].gather(1, latest)
    parts = [_tokens(pairs, num_keys), _tokens(torch.stack([asked, answers], dim=-1), num_keys)]
    if earlier is not None:
        parts[:0] = [_tokens(earlier, num_keys), torch.full((pairs.shape[0], 1), 2 * num_keys)]
    sequence = torch.cat(parts, dim=1)
    scored = torch.zeros_like(sequence, dtype=torch.bool)
    scored[:, sequence.shape[1] - 2 * asked.shape[1] :: 2] = True  # each asked key; its target is the value after it
    return sequence, torch.roll(sequence, -1, dims=1), scored


def _tokens(pairs: torch.Tensor, num_keys: int) -> torch.Tensor:
    """(b, W, 2) key ids and values counted from 0 -> (b, 2 W) token ids: k v k v ..., values after the keys."""
    return (pairs + torch.tensor([0, num_keys])).flatten(1)


def sequence_length(num_pairs: int, rebind: bool, boundary: bool) -> int:
    """Tokens in a sequence of num_pairs asked pairs: 4 N, plus 2 N for a rebinding, plus 2 N + 1 for a boundary."""
    return 4 * num_pairs + 2 * num_pairs * rebind + (2 * num_pairs + 1) * boundary


def check_pairs(num_pairs: object, name: str, limit: int) -> int:
    """A number of pairs from 1 to limit: the keys of one sequence are distinct."""
    num_pairs = check_size(num_pairs, name)
    if num_pairs > limit:
        raise ValueError(bilingual(
            f"{name} must be at most {limit} (the keys of a sequence are distinct), got {num_pairs}.",
            f"{name} 不能超过 {limit}（一条序列里的键互不相同），实际是 {num_pairs}。"))
    return num_pairs


def _batch_bytes(batch_size: int, num_keys: int, length: int) -> int:
    """About what a batch holds: random ranks of every key (float32 and their int64 order), and 3 rows of ids."""
    return batch_size * (12 * num_keys + 3 * 8 * length)
