"""Linear attention (Katharopoulos et al., 2020): φ(q)·φ(k) in place of exp(q·k), so the past fits in a fixed state.

Softmax attention must keep every key, because exp(q·k) cannot be split into a part that depends
on q and a part that depends on k. With a feature map φ the score is a plain dot product of
features, φ(q)·φ(k), and the sum over the past factors:

    out_t = Σ_{i≤t} (φ(q_t)·φ(k_i)) v_i = S_t φ(q_t),   S_t = Σ_{i≤t} v_i φ(k_i)ᵀ   (d_v × d_k)

so S can be carried forward one token at a time. The three functions below compute the same
outputs three ways: `linear_attention_parallel` (the masked (T, T) product, no softmax),
`linear_attention_recurrent` (the state, token by token) and `linear_attention_chunked` (parallel
inside a chunk, the state from chunk to chunk). They take the features themselves: pass
`feature_map(q)` and `feature_map(k)`, or any tensors you want to treat as features.

With `normalize=True` each output is divided by φ(q_t)·Σ_{i≤t} φ(k_i), the paper's normalizer
(the sum of the row's scores, as softmax's rows sum to 1); the features must then be non-negative.
A row whose normalizer is 0 gets a zero output, as a fully hidden row does in the rest of the package.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..checks import bilingual, cannot_read, check_flag, check_same_dtype, check_size, check_tensor
from ..devices import check_fits
from ..overflow import check_no_overflow

RANKS = (2, 3, 4)  # (T, d), (batch, T, d) or (batch, heads, T, d)
MOST_STEPS = 100_000  # a recurrent form takes one Python step per token (or chunk), about 30-50 µs each: a few seconds


def feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1: positive features, close to x + 1 for x > 0 (the paper's choice)."""
    x = check_tensor(x, "x", ranks=(1, 2, 3, 4))
    return F.elu(x) + 1


def check_qkv(queries: object, keys: object, values: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries and keys (..., T, d_k), values (..., T, d_v): one dtype and device, the same leading sizes."""
    for name, x in (("queries", queries), ("keys", keys), ("values", values)):
        check_tensor(x, name, ranks=RANKS)
    check_same_dtype({"queries": queries, "keys": keys, "values": values})
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            bilingual(
                f"queries and keys must have the same last dimension d_k, got {queries.shape[-1]} and {keys.shape[-1]}; "
                "project both to the same size.",
                f"queries 与 keys 的最后一维 d_k 必须相同，实际是 {queries.shape[-1]} 和 {keys.shape[-1]}；"
                "请把两者投影到同样的维数。",
            )
        )
    for name, x in (("keys", keys), ("values", values)):
        if x.shape[:-1] != queries.shape[:-1]:
            raise ValueError(
                bilingual(
                    f"`{name}` {tuple(x.shape)} must have the same sizes as queries {tuple(queries.shape)} in every "
                    "dimension but the last (batch, heads, tokens): one key and one value per query.",
                    f"`{name}` {tuple(x.shape)} 除最后一维外必须与 queries {tuple(queries.shape)} 的各维大小相同"
                    "（批次、头、词元）：每个查询对应一个键和一个值。",
                )
            )
    return queries, keys, values


def check_result(out: torch.Tensor) -> torch.Tensor:
    """Finite queries, keys and values gave inf or NaN: the scores (φ(q)·φ(k) sums) overflowed the dtype."""
    check_no_overflow(out, ("queries", "keys", "values"))
    return out


def check_steps(steps: int, what_en: str, what_zh: str, fix_en: str, fix_zh: str) -> None:
    """A form that loops in Python over tokens or chunks takes at most MOST_STEPS steps, so a slip never runs for minutes."""
    if steps > MOST_STEPS:
        raise ValueError(bilingual(
            f"{what_en} gives {steps:,} steps of a Python loop, at most {MOST_STEPS:,} here (each takes tens of "
            f"microseconds); {fix_en}.",
            f"{what_zh}要在 Python 循环里走 {steps:,} 步，这里最多 {MOST_STEPS:,} 步（每步要几十微秒）；{fix_zh}。"))


def check_scores_fit(queries: torch.Tensor, held: int = 2, element_size: int | None = None) -> None:
    """The (..., T, T) matrices a parallel form holds at once (`held` of them, of `element_size` bytes a number) must
    fit in memory: refuse a T they cannot fit in, before allocating. Linear attention holds 2: its scores and their tril."""
    length, batch = queries.shape[-2], queries.shape[:-2].numel()
    size = element_size or queries.element_size()
    check_fits(length, "num_tokens", lambda t: held * batch * t * t * size, queries.device)


def _check_features(queries: torch.Tensor, keys: torch.Tensor) -> None:
    """With normalize=True the normalizer must not change sign: features from a positive map."""
    for name, x in (("queries", queries), ("keys", keys)):
        if x.numel() and not cannot_read(x) and bool((x < 0).any()):  # no values to read on meta
            raise ValueError(
                bilingual(
                    f"normalize=True divides by sums of φ(q)·φ(k), so `{name}` must be features ≥ 0; "
                    f"pass feature_map({name}) instead of {name}.",
                    f"normalize=True 要除以 φ(q)·φ(k) 之和，所以 `{name}` 必须是非负的特征；"
                    f"请传入 feature_map({name})，而不是 {name}。",
                )
            )


def _divide(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
    """numerator / denominator row by row, 0 where the denominator is 0 (a query that matches nothing)."""
    safe = torch.where(denominator > 0, denominator, torch.ones_like(denominator))
    return torch.where(denominator > 0, numerator / safe, torch.zeros_like(numerator))


def _prepare(queries: object, keys: object, values: object, normalize: object) -> tuple[torch.Tensor, ...]:
    queries, keys, values = check_qkv(queries, keys, values)
    if check_flag(normalize, "normalize"):
        _check_features(queries, keys)
    return queries, keys, values


def linear_attention_parallel(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, normalize: bool = False
) -> torch.Tensor:
    """All outputs at once: the (T, T) matrix of φ(q)·φ(k), future hidden by zeros (no softmax), times the values."""
    queries, keys, values = _prepare(queries, keys, values, normalize)
    check_scores_fit(queries)
    scores = queries @ keys.transpose(-2, -1)  # (..., T, T)
    scores = torch.tril(scores)  # a causal model: the future counts 0 (there is no softmax to hide it with -inf)
    out = scores @ values  # (..., T, d_v)
    return check_result(_divide(out, scores.sum(-1, keepdim=True)) if normalize else out)


def linear_attention_recurrent(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, normalize: bool = False
) -> torch.Tensor:
    """Token by token: add v_t φ(k_t)ᵀ to the d_v × d_k state, then read it with φ(q_t). Memory does not grow with T."""
    queries, keys, values = _prepare(queries, keys, values, normalize)
    *lead, length, d_k = queries.shape
    check_steps(length, f"queries of {length:,} tokens", f"{length:,} 个词元的 queries",
                "use linear_attention_chunked for long inputs", "长输入请用 linear_attention_chunked")
    state = queries.new_zeros(*lead, values.shape[-1], d_k)  # S: one d_v x d_k matrix, whatever T is
    key_sum = queries.new_zeros(*lead, d_k)  # z = Σ φ(k_i), only for the normalizer
    outputs = []
    for t in range(length):
        q, k, v = queries[..., t, :], keys[..., t, :], values[..., t, :]
        state = state + v[..., :, None] * k[..., None, :]  # S ← S + v kᵀ
        out = (state @ q[..., :, None])[..., 0]  # S q
        if normalize:
            key_sum = key_sum + k
            out = _divide(out, (key_sum * q).sum(-1, keepdim=True))
        outputs.append(out)
    return check_result(torch.stack(outputs, dim=-2) if outputs else values.new_zeros(values.shape))


def linear_attention_chunked(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, chunk_size: int = 16, normalize: bool = False
) -> torch.Tensor:
    """Chunk by chunk: the parallel form inside a chunk, plus what the state carries from the chunks before.

    The last chunk may be shorter: `chunk_size` need not divide T.
    """
    queries, keys, values = _prepare(queries, keys, values, normalize)
    chunk_size = check_size(chunk_size, "chunk_size")
    *lead, length, d_k = queries.shape
    check_steps(-(-length // chunk_size), f"chunk_size={chunk_size} over {length:,} tokens",
                f"chunk_size={chunk_size} 对 {length:,} 个词元", "choose a larger chunk_size", "请把 chunk_size 设大一些")
    state = queries.new_zeros(*lead, values.shape[-1], d_k)
    key_sum = queries.new_zeros(*lead, 1, d_k)
    outputs = []
    for start in range(0, length, chunk_size):
        q, k, v = (x[..., start : start + chunk_size, :] for x in (queries, keys, values))
        inside = torch.tril(q @ k.transpose(-2, -1))  # (..., C, C): this chunk's scores
        out = inside @ v + q @ state.transpose(-2, -1)  # within the chunk + from the chunks before
        if normalize:
            out = _divide(out, inside.sum(-1, keepdim=True) + (q * key_sum).sum(-1, keepdim=True))
            key_sum = key_sum + k.sum(-2, keepdim=True)
        state = state + v.transpose(-2, -1) @ k  # S ← S + Σ_chunk v kᵀ
        outputs.append(out)
    return check_result(torch.cat(outputs, dim=-2) if outputs else values.new_zeros(values.shape))


def state_bytes(num_layers: int, num_heads: int, d_k: int, d_v: int, bytes_per_value: int = 4) -> int:
    """Bytes of the recurrent state of a whole model: layers × heads × d_v × d_k values, whatever the length."""
    sizes = [check_size(v, n) for v, n in ((num_layers, "num_layers"), (num_heads, "num_heads"), (d_k, "d_k"),
                                           (d_v, "d_v"), (bytes_per_value, "bytes_per_value"))]
    total = 1
    for size in sizes:
        total *= size
    return total
