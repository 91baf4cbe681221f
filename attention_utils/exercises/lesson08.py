"""Checkers for lesson 8: a fused module built by hand, the bytes of the attention matrix, SDPA's mask."""

from __future__ import annotations

import torch

from ..modules import FusedMultiHeadAttention, MultiHeadAttention
from . import as_whole_number, feedback, has_form, missing

# Exercise 1 builds its source module with this seed and these sizes (the notebook does the same).
SOURCE_SEED = 8
SOURCE_SIZES = dict(d_in=4, d_out=6, context_length=8, dropout=0.0, num_heads=3, qkv_bias=True)


def _source_module() -> MultiHeadAttention:
    """The module the learner converts, rebuilt here without touching the learner's random stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SOURCE_SEED)
        return MultiHeadAttention(**SOURCE_SIZES)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and torch.allclose(a.detach(), b.detach(), atol=1e-6)


def check_fused_by_hand(answer: object) -> None:
    """An au.FusedMultiHeadAttention holding the weights of the seed-8 MultiHeadAttention(4, 6, ..., 3 heads)."""
    if missing(answer):
        return
    if isinstance(answer, MultiHeadAttention):
        return feedback(False, "This is still the module with three projections; build an au.FusedMultiHeadAttention "
                        "and copy the weights into its single qkv layer.",
                        "这还是带三个投影的模块；请新建一个 au.FusedMultiHeadAttention，把权重复制进它唯一的 qkv 层。")
    if not isinstance(answer, FusedMultiHeadAttention):
        return feedback(False, f"fused_by_hand should be an au.FusedMultiHeadAttention, got {type(answer).__name__}.",
                        f"fused_by_hand 应该是 au.FusedMultiHeadAttention，而你给出的是 {type(answer).__name__}。")
    source = _source_module()
    projections = {"query": source.W_query, "key": source.W_key, "value": source.W_value}
    stacked = torch.cat([p.weight for p in projections.values()])  # (18, 4)
    if answer.qkv.weight.shape != stacked.shape or answer.qkv.bias is None or answer.num_heads != source.num_heads:
        return feedback(False, "Build it with the same sizes: au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3, "
                        "qkv_bias=True); its qkv weight then has shape (18, 4).",
                        "请用相同的尺寸创建：au.FusedMultiHeadAttention(4, 6, 8, 0.0, num_heads=3, qkv_bias=True)；"
                        "这样它的 qkv 权重形状是 (18, 4)。")
    if not _same(answer.qkv.weight, stacked):
        blocks = list(answer.qkv.weight.detach().split(source.d_out))
        if all(any(_same(block, p.weight) for block in blocks) for p in projections.values()):
            return feedback(False, "All three weight matrices are there, but in the wrong order: project_heads reads "
                            "rows 0-5 as queries, 6-11 as keys and 12-17 as values.",
                            "三个权重矩阵都在，但顺序不对：project_heads 把第 0-5 行当作查询，第 6-11 行当作键，"
                            "第 12-17 行当作值。")
        return feedback(False, "qkv.weight should hold W_query.weight, W_key.weight and W_value.weight stacked row-wise "
                        "(torch.cat along dim 0).",
                        "qkv.weight 应该是 W_query.weight、W_key.weight、W_value.weight 按行堆叠的结果（沿第 0 维 torch.cat）。")
    if not _same(answer.qkv.bias, torch.cat([p.bias for p in projections.values()])):
        return feedback(False, "The weights are right; now stack the three biases the same way into qkv.bias.",
                        "权重对了；再用同样的方式把三个偏置堆叠到 qkv.bias 中。")
    if not (_same(answer.out_proj.weight, source.out_proj.weight) and _same(answer.out_proj.bias, source.out_proj.bias)):
        return feedback(False, "The QKV projection is right; copy out_proj's weight and bias as well.",
                        "QKV 投影对了；还要复制 out_proj 的权重和偏置。")
    was_training = answer.training
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(0)
        x = torch.rand(2, 5, SOURCE_SIZES["d_in"])
        same = torch.allclose(answer.eval()(x), source.eval()(x), atol=1e-5)
    answer.train(was_training)  # leave the learner's module as it was
    if not same:
        return feedback(False, "The weights match, but the outputs differ; was the module changed in another way?",
                        "权重一致，但输出不同；模块是否在别处被改动过？")
    feedback(True, "One (18, 4) projection does the work of three (6, 4) ones, and the outputs match the source module.",
             "一个 (18, 4) 的投影完成了三个 (6, 4) 投影的工作，输出与原模块一致。")


def check_attention_bytes(answer: object) -> None:
    """Bytes of the (b, h, T, T) weights: batch 4, 16 heads, T = 4096, bfloat16 (2 bytes a number)."""
    if missing(answer):
        return
    batch, heads, length, size = 4, 16, 4096, torch.tensor([], dtype=torch.bfloat16).element_size()
    expected = batch * heads * length * length * size
    value = as_whole_number(answer)
    if value is None:
        return feedback(False, "Give a whole number of bytes (an int).", "请给出字节数，一个整数（int）。")
    if value == expected:
        return feedback(True, f"{expected:,} bytes = {expected / 2**30:g} GiB for one attention matrix of one layer.",
                        f"{expected:,} 字节 = {expected / 2**30:g} GiB，这只是一层的一个注意力矩阵。")
    hints = {
        expected // size: ("That is the number of entries; each bfloat16 number takes 2 bytes.",
                           "这是元素个数；每个 bfloat16 数占 2 个字节。"),
        expected * 2: ("bfloat16 takes 2 bytes a number, not 4 like float32.", "bfloat16 每个数占 2 个字节，不是 float32 的 4 个。"),
        expected * 8: ("Bytes, not bits.", "要的是字节数，不是比特数。"),
        expected // heads: ("Every head has its own T x T matrix: multiply by the 16 heads.", "每个头都有自己的 T x T 矩阵：还要乘以 16 个头。"),
        expected // batch: ("Every sentence of the batch has its own matrices: multiply by the batch size 4.",
                            "批次中每个句子都有自己的矩阵：还要乘以批大小 4。"),
        expected // length: ("The matrix is T x T: the length appears twice.", "矩阵是 T x T：长度要乘两次。"),
        expected // 2**30: ("Give the answer in bytes, not GiB.", "请用字节表示答案，而不是 GiB。"),
        expected // 2**20: ("Give the answer in bytes, not MiB.", "请用字节表示答案，而不是 MiB。"),
    }
    en, zh = hints.get(value, ("Multiply batch x heads x T x T x bytes per number.", "请计算 批大小 x 头数 x T x T x 每个数的字节数。"))
    feedback(False, en, zh)


def check_sdpa_mask(answer: object) -> None:
    """A (5, 5) boolean attn_mask for causal SDPA: True where a query may attend (itself and the past)."""
    if missing(answer):
        return
    length = 5
    may_attend = torch.ones(length, length, dtype=torch.bool).tril()  # row i: keys 0..i
    if not has_form(answer, (length, length), "fixed_mask", "fixed_mask "):
        return
    if answer.dtype != torch.bool:
        additive = torch.zeros(length, length).masked_fill(~may_attend, float("-inf"))
        if answer.is_floating_point() and torch.equal(answer, additive):
            return feedback(True, "A float mask of 0 and -inf is added to the scores, so this works too; the boolean "
                            "form is ~au.causal_mask(5).",
                            "由 0 和 -inf 组成的浮点掩码会被加到分数上，所以这样也可以；布尔形式是 ~au.causal_mask(5)。")
        return feedback(False, "SDPA adds a float mask to the scores (1.0 would not hide anything); give a boolean mask.",
                        "SDPA 会把浮点掩码加到分数上（1.0 遮不住任何东西）；请给出布尔掩码。")
    if torch.equal(answer, ~may_attend):
        return feedback(False, "This is the inverted mask: SDPA reads True as 'may attend', so every token would look "
                        "at the future. Flip it with ~.",
                        "这是写反的掩码：SDPA 把 True 理解为“可以看”，于是每个词元都会看向未来。请用 ~ 取反。")
    if torch.equal(answer, may_attend.tril(-1)):
        return feedback(False, "Each token must also see itself: keep the diagonal True (otherwise the first token sees nothing).",
                        "每个词元也要能看到自己：对角线应为 True（否则第一个词元什么都看不到）。")
    if torch.equal(answer, may_attend):
        return feedback(True, "True on and below the diagonal: each token sees itself and the past, as is_causal=True does.",
                        "对角线及其下方为 True：每个词元能看到自己和过去，与 is_causal=True 的效果相同。")
    feedback(False, "Row i should be True for keys 0..i and False for the keys after i.",
             "第 i 行应在键 0..i 处为 True，在 i 之后的键处为 False。")
