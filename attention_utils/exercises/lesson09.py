"""Checkers for lesson 9: the tiled loop's update, the tiles a causal kernel visits, a tile's size, a bug's witness."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import as_real_tensor, as_whole_number, checker, feedback, has_form, missing

# Exercise 1: a query row has met a first tile of three keys, then a second of two. The checker tries the
# learner's update on it first, where each classic mistake gives a recognisable number.
FIRST_SCORES = (0.8, 2.1, -0.3)
FIRST_VALUES = ((1.0, 0.0), (0.5, 1.0), (0.0, 2.0))
NEW_SCORES = (2.9, 1.2)
NEW_VALUES = ((2.0, -1.0), (1.0, 1.0))
LOOP_TILES = ((2, 2), (7, 3), (16, 16), (50, 1))  # (block_q, block_k) for the loop check on 50 tokens

# Exercises 2 and 3: sizes of a causal kernel.
TILE_LENGTH, TILE_BLOCK = 1000, 48
SIZES = dict(batch=8, heads=12, length=4096, head_dim=64, block_q=128, block_k=256)

# Exercise 4: one query's scores against six keys, in tiles of two; the weights must differ by more than this.
WITNESS_KEYS, WITNESS_TILE, WITNESS_GAP = 6, 2, 0.01


def _state_after(scores: tuple[float, ...], values: tuple[tuple[float, ...], ...]) -> tuple[torch.Tensor, ...]:
    """m, ℓ and o of one query row after `scores`, all at once (no running update): shapes (1, 1), (1, 1), (1, d_v)."""
    scores_t, values_t = torch.tensor([scores], dtype=torch.float64), torch.tensor(values, dtype=torch.float64)
    running_max = scores_t.amax(dim=1, keepdim=True)
    weights = torch.exp(scores_t - running_max)
    return running_max, weights.sum(dim=1, keepdim=True), weights @ values_t


def _call_update(update: object, state: tuple[torch.Tensor, ...], tile: torch.Tensor, tile_values: torch.Tensor):
    """The learner's (new_max, new_sum, new_unnormalized) as float64 tensors, or None after printing what is wrong."""
    answer = update(*(part.clone() for part in state), tile.clone(), tile_values.clone())
    if isinstance(answer, tuple) and any(missing(part) for part in answer[:3]):
        return None
    if not isinstance(answer, tuple) or len(answer) != 3:
        feedback(False, "update_tile should return three things: new_max, new_sum, new_unnormalized.",
                 "update_tile 应返回三样东西：new_max、new_sum、new_unnormalized。")
        return None
    rows, width = tile.shape[0], tile_values.shape[1]
    names = ("new_max", "new_sum", "new_unnormalized")
    for part, name, shape in zip(answer, names, ((rows, 1), (rows, 1), (rows, width))):
        if not has_form(part, shape, name, f"{name} "):
            return None
        if as_real_tensor(part) is None:
            feedback(False, f"{name} should hold real numbers, got {part.dtype}.",
                     f"{name} 应该由实数组成，而你给出的是 {part.dtype}。")
            return None
    return tuple(as_real_tensor(part) for part in answer)


def _close(found: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal to 4 decimals: the learner may compute in float32."""
    return torch.allclose(found, expected, atol=1e-4)


def _diagnose_one_row(found: tuple[torch.Tensor, ...]) -> bool:
    """Compare with the row of the exercise; print the hint for a classic mistake. True when all three are right."""
    old_max, old_sum, old_output = _state_after(FIRST_SCORES, FIRST_VALUES)
    new_max, new_sum, new_output = _state_after(FIRST_SCORES + NEW_SCORES, FIRST_VALUES + NEW_VALUES)
    new_terms = torch.exp(torch.tensor([NEW_SCORES], dtype=torch.float64) - new_max)
    found_max, found_sum, found_output = found
    if not _close(found_max, new_max):
        feedback(False, "On a row whose old maximum is 2.1 and whose new tile holds 2.9 and 1.2, new_max should be 2.9: "
                 "the larger of the old maximum and the tile's largest score, row by row.",
                 "某一行的旧累积最大值是 2.1，新分数块里是 2.9 和 1.2，new_max 应为 2.9：逐行取旧累积最大值与分数块最大分数中较大的那个。")
    elif _close(found_sum, old_sum + new_terms.sum(dim=1, keepdim=True)):
        feedback(False, "The old sum was computed with the old maximum (2.1 in the test row): multiply it by "
                 "exp(old max - new max) before adding the new terms.",
                 "旧的累积和是按旧累积最大值（测试行里是 2.1）算出来的：先乘以 exp(旧最大值 - 新最大值)，再加上新的各项。")
    elif not _close(found_sum, new_sum):
        feedback(False, "new_sum = running_sum * exp(running_max - new_max) + the row sums of exp(tile - new_max).",
                 "new_sum = running_sum * exp(running_max - new_max) + exp(tile - new_max) 按行求和。")
    elif _close(found_output, old_output + new_terms @ torch.tensor(NEW_VALUES, dtype=torch.float64)):
        feedback(False, "The sum is right; the old unnormalized output needs the same factor exp(running_max - new_max).",
                 "累积和已经对了；旧的未归一化输出也要乘以同一个因子 exp(running_max - new_max)。")
    elif _close(found_output, new_output / new_sum):
        feedback(False, "This output is already divided by the sum; keep it unnormalized: the loop divides once, at the end.",
                 "这个输出已经除以了累积和；请保持未归一化：循环会在最后统一除一次。")
    elif not _close(found_output, new_output):
        feedback(False, "new_unnormalized = unnormalized * exp(running_max - new_max) + exp(tile - new_max) @ tile_values.",
                 "new_unnormalized = unnormalized * exp(running_max - new_max) + exp(tile - new_max) @ tile_values。")
    else:
        return True
    return False


def _tiled_with(update: object, queries, keys, values, block_q: int, block_k: int, causal: bool):
    """The lesson's tiled loop with the learner's update inside; None once the update's answer was refused."""
    length_q, length_k = queries.shape[0], keys.shape[0]
    running_max = torch.full((length_q, 1), -math.inf, dtype=torch.float64)
    running_sum = torch.zeros(length_q, 1, dtype=torch.float64)
    unnormalized = torch.zeros(length_q, values.shape[-1], dtype=torch.float64)
    for q_start in range(0, length_q, block_q):
        rows = slice(q_start, min(q_start + block_q, length_q))
        for k_start in range(0, min(length_k, rows.stop) if causal else length_k, block_k):
            cols = slice(k_start, min(k_start + block_k, length_k))
            tile = queries[rows] @ keys[cols].T / math.sqrt(queries.shape[-1])
            if causal:
                future = torch.arange(cols.start, cols.stop) > torch.arange(rows.start, rows.stop)[:, None]
                tile = tile.masked_fill(future, -math.inf)
            state = (running_max[rows], running_sum[rows], unnormalized[rows])
            found = _call_update(update, state, tile, values[cols])
            if found is None:
                return None
            running_max[rows], running_sum[rows], unnormalized[rows] = found
    return unnormalized / running_sum


@checker
def check_update_tile(update_tile: object) -> None:
    """Exercise 1: the learner's update_tile, tried on one row, then inside the whole tiled loop against SDPA."""
    if missing(update_tile):
        return
    if not callable(update_tile):
        return feedback(False, f"Pass the function itself, update_tile, not {type(update_tile).__name__}.",
                        f"请传入函数本身 update_tile，而不是 {type(update_tile).__name__}。")
    one_row = _call_update(update_tile, _state_after(FIRST_SCORES, FIRST_VALUES),
                           torch.tensor([NEW_SCORES], dtype=torch.float64), torch.tensor(NEW_VALUES, dtype=torch.float64))
    if one_row is None or not _diagnose_one_row(one_row):
        return
    generator = torch.Generator().manual_seed(9)
    queries, keys = (torch.randn(50, 8, generator=generator, dtype=torch.float64) for _ in range(2))
    values = torch.randn(50, 5, generator=generator, dtype=torch.float64)
    for block_q, block_k in LOOP_TILES:
        for causal in (False, True):
            found = _tiled_with(update_tile, queries, keys, values, block_q, block_k, causal)
            if found is None:
                return
            sdpa = F.scaled_dot_product_attention(queries[None], keys[None], values[None], is_causal=causal)[0]
            if not torch.allclose(found, sdpa, atol=1e-5):  # float32 work passes too
                kind_en, kind_zh = ("causal", "因果") if causal else ("full", "完整")
                return feedback(False, f"Right on the test row, but the tiled loop ({kind_en}, tiles {block_q} x {block_k}, "
                                "50 tokens) differs from SDPA: work row by row (keepdim=True) and use only the tile's "
                                "own scores and values.",
                                f"测试行对了，但放进分块循环（{kind_zh}注意力，分数块 {block_q} × {block_k}，50 个词元）后与 SDPA "
                                "不一致：请逐行计算（keepdim=True），并且只用这个分数块自己的分数和值。")
    feedback(True, "Inside the tiled loop your four lines give SDPA's output for tiles 2 x 2, 7 x 3, 16 x 16 and "
             "50 x 1, causal or not.",
             "放进分块循环后，你写的四行对 2 × 2、7 × 3、16 × 16 和 50 × 1 的分数块都得到与 SDPA 相同的输出，因果与否都一样。")


def _visited_tiles(length: int, block_q: int, block_k: int) -> int:
    """Count, tile by tile, the tiles with at least one key at or before one of their queries."""
    count = 0
    for q_start in range(0, length, block_q):
        last_query = min(q_start + block_q, length) - 1
        count += sum(1 for k_start in range(0, length, block_k) if k_start <= last_query)
    return count


@checker
def check_visited_tiles(answer: object) -> None:
    """Exercise 2: how many (48, 48) tiles a causal kernel computes for T = 1000."""
    if missing(answer):
        return
    value = as_whole_number(answer)
    if value is None:
        return feedback(False, "Give a whole number of tiles (an int).", "请给出分数块的个数，一个整数（int）。")
    blocks = math.ceil(TILE_LENGTH / TILE_BLOCK)
    expected = _visited_tiles(TILE_LENGTH, TILE_BLOCK, TILE_BLOCK)
    if value == expected:
        return feedback(True, f"{expected} of the {blocks * blocks} tiles: {expected / blocks**2:.0%} of the work of the "
                        "full matrix.",
                        f"{blocks * blocks} 个分数块中只算 {expected} 个：是完整矩阵工作量的 {expected / blocks**2:.0%}。")
    lesson_blocks = math.ceil(TILE_LENGTH / 64)
    hints = {
        blocks * blocks: ("That is every tile; the tiles entirely above the diagonal are skipped.",
                          "这是全部分数块；完全位于对角线上方的分数块会被跳过。"),
        blocks * (blocks - 1) // 2: (
            "Check two things: the tiles the diagonal crosses are computed too (with a mask inside), and 1000 is not a "
            "multiple of 48, so the last, shorter block counts as a block.",
            "请检查两点：对角线穿过的分数块也要计算（在块内加掩码）；1000 不是 48 的整数倍，最后那个较短的块也算一块。"),
        lesson_blocks * (lesson_blocks + 1) // 2: ("That is the count for tiles of 64; here the tiles are 48 x 48.",
                                                   "这是分数块为 64 时的个数；这里的分数块是 48 × 48。"),
    }
    en, zh = hints.get(value, ("The query block with index i (counting from 0) visits the key blocks 0 to i.",
                               "索引为 i 的查询块（从 0 开始数）要计算索引为 0 到 i 的键块。"))
    feedback(False, en, zh)


@checker
def check_tile_elements(answer: object) -> None:
    """Exercise 3: elements of one score tile for every sentence and head: batch × heads × block_q × block_k."""
    if missing(answer):
        return
    value = as_whole_number(answer)
    if value is None:
        return feedback(False, "Give a whole number of elements (an int).", "请给出元素个数，一个整数（int）。")
    s = SIZES
    expected = s["batch"] * s["heads"] * s["block_q"] * s["block_k"]
    full = s["batch"] * s["heads"] * s["length"] ** 2
    if value == expected:
        return feedback(True, f"{expected:,} numbers ({expected * 4 / 2**20:g} MiB in float32), against {full:,} for the "
                        f"whole (T, T) matrix at T = {s['length']}: 1/{full // expected} of it. The tile's size does not "
                        "depend on T, so this share shrinks like 1/T² as T grows.",
                        f"{expected:,} 个数（float32 下为 {expected * 4 / 2**20:g} MiB），而 T = {s['length']} 时整个 (T, T) "
                        f"矩阵有 {full:,} 个：只占它的 1/{full // expected}。分数块的大小与 T 无关，T 越长，这个比例越小（按 1/T² 缩小）。")
    hints = {
        full: ("That is the whole (T, T) matrix: a tile is block_q × block_k.", "这是整个 (T, T) 矩阵：一个分数块是 block_q × block_k。"),
        expected * 4: ("Elements, not bytes.", "要的是元素个数，不是字节数。"),
        s["block_q"] * s["block_k"]: ("That is one tile of one head of one sentence; there is one for every sentence and head.",
                                      "这是一个句子、一个头的一个分数块；每个句子的每个头都有一个。"),
        s["batch"] * s["heads"] * s["block_q"] * s["head_dim"]: ("That is the running output's size; the score tile is "
                                                                 "block_q × block_k per sentence and head.",
                                                                 "这是累积输出的大小；每个句子、每个头的分数块是 block_q × block_k。"),
    }
    en, zh = hints.get(value, ("Multiply batch × heads × block_q × block_k; T does not appear.",
                               "请计算：批大小 × 头数 × block_q × block_k；T 不出现在式子里。"))
    feedback(False, en, zh)


def _weights_without_sum_rescale(scores: torch.Tensor) -> torch.Tensor:
    """One query's weights from the tiled loop with the bug: the output is rescaled, the running sum is not."""
    running_max, running_sum = torch.tensor(-math.inf, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)
    unnormalized = torch.zeros(len(scores), dtype=torch.float64)  # values = one-hot rows, so the output is the weights
    for start in range(0, len(scores), WITNESS_TILE):
        tile = scores[start:start + WITNESS_TILE]
        new_max = torch.maximum(running_max, tile.max())
        weights = torch.exp(tile - new_max)
        unnormalized = unnormalized * torch.exp(running_max - new_max)
        unnormalized[start:start + WITNESS_TILE] += weights
        running_sum = running_sum + weights.sum()  # the bug: the old sum stays on the old maximum's scale
        running_max = new_max
    return unnormalized / running_sum


@checker
def check_bug_witness(answer: object) -> None:
    """Six scores for which the update that forgets to rescale the running sum gives weights off by more than 0.01."""
    if missing(answer):
        return
    scores = as_real_tensor(torch.as_tensor(answer, dtype=torch.float64) if isinstance(answer, (list, tuple)) else answer)
    if scores is None or scores.numel() != WITNESS_KEYS:
        return feedback(False, "Give the six scores of one query: a list, tensor or array of six numbers.",
                        "请给出一个查询的六个分数：由六个数组成的列表、张量或数组。")
    scores = scores.reshape(-1)
    if not torch.isfinite(scores).all():
        return feedback(False, "Use finite scores: the bug is about a maximum that grows, not about infinities.",
                        "请用有限的分数：这个错误与最大值变大有关，与无穷大无关。")
    gap = (_weights_without_sum_rescale(scores) - torch.softmax(scores, dim=0)).abs().max().item()
    first_tile_max, later_max = scores[:WITNESS_TILE].max().item(), scores[WITNESS_TILE:].max().item()
    if gap > WITNESS_GAP:
        return feedback(True, f"The running maximum grows after the first tile, so the old sum had to shrink by e^(m − m'), "
                        f"and the bug leaves it as it was: the weights are off by up to {gap:.2f}. Scores sorted from "
                        "the largest down never make the maximum grow, so such tests cannot see this bug.",
                        f"第一个分数块之后累积最大值变大了，旧的累积和本应乘以 e^(m − m') 缩小，而这个错误让它保持原样："
                        f"权重最多差了 {gap:.2f}。从大到小排好的分数永远不会让最大值变大，所以这样的测试发现不了这个错误。")
    if later_max <= first_tile_max:
        return feedback(False, "The first tile already holds the largest score, so the running maximum never grows and the "
                        "missing factor is never needed: put a larger score in a later tile.",
                        "第一个分数块里已经有最大的分数，累积最大值从不变大，漏掉的因子也就用不上：把更大的分数放到后面的分数块里。")
    feedback(False, f"The maximum grows, but only a little, so e^(m − m') is close to 1 and the weights differ by only {gap:.3f}: "
             "make a later score larger by a few units.",
             f"最大值变大了，但只大了一点，e^(m − m') 接近 1，权重只差 {gap:.3f}：让后面的某个分数再大几个单位。")
