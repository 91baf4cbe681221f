"""The usual slips in a padding mask, named the same way by every checker that asks for one (lessons 5 and 8).

A padding mask must hide the pad tokens as keys (the last dimension of a (batch, queries, keys) mask).
The two slips learners make are hiding them as queries instead, and hiding them as both: the second
also empties the pad queries' rows, which a plain softmax turns into NaN (lesson 5).
"""

from __future__ import annotations

import torch

QUERIES_NOT_KEYS = ("Padding must be hidden as keys (the last dimension), not as queries.",
                    "要遮住的是作为键的填充词元（最后一个维度），而不是作为查询的。")
WHOLE_PAD_ROWS = ("Hide only the pad keys (the last dimension). Hiding the pad queries' rows as well leaves those rows "
                  "no key to see, and a plain softmax turns such a row into NaN.",
                  "只遮住作为键的填充词元（最后一个维度）。把填充查询的整行也遮住，这些行就一个键都看不到了，"
                  "普通的 softmax 会把这样的行变成 NaN。")


def padding_slip(hide: torch.Tensor, causal: torch.Tensor, is_pad: torch.Tensor) -> tuple[str, str] | None:
    """The (English, Chinese) hint when `hide` is one of the usual slips, else None.

    `hide` is a learner's (batch, T, T) boolean mask with True = hide, `causal` the (T, T) mask that
    hides the future, `is_pad` the (batch, T) pad positions. A slip that happens to equal the right
    mask (left padding, where the pad queries see only pads anyway) is no slip and gets None.
    """
    right = causal | is_pad[:, None, :]
    # whole rows first: with right padding the two slips are the same mask, and the empty rows are what matters
    slips = [(right | is_pad[:, :, None], WHOLE_PAD_ROWS), (causal | is_pad[:, :, None], QUERIES_NOT_KEYS)]
    for wrong, hint in slips:
        if not torch.equal(wrong, right) and torch.equal(hide, wrong):
            return hint
    return None
