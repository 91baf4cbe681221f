"""The same float32 product with the weight matrix on the left, W @ x.T, for the few rows of a decode step (lesson 14).

`nn.Linear` computes x @ W.T: torch 2.13 hands one row or a few to MKL's sgemm with W as the first, transposed
operand (MKL_VERBOSE=1 shows the calls); on the AMD EPYC CPUs this series was measured on (2 threads, torch's CPU
wheel) it read float32 weights at a third to a half of the speed of a large read. Written W @ x.T, with x.T a
transposed view of two or more contiguous rows, the same numbers (up to float32 rounding) reach sgemm with the rows
first, and MKL, which picks its own code path for each shape, read them at about four fifths of it on the one CPU
where both were measured; one row is doubled to make two (twice the FLOPs of a product that waits for its bytes).
Which way is faster depends on the CPU, its BLAS library and the threads: measure.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..checks import bilingual, shown

MOST_ROWS = 16  # more rows go through x @ W.T: a prefill's product is bound by its FLOPs, and that kernel is tuned for it


def weights_left_product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x @ weight.T (x (..., in), weight (out, in)), computed as weight @ x.T when x has at most MOST_ROWS rows."""
    rows = x.reshape(-1, x.shape[-1])
    if not 0 < rows.shape[0] <= MOST_ROWS:
        return x @ weight.T
    rows = rows.contiguous()  # x.T must be a transposed view: a contiguous (in, rows) takes a slow path (measured 4x)
    if rows.shape[0] == 1:  # the row goes in twice: two rows timed faster than one where this was written (why: not measured)
        return (weight @ torch.cat([rows, rows]).T)[:, :1].T.reshape(*x.shape[:-1], weight.shape[0])
    return (weight @ rows.T).T.reshape(*x.shape[:-1], weight.shape[0])


class WeightsLeftLinear(nn.Linear):
    """An nn.Linear that holds the same weight (and bias) as another and multiplies with the weights on the left."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__(linear.in_features, linear.out_features, bias=False, device="meta")  # nothing allocated
        self.weight, self.bias = linear.weight, linear.bias  # the same tensors: no copy of the bytes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[-1] != self.in_features or x.dtype != self.weight.dtype:
            wrong_kind = not isinstance(x, torch.Tensor) or x.dtype != self.weight.dtype
            raise (TypeError if wrong_kind else ValueError)(bilingual(
                f"x must be a {self.weight.dtype} tensor (..., {self.in_features}), got {shown(x)}.",
                f"x 必须是 {self.weight.dtype} 张量 (..., {self.in_features})，实际是 {shown(x, True)}。"))
        out = weights_left_product(x, self.weight)
        return out if self.bias is None else out + self.bias


def weights_left(model: nn.Module) -> nn.Module:
    """A copy of `model` whose nn.Linear layers (and LlamaModel's output scores) multiply with the weights on the left;
    it shares every weight with `model` (no bytes copied) and computes the same numbers up to rounding."""
    if not isinstance(model, nn.Module):
        raise TypeError(bilingual(f"model must be a torch module (lesson 13's LlamaModel), got {shown(model)}.",
                                  f"model 必须是 torch 模块（第 13 课的 LlamaModel），实际是 {shown(model, True)}。"))
    memo = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    shallow = copy.deepcopy(model, memo)  # every module copied, every parameter and buffer shared
    for module in list(shallow.modules()):
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, WeightsLeftLinear(child))
    if hasattr(shallow, "scores_product"):  # LlamaModel's output layer is the embedding table, not an nn.Linear
        shallow.scores_product = weights_left_product
    return shallow.eval()
