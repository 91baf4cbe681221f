"""Checkers for lesson 11: a pair turned by hand, pair speeds, rows for halves, a rotation by complex numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..rotary import apply_rotary
from . import as_real_number, as_real_tensor, as_whole_number, checker, feedback, missing

# Exercise 1: the pair (0.6, 0.8) is pair 1 of a head with 4 features, base 100, at position 3.
PAIR = (0.6, 0.8)
PAIR_INDEX, PAIR_HEAD_DIM, PAIR_BASE, PAIR_POSITION = 1, 4, 100.0, 3
# Exercise 2: a head of 64 features with the paper's base.
SPEED_HEAD_DIM, SPEED_BASE = 64, 10000.0
# Exercise 3: one head of 8 features stored for interleaved pairs.
ROWS_HEAD_DIM = 8
# Exercise 4: rotate_complex(x, positions, base) is tried on these cases: (tokens, head_dim, base, positions).
COMPLEX_CASES = ((5, 8, 10000.0, (0, 1, 2, 3, 4)), (3, 6, 100.0, (0, 7, 30)))


def _numbers(answer: object) -> torch.Tensor | None:
    """A tensor, numpy array, list or tuple of real numbers as a 1-D float64 tensor, or None."""
    if isinstance(answer, (list, tuple)):
        values = [as_real_number(value) for value in answer]
        return None if None in values else torch.tensor(values, dtype=torch.float64)
    tensor = as_real_tensor(answer)
    return None if tensor is None or tensor.dim() != 1 else tensor


def _turn(pair: Sequence[float], angle: float) -> torch.Tensor:
    """The pair (x, y) turned counter-clockwise by `angle` radians, written with the 2-D rotation formula."""
    x, y = pair
    return torch.tensor([x * math.cos(angle) - y * math.sin(angle), x * math.sin(angle) + y * math.cos(angle)],
                        dtype=torch.float64)


@checker
def check_turned_pair(answer: object) -> None:
    """Exercise 1: PAIR turned as pair PAIR_INDEX of a PAIR_HEAD_DIM-feature head (base PAIR_BASE) at PAIR_POSITION."""
    if missing(answer):
        return
    turned = _numbers(answer)
    if turned is None or turned.shape != (2,):
        return feedback(False, "Give the turned pair as two numbers, for example torch.tensor([x, y]) or a list [x, y].",
                        "请用两个数给出旋转后的特征对，例如 torch.tensor([x, y]) 或列表 [x, y]。")
    speed = PAIR_BASE ** (-2 * PAIR_INDEX / PAIR_HEAD_DIM)  # radians per position for this pair
    expected = _turn(PAIR, PAIR_POSITION * speed)
    if torch.allclose(turned, expected, atol=1e-3):
        return feedback(True, f"The pair turns by {PAIR_POSITION} × {speed:g} = {PAIR_POSITION * speed:g} rad: "
                        f"({expected[0]:.4f}, {expected[1]:.4f}). Its length stays 1.",
                        f"这个特征对转过 {PAIR_POSITION} × {speed:g} = {PAIR_POSITION * speed:g} 弧度，"
                        f"得到 ({expected[0]:.4f}, {expected[1]:.4f})。它的长度仍然是 1。")
    if abs(turned.norm().item() - 1.0) > 1e-3:
        return feedback(False, f"A rotation keeps the length: (0.6, 0.8) has length 1, yours has {turned.norm():.4f}. "
                        "Check the formula (x cos φ − y sin φ, x sin φ + y cos φ).",
                        f"旋转不改变长度：(0.6, 0.8) 的长度是 1，你的结果长度是 {turned.norm():.4f}。"
                        "请检查公式 (x cos φ − y sin φ, x sin φ + y cos φ)。")
    mistakes = [
        (-PAIR_POSITION * speed, "You turned the other way: a positive angle turns counter-clockwise, so the first "
         "component gets − y sin φ.", "你转反了方向：正的角度是逆时针旋转，所以第一个分量是减去 y sin φ。"),
        (PAIR_POSITION * 1.0, "That is the angle of pair 0 (1 rad per position). Pair 1 of 4 features turns at "
         "100^(−2·1/4) rad per position.", "这是特征对 0 的角度（每个位置 1 弧度）。4 个特征中的特征对 1，每个位置转 100^(−2·1/4) 弧度。"),
        (speed, "That is one position's angle; the pair sits at position 3, so it turns three times as far.",
         "这只是一个位置的角度；这个特征对在位置 3，要转 3 倍那么多。"),
        (math.radians(PAIR_POSITION * speed), "Angles here are in radians: torch.cos and math.cos take radians.",
         "这里的角度以弧度为单位：torch.cos 和 math.cos 都接受弧度。"),
    ]
    for angle, hint_en, hint_zh in mistakes:
        if torch.allclose(turned, _turn(PAIR, angle), atol=1e-3):
            return feedback(False, hint_en, hint_zh)
    feedback(False, "The length is right but the angle is not: the angle is position × 100^(−2i/d) with i = 1, d = 4.",
             "长度对了，角度不对：角度等于位置 × 100^(−2i/d)，其中 i = 1，d = 4。")


@checker
def check_speeds(fastest: object, slowest: object, full_turn: object) -> None:
    """Exercise 2: the fastest and slowest pair of a 64-feature head, and how many positions the slowest needs per turn."""
    if missing(fastest) or missing(slowest) or missing(full_turn):
        return
    pairs = SPEED_HEAD_DIM // 2
    fast, slow, turn = as_whole_number(fastest), as_whole_number(slowest), as_real_number(full_turn)
    if fast is None or slow is None or turn is None:
        return feedback(False, "Give the two pairs as whole numbers (counted from 0) and the full turn as a number of positions.",
                        "请用整数给出两个特征对的索引（从 0 开始数），再用一个数给出转一整圈需要的位置数。")
    if fast != 0:
        return feedback(False, "The fastest pair is the one whose speed base^(−2i/d) is largest: the smallest i.",
                        "转得最快的特征对，其速度 base^(−2i/d) 最大，也就是 i 最小的那一对。")
    if slow != pairs - 1:
        hint_en = " Count pairs, not features: 64 features make 32 pairs." if slow == SPEED_HEAD_DIM - 1 else (
            " Counting from 0, the last of 32 pairs is not 32." if slow == pairs else "")
        hint_zh = "要数特征对，而不是特征：64 个特征组成 32 个特征对。" if slow == SPEED_HEAD_DIM - 1 else (
            "从 0 开始数，32 个特征对中的最后一对不是 32。" if slow == pairs else "")
        return feedback(False, f"The slowest pair is the one with the largest i.{hint_en}",
                        f"转得最慢的特征对是 i 最大的那一对。{hint_zh}")
    speed = SPEED_BASE ** (-2 * slow / SPEED_HEAD_DIM)  # radians per position
    expected = 2 * math.pi / speed
    if math.isclose(turn, expected, rel_tol=0.01):
        return feedback(True, f"Pair {slow} turns {speed:.3g} rad per position, so a full turn (2π) takes about "
                        f"{expected:,.0f} positions. Training on 4,096 tokens turns it by less than a tenth of a turn, "
                        "so a longer text shows it angles it has never met.",
                        f"特征对 {slow} 每个位置转 {speed:.3g} 弧度，转一整圈（2π）大约需要 {expected:,.0f} 个位置。"
                        "在 4,096 个词元上训练，也只让它转了不到十分之一圈，所以更长的文本会让它遇到从没见过的角度。")
    mistakes = [
        (1 / speed, "That is how many positions one radian takes; a full turn is 2π radians.",
         "这是转 1 弧度需要的位置数；转一整圈是 2π 弧度。"),
        (360 / speed, "A full turn is 2π radians, not 360: the speed is in radians per position.",
         "一整圈是 2π 弧度，而不是 360：速度的单位是每个位置多少弧度。"),
        (2 * math.pi * SPEED_BASE, "The slowest speed is 10000^(−2·31/64), a little faster than 1/10000.",
         "最慢的速度是 10000^(−2·31/64)，比 1/10000 稍快一点。"),
    ]
    for value, hint_en, hint_zh in mistakes:
        if math.isclose(turn, value, rel_tol=0.01):
            return feedback(False, hint_en, hint_zh)
    feedback(False, f"Pair {slow} turns 10000^(−2·{slow}/64) rad per position; how many positions make 2π?",
             f"特征对 {slow} 每个位置转 10000^(−2·{slow}/64) 弧度；多少个位置才能转满 2π？")


@checker
def check_halves_rows(answer: object) -> None:
    """Exercise 3: the order of an 8-feature head's rows, stored for interleaved pairs, that the halves layout needs."""
    if missing(answer):
        return
    values = _numbers(answer)
    rows = None if values is None else [as_whole_number(value) for value in values.tolist()]
    if rows is None or None in rows or sorted(rows) != list(range(ROWS_HEAD_DIM)):
        return feedback(False, f"Give {ROWS_HEAD_DIM} row numbers, each of 0 to {ROWS_HEAD_DIM - 1} once, for example "
                        "a list [0, 1, ...] or a tensor.",
                        f"请给出 {ROWS_HEAD_DIM} 个行号，0 到 {ROWS_HEAD_DIM - 1} 每个出现一次，例如列表 [0, 1, ...] 或张量。")
    half = ROWS_HEAD_DIM // 2
    # halves pair j is (j, j + half); it must hold interleaved pair j, which is rows (2j, 2j + 1)
    expected = [0] * ROWS_HEAD_DIM
    for j in range(half):
        expected[j], expected[j + half] = 2 * j, 2 * j + 1
    if rows == expected:
        return feedback(True, f"new_weight = old_weight[{expected}]: the first rows of each pair go to the first half, "
                        "their partners to the second. halves_order and to_halves_layout do exactly this.",
                        f"new_weight = old_weight[{expected}]：每对的第一行放进前一半，它的搭档放进后一半。"
                        "halves_order 和 to_halves_layout 做的正是这件事。")
    inverse = [expected.index(row) for row in range(ROWS_HEAD_DIM)]
    if rows == inverse:
        return feedback(False, "That order goes the other way (halves back to interleaved). Row j of the new matrix is "
                        "row order[j] of the old one: which old row must sit in new row 1?",
                        "这个顺序方向反了（从前后两半配对换回相邻配对）。新矩阵索引为 j 的行取自旧矩阵索引为 order[j] 的行："
                        "新矩阵索引为 1 的行应该放旧矩阵的哪一行？")
    feedback(False, f"In the halves layout feature j pairs with feature j + {half}. Pair j must be the old pair "
             "(2j, 2j + 1): which old rows go to new rows j and j + 4?",
             f"前后两半配对中，特征 j 与特征 j + {half} 配对。索引为 j 的特征对必须是原来的那一对 (2j, 2j + 1)："
             "旧矩阵的哪两行应该放到新矩阵索引为 j 和 j + 4 的行？")



def _other_rotations(x: torch.Tensor, positions: torch.Tensor, base: float) -> list[tuple[torch.Tensor, str, str]]:
    """What common slips give on x, each with its hint: the other direction, halves pairs, speeds without the 2, no turn."""
    d = x.shape[-1]
    backwards = apply_rotary(x * torch.tensor([1.0, -1.0] * (d // 2), dtype=x.dtype), positions, base)
    backwards = backwards * torch.tensor([1.0, -1.0] * (d // 2), dtype=x.dtype)  # conj, turn, conj: the other way round
    no_two = apply_rotary(x, positions, base ** 0.5)  # base ** (-i / d) is (base ** 0.5) ** (-2i / d)
    slips = [
        (backwards, "Your pairs turn the other way: multiply by e^{j m θ} (torch.polar(ones, angles)), not by its conjugate.",
         "你的特征对转反了方向：应该乘以 e^{j m θ}（torch.polar(ones, angles)），而不是它的共轭。"),
        (apply_rotary(x, positions, base, layout="halves"),
         "You paired feature i with i + d/2 (the halves layout). Here pairs are neighbours: reshape the last dimension "
         "to (d/2, 2) before torch.view_as_complex.",
         "你把特征 i 和特征 i + d/2 配成了一对（前后两半配对）。这里的特征对是相邻的两个特征：调用 torch.view_as_complex "
         "之前，先把最后一维变形为 (d/2, 2)。"),
        (no_two, "The speeds are base^(−i/d) with i = 0, 1, 2, ...: the exponent is −2i/d, one per pair "
         "(torch.arange(0, d, 2) / d).",
         "你用的转速是 base^(−i/d)（i = 0, 1, 2, ……）：指数应为 −2i/d，每个特征对一个（torch.arange(0, d, 2) / d）。"),
        (x, "Nothing turned: the angle of pair i at position m is m θ_i; multiply each pair by e^{j m θ_i}.",
         "什么都没有转：位置 m 上特征对 i 的角度是 m θ_i；请把每个特征对乘以 e^{j m θ_i}。"),
    ]
    return slips


@checker
def check_complex_rotation(rotate_complex: object) -> None:
    """Exercise 4: rotate_complex(x, positions, base) turns interleaved pairs as apply_rotary does, through complex numbers."""
    if missing(rotate_complex):
        return
    if not callable(rotate_complex):
        return feedback(False, "Pass your function itself: rotate_complex, without parentheses.",
                        "请传入函数本身：rotate_complex，不要加括号。")
    generator = torch.Generator().manual_seed(11)
    for tokens, head_dim, base, where in COMPLEX_CASES:
        x = torch.randn(tokens, head_dim, generator=generator, dtype=torch.float64)
        positions = torch.tensor(where)
        found = rotate_complex(x.clone(), positions.clone(), base)
        if isinstance(found, torch.Tensor) and found.is_complex():
            return feedback(False, "Your function returns complex numbers: turn them back into real pairs with "
                            "torch.view_as_real(...) and flatten the last two dimensions (.flatten(-2)).",
                            "你的函数返回的是复数：请用 torch.view_as_real(...) 把它们变回实数对，再把最后两维展平（.flatten(-2)）。")
        if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(x.shape):
            shape = tuple(found.shape) if isinstance(found, torch.Tensor) else type(found).__name__
            return feedback(False, f"rotate_complex should return a real tensor shaped like x, {tuple(x.shape)}; got {shape}.",
                            f"rotate_complex 应返回与 x 形状相同的实数张量 {tuple(x.shape)}；实际是 {shape}。")
        found = found.detach().to(torch.float64)
        if torch.allclose(found, apply_rotary(x, positions, base), atol=1e-5):
            continue
        for wrong, hint_en, hint_zh in _other_rotations(x, positions, base):
            if torch.allclose(found, wrong, atol=1e-5):
                return feedback(False, hint_en, hint_zh)
        if base != COMPLEX_CASES[0][2] and torch.allclose(found, apply_rotary(x, positions, COMPLEX_CASES[0][2]), atol=1e-5):
            return feedback(False, f"With base={base:g} your function still turns as with 10000: use the base it is given.",
                            f"base={base:g} 时，你的函数仍按 10000 转动：请使用传入的 base。")
        return feedback(False, f"On {tokens} tokens of {head_dim} features (base {base:g}, positions {list(where)}) the "
                        "result differs from apply_rotary: pair i is x[2i] + j·x[2i+1], turned by e^{j·m·θ_i}, "
                        "θ_i = base^(−2i/d).",
                        f"在 {tokens} 个 {head_dim} 维词元上（base {base:g}，位置 {list(where)}），结果与 apply_rotary 不同："
                        "特征对 i 是复数 x[2i] + j·x[2i+1]，要乘以 e^{j·m·θ_i}，其中 θ_i = base^(−2i/d)。")
    feedback(True, "Multiplying each pair by e^{j m θ_i} is the rotation of section 1: the same numbers as apply_rotary "
             "for heads of 8 and 6 features, bases 10000 and 100, positions 0 to 4 and 0, 7, 30. Meta's Llama code "
             "turns queries and keys this way.",
             "把每个特征对乘以 e^{j m θ_i}，就是第 1 节的旋转：在 8 维和 6 维的头、旋转底数 10000 和 100、位置 0 到 4 以及 "
             "0、7、30 上，都与 apply_rotary 给出相同的数值。Meta 的 Llama 代码就是这样转动查询和键的。")
