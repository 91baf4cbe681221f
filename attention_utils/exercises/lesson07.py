"""Checkers for lesson 7: splitting features into heads, merging them back, counting parameters."""

from __future__ import annotations

import torch

from . import as_real_tensor, as_whole_number, check_tensor_answer, checker, feedback, missing


def _features() -> torch.Tensor:
    """The exercise input: 2 tokens with 12 features each, numbered 0..23 so every move is visible."""
    return torch.arange(24.0).view(1, 2, 12)  # (b=1, T=2, d_out=12)


def _equals(answer: object, wrong: torch.Tensor) -> bool:
    """True when the answer, read as real numbers in any form, is exactly the tensor of a known mistake."""
    given = as_real_tensor(answer)
    return given is not None and given.shape == wrong.shape and torch.equal(given, wrong.double())


@checker
def check_split_heads(answer: object) -> None:
    """(1, 2, 12) split into 3 heads of 4 features: (1, 3, 2, 4), head h holding features 4h..4h+3."""
    x = _features()
    expected = torch.empty(1, 3, 2, 4)
    for head in range(3):  # built element by element, without view or transpose
        for token in range(2):
            expected[0, head, token] = x[0, token, 4 * head : 4 * head + 4]
    if _equals(answer, x.view(1, 3, 2, 4)):
        return feedback(False, "A direct view to (1, 3, 2, 4) mixes the tokens: head 0 got the first 8 features of token 0. "
                        "First split the last dimension, view(1, 2, 3, 4), then swap tokens and heads.",
                        "直接 view 成 (1, 3, 2, 4) 会把词元搅乱：头 0 拿到的是词元 0 的前 8 个特征。"
                        "应先拆分最后一维 view(1, 2, 3, 4)，再交换词元维和头维。")
    check_tensor_answer(answer, expected, "Your split tensor", "你拆分后的张量")


@checker
def check_merge_heads(answer: object) -> None:
    """(1, 3, 2, 4) context of 3 heads merged back to (1, 2, 12): each token's heads side by side."""
    context = torch.arange(24.0).view(1, 3, 2, 4)  # (b, h, T, d_h)
    expected = torch.stack([torch.cat([context[0, head, token] for head in range(3)]) for token in range(2)])[None]
    if _equals(answer, context.view(1, 2, 12)):
        return feedback(False, "A direct view to (1, 2, 12) glues the wrong numbers together: token 0 got all of head 0. "
                        "Move the tokens in front of the heads first: transpose(1, 2), then reshape.",
                        "直接 view 成 (1, 2, 12) 会把错误的数字拼在一起：词元 0 拿到了头 0 的全部内容。"
                        "应先用 transpose(1, 2) 把词元维移到头维前面，再 reshape。")
    check_tensor_answer(answer, expected, "Your merged tensor", "你合并后的张量")


@checker
def check_parameter_count(answer: object) -> None:
    """Trainable parameters of MultiHeadAttention(512, 512, 1024, 0.0, 8) with qkv_bias=False."""
    if missing(answer):
        return
    d = 512
    expected = 3 * d * d + (d * d + d)  # W_query, W_key, W_value without bias; out_proj with its bias
    value = as_whole_number(answer)
    if value is None:
        return feedback(False, "Give a whole number.", "请给出一个整数。")
    if value == expected:
        return feedback(True, f"{expected:,} parameters: three 512 × 512 projections without bias, plus out_proj with "
                        "its bias. The 8 heads add nothing.",
                        f"共 {expected:,} 个参数：三个不带偏置的 512 × 512 投影，加上带偏置的 out_proj。8 个头并不增加参数。")
    hints = {
        expected + 3 * 512: ("qkv_bias=False: W_query, W_key and W_value have no bias here.",
                             "qkv_bias=False：这里 W_query、W_key 和 W_value 都没有偏置。"),
        expected - 512: ("out_proj is an ordinary nn.Linear and keeps its bias.", "out_proj 是普通的 nn.Linear，它有偏置。"),
        expected - 512 * 512 - 512: ("Don't forget out_proj, the fourth 512 × 512 matrix.", "别忘了 out_proj，第四个 512 × 512 矩阵。"),
        expected + 1024 * 1024: ("The mask is a buffer, not a trained parameter.", "掩码是缓冲区（buffer），不是要训练的参数。"),
    }
    en, zh = hints.get(value, ("Count the weights and biases of the four nn.Linear layers.",
                               "请数一数四个 nn.Linear 层的权重和偏置。"))
    feedback(False, en, zh)
