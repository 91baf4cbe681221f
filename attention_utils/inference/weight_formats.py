"""The weights of a model in fewer bytes: bfloat16, and int8 with one scale per row, written by hand (lesson 14).

A decode step reads every weight once, so its time follows the bytes of the weights. float32
spends 4 bytes a weight, bfloat16 2 (float32's exponent, 8 bits of mantissa), int8 1 plus one
scale per row: row r of W becomes round(W[r] / s_r) with s_r = max |W[r]| / 127, and
s_r * q[r] gives it back with an error of at most s_r / 2 per weight.

torch's CPU kernel for int8 weights (`torch._weight_int8pack_mm`) multiplies by the int8 rows and
scales without building the float matrix; lesson 14 measured it slow with float32 activations and
fast with bfloat16 ones, so an int8 model computes in bfloat16 unless told otherwise.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn

from ..checks import bilingual, cannot_read, check_finite, check_flag, check_tensor, shown

FORMATS = ("float32", "bfloat16", "int8")
COMPUTE = (torch.float32, torch.bfloat16)


def quantize_rows(weight: torch.Tensor, scale_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values (rows, cols) and one float32 scale per row: s = max |row| / 127 (1 for a row of zeros).

    With scale_dtype=torch.bfloat16 each s is first rounded up to the next bfloat16 number, the scale the
    kernel will multiply by, so every weight stays within half of its own step (at most 1.008 s / 2).
    """
    check_tensor(weight, "weight", ranks=(2,))
    _check_compute(scale_dtype, "scale_dtype")
    weight = weight.float()
    if weight.dtype != torch.float32 or not (cannot_read(weight) or bool(torch.isfinite(weight).all())):
        raise ValueError(bilingual(f"`weight` holds values beyond float32's range ({shown(weight)}); scale it down first.",
                                   f"`weight` 里有超出 float32 表示范围的值（{shown(weight, True)}）；请先把它缩小。"))
    # (rows,): the largest |w| of each row (a row of no columns has none: 0, so its scale is 1)
    scale = weight.abs().amax(dim=1) / 127 if weight.shape[1] else weight.new_zeros(weight.shape[0])
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # a row of zeros stays zeros
    if scale_dtype != torch.float32:  # round up, so no |w| / s passes 127
        rounded = scale.to(scale_dtype)
        scale = torch.where(rounded.float() < scale, torch.nextafter(rounded, torch.full_like(rounded, math.inf)), rounded).float()
    return torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def dequantize_rows(values: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 weights the int8 values stand for: scale[r] * values[r] for each row r."""
    if not isinstance(values, torch.Tensor) or values.dtype != torch.int8 or values.dim() != 2:
        raise TypeError(bilingual(
            f"values must be the int8 matrix (rows, cols) that quantize_rows returns, got {_shown(values)}.",
            f"values 必须是 quantize_rows 返回的 int8 矩阵 (rows, cols)，实际是 {_shown(values)}。"))
    check_tensor(scale, "scale", ranks=(1,))
    if scale.device != values.device:
        raise TypeError(bilingual(
            f"values are on {values.device} but scale on {scale.device}; move them together, for example "
            f"scale.to('{values.device}').",
            f"values 在 {values.device} 上，而 scale 在 {scale.device} 上；请把它们放到一起，例如 scale.to('{values.device}')。"))
    if scale.shape[0] != values.shape[0]:
        raise ValueError(bilingual(
            f"scale must hold one number per row of values ({values.shape[0]}), got {scale.shape[0]}.",
            f"scale 必须为 values 的每一行给一个数（共 {values.shape[0]} 个），实际有 {scale.shape[0]} 个。"))
    return values.float() * scale.float()[:, None]


class Int8Linear(nn.Module):
    """A linear layer without bias whose weight is stored as int8 rows and a scale per row (1 byte a weight)."""

    def __init__(self, linear: nn.Linear, check_input: bool = True, compute: torch.dtype | None = None) -> None:
        """`check_input` False skips the finite check of x: to_format's layers, whose model checks its own input
        and result once (a sum per layer would cost a few per cent of a decode step). `compute` (default: the
        weight's dtype) is the dtype of the scales the kernel multiplies by; they are chosen representable in it."""
        super().__init__()
        if not isinstance(linear, nn.Linear) or linear.bias is not None:
            with_bias_en, with_bias_zh = (" with a bias", "（带偏置）") if isinstance(linear, nn.Linear) else ("", "")
            raise TypeError(bilingual(
                f"linear must be an nn.Linear without bias (Int8Linear stores no bias), got {type(linear).__name__}"
                f"{with_bias_en}.",
                f"linear 必须是不带偏置的 nn.Linear（Int8Linear 不保存偏置），实际是 {type(linear).__name__}{with_bias_zh}。"))
        compute = linear.weight.dtype if compute is None else _check_compute(compute, "compute")
        values, scale = quantize_rows(linear.weight.detach(), compute)
        self.register_buffer("values", values)  # (out, in) int8
        self.register_buffer("scale", scale.to(compute))  # (out,) in the dtype the layer computes in: exact
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.check_input = check_flag(check_input, "check_input")

    @property
    def weight(self) -> torch.Tensor:
        """The weight these int8 rows stand for, scale * values, in the compute dtype (what nn.Linear's .weight is).

        The package's checks read a module's `.weight` for its dtype and device (FusedMultiHeadAttention
        checks its input against `qkv.weight`); the forward never builds it.
        """
        return self.values.to(self.scale.dtype) * self.scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) times the int8 rows, each scaled: torch's int8 weight kernel, in the compute dtype (x's)."""
        # the kind and size of x always; its values unless the model that holds this layer checks them (to_format)
        if not isinstance(x, torch.Tensor) or x.dtype not in COMPUTE or x.dim() == 0 or x.shape[-1] != self.in_features:
            wrong_kind = not isinstance(x, torch.Tensor) or x.dtype not in COMPUTE
            raise (TypeError if wrong_kind else ValueError)(bilingual(
                f"x must be a float32 or bfloat16 tensor (..., {self.in_features}), got {shown(x)}.",
                f"x 必须是 float32 或 bfloat16 张量 (..., {self.in_features})，实际是 {shown(x, True)}。"))
        if self.check_input:
            check_finite(x, "x")
        if self.in_features % 16 or not self.in_features:  # torch 2.13's AVX-512 kernel read past rows of other lengths
            return x @ self.weight.to(x.dtype).T                # (garbage, or a crash), and fails on rows of nothing
        flat = x.reshape(-1, self.in_features).contiguous()  # the kernel reads each row as one run of memory
        out = torch._weight_int8pack_mm(flat, self.values, self.scale.to(x.dtype))  # (N, out)
        return out.reshape(*x.shape[:-1], self.out_features)


def to_format(model: nn.Module, format: str, compute: torch.dtype | None = None) -> nn.Module:
    """A copy of `model` with its weights in `format` ('float32', 'bfloat16' or 'int8'); the original is untouched.

    'bfloat16' turns every weight and so every activation into bfloat16. 'int8' stores every
    nn.Linear's weight as int8 rows with a scale each (Int8Linear), quantized from the weights as given
    with scales that `compute` holds exactly (each weight within half its own step, at most 1.008 times
    half float32's step); the embedding, which doubles as the output layer, and the norms become
    `compute` (default bfloat16, the fast kernel; float32 gives the slow but exact reference that tests
    compare with a dequantized float32 copy).
    """
    if not isinstance(format, str) or format not in FORMATS:
        raise ValueError(bilingual(
            f"format must be one of {', '.join(FORMATS)}, got {shown(format)}.",
            f"format 必须是 {'、'.join(FORMATS)} 之一，实际是 {shown(format, True)}。"))
    if not isinstance(model, nn.Module):
        raise TypeError(bilingual(
            f"model must be a torch module (lesson 13's LlamaModel), got {type(model).__name__}.",
            f"model 必须是 torch 模块（第 13 课的 LlamaModel），实际是 {type(model).__name__}。"))
    if compute is not None and not isinstance(compute, torch.dtype):
        raise TypeError(bilingual(f"compute must be None, torch.float32 or torch.bfloat16, got {shown(compute)}.",
                                  f"compute 必须是 None、torch.float32 或 torch.bfloat16，实际是 {shown(compute, True)}。"))
    compute = torch.bfloat16 if compute is None and format != "float32" else compute or torch.float32
    biased = next((name for name, m in model.named_modules() if isinstance(m, nn.Linear) and m.bias is not None), None)
    if format == "int8" and biased is not None:
        raise ValueError(bilingual(
            f"model has a linear layer with a bias ({biased}); int8 here stores linear layers without bias, as lesson 13's "
            "LlamaModel has: convert this model to 'bfloat16' instead.",
            f"model 里有带偏置的线性层（{biased}）；这里的 int8 只保存不带偏置的线性层（第 13 课的 LlamaModel 就是这样）："
            "请把这个模型转成 'bfloat16'。"))
    if compute not in COMPUTE or (format != "int8" and compute != getattr(torch, format)):
        raise ValueError(bilingual(
            f"compute must be torch.float32 or torch.bfloat16 (and only int8 may differ from its format), got {compute}.",
            f"compute 必须是 torch.float32 或 torch.bfloat16（只有 int8 可以与格式不同），实际是 {compute}。"))
    converted = copy.deepcopy(model)
    if format == "int8":  # quantize the weights as given (float32), with scales the compute dtype holds exactly
        _replace_linears(converted, compute)
    return converted.to(compute).eval().requires_grad_(False)


def dequantized(model: nn.Module) -> nn.Module:
    """A float32 copy of an int8 model with every Int8Linear back as nn.Linear holding scale * values: the reference."""
    if not isinstance(model, nn.Module):
        raise TypeError(bilingual(f"model must be a torch module (what to_format returns), got {type(model).__name__}.",
                                  f"model 必须是 torch 模块（to_format 的返回值），实际是 {type(model).__name__}。"))
    copied = copy.deepcopy(model).float()
    for name, module in list(copied.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, Int8Linear):
                linear = nn.Linear(child.in_features, child.out_features, bias=False)
                linear.weight = nn.Parameter(dequantize_rows(child.values, child.scale), requires_grad=False)
                setattr(module, child_name, linear)
    return copied.eval()


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the weights a forward reads: every parameter and every buffer (int8 values and their scales)."""
    if not isinstance(model, nn.Module):
        raise TypeError(bilingual(f"model must be a torch module, got {type(model).__name__}.",
                                  f"model 必须是 torch 模块，实际是 {type(model).__name__}。"))
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def _check_compute(dtype: object, name: str) -> torch.dtype:
    """The dtype itself when it is one the int8 kernel computes in (float32 or bfloat16); otherwise a clear error."""
    if not isinstance(dtype, torch.dtype) or dtype not in COMPUTE:
        raise (TypeError if not isinstance(dtype, torch.dtype) else ValueError)(bilingual(
            f"{name} must be torch.float32 or torch.bfloat16, got {shown(dtype)}.",
            f"{name} 必须是 torch.float32 或 torch.bfloat16，实际是 {shown(dtype, True)}。"))
    return dtype


def _replace_linears(model: nn.Module, compute: torch.dtype) -> None:
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child, check_input=False, compute=compute))


def _shown(x: object) -> str:
    return f"{x.dtype} {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
