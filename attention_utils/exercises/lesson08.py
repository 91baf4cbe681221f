"""Checkers for lesson 8: a fused module built by hand, the longest sequence whose matrices fit, a merged SDPA mask."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

import numpy as np
import torch

from ..fused import FusedMultiHeadAttention
from ..modules import MultiHeadAttention
from . import as_real_number, as_real_tensor, as_whole_number, checker, feedback, missing
from .padding import padding_slip

# Exercise 1 calls the learner's function on modules of its own: one with projection biases, one without.
SOURCES = (
    (8, dict(d_in=4, d_out=6, context_length=8, dropout=0.0, num_heads=3, qkv_bias=True)),
    (9, dict(d_in=5, d_out=4, context_length=8, dropout=0.0, num_heads=2, qkv_bias=False)),
)


def _source_module(seed: int, sizes: dict) -> MultiHeadAttention:
    """A module to convert, built without touching the learner's random stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MultiHeadAttention(**sizes)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """Both present, same shape, same values when read as float64 (so weights moved with .double() count)."""
    a, b = as_real_tensor(a), as_real_tensor(b)
    return a is not None and b is not None and a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def _call_watching_for_shortcut(fuse: Callable, source: MultiHeadAttention) -> tuple[object, bool]:
    """fuse(source), and whether from_multihead ran meanwhile (seen by a profiler, so an alias is caught too)."""
    shortcut = FusedMultiHeadAttention.from_multihead.__func__.__code__
    seen = []

    def watch(frame, event, _arg) -> None:
        if event == "call" and frame.f_code is shortcut:
            seen.append(frame)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # the learner's stream stays as it was
            answer = fuse(source)
    finally:
        sys.setprofile(previous)
    return answer, bool(seen)


def _problem(answer: object, source: MultiHeadAttention) -> tuple[str, str] | None:
    """What is wrong with `answer` as a fused copy of `source` (English, Chinese), or None."""
    sizes = f"({source.d_in}, {source.d_out}, {source.context_length}, 0.0, num_heads={source.num_heads}, qkv_bias={source.W_query.bias is not None})"
    if isinstance(answer, MultiHeadAttention):
        return ("This is still the module with three projections; build an au.FusedMultiHeadAttention and copy the "
                "weights into its single qkv layer.",
                "这还是带三个投影的模块；请新建一个 au.FusedMultiHeadAttention，把权重复制进它唯一的 qkv 层。")
    if not isinstance(answer, FusedMultiHeadAttention):
        return (f"fuse_by_hand should return an au.FusedMultiHeadAttention, got {type(answer).__name__}.",
                f"fuse_by_hand 应该返回 au.FusedMultiHeadAttention，而你返回的是 {type(answer).__name__}。")
    projections = {"query": source.W_query, "key": source.W_key, "value": source.W_value}
    stacked = torch.cat([p.weight for p in projections.values()])  # (3 * d_out, d_in)
    has_bias = source.W_query.bias is not None
    if answer.qkv.weight.shape != stacked.shape or (answer.qkv.bias is not None) != has_bias or answer.num_heads != source.num_heads:
        return (f"Build it with the sizes of mha: au.FusedMultiHeadAttention{sizes}, read from mha.d_in, mha.d_out, "
                "mha.context_length, mha.num_heads and whether mha.W_query has a bias.",
                f"请按 mha 的尺寸创建：au.FusedMultiHeadAttention{sizes}，这些值从 mha.d_in、mha.d_out、"
                "mha.context_length、mha.num_heads 以及 mha.W_query 是否有偏置中读取。")
    if not _same(answer.qkv.weight, stacked):
        blocks = list(answer.qkv.weight.detach().split(source.d_out))
        if all(any(_same(block, p.weight) for block in blocks) for p in projections.values()):
            return ("All three weight matrices are there, but in the wrong order: project_heads reads the first d_out "
                    "rows as queries, then keys, then values.",
                    "三个权重矩阵都在，但顺序不对：project_heads 把前 d_out 行当作查询，接着是键，最后是值。")
        return ("qkv.weight should hold W_query.weight, W_key.weight and W_value.weight stacked row-wise "
                "(torch.cat along dim 0).",
                "qkv.weight 应该是 W_query.weight、W_key.weight、W_value.weight 按行堆叠的结果（沿第 0 维 torch.cat）。")
    if has_bias and not _same(answer.qkv.bias, torch.cat([p.bias for p in projections.values()])):
        return ("The weights are right; now stack the three biases the same way into qkv.bias.",
                "权重对了；再用同样的方式把三个偏置堆叠到 qkv.bias 中。")
    if not (_same(answer.out_proj.weight, source.out_proj.weight) and _same(answer.out_proj.bias, source.out_proj.bias)):
        return ("The QKV projection is right; copy out_proj's weight and bias as well.",
                "QKV 投影对了；还要复制 out_proj 的权重和偏置。")
    if not _same_outputs(answer, source):
        return ("The weights match, but the outputs differ; was the module changed in another way?",
                "权重一致，但输出不同；模块是否在别处被改动过？")
    return None


def _same_outputs(answer: FusedMultiHeadAttention, source: MultiHeadAttention) -> bool:
    """Whether both modules, in eval mode, give the same outputs; the learner's module gets its own mode back."""
    was_training = answer.training
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        x = torch.rand(2, 5, source.d_in)
        try:
            mine = answer.eval()(x.to(answer.qkv.weight.dtype))  # the learner may have moved the weights to float64
        finally:
            answer.train(was_training)
        return torch.allclose(as_real_tensor(mine), source.eval()(x).double(), atol=1e-5)


@checker
def check_fused_by_hand(fuse: object) -> None:
    """fuse(mha) must return an au.FusedMultiHeadAttention with mha's weights, built without from_multihead."""
    if missing(fuse):
        return
    if isinstance(fuse, torch.nn.Module) or not callable(fuse):
        return feedback(False, "Pass the function itself: check_fused_by_hand(fuse_by_hand), without calling it.",
                        "请传入函数本身：check_fused_by_hand(fuse_by_hand)，不要先调用它。")
    for seed, sizes in SOURCES:
        source = _source_module(seed, sizes)
        answer, shortcut = _call_watching_for_shortcut(fuse, source)  # an error in it: @checker names it
        if shortcut:
            return feedback(False, "from_multihead does exactly what this exercise asks you to write; copy the weights yourself.",
                            "from_multihead 做的正是本练习要你写的事；请自己复制权重。")
        if missing(answer):
            return
        problem = _problem(answer, source)
        if problem is not None:
            return feedback(False, *problem)
    feedback(True, "Both modules, with and without projection biases, became fused modules with the same outputs: "
             "one (3 * d_out, d_in) projection does the work of three.",
             "两个模块（投影带偏置的和不带偏置的）都变成了输出相同的融合模块：一个 (3 * d_out, d_in) 的投影完成了三个投影的工作。")


# Exercise 2: GPT-2 small's layer (12 heads), batch 8, float32: the scores and the softmax output side by side.
BUDGET = dict(batch=8, heads=12, bytes_per_number=4, matrices=2, memory=16 * 2**30)


def _longest(batch: int, heads: int, bytes_per_number: int, matrices: int, memory: int) -> int:
    """The largest T with matrices × batch × heads × T × T × bytes_per_number <= memory."""
    return math.isqrt(memory // (matrices * batch * heads * bytes_per_number))


@checker
def check_longest_length(answer: object) -> None:
    """The largest T at which a batch of 8's scores and softmax output (two float32 (b, h, T, T) matrices) fit in 16 GiB."""
    if missing(answer):
        return
    expected = _longest(**BUDGET)
    value = as_whole_number(answer)
    if value is None:
        number = as_real_number(answer)
        if number is not None and expected < number < expected + 1:
            return feedback(False, f"A length is a whole number of tokens: round {number:g} down, since one more token no longer fits.",
                            f"长度是词元的个数，必须是整数：把 {number:g} 向下取整，因为再多一个词元就放不下了。")
        return feedback(False, "Give a whole number of tokens.", "请给出词元个数，一个整数。")
    if value == expected:
        used = BUDGET["matrices"] * BUDGET["batch"] * BUDGET["heads"] * expected**2 * BUDGET["bytes_per_number"]
        return feedback(True, f"T = {expected:,}: the two matrices take {used / 2**30:.3f} GiB, and at T = {expected + 1:,} they "
                        "pass 16 GiB. The fused kernel's tensors at that length take a few hundred MiB.",
                        f"T = {expected:,}：两个矩阵共占 {used / 2**30:.3f} GiB，到 T = {expected + 1:,} 就超过 16 GiB 了。"
                        "同样的长度下，融合内核的张量只占几百 MiB。")
    hints = {
        _longest(**{**BUDGET, "matrices": 1}): (
            "That length fits one (b, h, T, T) matrix of 4-byte numbers; the scores and the softmax output are two of them.",
            "这个长度只放得下一个每个数 4 字节的 (b, h, T, T) 矩阵；分数和 softmax 的输出是两个这样的矩阵。"),
        _longest(**{**BUDGET, "heads": 1}): ("Every head has its own T × T matrices: count the 12 heads.", "每个头都有自己的 T × T 矩阵：要算上 12 个头。"),
        _longest(**{**BUDGET, "batch": 1}): ("Every sentence of the batch has its own matrices: count the batch of 8.",
                                             "批次中每个句子都有自己的矩阵：要算上批大小 8。"),
        math.isqrt(16 * 10**9 // (BUDGET["matrices"] * BUDGET["batch"] * BUDGET["heads"] * BUDGET["bytes_per_number"])): (
            "16 GiB is 16 × 2**30 bytes, not 16 × 10**9.", "16 GiB 是 16 × 2**30 字节，不是 16 × 10**9 字节。"),
        expected + 1: ("At that length the two matrices pass 16 GiB by a few MiB; the largest T is one less.",
                       "在这个长度下，两个矩阵比 16 GiB 多出几 MiB；最大的 T 还要少一个。"),
        4096: ("4096 fits, but it is not the largest length: the question asks for any T, not a power of two.",
               "4096 放得下，但不是最大的长度：题目问的是任意 T，不只是 2 的幂。"),
    }
    en, zh = hints.get(value, ("Solve 2 × batch × heads × T² × 4 bytes <= 16 × 2**30 for T, and round down.",
                               "解不等式 2 × 批大小 × 头数 × T² × 4 字节 <= 16 × 2**30，再向下取整。"))
    feedback(False, en, zh)


# Exercise 3: two sentences of 5 tokens; the first starts with two padding tokens (True = padding).
PADDING = ((True, True, False, False, False), (False, False, False, False, False))


def _expected_merged() -> torch.Tensor:
    """SDPA's boolean attn_mask (True = may attend), entry by entry: key j is not after query i and is not padding."""
    batch, length = len(PADDING), len(PADDING[0])
    expected = torch.zeros(batch, 1, length, length, dtype=torch.bool)
    for b in range(batch):
        for i in range(length):
            for j in range(length):
                expected[b, 0, i, j] = j <= i and not PADDING[b][j]
    return expected


@checker
def check_merged_mask(answer: object) -> None:
    """The (2, 1, 5, 5) boolean attn_mask that hides both the future and the padding keys, in SDPA's convention."""
    if missing(answer):
        return
    expected = _expected_merged()
    from_numpy = isinstance(answer, np.ndarray) and answer.dtype == np.bool_
    if from_numpy:
        answer = torch.from_numpy(answer)
    if not isinstance(answer, torch.Tensor):
        return feedback(False, f"merged should be a torch.Tensor, got {type(answer).__name__}.",
                        f"merged 应该是 torch.Tensor，而你给出的是 {type(answer).__name__}。")
    if answer.dtype != torch.bool:
        return feedback(False, "Give a boolean mask (True = may attend); a float mask would be added to the scores.",
                        "请给出布尔掩码（True = 可以关注）；浮点掩码会被加到分数上。")
    if tuple(answer.shape) == (2, 5, 5) and torch.equal(answer, expected[:, 0]):
        return feedback(False, "The entries are right; add the head dimension, shape (2, 1, 5, 5), so that the mask "
                        "broadcasts over the heads of (b, h, T, T) scores.",
                        "数值都对了；还要加上头这一维，形状为 (2, 1, 5, 5)，这样掩码才能在 (b, h, T, T) 的分数上按头广播。")
    if tuple(answer.shape) != tuple(expected.shape):
        return feedback(False, f"merged should have shape (2, 1, 5, 5): batch, one head for all heads, queries, keys; "
                        f"got {tuple(answer.shape)}.",
                        f"merged 的形状应为 (2, 1, 5, 5)：批次、所有头共用的一维、查询、键；你的是 {tuple(answer.shape)}。")
    causal_only = torch.ones(5, 5, dtype=torch.bool).tril().expand(2, 1, 5, 5)
    padding = torch.tensor(PADDING)
    hints = [
        (~expected, "This is the package's convention (True = hide); SDPA reads True as 'may attend'. Invert it with ~.",
         "这是辅助包的约定（True = 遮住）；SDPA 把 True 理解为“可以关注”。请用 ~ 取反。"),
        (causal_only, "The future is hidden, but the padding keys are not: also hide the keys where padding_mask is True.",
         "未来已经遮住了，但填充的键没有：还要遮住 padding_mask 为 True 的那些键。"),
        ((~padding)[:, None, None, :].expand(2, 1, 5, 5), "The padding is hidden, but the future is not: combine it with the causal mask.",
         "填充已经遮住了，但未来没有：还要与因果掩码合并。"),
    ]
    for wrong, en, zh in hints:
        if torch.equal(answer, wrong):
            return feedback(False, en, zh)
    slip = padding_slip(~answer[:, 0], ~causal_only[:, 0], padding)  # the slips lesson 5's checker names too
    if slip is not None:
        return feedback(False, *slip)
    if not torch.equal(answer, expected):
        return feedback(False, "Query i may attend to key j when j <= i and key j is not padding.",
                        "当 j <= i 且键 j 不是填充词元时，查询 i 才可以关注键 j。")
    note_en, note_zh = (" SDPA itself takes a torch tensor: torch.from_numpy(merged).",
                        "SDPA 本身需要 torch 张量：torch.from_numpy(merged)。") if from_numpy else ("", "")
    feedback(True, "Future and padding keys are hidden. The two padding queries of the first sentence may attend to "
             "nothing: SDPA gives them zero context vectors (lesson 5 explains why a plain softmax would give NaN)." + note_en,
             "未来的键和填充的键都被遮住了。第一个句子的两个填充查询什么都不能关注：SDPA 给它们零向量作为上下文向量"
             "（第 5 课解释过，普通的 softmax 在这里会得到 NaN）。" + note_zh)
