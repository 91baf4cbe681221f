"""Checkers for lesson 18: tokens per pass, the speed-up a draft buys, and the rule that keeps sampling exact."""

from __future__ import annotations

import torch

from . import as_real_number, as_real_tensor, checker, feedback, missing

# Exercises 1 and 2: a draft kept with probability ALPHA, K drafted tokens, a pass costing PASS_COST decode steps,
# a draft step costing DRAFT_COST of one. Exercise 3: the model's p and the draft's q over three tokens.
ALPHA, K, PASS_COST, DRAFT_COST = 0.8, 4, 1.2, 0.5
P, Q = (0.5, 0.3, 0.2), (0.2, 0.6, 0.2)


def _close(found: float, expected: float, share: float = 0.01) -> bool:
    return abs(found - expected) <= share * abs(expected)


def _tokens(alpha: float, k: int) -> float:
    return sum(alpha ** i for i in range(k + 1))  # 1 + alpha + ... + alpha^k, term by term


@checker
def check_tokens_per_pass(answer: object) -> None:
    """Exercise 1: expected tokens from one pass of K = 4 drafted tokens, each kept with probability 0.8."""
    if missing(answer):
        return
    found, expected = as_real_number(answer), _tokens(ALPHA, K)
    if found is None:
        return feedback(False, "Give a number of tokens.", "请给出一个词元数。")
    if _close(found, expected):
        return feedback(True, f"1 + 0.8 + 0.8² + 0.8³ + 0.8⁴ = (1 − 0.8⁵) / (1 − 0.8) = {expected:.3f}: drafted token i counts "
                        "only if all before it were kept, and the model's own token always comes last.",
                        f"1 + 0.8 + 0.8² + 0.8³ + 0.8⁴ = (1 − 0.8⁵) / (1 − 0.8) = {expected:.3f}：第 i 个草稿词元只有在它前面的"
                        "词元全被接受时才算数，而且最后总有一个模型自己给出的词元。")
    if _close(found, 1 + ALPHA * K):
        return feedback(False, "1 + 0.8 × 4 counts every drafted token as if each were judged alone; a token after a refusal "
                        "is thrown away, so token i needs all i before it kept: probability 0.8^i.",
                        "1 + 0.8 × 4 把每个草稿词元当成单独判断；可一旦有词元被拒绝，后面的都要扔掉，所以第 i 个词元要求前面 i 个"
                        "全被接受，概率是 0.8^i。")
    if _close(found, _tokens(ALPHA, K) - 1):
        return feedback(False, "Add the model's own token: every pass yields one more than the drafted tokens it kept.",
                        "别忘了模型自己的那个词元：每次前向都比接受的草稿词元多出一个。")
    feedback(False, "Sum the probability that each token of the pass is kept: 1 for the model's own, 0.8^i for drafted token i.",
             "把这次前向中每个词元被保留的概率加起来：模型自己的词元是 1，第 i 个草稿词元是 0.8^i。")


@checker
def check_speedup(answer: object) -> None:
    """Exercise 2: the speed-up over plain decoding with c(4) = 1.2 and a draft step of 0.5 decode steps."""
    if missing(answer):
        return
    found, tokens = as_real_number(answer), _tokens(ALPHA, K)
    expected = tokens / (PASS_COST + K * DRAFT_COST)
    if found is None:
        return feedback(False, "Give a ratio, such as 1.3.", "请给出一个比值，例如 1.3。")
    if _close(found, expected):
        return feedback(True, f"{tokens:.3f} tokens for 1.2 + 4 × 0.5 = 3.2 decode steps: {expected:.2f}×. The four draft "
                        "steps cost more than the check; a draft at half the model's cost barely pays here.",
                        f"用 1.2 + 4 × 0.5 = 3.2 步解码的时间得到 {tokens:.3f} 个词元：{expected:.2f} 倍。4 步草稿比检查本身还贵；"
                        "草稿模型的开销是原模型的一半时，这里几乎不划算。")
    if _close(found, tokens / PASS_COST):
        return feedback(False, "That leaves out the draft: its 4 steps at 0.5 each cost 2 decode steps per pass.",
                        "这样没有算草稿模型的开销：每次前向它要走 4 步，每步 0.5，合计 2 步解码。")
    if _close(found, tokens / (1 + K * DRAFT_COST)):
        return feedback(False, "Checking 5 tokens costs 1.2 decode steps, not 1.", "检查 5 个词元的代价是 1.2 步解码，不是 1 步。")
    feedback(False, "Tokens per pass (exercise 1) divided by the pass's cost in decode steps: c(4) + 4 × d.",
             "每次前向得到的词元数（练习 1）除以这次前向折合的解码步数：c(4) + 4 × d。")


@checker
def check_acceptance(answer: object) -> None:
    """Exercise 3a: the probability that a token drawn from q is accepted with min(1, p / q)."""
    if missing(answer):
        return
    found, expected = as_real_number(answer), sum(min(p, q) for p, q in zip(P, Q))
    if found is None:
        return feedback(False, "Give a probability.", "请给出一个概率。")
    if _close(found, expected):
        return feedback(True, f"Σ q(x) · min(1, p(x) / q(x)) = Σ min(p(x), q(x)) = 0.2 + 0.3 + 0.2 = {expected:g}: the overlap "
                        "of the two distributions.",
                        f"Σ q(x) · min(1, p(x) / q(x)) = Σ min(p(x), q(x)) = 0.2 + 0.3 + 0.2 = {expected:g}：正好是两个分布重叠的部分。")
    feedback(False, "For each token: the chance the draft proposes it, q(x), times the chance it is kept, min(1, p(x) / q(x)); sum them.",
             "对每个词元：草稿提出它的概率 q(x) 乘以它被接受的概率 min(1, p(x) / q(x))，再求和。")


@checker
def check_residual(answer: object) -> None:
    """Exercise 3b: the distribution to draw from after a refusal, max(0, p - q) normalized."""
    if missing(answer):
        return
    found = as_real_tensor(answer)
    residual = torch.tensor([max(0.0, p - q) for p, q in zip(P, Q)], dtype=torch.float64)
    expected = residual / residual.sum()
    if found is None or found.numel() != 3:
        return feedback(False, "Give three probabilities, one per token, such as [0.2, 0.3, 0.5].",
                        "请给出三个概率，每个词元一个，例如 [0.2, 0.3, 0.5]。")
    found = found.flatten()
    if torch.allclose(found, expected, atol=1e-3):
        return feedback(True, "Only token 0 has p > q, so a refusal always gives token 0. Accepted mass min(p, q) plus "
                        "refusals 0.3 × [1, 0, 0] gives back p = [0.5, 0.3, 0.2] exactly.",
                        "只有词元 0 的 p 大于 q，所以一旦拒绝，重新采样总是得到词元 0。接受的部分 min(p, q) 加上拒绝后的 "
                        "0.3 × [1, 0, 0]，恰好还原 p = [0.5, 0.3, 0.2]。")
    if torch.allclose(found, torch.tensor(P, dtype=torch.float64), atol=1e-3):
        return feedback(False, "Drawing from p again is the shortcut that biases the output: token 1 would come out too often. "
                        "Draw only from what p has more of than q: max(0, p − q), normalized.",
                        "拒绝后再从 p 里抽，正是会让输出有偏的捷径：词元 1 会出现得太多。只能从 p 比 q 多出来的部分抽：max(0, p − q)，再归一化。")
    if torch.allclose(found, residual, atol=1e-3):
        return feedback(False, "Normalize it: the three probabilities must sum to 1.", "还要归一化：三个概率之和必须是 1。")
    feedback(False, "Take max(0, p − q) token by token, then divide by its sum.", "逐个词元取 max(0, p − q)，再除以它们的和。")
