"""Results that left their dtype's range: the error that names the dtype, and the weight a diverged run broke.

From finite inputs, NaN or inf in a result mean either that the scores overflowed the dtype (`Overflowed`, a
ValueError that says which dtype to compute in) or that a module's weights hold NaN or inf (named, as
`layers.1.W_key.weight`). The input checks are in `checks`, whose docstring states the whole contract.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .arguments import bilingual, cannot_read


def _wider(dtype: torch.dtype) -> tuple[str, str]:
    """The dtype to compute in when `dtype` overflows, and the method that converts to it."""
    return ("float32", "float") if torch.finfo(dtype).bits < 32 else ("float64", "double")


class Overflowed(ValueError):
    """Finite inputs gave a result beyond the dtype's range: the scores, or a module's weights, are too large."""


def check_no_overflow(result: torch.Tensor, names: Sequence[str] = ("queries", "keys", "values")) -> None:
    """Refuse a result that overflowed: from finite inputs, NaN or inf appear only when the scores overflowed."""
    if result.numel() == 0 or cannot_read(result) or torch.isfinite(result.sum()):
        return
    if torch.isfinite(result).all():
        return  # only the sum overflowed
    limit = torch.finfo(result.dtype).max
    wider, method = _wider(result.dtype)
    convert = ", ".join(f"{name}.{method}()" for name in names)
    raise Overflowed(
        bilingual(
            f"The attention scores overflowed {result.dtype} (a dot product beyond {limit:.3g}): `queries` and `keys` "
            f"are too large for this dtype; scale them down, or compute in {wider} ({convert}).",
            f"注意力分数超出了 {result.dtype} 的表示范围（某个点积超过了 {limit:.3g}）：对这种类型来说，"
            f"`queries` 和 `keys` 的数值太大了；请把它们缩小，或改用 {wider} 计算（{convert}）。",
        )
    )


def check_weights(module: torch.nn.Module) -> None:
    """Refuse a module whose weights hold NaN or inf: what a training run that diverged leaves behind."""
    for name, weight in module.named_parameters():
        if weight.numel() and not cannot_read(weight) and not torch.isfinite(weight.detach().sum()):
            if not torch.isfinite(weight.detach()).all():
                kind = type(module).__name__
                raise ValueError(
                    bilingual(
                        f"The weights of {kind} hold NaN or inf ({name}); a training run that diverged leaves "
                        "weights like these: restore a snapshot from before it, or build the model again, and "
                        "train with a lower learning_rate.",
                        f"{kind} 的权重里有 NaN 或 inf（{name}）；训练发散后就会留下这样的权重："
                        "请恢复发散之前的快照，或重新创建模型，再用更小的 learning_rate 训练。",
                    )
                )


def check_result(
    module: torch.nn.Module, result: torch.Tensor, x: torch.Tensor | None = None, name: str = "x"
) -> torch.Tensor:
    """A module's result from finite input `name`: NaN or inf come from its weights or from an overflow; say which."""
    if result.numel() == 0 or cannot_read(result) or torch.isfinite(result.sum()) or torch.isfinite(result).all():
        return result
    check_weights(module)
    raise overflow_error(module, result.dtype, x, name)


def overflow_error(
    module: torch.nn.Module, dtype: torch.dtype, x: torch.Tensor | None = None, name: str = "x"
) -> Overflowed:
    """The error for a module whose finite weights and input gave a result beyond `dtype`, naming the largest weight."""
    sizes = [(name, float(w.detach().abs().max())) for name, w in module.named_parameters() if w.numel()]
    weight_name, largest = max(sizes, key=lambda pair: pair[1], default=("-", 0.0))
    kind, limit = type(module).__name__, torch.finfo(dtype).max
    wider, method = _wider(dtype)
    if x is None or not x.is_floating_point() or not x.numel():  # token ids in: only the weights can be too large
        return Overflowed(
            bilingual(
                f"The output of {kind} overflowed {dtype} (a value beyond {limit:.3g}): its weights are too large for "
                f"this dtype (largest weight {largest:.3g} in {weight_name}). Restore the weights from before a "
                f"training run diverged, or compute in {wider} (module.{method}()).",
                f"{kind} 的输出超出了 {dtype} 的表示范围（某个值超过了 {limit:.3g}）：对这种类型来说，它的权重太大了"
                f"（权重最大为 {largest:.3g}，在 {weight_name} 中）。请恢复训练发散之前的权重，或改用 {wider} 计算"
                f"（module.{method}()）。",
            )
        )
    largest_x = float(x.detach().abs().max())
    return Overflowed(
        bilingual(
            f"The output of {kind} overflowed {dtype} (a value beyond {limit:.3g}) although its input is finite: "
            f"`{name}` and the weights together are too large for this dtype (largest |{name}| {largest_x:.3g}, largest "
            f"weight {largest:.3g} in {weight_name}). Scale `{name}` down, restore the weights from before a training "
            f"run diverged, or compute in {wider} ({name}.{method}(), module.{method}()).",
            f"{kind} 的输出超出了 {dtype} 的表示范围（某个值超过了 {limit:.3g}），而输入是有限的：对这种类型来说，"
            f"`{name}` 和权重合起来太大了（|{name}| 最大为 {largest_x:.3g}，权重最大为 {largest:.3g}，在 {weight_name} 中）。"
            f"请把 `{name}` 缩小，或恢复训练发散之前的权重，或改用 {wider} 计算（{name}.{method}()、module.{method}()）。",
        )
    )
