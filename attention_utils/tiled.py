"""The fused attention kernel's algorithm written out in plain torch: online softmax and tiles.

`online_softmax` reads a row once, keeping a running maximum and a running sum that is rescaled
whenever the maximum grows. `tiled_attention` applies the same bookkeeping to blocks of keys and
blocks of queries, so the largest tensor it ever builds is one (block_q, block_k) tile of scores per
batch and head, never the (T, T) matrix. With causal=True it skips the tiles that lie entirely
above the diagonal and masks only inside the tiles that the diagonal crosses. Its backward pass
keeps one log-sum-exp per query and recomputes each tile of weights, so training stays free of
(T, T) tensors too. These are the ideas behind FlashAttention (Dao et al., 2022); the real kernels
do the same work in registers and on-chip memory instead of in Python.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from .checks import bilingual, check_dim, check_flag, check_same_dtype, check_size, check_tensor
from .overflow import check_no_overflow

RANKS = (2, 3, 4, 5)  # (T, d), (b, T, d), (b, h, T, d), or one more leading dimension
MOST_STEPS = 100_000  # Python steps of a loop (tiles, or positions of online_softmax), tens of microseconds each


def online_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along `dim`, reading the scores one position at a time with a running maximum and sum.

    -inf marks a hidden position, as in stable_softmax; a row that is -inf everywhere gets zeros.
    """
    scores = check_tensor(scores, "scores", ranks=(1, *RANKS), allow_neg_inf=True)
    dim = check_dim(dim, scores)
    _check_loop(scores.shape[dim], f"scores of {scores.shape[dim]:,} positions along dim={dim}",
                f"沿 dim={dim} 有 {scores.shape[dim]:,} 个位置的 scores", "use stable_softmax for long rows",
                "长的行请用 stable_softmax")
    rows = scores.movedim(dim, -1)  # the positions to walk through come last
    running_max = torch.full(rows.shape[:-1], -math.inf, dtype=rows.dtype, device=rows.device)
    running_sum = torch.zeros_like(running_max)
    for position in range(rows.shape[-1]):
        score = rows[..., position]
        new_max = torch.maximum(running_max, score)
        # the terms summed so far were exp(s - old max); multiplying by exp(old max - new max) rescales them
        shift = _finite(new_max)  # while a row has seen only -inf its sum is 0, and any finite shift will do
        running_sum = running_sum * torch.exp(running_max - shift) + torch.exp(score - shift)
        running_max = new_max
    weights = torch.exp(rows - _finite(running_max)[..., None]) / _nonzero(running_sum)[..., None]
    return weights.movedim(-1, dim)


def _finite(maximum: torch.Tensor) -> torch.Tensor:
    """A running maximum with -inf (nothing visible yet) replaced by 0, so exp(x - maximum) stays defined."""
    return maximum.masked_fill(maximum == -math.inf, 0.0)


def _nonzero(total: torch.Tensor) -> torch.Tensor:
    """A running sum with 0 (nothing visible at all) replaced by 1: such a row gets zero weights, not 0 / 0."""
    return total.masked_fill(total == 0, 1.0)


def _check_loop(steps: int, what_en: str, what_zh: str, fix_en: str, fix_zh: str) -> None:
    """A Python loop of at most MOST_STEPS steps (tiles or positions), so a slip never runs for minutes."""
    if steps > MOST_STEPS:
        raise ValueError(bilingual(
            f"{what_en} give {steps:,} steps of a Python loop, at most {MOST_STEPS:,} here; {fix_en}.",
            f"{what_zh}要在 Python 循环里走 {steps:,} 步，这里最多 {MOST_STEPS:,} 步；{fix_zh}。"))


def blocks(length: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive blocks of `size` positions; the last one may be shorter."""
    length, size = check_size(length, "length", minimum=0), check_size(size, "size")
    for start in range(0, length, size):
        yield start, min(start + size, length)


def tile_is_skipped(query_block: tuple[int, int], key_block: tuple[int, int]) -> bool:
    """True when every key of the tile lies after every query of it: the causal rule hides it all."""
    return key_block[0] > query_block[1] - 1


def tile_crosses_diagonal(query_block: tuple[int, int], key_block: tuple[int, int]) -> bool:
    """True when some key of the tile lies after some query of it, so the tile needs a mask inside."""
    return key_block[1] - 1 > query_block[0]


def check_shapes(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    """Queries and keys share d; keys and values share T; all share the leading (batch, head) sizes."""
    shapes = f"queries {tuple(queries.shape)}, keys {tuple(keys.shape)}, values {tuple(values.shape)}"
    shapes_zh = f"queries {tuple(queries.shape)}、keys {tuple(keys.shape)}、values {tuple(values.shape)}"
    if not queries.dim() == keys.dim() == values.dim():
        rule_en, rule_zh = "must have the same number of dimensions", "的维度个数必须相同"
    elif not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:
        rule_en, rule_zh = "must have the same leading (batch, head) sizes", "最后两维之前的大小（批次、头）必须相同"
    elif queries.shape[-1] != keys.shape[-1]:
        rule_en, rule_zh = "disagree: queries and keys must have the same last size d", "不匹配：查询和键的最后一维 d 必须相同"
    elif keys.shape[-2] != values.shape[-2]:
        rule_en, rule_zh = "disagree: keys and values must have the same length T_k", "不匹配：键和值的长度 T_k 必须相同"
    else:
        return
    raise ValueError(bilingual(f"Got {shapes}: they {rule_en}.", f"实际形状为 {shapes_zh}：它们{rule_zh}。"))


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    block_size: int = 128,
    causal: bool = False,
    *,
    block_q: int | None = None,
    block_k: int | None = None,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √d) V tile by tile, never storing the (T_q, T_k) matrix; same as torch's SDPA.

    `block_size` sets both tile sides; `block_q` and `block_k` override one side each. With
    causal=True query i sees keys 0..i (torch's is_causal=True).
    """
    queries = check_tensor(queries, "queries", ranks=RANKS)
    keys = check_tensor(keys, "keys", ranks=RANKS)
    values = check_tensor(values, "values", ranks=RANKS)
    check_same_dtype({"queries": queries, "keys": keys, "values": values})
    check_shapes(queries, keys, values)
    causal = check_flag(causal, "causal")
    block_q = check_size(block_size, "block_size") if block_q is None else check_size(block_q, "block_q")
    block_k = check_size(block_size, "block_size") if block_k is None else check_size(block_k, "block_k")
    tiles = -(-queries.shape[-2] // block_q) * -(-keys.shape[-2] // block_k)
    _check_loop(tiles, f"tiles of {block_q} x {block_k} over {queries.shape[-2]:,} queries and {keys.shape[-2]:,} keys",
                f"{block_q} x {block_k} 的块铺满 {queries.shape[-2]:,} 个查询和 {keys.shape[-2]:,} 个键", "choose a larger block_size",
                "请把 block_size 设大一些")
    output, _ = TiledAttention.apply(queries, keys, values, block_q, block_k, causal)
    check_no_overflow(output)  # the inputs are finite, so NaN or inf here means the scores overflowed
    return output


def scored_tiles(
    queries: torch.Tensor, keys: torch.Tensor, block_q: int, block_k: int, causal: bool
) -> Iterator[tuple[slice, slice, torch.Tensor]]:
    """Every tile that is not skipped: its rows, its columns and its scaled scores (future keys set to -inf)."""
    scale = 1.0 / math.sqrt(queries.shape[-1]) if queries.shape[-1] else 1.0  # head size 0: every score is 0
    for query_block in blocks(queries.shape[-2], block_q):
        rows = slice(*query_block)
        for key_block in blocks(keys.shape[-2], block_k):
            if causal and tile_is_skipped(query_block, key_block):
                break  # this tile and every later one in the row of tiles lie above the diagonal
            columns = slice(*key_block)
            tile = queries[..., rows, :] @ keys[..., columns, :].transpose(-2, -1) * scale  # (..., bq, bk)
            if causal and tile_crosses_diagonal(query_block, key_block):
                query_index = torch.arange(*query_block, device=tile.device)[:, None]
                key_index = torch.arange(*key_block, device=tile.device)[None, :]
                tile = tile.masked_fill(key_index > query_index, -math.inf)
            yield rows, columns, tile


def tiled_forward(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, block_q: int, block_k: int, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The context (..., T_q, d_v) and each query's log-sum-exp (..., T_q, 1), the one number the backward needs."""
    shape = queries.shape[:-1]
    running_max = queries.new_full((*shape, 1), -math.inf)  # m of every query
    running_sum = queries.new_zeros((*shape, 1))  # l of every query
    unnormalized = queries.new_zeros((*shape, values.shape[-1]))  # o of every query
    for rows, columns, tile in scored_tiles(queries, keys, block_q, block_k, causal):
        # Every row's first tile holds key 0, which every query may see, so new_max is finite from the first
        # tile on: a row whose keys in a later tile are all hidden keeps its old maximum, and exp(-inf) = 0.
        old_max = running_max[..., rows, :]
        new_max = torch.maximum(old_max, tile.amax(dim=-1, keepdim=True))  # (..., bq, 1)
        weights = torch.exp(tile - new_max)  # (..., bq, bk), not yet divided by the sum
        rescale = torch.exp(old_max - new_max)  # shrinks what was summed under the old maximum; 0 at first
        running_sum[..., rows, :] = running_sum[..., rows, :] * rescale + weights.sum(dim=-1, keepdim=True)
        unnormalized[..., rows, :] = unnormalized[..., rows, :] * rescale + weights @ values[..., columns, :]
        running_max[..., rows, :] = new_max
    # divide once, at the end; with no keys at all (T_k = 0) the sum is 0 and the context 0, as in torch's SDPA
    return unnormalized / _nonzero(running_sum), running_max + torch.log(running_sum)


class TiledAttention(torch.autograd.Function):
    """Tiled attention whose backward recomputes each tile of weights from the saved log-sum-exp.

    Storing the weights for the backward would bring back the (T_q, T_k) matrix; FlashAttention keeps one
    number per query instead, L = m + log(l), and recomputes exp(scores - L) tile by tile.
    """

    generate_vmap_rule = True  # torch.vmap and torch.func run forward and backward on batched tensors as they are

    @staticmethod
    def forward(queries, keys, values, block_q, block_k, causal):
        return tiled_forward(queries, keys, values, block_q, block_k, causal)

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        queries, keys, values, block_q, block_k, causal = inputs
        output, log_sum_exp = outputs
        ctx.save_for_backward(queries, keys, values, output, log_sum_exp)
        ctx.mark_non_differentiable(log_sum_exp)
        ctx.tiling = (block_q, block_k, causal)

    @staticmethod
    def jvp(ctx, *_tangents):
        raise ValueError(
            bilingual(
                "tiled_attention has no forward-mode derivative (jvp, torch.func.jacfwd, hessian): use "
                "torch.func.jacrev or torch.autograd.grad for its first derivative, or the package's "
                "scaled_dot_product_attention for more.",
                "tiled_attention 没有前向模式的导数（jvp、torch.func.jacfwd、hessian）：一阶导数请用 "
                "torch.func.jacrev 或 torch.autograd.grad，更高阶的请改用辅助包的 scaled_dot_product_attention。",
            )
        )

    @staticmethod
    def backward(ctx, grad_output, _grad_log_sum_exp):
        with torch.no_grad():  # the backward is written by hand, so a second derivative through it would be wrong
            grads = _tiled_backward(ctx, grad_output)
        if torch.is_grad_enabled():  # create_graph=True: these gradients may be differentiated again, so say why not
            grads = NoSecondDerivative.apply(*grads, *ctx.saved_tensors[:3])
        return (*grads, None, None, None)


class NoSecondDerivative(torch.autograd.Function):
    """Passes tiled attention's gradients on; differentiating them again raises a clear error.

    torch's own once_differentiable returns gradients with no history when the incoming gradient has
    none (loss.sum()), so a second torch.autograd.grad says only "does not require grad". Here the
    gradients take their history from the inputs (queries, keys, values), and its backward refuses.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(grad_queries, grad_keys, grad_values, *_inputs):
        return grad_queries.clone(), grad_keys.clone(), grad_values.clone()

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        pass

    @staticmethod
    def backward(ctx, *_grads):
        raise ValueError(
            bilingual(
                "tiled_attention has a first derivative only (its backward is written by hand): for a second "
                "derivative (create_graph=True, a Hessian) use the package's scaled_dot_product_attention instead.",
                "tiled_attention 只有一阶导数（它的反向传播是手写的）：需要二阶导数（create_graph=True、Hessian）时，"
                "请改用辅助包的 scaled_dot_product_attention。",
            )
        )


def _tiled_backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of queries, keys and values, tile by tile, from the saved log-sum-exp."""
    queries, keys, values, output, log_sum_exp = ctx.saved_tensors
    scale = 1.0 / math.sqrt(queries.shape[-1]) if queries.shape[-1] else 1.0
    grad_queries, grad_keys, grad_values = (torch.zeros_like(t) for t in (queries, keys, values))
    # d softmax: dS = P * (dP - rowsum(dO * O)), since rowsum(P * dP) = rowsum(dO * O) for every query
    correction = (grad_output * output).sum(dim=-1, keepdim=True)  # (..., T_q, 1)
    for rows, columns, tile in scored_tiles(queries, keys, *ctx.tiling):
        weights = torch.exp(tile - log_sum_exp[..., rows, :])  # (..., bq, bk): the tile's weights, recomputed
        grad_values[..., columns, :] += weights.transpose(-2, -1) @ grad_output[..., rows, :]
        grad_weights = grad_output[..., rows, :] @ values[..., columns, :].transpose(-2, -1)
        grad_scores = weights * (grad_weights - correction[..., rows, :]) * scale
        grad_queries[..., rows, :] += grad_scores @ keys[..., columns, :]
        grad_keys[..., columns, :] += grad_scores.transpose(-2, -1) @ queries[..., rows, :]
    return grad_queries, grad_keys, grad_values
