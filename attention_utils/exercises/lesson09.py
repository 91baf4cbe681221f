"""Checkers for lesson 9: one online-softmax update by hand, the tiles a causal kernel visits, one tile's size."""

from __future__ import annotations

import math

import torch

from . import as_whole_number, feedback, missing

# Exercise 1: one query row has met a first block of keys; the learner sees only its running statistics.
_FIRST_SCORES = (0.8, 2.1, -0.3)  # the first block; private: the learner works from its statistics alone
_FIRST_VALUES = ((1.0, 0.0), (0.5, 1.0), (0.0, 2.0))
NEW_SCORES = (2.9, 1.2)  # the next block of keys
NEW_VALUES = ((2.0, -1.0), (1.0, 1.0))

# Exercise 2 and 3: sizes of a causal kernel.
TILE_LENGTH, TILE_BLOCK = 1000, 64
SIZES = dict(batch=8, heads=12, length=4096, head_dim=64, block_q=128, block_k=256)


def first_block_state() -> tuple[float, float, torch.Tensor]:
    """Running max, running sum and unnormalized output after the first block (what the notebook shows)."""
    scores, values = torch.tensor(_FIRST_SCORES, dtype=torch.float64), torch.tensor(_FIRST_VALUES, dtype=torch.float64)
    running_max = scores.max()
    weights = torch.exp(scores - running_max)
    return running_max.item(), weights.sum().item(), weights @ values


def _expected_state() -> tuple[float, float, torch.Tensor]:
    """The statistics after both blocks, computed from all five scores at once (no rescaling involved)."""
    scores = torch.tensor(_FIRST_SCORES + NEW_SCORES, dtype=torch.float64)
    values = torch.tensor(_FIRST_VALUES + NEW_VALUES, dtype=torch.float64)
    weights = torch.exp(scores - scores.max())
    return scores.max().item(), weights.sum().item(), weights @ values


def _as_number(value: object) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def check_update(new_max: object, new_sum: object, new_output: object) -> None:
    """The running max, running sum and unnormalized output of exercise 1's row after the new block."""
    if missing(new_max) or missing(new_sum) or missing(new_output):
        return
    expected_max, expected_sum, expected_output = _expected_state()
    found_max, found_sum = _as_number(new_max), _as_number(new_sum)
    if found_max is None or found_sum is None:
        return feedback(False, "new_max and new_sum should each be one number.", "new_max 和 new_sum 都应该是一个数。")
    if not isinstance(new_output, torch.Tensor) or tuple(new_output.shape) != (2,):
        return feedback(False, "new_output should be a tensor of shape (2,), like the values.",
                        "new_output 应该是形状为 (2,) 的张量，与值向量的形状相同。")
    output = new_output.detach().double()
    if not math.isclose(found_max, expected_max, abs_tol=1e-4):
        return feedback(False, "The new maximum is the larger of the old maximum and the new block's largest score.",
                        "新的最大值是旧最大值与新分块中最大分数两者中较大的那个。")
    old_max, old_sum, old_output = first_block_state()
    new_terms = torch.exp(torch.tensor(NEW_SCORES, dtype=torch.float64) - expected_max)
    if math.isclose(found_sum, old_sum + new_terms.sum().item(), abs_tol=1e-4):
        return feedback(False, "The old sum was computed with the old maximum 2.1: multiply it by exp(2.1 - 2.9) before "
                        "adding the new terms.",
                        "旧的和是按旧最大值 2.1 算出来的：先乘以 exp(2.1 - 2.9)，再加上新的几项。")
    if not math.isclose(found_sum, expected_sum, abs_tol=1e-4):
        return feedback(False, "new_sum = old_sum * exp(old_max - new_max) + the sum of exp(score - new_max) over the new block.",
                        "new_sum = old_sum * exp(old_max - new_max) + 新分块中各项 exp(score - new_max) 之和。")
    if torch.allclose(output, old_output + new_terms @ torch.tensor(NEW_VALUES, dtype=torch.float64), atol=1e-4):
        return feedback(False, "The sum is right; the old output needs the same factor exp(old_max - new_max) as the old sum.",
                        "和已经对了；旧的输出也要乘以与旧的和相同的因子 exp(old_max - new_max)。")
    if torch.allclose(output, torch.tensor(expected_output.tolist(), dtype=torch.float64) / expected_sum, atol=1e-4):
        return feedback(False, "This is already divided by the sum; the running output stays unnormalized until the last block.",
                        "这已经除以了和；在最后一个分块之前，累积的输出应保持未归一化。")
    if not torch.allclose(output, expected_output, atol=1e-4):
        return feedback(False, "new_output = old_output * exp(old_max - new_max) + exp(new scores - new_max) @ new values.",
                        "new_output = old_output * exp(old_max - new_max) + exp(新分数 - new_max) @ 新的值向量。")
    feedback(True, f"Maximum {expected_max:.1f}, sum {expected_sum:.4f}: the same as a softmax over all five scores at once.",
             f"最大值 {expected_max:.1f}，和 {expected_sum:.4f}：与一次对全部 5 个分数做 softmax 的结果相同。")


def _visited_tiles(length: int, block_q: int, block_k: int) -> int:
    """Count, tile by tile, the tiles with at least one key at or before one of their queries."""
    count = 0
    for q_start in range(0, length, block_q):
        last_query = min(q_start + block_q, length) - 1
        count += sum(1 for k_start in range(0, length, block_k) if k_start <= last_query)
    return count


def check_visited_tiles(answer: object) -> None:
    """How many (64, 64) tiles a causal kernel computes for T = 1000."""
    if missing(answer):
        return
    value = as_whole_number(answer)
    if value is None:
        return feedback(False, "Give a whole number of tiles (an int).", "请给出分块的个数，一个整数（int）。")
    blocks = math.ceil(TILE_LENGTH / TILE_BLOCK)
    expected = _visited_tiles(TILE_LENGTH, TILE_BLOCK, TILE_BLOCK)
    if value == expected:
        return feedback(True, f"{expected} of the {blocks * blocks} tiles: {expected / blocks**2:.0%} of the work of the full matrix.",
                        f"{blocks * blocks} 个分块中只算 {expected} 个：是完整矩阵工作量的 {expected / blocks**2:.0%}。")
    hints = {
        blocks * blocks: ("That is every tile; the tiles entirely above the diagonal are skipped.",
                          "这是全部分块；完全位于对角线上方的分块会被跳过。"),
        blocks * (blocks - 1) // 2: (
            "Check two things: the diagonal tiles are computed too (with a mask inside), and 1000 is not a multiple "
            "of 64, so the last, shorter block counts as a block.",
            "请检查两点：对角线上的分块也要计算（在块内加掩码）；1000 不是 64 的整数倍，最后那个较短的分块也算一个分块。"),
    }
    en, zh = hints.get(value, ("Block row i (counting from 0) visits key blocks 0 to i.",
                               "索引为 i 的一行分块（从 0 开始数）要计算索引为 0 到 i 的键分块。"))
    feedback(False, en, zh)


def check_tile_elements(answer: object) -> None:
    """Elements of one score tile for every sentence and head: batch x heads x block_q x block_k."""
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
                        f"whole (T, T) matrix: {full // expected} times fewer, whatever T is.",
                        f"{expected:,} 个数（float32 下为 {expected * 4 / 2**20:g} MiB），而整个 (T, T) 矩阵有 {full:,} 个："
                        f"只有它的 {expected / full:.4%}，而且与 T 无关。")
    hints = {
        full: ("That is the whole (T, T) matrix: a tile is block_q x block_k.", "这是整个 (T, T) 矩阵：一个分块是 block_q × block_k。"),
        expected * 4: ("Elements, not bytes.", "要的是元素个数，不是字节数。"),
        s["block_q"] * s["block_k"]: ("That is one tile of one head of one sentence; there is one for every sentence and head.",
                                      "这是一个句子、一个头的一个分块；每个句子的每个头都有一个。"),
        s["batch"] * s["heads"] * s["block_q"] * s["head_dim"]: ("That is the running output's size; the score tile is "
                                                                 "block_q x block_k per sentence and head.",
                                                                 "这是累积输出的大小；分数分块是每个句子、每个头 block_q × block_k。"),
    }
    en, zh = hints.get(value, ("Multiply batch x heads x block_q x block_k; T does not appear.",
                               "请计算 批大小 × 头数 × block_q × block_k；T 不出现在式子里。"))
    feedback(False, en, zh)
