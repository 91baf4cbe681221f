"""Input validation: every bad input gets one English and one Chinese sentence that say what to do.

The contract of the package, argument by argument. Each rule is checked before any work or side
effect; a broken rule raises `TypeError` (wrong kind of thing) or `ValueError` (right kind, wrong
size or value), and the message has two lines, English then Chinese (Chinese first while the
package's `language` is "zh"), both naming the argument the caller passed (`d_model` for the tiny
model, `block_size` for tiled attention, never an inner name).
A value echoed in a message is shown on one line (a tensor by its dtype and shape).

Tensors (`x`, `queries`, `keys`, `values`, `scores`, `context`, `logits`):
    a `torch.Tensor`, else TypeError ("convert it with torch.tensor(..., dtype=torch.float32)";
    a numpy array gets "torch.from_numpy(x).float()"); floating point, else TypeError: integers
    (`torch.tensor([[1, 2, 3]])`) get "x.float()"; bool and complex tensors are refused too;
    in a module, the same dtype and device as the module's weights, else TypeError; in the
    functional API and tiled attention, queries, keys and values share one dtype and one device;
    of an allowed rank and last dimension, else ValueError (modules: `x` is (batch, num_tokens,
    d_in); V1/V2 also take (num_tokens, d_in); split_heads, project_heads and combine_heads want
    the last dimension d_out, d_in and head_dim, and `context` is (batch, num_heads, T, head_dim));
    finite, else ValueError. Scores may hold -inf (a hidden position), not NaN or +inf; a row of
    scores that is -inf everywhere gets zero weights (stable_softmax, online_softmax).
    Empty sizes are valid: batch 0, 0 tokens, 1 token and num_tokens == context_length all work;
    no keys at all gives zero context vectors, and head size 0 gives scores of 0, so uniform
    weights (both as torch's SDPA). naive_softmax and sum_normalize alone return the inf or NaN
    their formula gives (exp overflowed, a sum of 0): lesson 3 shows that failure on purpose.
Token ids (`tokens`, a batch's `inputs` and `targets`): an integer tensor (batch, T), T at most
    context_length, ids in 0 .. vocab_size - 1, on the model's device; else TypeError (kind,
    device) or ValueError (shape, range). encode takes a non-empty string of the first vocab_size
    letters; decode takes ids 0..25 as a tensor, numpy array, list or int.
Batches (`batch` of accuracy, a task's output): (inputs, targets, scored), scored a boolean mask
    (an integer mask would pick rows) with at least one True, all three of one shape.
Sizes (`d_in`, `d_out`, `d_model`, `context_length`, `num_heads`, `num_layers`, `vocab_size`,
    `length`, `batch_size`, `num_tokens`, `block_size`, `steps`, `snapshots`, `threads`, `dim` of
    a table): an integer (Python, numpy or 0-d torch integer), else TypeError; True/False are
    refused; at least 1 (0 where an empty result makes sense: `num_tokens`, `batch_size` of
    example_batch, `num_positions`), else ValueError; `d_out` and `d_model` multiples of
    `num_heads`; the tensors a size asks for must fit in the device's memory, else ValueError that
    says how large it can be here; sizes that cost time are bounded too (steps <= 1,000,000,
    layers or wrapper heads <= 1024, threads <= 1024, the tiles of tiled attention and the
    positions of online_softmax <= 100,000), so a slip never leaves a notebook running.
Seeds (`seed`): an integer from 0 to 2**64 - 1. Generators (`generator` of a task's batch): a CPU
    torch.Generator, never None (the global random state would break reproducibility).
Indices (`layer`, `head`, `index`, `dim`, `highlight`, `angle_between`): an integer as for sizes,
    within range (`index` may count from the end), else ValueError that gives the range.
Devices (`device`): None, a string, a torch.device or an accelerator index naming a device this
    machine has, else ValueError listing the ones it has ('cpu', 'cuda:0', ..., 'meta').
Rates (`dropout`, `dropout_p`): a real number (numpy and 0-d torch numbers count), else TypeError;
    in [0, 1), else ValueError; a module checks its rate again in every forward. `learning_rate`:
    a finite real number > 0.
Flags (`qkv_bias`, `training`, `causal`, `return_weights`, `annotate`, `quick`): True or False
    (numpy and 0-d torch booleans count), else TypeError. `progress` may also be a tqdm bar.
Masks: a boolean tensor, True = hide, on the input's device, else TypeError. `mask` must broadcast
    TO the scores' shape without enlarging it; `padding_mask` must be exactly (batch, num_tokens).
Models and tasks: training needs a TinyAttentionModel holding values (not on meta) with a
    trainable parameter, and a task object with a batch method whose vocabulary and length fit
    the model. A snapshot fits only a model of the same sizes and causal setting.
Plots: labels and titles are strings; `titles`, tick labels and `labels` give one per panel, key,
    query or vector; `figsize` positive numbers; `vmin <= vmax`; `cmap` a known colour map;
    `vectors` finite; at most 100 panels.
Fully masked rows: a query that may look at no key gets zero attention weights and a zero context
    vector, in every function and module (the same as torch's `scaled_dot_product_attention`).
    A row of NaN would spread to every gradient through the shared weights. Lesson 5 shows the
    NaN the plain softmax gives and why; lesson 8 shows SDPA doing the same as the package.
Overflow: finite inputs can still give scores beyond the dtype's range (float16 inputs of a few
    hundred, float32 inputs near 1e19); attention_scores, scaled_dot_product_attention and
    tiled_attention then raise `Overflowed` (a ValueError, in `overflow.py` with the checks of results) naming
    the dtype instead of returning inf or NaN.
    So do the linear-attention forms; the delta rule names a state that grew past the dtype (beta |k|² > 2).
Results of modules (after `out_proj`, and the QKV projection of the fused module, whose kernel may
    turn NaN into zeros): NaN or inf from a finite input means weights that hold NaN or inf (what
    a diverged training run leaves; the ValueError names the weight, `layers.1.W_key.weight`) or
    an overflow (it names the dtype and the largest weight). from_multihead refuses a source
    whose mask is not causal; predict gives the model its train/eval mode back, even on an error.
Training that diverges (the loss or the weights stop being finite) raises TrainingDiverged, a
    ValueError: "training diverged at step N: lower learning_rate", the weights from before the
    run restored, the losses so far on `error.run`.
Files (`path` of read_gguf): None (lesson 13's model), a str or os.PathLike naming an existing file,
    else TypeError (not a path), FileNotFoundError (missing) or ValueError (a folder). A file is
    read as untrusted: a file that is not GGUF, big-endian, of a version other than 2 or 3, or
    truncated or damaged anywhere gets a ValueError naming the byte and the field ("cut short or
    damaged at byte 1,099 (the length of the value of 'tokenizer.ggml.tokens')"); every count,
    string length and array length is checked against the bytes left before anything is allocated;
    every tensor's bytes must lie inside the file when it is opened, so a cut download is refused at
    once. A header key the model needs and the file lacks is named; `tensor(name)` of a name not in
    the table is a ValueError. `from_gguf` takes what read_gguf returns or a path (read with
    read_gguf); anything else is a TypeError.
Saved results (`load_saved` and the tables and figures that read `make bench`'s JSON): a missing
    file is a FileNotFoundError, a folder, broken JSON or a non-dict a ValueError, each saying to run
    `make bench` or `git checkout -- figures/`; a function given another bench's results (or no
    dict) names the load_saved call it needs, and a field it reads that is missing or null (a
    hand-edited file) is named with the same fix; what the bench writes is read, also without
    transformers' rows; a row where results are asked (or results where a row is) is refused; a
    table's `language` is 'en' or 'zh'.
Text (`text`, `prompt`): a str, else TypeError (bytes: ".decode('utf-8')"). Every character
    encodes to tokens that decode back to it, or gets a ValueError naming it: a lone surrogate
    ("\\ud800") is not text, and a character whose bytes this vocabulary has no token for is named.
    A prompt has at least one token and at most context_length.
Generation (`generate`): `model` a torch module returning logits (batch, T, vocab) for tokens
    (batch, T), else a ValueError naming the shape it returned; `prompt` an integer tensor
    (batch, T >= 1); `new_tokens` an integer >= 0 that the model can reach: prompt length +
    new_tokens - 1 at most its context length (`model.config.context_length` or
    `model.context_length`; 10,000 when the model states none), refused before the first step,
    so no call runs for minutes and then fails. 0 new tokens give logits (batch, 0, vocab). A
    cache is a new, empty KVCache; adding 0 tokens to a cache is allowed and changes nothing.
    generate_batch checks the same before its first step, and that every prompt id and `pad_id`
    lie below the model's vocab_size; logits_through_cache also takes only a new, empty cache.
Caches of lessons 14-15: `bits` 8 or 4; `value_group` divides head_dim (even for 4 bits); `rank` at
    most head_dim; a low-rank cache's bases have orthonormal columns as fit_bases returns them (check_orthonormal
    is the check); the keys given to a cache have its kv_heads and head_dim; a pool of pages
    (`num_pages` x `page_size` x ...) must fit in the memory of its `device`, the device of the keys
    written to it; `sequence` is an id that new_sequence or fork returned; the queries of
    paged_attention are the sequence's last tokens (at most its length); one sequence of a pool is written by one
    layer's cache only. A cache factory (`make_cache`) is a function of no arguments: given the factory itself
    (quantized_kv_cache, KVCache) or a cache, the message says to pass `lambda: ...`, before calling it. A parallel form (linear attention, the delta rule) refuses a T whose (T, T) matrix
    cannot fit in memory, before allocating it; a recurrent or chunked form, more than 100,000
    steps of its Python loop (tokens, or chunks).
New modules (lessons 14 on): every public function, class and method follows this contract from
    its first commit: it checks its arguments with the helpers here (check_tensor, check_size,
    check_seed, check_index, check_flag, check_real, check_device, ...) before any work, bounds
    the sizes that cost time, reads a file as untrusted, and raises TypeError or ValueError with
    one English and one Chinese line built by `bilingual`. Its tests (tests/test_contract*.py)
    give each argument the odd values there (None, str, float, bool, NaN, numpy and 0-d torch
    numbers, wrong ranks, empty sizes) and assert the refusal with contract_helpers.assert_contract_error.
Speed: the finite check is one `sum` reduction (a finite sum proves every entry finite); only when
    that sum is not finite does an exact pass decide. A module checks its input and its result,
    never the (T, T) scores. Checks that read values on the host are skipped under torch.compile
    (they would split the graph), on the meta device (no values) and inside torch.vmap (Python
    cannot branch on a batched value); the checks of types and shapes remain. Work that itself needs the
    values (a figure, picking tokens from a prompt's ids, a copy to the host) refuses a meta tensor with a
    ValueError that names it (check_holds_values); a sign check that only guards the result is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .arguments import (  # noqa: F401 (re-exported: the whole contract is importable from checks)
    LARGEST_SEED,
    bilingual,
    cannot_read,
    check_dim,
    check_flag,
    check_index,
    check_rate,
    check_real,
    check_same_length,
    check_seed,
    check_size,
    shown,
)


def _dimensions_en(ranks: Sequence[int]) -> str:
    """'3 dimensions', '2 or 3 dimensions', '1 dimension' (English, singular and plural right)."""
    words = " or ".join(str(r) for r in ranks)
    return f"{words} dimension" + ("" if tuple(ranks) == (1,) else "s")


def _dimensions_zh(ranks: Sequence[int]) -> str:
    """'3 维', '2 维或 3 维' (Chinese, composed with 或)."""
    return "或 ".join(f"{r} 维" for r in ranks)


def check_tensor(
    x: object,
    name: str,
    ranks: Sequence[int],
    last_dim: int | None = None,
    like: torch.Tensor | None = None,
    allow_neg_inf: bool = False,
    last_name: str = "d_in",
) -> torch.Tensor:
    """Check that `x` is a finite floating-point tensor of an allowed rank and last dimension.

    `like` is a module's weight: `x` must then have its dtype and sit on its device. `last_name`
    names the size the last dimension must equal (d_in for a module's input).
    """
    if not isinstance(x, torch.Tensor):
        hint_en, hint_zh = (
            (f"torch.from_numpy({name}).float()", f"torch.from_numpy({name}).float()") if isinstance(x, np.ndarray)
            else ("torch.tensor(data, dtype=torch.float32)", "torch.tensor(data, dtype=torch.float32)")
        )
        raise TypeError(
            bilingual(
                f"`{name}` must be a torch.Tensor, got {type(x).__name__}; convert it with {hint_en}.",
                f"`{name}` 必须是 torch.Tensor，你传入的是 {type(x).__name__}；请用 {hint_zh} 转成张量。",
            )
        )
    _check_floating(x, name, None if like is None else like.dtype)
    if like is not None and x.device != like.device:
        raise TypeError(
            bilingual(
                f"`{name}` is on {x.device} but the module's weights are on {like.device}; move the input with "
                f"{name}.to('{like.device}') or the module with module.to('{x.device}').",
                f"`{name}` 在 {x.device} 上，而模块权重在 {like.device} 上；请用 {name}.to('{like.device}') 移动输入，"
                f"或用 module.to('{x.device}') 移动模块。",
            )
        )
    if x.dim() not in ranks:
        _wrong_rank(x, name, ranks)
    if last_dim is not None and x.shape[-1] != last_dim:
        fix_en, fix_zh = (
            (f"build the module with d_in={x.shape[-1]} or fix the input", f"请用 d_in={x.shape[-1]} 创建模块，或者修正输入")
            if last_name == "d_in" else ("fix the input", "请修正输入")
        )
        raise ValueError(
            bilingual(
                f"The last dimension of `{name}` must be {last_name}={last_dim}, got {x.shape[-1]} "
                f"(shape {tuple(x.shape)}); {fix_en}.",
                f"`{name}` 的最后一维应等于 {last_name}={last_dim}，实际是 {x.shape[-1]}（形状为 {tuple(x.shape)}）；{fix_zh}。",
            )
        )
    check_finite(x, name, allow_neg_inf)
    return x


def check_orthonormal(basis: torch.Tensor, name: str, columns: int | None = None, tolerance: float = 1e-3) -> None:
    """Refuse a basis (..., n, n) whose first `columns` columns are not orthonormal (Bᵀ B = I): coordinates read
    through it (Bᵀ x) would not rebuild the vectors (B c), and a cache would hold other vectors than it was given."""
    if cannot_read(basis) or not basis.numel():
        return
    used = basis[..., :columns].double()
    error = (used.mT @ used - torch.eye(used.shape[-1], dtype=torch.float64, device=basis.device)).abs().max().item()
    if error > tolerance:
        raise ValueError(
            bilingual(
                f"`{name}` must have orthonormal columns (Bᵀ B = I) as fit_bases returns them, but Bᵀ B is off by "
                f"{error:.3g}; pass the bases fit_bases returned, or orthonormalize with torch.linalg.qr({name}).Q.",
                f"`{name}` 的列必须是标准正交的（Bᵀ B = I），fit_bases 返回的就是这样，但这里 Bᵀ B 与单位矩阵相差 "
                f"{error:.3g}；请传入 fit_bases 返回的基，或用 torch.linalg.qr({name}).Q 正交化。",
            )
        )


def check_holds_values(x: torch.Tensor, name: str, work_en: str, work_zh: str) -> None:
    """Refuse a meta tensor where the work itself needs its values (a figure, a copy to the host), not just a check."""
    if x.is_meta:
        raise ValueError(
            bilingual(
                f"`{name}` is on the meta device, which holds shapes but no values, and {work_en} needs its values; "
                f"compute it on 'cpu' (or another device that holds values).",
                f"`{name}` 在 meta 设备上，那里只有形状没有数值，而{work_zh}需要它的数值；请在 'cpu'（或其他存有数值的设备）上计算它。",
            )
        )


def _check_floating(x: torch.Tensor, name: str, dtype: torch.dtype | None) -> None:
    """Refuse integer, bool and complex tensors, and a float dtype other than the module's."""
    if x.dtype == torch.bool or x.is_complex() or not x.is_floating_point():
        kind_en, kind_zh = (
            ("booleans", "布尔值") if x.dtype == torch.bool
            else ("complex numbers", "复数") if x.is_complex()
            else ("integers", "整数")
        )
        integer = kind_en == "integers"
        hint_en = " (torch.tensor([[1, 2, 3]]) stores integers; write 1.0, 2.0, 3.0 or add dtype=torch.float32)"
        hint_zh = "；如果是用 torch.tensor([[1, 2, 3]]) 这样创建的，也可以写成 1.0、2.0、3.0，或加上 dtype=torch.float32"
        raise TypeError(
            bilingual(
                f"`{name}` holds {kind_en} ({x.dtype}), but attention needs floating-point numbers; "
                f"convert it with {name}.float(){hint_en if integer else ''}.",
                f"`{name}` 存的是{kind_zh}（{x.dtype}），而注意力需要浮点数。"
                f"请用 {name}.float() 转换{hint_zh if integer else ''}。",
            )
        )
    if dtype is not None and x.dtype != dtype:
        raise TypeError(
            bilingual(
                f"`{name}` is {x.dtype} but the module's weights are {dtype}; convert the input with "
                f"{name}.to({dtype}) or the module with module.to({x.dtype}).",
                f"`{name}` 的类型是 {x.dtype}，而模块权重的类型是 {dtype}；请用 {name}.to({dtype}) 转换输入，"
                f"或用 module.to({x.dtype}) 转换模块。",
            )
        )


def _wrong_rank(x: torch.Tensor, name: str, ranks: Sequence[int]) -> None:
    """Raise the rank error, with an unsqueeze hint only when one missing dimension explains it."""
    hint_en = hint_zh = ""
    if x.dim() >= 1 and x.dim() + 1 in ranks:
        hint_en = f" Add a batch dimension with {name}.unsqueeze(0)."
        hint_zh = f"可以用 {name}.unsqueeze(0) 补上批次维度。"
    got = "1 dimension" if x.dim() == 1 else f"{x.dim()} dimensions"
    raise ValueError(
        bilingual(
            f"`{name}` must have {_dimensions_en(ranks)}, got shape {tuple(x.shape)} ({got}).{hint_en}",
            f"`{name}` 应为 {_dimensions_zh(ranks)}张量，实际形状是 {tuple(x.shape)}（{x.dim()} 维）。{hint_zh}",
        )
    )


def check_finite(x: torch.Tensor, name: str, allow_neg_inf: bool = False) -> None:
    """Refuse NaN and inf (and +inf only, with allow_neg_inf) with one cheap reduction on the fast path."""
    if x.numel() == 0 or cannot_read(x):
        return
    if torch.isfinite(x.sum()):
        return  # a finite sum proves every entry finite: inf and NaN never cancel out
    bad = torch.isnan(x) | (x == float("inf")) if allow_neg_inf else ~torch.isfinite(x)
    if not bad.any():
        return  # the sum overflowed, or only -inf entries were allowed
    allowed_en, allowed_zh = (" (-inf, a hidden position, is allowed)", "（-inf 表示遮住的位置，是允许的）") if allow_neg_inf else ("", "")
    raise ValueError(
        bilingual(
            f"`{name}` contains NaN or inf values{allowed_en}; find where they first appear "
            f"(torch.isnan({name}).any()) before calling attention.",
            f"`{name}` 里有 NaN 或 inf{allowed_zh}；请先用 torch.isnan({name}).any() 找到它们最早出现的地方，再调用注意力。",
        )
    )


def check_heads(d_out: int, num_heads: int, name: str = "d_out") -> None:
    """Check that the width `name` (d_out, or a model's d_model) splits evenly into `num_heads` heads."""
    if d_out % num_heads != 0:
        raise ValueError(
            bilingual(
                f"{name}={d_out} must be divisible by num_heads={num_heads}; choose {name} as a multiple of num_heads.",
                f"{name}={d_out} 必须能被 num_heads={num_heads} 整除；请把 {name} 设为 num_heads 的整数倍。",
            )
        )


def check_length(num_tokens: int, context_length: int) -> None:
    """Check that a sequence fits into the causal mask built for `context_length` tokens."""
    if num_tokens > context_length:
        raise ValueError(
            bilingual(
                f"The input has {num_tokens} tokens but the module was built with context_length={context_length}; "
                f"shorten the input or build the module with context_length>={num_tokens}.",
                f"输入有 {num_tokens} 个词元，但模块的 context_length={context_length}；"
                f"请截短输入，或用 context_length>={num_tokens} 重新创建模块。",
            )
        )


def _boolean(mask: object, name: str, device: torch.device | None = None) -> torch.Tensor:
    """Refuse anything but a boolean tensor (on `device`), saying which convention the package uses."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        got = f"a {mask.dtype} tensor" if isinstance(mask, torch.Tensor) else type(mask).__name__
        got_zh = f"{mask.dtype} 张量" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise TypeError(
            bilingual(
                f"`{name}` must be a boolean tensor where True marks a position to hide, got {got}; "
                f"convert it with {name}.bool().",
                f"`{name}` 必须是布尔张量，True 表示要遮住的位置，你传入的是 {got_zh}；请用 {name}.bool() 转换。",
            )
        )
    if device is not None and mask.device != device:
        raise TypeError(
            bilingual(
                f"`{name}` is on {mask.device} but the attention input is on {device}; move it with {name}.to('{device}').",
                f"`{name}` 在 {mask.device} 上，而注意力的输入在 {device} 上；请用 {name}.to('{device}') 移过去。",
            )
        )
    return mask


def check_mask(mask: object, scores_shape: torch.Size, name: str = "mask", device: torch.device | None = None) -> torch.Tensor:
    """Check that a boolean mask (True = hide) broadcasts to the scores' shape without enlarging it."""
    _boolean(mask, name, device)
    try:
        fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except RuntimeError:
        fits = False
    if not fits:
        queries, keys = (scores_shape[-2], scores_shape[-1]) if len(scores_shape) >= 2 else (1, scores_shape[-1])
        raise ValueError(
            bilingual(
                f"`{name}` of shape {tuple(mask.shape)} does not fit the attention scores of shape "
                f"{tuple(scores_shape)}; it must broadcast to that shape without adding to it, "
                f"for example shape ({queries}, {keys}).",
                f"形状为 {tuple(mask.shape)} 的 `{name}` 与形状为 {tuple(scores_shape)} 的注意力分数不匹配；"
                f"它必须能广播到这个形状，而且广播后不能比它大，例如使用形状 ({queries}, {keys})。",
            )
        )
    return mask


def check_padding_mask(padding_mask: object, batch: int, num_tokens: int, device: torch.device | None = None) -> torch.Tensor:
    """Check that a padding mask is boolean (True = padding), on the input's device and exactly (batch, num_tokens)."""
    _boolean(padding_mask, "padding_mask", device)
    if tuple(padding_mask.shape) != (batch, num_tokens):
        raise ValueError(
            bilingual(
                f"`padding_mask` must have shape (batch, num_tokens) = ({batch}, {num_tokens}), one flag per "
                f"token of x, got {tuple(padding_mask.shape)}.",
                f"`padding_mask` 的形状必须是 (batch, num_tokens) = ({batch}, {num_tokens})，"
                f"即 x 的每个词元对应一个布尔值，实际是 {tuple(padding_mask.shape)}。",
            )
        )
    return padding_mask


def check_same_dtype(tensors: dict[str, torch.Tensor]) -> None:
    """Check that tensors multiplied together share one dtype and one device (queries, keys, values)."""
    for attribute, word_en, word_zh in (("dtype", "dtype", "类型"), ("device", "device", "设备")):
        found = {name: getattr(t, attribute) for name, t in tensors.items()}
        if len(set(found.values())) > 1:
            first = next(iter(found.values()))
            listed = ", ".join(f"`{name}` {value}" for name, value in found.items())
            listed_zh = "，".join(f"`{name}` 是 {value}" for name, value in found.items())
            convert = f".to({first})" if attribute == "dtype" else f".to('{first}')"
            raise TypeError(
                bilingual(
                    f"{listed}: all must have the same {word_en}; convert them, for example with {convert}.",
                    f"{listed_zh}：它们的{word_zh}必须相同；请统一转换，例如使用 {convert}。",
                )
            )
