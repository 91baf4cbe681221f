"""Checkers for lesson 7: splitting features into heads, merging them back, counting parameters."""

from __future__ import annotations

import torch

from . import as_real_tensor, check_tensor_answer, checker, feedback, missing


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
                        "应先拆分最后一个维度 view(1, 2, 3, 4)，再交换词元的维度和头的维度。")
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
                        "应先用 transpose(1, 2) 把词元的维度移到头的维度前面，再 reshape。")
    check_tensor_answer(answer, expected, "Your merged tensor", "你合并后的张量")


def _head_weights(module: object) -> torch.Tensor | None:
    """The (h, 6, 6) weights of `module` on six one-hot positions, or None when it is no module that returns them."""
    if not isinstance(module, torch.nn.Module):
        return None
    with torch.no_grad():
        result = module(torch.eye(6)[None], return_weights=True)  # an error in the learner's module: @checker names it
    weights = result[1] if isinstance(result, tuple) and len(result) == 2 else None
    return as_real_tensor(weights)[0] if isinstance(weights, torch.Tensor) and weights.dim() == 4 else None


def _looks_back(weights: torch.Tensor, steps: int) -> bool:
    """True when every query that has a token `steps` before it puts its largest weight on that token."""
    return all(int(weights[t].argmax()) == t - steps for t in range(steps, weights.shape[-1]))


@checker
def check_looks_back(module: object) -> None:
    """A hand-set two-head MultiHeadAttention on one-hot positions: head 0 looks two tokens back, head 1 one back."""
    if missing(module):
        return
    weights = _head_weights(module)
    if weights is None:
        return feedback(False, "Give the module itself, a MultiHeadAttention(6, 12, 6, 0.0, num_heads=2) whose weights "
                               "you have set, like two_heads above.",
                        "请给出模块本身：一个设定好权重的 MultiHeadAttention(6, 12, 6, 0.0, num_heads=2)，就像上面的 two_heads。")
    if weights.shape != (2, 6, 6):
        return feedback(False, f"The module should have 2 heads over 6 positions; its weights have shape "
                               f"{tuple(weights.shape)} per sentence.",
                        f"模块应有 2 个头、6 个位置；它每个句子的权重形状是 {tuple(weights.shape)}。")
    if _looks_back(weights[0], 1) and _looks_back(weights[1], 2):
        return feedback(False, "The two heads are swapped: head 0 looks one token back and head 1 two. Exchange their "
                               "rows of W_key (rows 0-5 belong to head 0, rows 6-11 to head 1).",
                        "两个头弄反了：头 0 看前一个词元，头 1 看前两个。请交换它们在 W_key 中的行"
                        "（第 0–5 行属于头 0，第 6–11 行属于头 1）。")
    for head, steps in ((0, 2), (1, 1)):
        if not _looks_back(weights[head], steps):
            picks = [int(weights[head, t].argmax()) for t in range(steps, 6)]
            return feedback(False, f"Head {head} should look {steps} token(s) back, but queries {list(range(steps, 6))} "
                                   f"put their largest weights on keys {picks}. Key j has to answer \"j + {steps}\": move "
                                   "the diagonal of that head's key matrix down, not up (the causal mask hides every "
                                   "later token).",
                            f"头 {head} 应该看前 {steps} 个词元，但查询 {list(range(steps, 6))} 把最大权重给了键 {picks}。"
                            f"键 j 要回答“j + {steps}”：把这个头的键矩阵的对角线往下移，而不是往上移（因果掩码会遮住后面的词元）。")
    weakest = min(float(weights[0, t, t - 2]) for t in range(2, 6))
    weakest = min(weakest, *(float(weights[1, t, t - 1]) for t in range(1, 6)))
    if weakest <= 0.5:
        return feedback(False, f"Both heads point the right way, but weakly: the smallest of those top weights is "
                               f"{weakest:.2f}. Scale the query or key weights up so that each softmax picks one key.",
                        f"两个头的方向都对，但不够集中：这些最大权重中最小的只有 {weakest:.2f}。"
                        "请把查询或键的权重放大，让每个 softmax 只选中一个键。")
    feedback(True, f"Head 0 looks two tokens back and head 1 one token back; the smallest of those top weights is "
                   f"{weakest:.4f}.",
             f"头 0 看前两个词元，头 1 看前一个词元；这些最大权重中最小的是 {weakest:.4f}。")
