"""The two small tasks of lesson 10: reverse a sequence, and continue a repeating pattern.

Each answer is one specific token of the input, so a trained attention map is a picture of the
solution: an anti-diagonal for reversing, a stripe one period back for the repeating pattern.
Tokens are small integers; `LETTERS` turns them into letters a learner can read and type.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .checks import bilingual, check_size

LETTERS = "abcdefghijklmnopqrstuvwxyz"

# inputs (b, T) and targets (b, T) as int64 token ids; scored (b, T) is True where the answer counts
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _check_vocabulary(vocab_size: int, needed: int, what_en: str, what_zh: str) -> None:
    """Distinct tokens need a vocabulary at least as large as the longest run of them."""
    if vocab_size < needed or vocab_size > len(LETTERS):
        raise ValueError(
            bilingual(
                f"vocab_size must be between {needed} ({what_en}) and {len(LETTERS)} (the letters a-z), "
                f"got {vocab_size}.",
                f"vocab_size 应在 {needed}（{what_zh}）到 {len(LETTERS)}（字母 a-z）之间，实际是 {vocab_size}。",
            )
        )


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
        check_size(self.length, "length", minimum=2)
        check_size(self.vocab_size, "vocab_size")
        _check_vocabulary(self.vocab_size, self.length, "the sequence length", "序列长度")

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Random sequences and their reverses; every position is scored."""
        check_size(batch_size, "batch_size")
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
        check_size(self.length, "length", minimum=2)
        check_size(self.shortest, "shortest", minimum=2)
        check_size(self.longest, "longest", minimum=self.shortest)
        check_size(self.vocab_size, "vocab_size")
        _check_vocabulary(self.vocab_size, self.longest, "the longest period", "最长周期")
        if self.longest >= self.length:
            raise ValueError(
                bilingual(
                    f"longest={self.longest} must be shorter than length={self.length}, so the pattern repeats.",
                    f"longest={self.longest} 必须小于 length={self.length}，这样图案才会重复出现。",
                )
            )

    def batch(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Repeating sequences, their next tokens, and which positions can be answered from the past."""
        check_size(batch_size, "batch_size")
        periods = torch.randint(self.shortest, self.longest + 1, (batch_size, 1), generator=generator)
        patterns = _distinct_tokens(batch_size, self.longest, self.vocab_size, generator)
        steps = torch.arange(self.length + 1)[None, :]  # (1, T + 1)
        sequences = patterns.gather(1, steps % periods)  # (b, T + 1): the pattern again and again
        scored = steps[:, :-1] >= periods  # (b, T): the current token has been seen one period earlier
        return sequences[:, :-1], sequences[:, 1:], scored


def encode(text: str, vocab_size: int) -> torch.Tensor:
    """'abc' -> tensor([[0, 1, 2]]): a batch of one sequence, for letters among the first vocab_size."""
    allowed = LETTERS[:vocab_size]
    unknown = sorted(set(text) - set(allowed))
    if not text or unknown:
        raise ValueError(
            bilingual(
                f"Type letters from a to {allowed[-1]} only; not allowed: {''.join(unknown) or 'an empty text'}.",
                f"只能输入 a 到 {allowed[-1]} 的字母；不允许的字符：{''.join(unknown) or '空文本'}。",
            )
        )
    return torch.tensor([[allowed.index(letter) for letter in text]])


def decode(tokens: torch.Tensor) -> str:
    """tensor([0, 1, 2]) -> 'abc'."""
    return "".join(LETTERS[int(token)] for token in tokens.flatten())
