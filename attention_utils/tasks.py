"""The two small tasks of lesson 10: reverse a sequence, and continue a repeating pattern.

Each answer is one specific token of the input, so a trained attention map is a picture of the
solution: an anti-diagonal for reversing, a stripe one period back for the repeating pattern.
Tokens are small integers; `LETTERS` turns them into letters a learner can read and type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .checks import bilingual, check_size, shown
from .devices import check_fits

LETTERS = "abcdefghijklmnopqrstuvwxyz"

# inputs (b, T) and targets (b, T) as int64 token ids; scored (b, T) is True where the answer counts
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _check_vocabulary(vocab_size: int, needed: int, needed_name: str, what_en: str, what_zh: str) -> None:
    """Distinct tokens need a vocabulary at least as large as the longest run of them, and letters to show them."""
    if needed > len(LETTERS):
        raise ValueError(
            bilingual(
                f"{needed_name} must be at most {len(LETTERS)} (the letters a-z, each used once in a sequence), "
                f"got {needed}.",
                f"{needed_name} 不能超过 {len(LETTERS)}（字母 a-z，每个字母在一条序列里只出现一次），实际是 {needed}。",
            )
        )
    if not needed <= vocab_size <= len(LETTERS):
        raise ValueError(
            bilingual(
                f"vocab_size must be between {needed} ({what_en}) and {len(LETTERS)} (the letters a-z), "
                f"got {vocab_size}.",
                f"vocab_size 应在 {needed}（{what_zh}）到 {len(LETTERS)}（字母 a-z）之间，实际是 {vocab_size}。",
            )
        )


def _check_generator(generator: object) -> torch.Generator:
    """Batches come from a generator the caller seeded, never the global random state (seeds would not repeat)."""
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise TypeError(
            bilingual(
                f"generator must be a CPU torch.Generator, so the same seed gives the same batches, got "
                f"{type(generator).__name__}; for example torch.Generator().manual_seed(0).",
                f"generator 必须是 CPU 上的 torch.Generator，这样同一个种子才会给出同样的批次，实际是 "
                f"{type(generator).__name__}；例如 torch.Generator().manual_seed(0)。",
            )
        )
    return generator


def _sizes(task: object, *names: str) -> None:
    """Store each checked size as a plain int (a frozen dataclass needs object.__setattr__ for that)."""
    for name in names:
        object.__setattr__(task, name, check_size(getattr(task, name), name, minimum=2 if name != "vocab_size" else 1))


def _distinct_tokens(batch_size: int, count: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """(batch_size, count) token ids, no token twice in a row of the batch."""
    ranks = torch.rand(batch_size, vocab_size, generator=generator)
    return ranks.argsort(dim=1)[:, :count]  # the order of random numbers is a random permutation


@dataclass(frozen=True)
class ReverseTask:
    """Read `length` distinct tokens and output them in reverse order: position i answers token length-1-i."""

    length: int = 8
    vocab_size: int = 16

    def __post_init__(self) -> None:
        _sizes(self, "length", "vocab_size")
        _check_vocabulary(self.vocab_size, self.length, "length", "the sequence length", "序列长度")

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Random sequences and their reverses; every position is scored."""
        batch_size = _check_batch_size(batch_size, self.vocab_size)
        _check_generator(generator)
        inputs = _distinct_tokens(batch_size, self.length, self.vocab_size, generator)
        targets = inputs.flip(1)
        return inputs, targets, torch.ones_like(inputs, dtype=torch.bool)


@dataclass(frozen=True)
class RepeatTask:
    """A pattern of distinct tokens repeated to fill `length`; each position predicts the next token.

    The period is drawn between `shortest` and `longest` for every sequence, so no fixed offset
    works: the model must find where the current token was seen before and read what came next.
    Only positions from the second round on are scored; before that the next token is a surprise.
    """

    length: int = 16
    vocab_size: int = 16
    shortest: int = 3
    longest: int = 7

    def __post_init__(self) -> None:
        _sizes(self, "length", "shortest", "longest", "vocab_size")
        if self.shortest > self.longest:
            raise ValueError(
                bilingual(
                    f"shortest={self.shortest} must not be above longest={self.longest}: each sequence's period is "
                    "drawn between them.",
                    f"shortest={self.shortest} 不能大于 longest={self.longest}：每条序列的周期在两者之间随机选取。",
                )
            )
        _check_vocabulary(self.vocab_size, self.longest, "longest", "the longest period", "最长周期")
        if self.longest >= self.length:
            raise ValueError(
                bilingual(
                    f"longest={self.longest} must be shorter than length={self.length}, so the pattern repeats.",
                    f"longest={self.longest} 必须小于 length={self.length}，这样循环片段才会重复出现。",
                )
            )
        check_fits(self.length, "length", lambda n: 3 * 8 * n)  # three int64 rows of a one-sequence batch

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Repeating sequences, their next tokens, and which positions can be answered from the past."""
        batch_size = _check_batch_size(batch_size, self.length + self.vocab_size)
        _check_generator(generator)
        periods = torch.randint(self.shortest, self.longest + 1, (batch_size, 1), generator=generator)
        patterns = _distinct_tokens(batch_size, self.longest, self.vocab_size, generator)
        steps = torch.arange(self.length + 1)[None, :]  # (1, T + 1)
        sequences = patterns.gather(1, steps % periods)  # (b, T + 1): the pattern again and again
        scored = steps[:, :-1] >= periods  # (b, T): the current token has been seen one period earlier
        return sequences[:, :-1], sequences[:, 1:], scored


def _check_batch_size(batch_size: object, per_sequence: int) -> int:
    """A batch size of 1 or more whose tensors (about `per_sequence` numbers of 8 bytes a row, thrice) fit in memory."""
    batch_size = check_size(batch_size, "batch_size")
    check_fits(batch_size, "batch_size", lambda b: 3 * 8 * b * per_sequence)
    return batch_size


def encode(text: str, vocab_size: int) -> torch.Tensor:
    """'abc' -> tensor([[0, 1, 2]]): a batch of one sequence, for letters among the first vocab_size."""
    vocab_size = check_size(vocab_size, "vocab_size")
    if vocab_size > len(LETTERS):
        raise ValueError(
            bilingual(
                f"vocab_size must be at most {len(LETTERS)} (one letter a-z per token), got {vocab_size}.",
                f"vocab_size 不能超过 {len(LETTERS)}（每个词元对应一个字母 a-z），实际是 {vocab_size}。",
            )
        )
    allowed = LETTERS[:vocab_size]
    if not isinstance(text, str):
        raise TypeError(
            bilingual(
                f"text must be a string of letters such as 'abc', got {type(text).__name__}.",
                f"text 必须是由字母组成的字符串，例如 'abc'，实际是 {type(text).__name__}。",
            )
        )
    if not text:
        raise ValueError(
            bilingual(
                f"text is empty: type at least one letter (a to {allowed[-1]}).",
                f"text 是空的：请至少输入一个字母（a 到 {allowed[-1]}）。",
            )
        )
    unknown = "".join(sorted(set(text) - set(allowed)))
    if unknown:
        lower = " (lower case)" if text.lower() != text else ""
        lower_zh = "（小写）" if lower else ""
        raise ValueError(
            bilingual(
                f"text may hold the letters a to {allowed[-1]} only{lower}; not allowed: {shown(unknown)}.",
                f"text 只能包含 a 到 {allowed[-1]} 的字母{lower_zh}；不允许的字符：{shown(unknown, True)}。",
            )
        )
    return torch.tensor([[allowed.index(letter) for letter in text]])


def decode(tokens: torch.Tensor | Sequence[int] | int) -> str:
    """tensor([0, 1, 2]) -> 'abc'; numpy arrays, lists and single ids work too."""
    integer_tensor = isinstance(tokens, torch.Tensor) and not (
        tokens.is_floating_point() or tokens.is_complex() or tokens.dtype == torch.bool or tokens.is_meta)
    if not integer_tensor and (isinstance(tokens, torch.Tensor) or not _whole_numbers(tokens)):
        raise TypeError(
            bilingual(
                f"tokens must be token ids (whole numbers), such as tensor([0, 1, 2]), got {_kind(tokens)}.",
                f"tokens 必须是词元编号（整数），例如 tensor([0, 1, 2])，实际是 {_kind(tokens, True)}。",
            )
        )
    ids = tokens.flatten().tolist() if integer_tensor else [int(v) for v in np.asarray(tokens, dtype=object).flat]
    outside = [i for i in ids if not 0 <= i < len(LETTERS)]
    if outside:
        raise ValueError(
            bilingual(
                f"tokens must be ids from 0 to {len(LETTERS) - 1} (the letters a-z), got {outside[0]}.",
                f"tokens 里的编号应在 0 到 {len(LETTERS) - 1} 之间（字母 a-z），实际有 {outside[0]}。",
            )
        )
    return "".join(LETTERS[i] for i in ids)


def _whole_numbers(tokens: object) -> bool:
    """True for an int, or a list, tuple or numpy array of ints (numpy ints count, bools do not)."""
    try:
        values = np.asarray(tokens)
    except (ValueError, TypeError):
        return False
    return values.dtype.kind in "iu" or values.size == 0 or (values.dtype == object and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values.flat))


def _kind(tokens: object, chinese: bool = False) -> str:
    """How a value looks in a message: the dtype of a tensor or array (and meta, which holds no ids), else the type."""
    if isinstance(tokens, torch.Tensor) and tokens.is_meta:
        return (f"meta 设备上的 {tokens.dtype} 张量，它没有编号" if chinese
                else f"a {tokens.dtype} tensor on the meta device, which holds no ids")
    return str(tokens.dtype) if isinstance(tokens, (torch.Tensor, np.ndarray)) else type(tokens).__name__
