"""The model file's own 4-bit blocks, multiplied by torch's int4 kernel without rounding them again (lesson 14).

SmolLM2's file stores each block matrix as Q4_1: per 32 weights a float16 scale d, a float16
minimum m and 32 codes q of 4 bits (16 bytes), so w = d·q + m and a weight costs 5 bits. torch's
CPU kernel `torch.ops.aten._weight_int4pack_mm_for_cpu` reads groups of 32 codes with a scale and a
zero each and computes w = (q − 8)·scale + zero. With scale = d and zero = m + 8·d that is d·q + m:
the file's codes are repacked as they are, and only d and m + 8·d are rounded, to bfloat16 (the
kernel's vectorized path takes bfloat16 activations and scales; float32 ones take a scalar path,
measured 15× slower on an AVX2 host). A matrix then takes 20 bytes per 32 weights, as in the file.

Where torch's x86 kernels are not vectorized (a CPU without AVX2, or ATEN_CPU_CAPABILITY=default),
the int4 kernel runs scalar code, measured 57× slower than with AVX2 here (a 32-token pass of the model:
38 s). There each layer multiplies by a float32 copy of the same weights, made once from the codes:
the same numbers, four times the bytes of bfloat16; `int4_kernel_runs()` says which path a layer takes.

The embedding table, which doubles as the output layer, is Q8_0 in the file (per 32 weights one
float16 scale and 32 int8 codes). torch's int8 kernel (`torch._weight_int8pack_mm`) has one scale
per row and cannot hold a scale per 32 weights without rounding the codes again, so the table is
kept in bfloat16 (2 bytes a weight against the file's 1.06), as in the bfloat16 format.
"""

from __future__ import annotations

import copy
import os
import platform
from pathlib import Path

import torch
from torch import nn

from ..checks import bilingual, shown
from .block_formats import GROUP, Q4_1, q4_1_blocks, q4_1_numbers
from .gguf_file import GGUFFile, check_file, read_gguf
from .llama import LlamaConfig, LlamaModel, gguf_names

CENTRE = 8  # the int4 kernel subtracts 8 from each code before scaling
COMPUTE = (torch.float32, torch.bfloat16)


def int4_kernel_runs() -> bool:
    """Whether Q4Linear multiplies through torch's int4 kernel here: not on x86 without vectorized kernels (57× slower)."""
    scalar_x86 = platform.machine().lower() in ("x86_64", "amd64") and torch.backends.cpu.get_cpu_capability() == "DEFAULT"
    return not scalar_x86


CPUINFO = "/proc/cpuinfo"  # where Linux lists the CPU's instruction flags


def kernel_path() -> dict:
    """Which int4 kernel path q4 takes here: torch's CPU capability and whether the CPU has bfloat16 instructions."""
    try:
        with open(CPUINFO, encoding="utf-8") as cpuinfo:
            # an Arm CPU lists "Features", not x86 "flags": no such line leaves the flags unknown, not absent
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), None)
    except OSError:  # no /proc/cpuinfo (macOS, Windows): the flags are unknown too
        flags = None
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "avx512_bf16": None if flags is None else "avx512_bf16" in flags,
            "amx_bf16": None if flags is None else "amx_bf16" in flags, "activations": "bfloat16 (the int4 kernel's vectorized path)"}


class Q4Linear(nn.Module):
    """A linear layer without bias that holds Q4_1 codes in torch's int4 layout: (q − 8)·scale + zero = d·q + m."""

    def __init__(self, codes: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> None:
        """codes (out, in) 0..15; d and m (out, in / 32): a block's scale and minimum, as Q4_1 stores them."""
        super().__init__()
        self.out_features, self.in_features = codes.shape
        if self.in_features % GROUP or d.shape != m.shape or d.shape != (self.out_features, self.in_features // GROUP):
            raise ValueError(bilingual(
                f"codes must be (out, in) with in a multiple of {GROUP}, and d and m (out, in / {GROUP}); got codes "
                f"{tuple(codes.shape)}, d {tuple(d.shape)}, m {tuple(m.shape)}.",
                f"codes 的形状应为 (out, in)，in 是 {GROUP} 的倍数；d 和 m 的形状应为 (out, in / {GROUP})；实际 codes 是 "
                f"{tuple(codes.shape)}，d 是 {tuple(d.shape)}，m 是 {tuple(m.shape)}。"))
        self.register_buffer("packed", torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.int(), 1))  # (out, in/2)
        zero = m + CENTRE * d  # in float32, then rounded once to bfloat16 with d
        # (in / 32, out, 2): for each group of 32 inputs and each output row, (scale, zero)
        self.register_buffer("scales_and_zeros", torch.stack([d, zero], dim=-1).transpose(0, 1).contiguous().bfloat16())
        self.float_copy = None if int4_kernel_runs() else self._weights_from(codes)  # not a buffer: not the format's bytes

    @property
    def weight(self) -> torch.Tensor:
        """The (out, in) weights the kernel multiplies by, in bfloat16; the package's checks read a module's dtype here."""
        return self.dequantized().bfloat16()

    def dequantized(self) -> torch.Tensor:
        """The kernel's weights (out, in) in float32: the kernel applied to the identity, on its float32 path."""
        identity = torch.eye(self.in_features, device=self.packed.device)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(identity, self.packed, GROUP, self.scales_and_zeros.float()).T

    def _weights_from(self, codes: torch.Tensor) -> torch.Tensor:
        """(q − 8)·scale + zero in float32, (out, in), from the codes and the rounded scales the kernel reads."""
        scale, zero = self.scales_and_zeros.float().repeat_interleave(GROUP, dim=0).unbind(-1)  # (in, out) each
        return (codes.float() - CENTRE) * scale.T + zero.T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., in) times the 4-bit weights, in x's dtype: the int4 kernel reads the packed codes with x in bfloat16."""
        if not isinstance(x, torch.Tensor) or x.dtype not in COMPUTE or x.dim() == 0 or x.shape[-1] != self.in_features:
            raise (TypeError if not isinstance(x, torch.Tensor) or x.dtype not in COMPUTE else ValueError)(bilingual(
                f"x must be a float32 or bfloat16 tensor (..., {self.in_features}), got {shown(x)}.",
                f"x 必须是 float32 或 bfloat16 张量 (..., {self.in_features})，实际是 {shown(x, True)}。"))
        if self.float_copy is not None:  # no vectorized int4 kernel on this CPU: the float32 copy (module docstring)
            return nn.functional.linear(x.float(), self.float_copy).to(x.dtype)
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)  # the kernel's vectorized path wants bfloat16
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.packed, GROUP, self.scales_and_zeros)
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


def to_q4(model: LlamaModel, file: GGUFFile | str | os.PathLike | None = None) -> LlamaModel:
    """A copy of `model` whose block matrices are its file's Q4_1 blocks (Q4Linear) and whose table is bfloat16.

    Each of the model's matrices becomes one Q4Linear, so the stacked ones (QKV, and the feed-forward's
    gate and up) stay one kernel call each.

    It computes in float32 between the matrix products: on an AVX2 CPU torch's attention kernel took
    4× longer in bfloat16 than in float32 for one new token against 128 cached ones.

    The file (by default lesson 13's) must be the one the model was read from, its weights unchanged:
    each matrix is checked to equal d·q + m of the file's blocks, since the copy reads the file, not the model.
    """
    if not isinstance(model, LlamaModel):
        raise TypeError(bilingual(
            f"model must be the LlamaModel that load_smollm2() or LlamaModel.from_gguf returns, got {type(model).__name__}.",
            f"model 必须是 load_smollm2() 或 LlamaModel.from_gguf 返回的 LlamaModel，实际是 {type(model).__name__}。"))
    file = read_gguf() if file is None else check_file(file, "to_q4")
    if LlamaConfig.from_gguf(file) != model.config:
        raise ValueError(bilingual(
            f"{file.path.name} describes another model than this one (its sizes differ); pass the file the model was read from.",
            f"{file.path.name} 描述的模型与这个模型不同（大小不一样）；请传入读出这个模型的那个文件。"))
    converted = copy.deepcopy(model)
    converted.token_embedding.to(torch.bfloat16)  # the norms, the residual stream and the cache stay float32
    weights, read = dict(model.named_parameters()), {}
    for ours, theirs in gguf_names(model.config.num_layers).items():
        path = ours.removesuffix(".weight")
        if not isinstance(converted.get_submodule(path), nn.Linear):
            continue  # the embedding table and the norms
        codes, d, m = (torch.cat(parts) for parts in zip(*(_blocks(file, name) for name in theirs)))
        _check_same(weights[ours], codes, d, m, theirs, file.path)
        read[path] = codes, d, m
    for path, (codes, d, m) in read.items():  # every block matrix, after all were checked
        parent, _, name = path.rpartition(".")
        setattr(converted.get_submodule(parent), name, Q4Linear(codes, d, m))
    return converted.eval().requires_grad_(False)


def _blocks(file: GGUFFile, name: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tensor's codes, d and m; ValueError when the file stores it in another format than Q4_1."""
    if file.entry(name).kind != Q4_1:
        raise ValueError(bilingual(
            f"{file.path.name} stores {name} as {file.kind_name(name)}; to_q4 reads Q4_1 blocks only (use to_format for "
            "other files).",
            f"{file.path.name} 把 {name} 存成 {file.kind_name(name)}；to_q4 只读 Q4_1 块（其他文件请用 to_format）。"))
    return q4_1_blocks(file.blocks(name))


def _check_same(weight: torch.Tensor, codes: torch.Tensor, d: torch.Tensor, m: torch.Tensor, names: list[str],
                path: Path) -> None:
    """Refuse a model whose matrix is not d·q + m of the file's blocks (another file, or weights changed since loading)."""
    if weight.dtype != torch.float32 or not torch.equal(q4_1_numbers(codes, d, m), weight):
        raise ValueError(bilingual(
            f"The model's weights for {' + '.join(names)} are not the blocks of {path.name}: to_q4 reads the file, so "
            "give it the float32 model as LlamaModel.from_gguf built it from that file.",
            f"模型中 {' + '.join(names)} 的权重与 {path.name} 里的块不一致：to_q4 读的是文件，"
            "所以请传入 LlamaModel.from_gguf 从这个文件建出的 float32 模型。"))
