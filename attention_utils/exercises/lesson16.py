"""Checkers for lesson 16: state bytes against cache bytes, a delta-rule update, recall with more pairs than directions.

The three exercises: the bytes of a state against the bytes of a cache, one delta-rule update by
hand, and the recall a state can reach when it is given more pairs than it has directions.
"""

from __future__ import annotations

import torch

from . import as_real_number, as_real_tensor, as_whole_number, checker, feedback, missing

# Exercise 1: one layer with a state and one with a KV cache, the sizes the lesson's text gives, bfloat16.
STATE_HEADS, STATE_KEY_DIM, STATE_VALUE_DIM = 32, 128, 128
CACHE_KV_HEADS, CACHE_HEAD_DIM = 2, 256
BYTES_PER_VALUE = 2
# Exercise 2: a state with d_v = 1 and d_k = 2, a unit key, a value and β, chosen so a learner can do it on paper.
STATE = ((3.0, 1.0),)
KEY = (0.6, 0.8)
VALUE = 5.0
BETA = 0.5
# Exercise 3: six one-hot keys in a state with d_k = 4, so keys 5 and 6 fall on the directions of keys 1 and 2;
# six values, each a different one-hot token. Then the general bound for d_k = 16 and N = 24.
CROWDED_KEY_SIZE = 4
CROWDED_DIRECTIONS = (0, 1, 2, 3, 0, 1)  # the direction e_j of each key, in writing order
BOUND_KEY_SIZE, BOUND_PAIRS = 16, 24
SHARE_TOLERANCE = 0.01  # 0.67 and 2/3 both count


def _state_bytes() -> int:
    return STATE_HEADS * STATE_KEY_DIM * STATE_VALUE_DIM * BYTES_PER_VALUE


def _cache_bytes_per_token() -> int:
    return 2 * CACHE_KV_HEADS * CACHE_HEAD_DIM * BYTES_PER_VALUE  # a key and a value per key/value head


@checker
def check_state_bytes(answer: object) -> None:
    """Exercise 1a: the state of one layer, in bytes."""
    if missing(answer):
        return
    found, expected = as_whole_number(answer), _state_bytes()
    if found is None:
        return feedback(False, "Give the size as a whole number of bytes.", "请用整数给出字节数。")
    if found == expected:
        return feedback(True, f"{STATE_HEADS} × {STATE_KEY_DIM} × {STATE_VALUE_DIM} × {BYTES_PER_VALUE} = {expected:,} bytes "
                        f"({expected / 2**20:g} MiB), at any length.",
                        f"{STATE_HEADS} × {STATE_KEY_DIM} × {STATE_VALUE_DIM} × {BYTES_PER_VALUE} = {expected:,} 字节"
                        f"（{expected / 2**20:g} MiB），无论序列多长都是这么大。")
    if found == expected * 2:  # float32 and a second matrix give the same number: name both
        return feedback(False, "Twice the answer: either you took 4 bytes a number (bfloat16 takes 2), or you kept a "
                        "second matrix (a state is one d_v × d_k matrix per head, not one for keys and one for values).",
                        "正好是答案的 2 倍：要么按每个数 4 个字节算了（bfloat16 每个数占 2 个字节），要么多算了一个矩阵"
                        "（每个头的状态只是一个 d_v × d_k 的矩阵，并没有键和值各一份）。")
    if found == expected // BYTES_PER_VALUE:
        return feedback(False, "That is the count of numbers; each bfloat16 number takes 2 bytes.",
                        "这是数的个数；每个 bfloat16 数占 2 个字节。")
    feedback(False, "Multiply: heads × d_k × d_v × bytes per number.", "把这些乘起来：头数 × d_k × d_v × 每个数的字节数。")


@checker
def check_crossover(answer: object) -> None:
    """Exercise 1b: the number of tokens at which the attention layer's cache holds as many bytes as the state."""
    if missing(answer):
        return
    found = as_real_number(answer)
    expected = _state_bytes() / _cache_bytes_per_token()
    if found is None:
        return feedback(False, "Give a number of tokens.", "请给出一个词元数。")
    if abs(found - expected) < 0.5:
        return feedback(True, f"{_state_bytes():,} / {_cache_bytes_per_token():,} bytes per token = {expected:,.0f} tokens. "
                        "Beyond that the cache is the larger one, and it keeps growing.",
                        f"{_state_bytes():,} / 每个词元 {_cache_bytes_per_token():,} 字节 = {expected:,.0f} 个词元。"
                        "超过这个长度，缓存就比状态大，而且还在继续增长。")
    if abs(found - 2 * expected) < 0.5:
        return feedback(False, "Each token puts a key AND a value into the cache: 2 × kv heads × head_dim × bytes.",
                        "每个词元要往缓存里放一个键和一个值：2 × 键值头数 × head_dim × 字节数。")
    feedback(False, "Divide the state's bytes by the cache's bytes per token.", "用状态的字节数除以缓存每个词元的字节数。")


def _expected_update() -> tuple[torch.Tensor, float]:
    """S + β (v − S k) kᵀ worked out for the exercise's numbers, and what the new state answers for k."""
    state, key = torch.tensor(STATE, dtype=torch.float64), torch.tensor(KEY, dtype=torch.float64)
    error = VALUE - (state @ key)  # (1,)
    new_state = state + BETA * error[:, None] * key[None, :]
    return new_state, float(new_state @ key)


@checker
def check_delta_update(new_state: object, answer_for_key: object) -> None:
    """Exercise 2: the state after one delta-rule write, and what it then answers for the same key."""
    if missing(new_state) or missing(answer_for_key):
        return
    expected, read = _expected_update()
    found = as_real_tensor(torch.as_tensor(new_state, dtype=torch.float64) if isinstance(new_state, (list, tuple))
                           else new_state)
    if found is None or found.numel() != 2:
        return feedback(False, "Give the new state as two numbers, for example [[s1, s2]] or a tensor of shape (1, 2).",
                        "请把新状态写成两个数，例如 [[s1, s2]]，或形状为 (1, 2) 的张量。")
    found = found.reshape(1, 2)
    state, key = torch.tensor(STATE, dtype=torch.float64), torch.tensor(KEY, dtype=torch.float64)
    linear = state + BETA * VALUE * key[None, :]
    no_beta = state + (VALUE - state @ key)[:, None] * key[None, :]
    if torch.allclose(found, linear, atol=1e-3):
        return feedback(False, "That is linear attention's write, β v kᵀ: the delta rule writes β (v − S k) kᵀ.",
                        "这是线性注意力的写法 β v kᵀ；delta 规则写入的是 β (v − S k) kᵀ。")
    if torch.allclose(found, no_beta, atol=1e-3):
        return feedback(False, "That is the update with β = 1; here β = 0.5 corrects only half of the error.",
                        "这是 β = 1 时的结果；这里 β = 0.5，只纠正一半的误差。")
    if not torch.allclose(found, expected, atol=1e-3):
        return feedback(False, "First S k (the state's current answer), then the error v − S k, then S + β × error × kᵀ.",
                        "先算 S k（状态现在给出的答案），再算误差 v − S k，最后算 S + β × 误差 × kᵀ。")
    answer = as_real_number(answer_for_key)
    if answer is None or abs(answer - read) > 1e-3:
        return feedback(False, f"The new state is right. Now read it with the same key: S_new k = {expected[0, 0]:.2f} × "
                        f"{KEY[0]} + {expected[0, 1]:.2f} × {KEY[1]}.",
                        f"新状态算对了。再用同一个键读一次：S_new k = {expected[0, 0]:.2f} × {KEY[0]} + "
                        f"{expected[0, 1]:.2f} × {KEY[1]}。")
    before = float(state @ key)
    feedback(True, f"S_new = [[{expected[0, 0]:.2f}, {expected[0, 1]:.2f}]] and it answers {read:.2f} for k: halfway "
             f"from the old answer {before:.2f} to the value {VALUE:g}, because β = {BETA} and ‖k‖ = 1.",
             f"S_new = [[{expected[0, 0]:.2f}, {expected[0, 1]:.2f}]]，对键 k 的回答是 {read:.2f}：正好从原来的答案 "
             f"{before:.2f} 走到值 {VALUE:g} 的一半，因为 β = {BETA}，而且 ‖k‖ = 1。")


def _crowded_shares() -> tuple[float, float]:
    """Share of the six keys each state answers right (its own value strictly largest in S k): delta rule, linear."""
    keys = torch.eye(CROWDED_KEY_SIZE, dtype=torch.float64)[list(CROWDED_DIRECTIONS)]  # (N, d_k)
    values = torch.eye(len(CROWDED_DIRECTIONS), dtype=torch.float64)  # (N, d_v): a different token each
    linear = values.T @ keys  # Σ v kᵀ
    delta = torch.zeros_like(linear)
    for k, v in zip(keys, values):
        delta = delta - torch.outer(delta @ k - v, k)  # β = 1
    return tuple(_share_right(state, keys) for state in (delta, linear))


def _share_right(state: torch.Tensor, keys: torch.Tensor) -> float:
    """A key is answered right when its own token scores strictly above every other token (a tie is wrong)."""
    reads = keys @ state.T  # (N, d_v): row i is S k_i
    own = reads.diagonal()
    others = reads.masked_fill(torch.eye(len(keys), dtype=torch.bool), -torch.inf).amax(dim=1)
    return (own > others).double().mean().item()


def _near(found: float, share: float) -> bool:
    return abs(found - share) < SHARE_TOLERANCE


@checker
def check_crowded_recall(delta_share: object, linear_share: object) -> None:
    """Exercise 3a: the share of the six questions the delta rule (β = 1) and linear attention answer right."""
    if missing(delta_share) or missing(linear_share):
        return
    delta, linear = as_real_number(delta_share), as_real_number(linear_share)
    pairs = len(CROWDED_DIRECTIONS)
    if delta is None or linear is None:
        return feedback(False, f"Give each share as a number between 0 and 1, for example 3 / {pairs}.",
                        f"请把每个比例写成 0 到 1 之间的数，例如 3 / {pairs}。")
    if delta > 1 or linear > 1:
        return feedback(False, f"That looks like a count of questions; divide by the {pairs} questions to get a share.",
                        f"这看起来是答对的题数；除以 {pairs} 道题才是比例。")
    right_delta, right_linear = _crowded_shares()
    if not _near(delta, right_delta):
        if _near(delta, 1.0):
            return feedback(False, f"{pairs} keys, {CROWDED_KEY_SIZE} directions: keys 1 and 5 are both e₁, so the state has "
                            "room for one of their values only. Which one does the delta rule keep?",
                            f"{pairs} 个键，只有 {CROWDED_KEY_SIZE} 个方向：键 1 和键 5 都是 e₁，状态只放得下它们当中一个的值。"
                            "delta 规则留下的是哪一个？")
        if _near(delta, right_linear):
            return feedback(False, "That is linear attention's share. The delta rule replaces what is stored along a "
                            "direction: after the last write, which keys read their own value?",
                            "这是线性注意力的比例。delta 规则会替换某个方向上已存的内容：全部写完以后，哪些键读出的是自己的值？")
        return feedback(False, "Write the six pairs one by one: the state has one column per direction e_j, and reading "
                        "key i returns the column of its direction.",
                        "把六个键值对逐个写进去：状态的每一列对应一个方向 e_j，读键 i 得到的就是它那个方向上的那一列。")
    if not _near(linear, right_linear):
        if _near(linear, right_delta):
            return feedback(False, "The delta rule is right. Linear attention adds instead of replacing: the column for e₁ "
                            "holds v₁ + v₅, two tokens with the same score, and a tie counts as wrong.",
                            "delta 规则算对了。线性注意力是相加而不是替换：e₁ 那一列存的是 v₁ + v₅，两个词元得分相同，"
                            "平局算答错。")
        return feedback(False, "The delta rule is right. For linear attention add v kᵀ for every pair: which columns "
                        "hold two values at once?",
                        "delta 规则算对了。线性注意力要把每一对的 v kᵀ 都加上：哪几列同时存了两个值？")
    kept, lost = round(right_delta * pairs), round(right_linear * pairs)
    feedback(True, f"The delta rule answers {kept} of {pairs} = d_k / N, the most any state with {CROWDED_KEY_SIZE} directions can "
             f"return exactly: keys 1 and 2 read the values of keys 5 and 6, which replaced theirs. Linear attention answers {lost} of {pairs}: where two keys share a direction, "
             "both answers are lost in a tie.",
             f"{pairs} 道题里 delta 规则答对 {kept} 道，比例正好是 d_k / N，这是只有 {CROWDED_KEY_SIZE} 个方向的状态最多能原样读出的比例："
             "键 1 和键 2 读出的是键 5 和键 6 的值，它们原来的值被替换掉了。"
             f"线性注意力只答对 {lost} 道：两个键共用一个方向时，两者的答案打成平局，都算答错。")


@checker
def check_exact_recall_bound(share: object) -> None:
    """Exercise 3b: the largest share of N questions a state with d_k < N can answer with exactly the right value."""
    if missing(share):
        return
    found = as_real_number(share)
    expected = BOUND_KEY_SIZE / BOUND_PAIRS
    if found is None:
        return feedback(False, "Give the share as a number between 0 and 1.", "请把比例写成 0 到 1 之间的数。")
    if _near(found, expected):
        return feedback(True, f"At most {BOUND_KEY_SIZE} of the {BOUND_PAIRS} values: {expected:.2f}. Every S k is a mix of "
                        f"the d_k = {BOUND_KEY_SIZE} columns of S, and a space of {BOUND_KEY_SIZE} dimensions holds at most "
                        f"{BOUND_KEY_SIZE} of {BOUND_PAIRS} different one-hot vectors.",
                        f"{BOUND_PAIRS} 个值里最多 {BOUND_KEY_SIZE} 个：{expected:.2f}。每个 S k 都是 S 的 d_k = "
                        f"{BOUND_KEY_SIZE} 列的某种组合，而一个 {BOUND_KEY_SIZE} 维的空间最多只能容下 {BOUND_PAIRS} "
                        f"个互不相同的独热向量中的 {BOUND_KEY_SIZE} 个。")
    if _near(found, 1.0):
        return feedback(False, f"There are more pairs ({BOUND_PAIRS}) than directions (d_k = {BOUND_KEY_SIZE}): S k can only "
                        f"be a mix of the {BOUND_KEY_SIZE} columns of S.",
                        f"键值对（{BOUND_PAIRS} 个）比方向（d_k = {BOUND_KEY_SIZE} 个）多：S k 只能是 S 的 "
                        f"{BOUND_KEY_SIZE} 列的某种组合。")
    if _near(found, BOUND_PAIRS / BOUND_KEY_SIZE):
        return feedback(False, "A share cannot exceed 1: divide the values it can return by the number of pairs.",
                        "比例不会超过 1：用能原样读出的值的个数除以键值对的个数。")
    if _near(found, 1 - expected):
        return feedback(False, "That is the share it must miss at least; the question asks for the share it can get right.",
                        "这是至少要答错的比例；题目问的是最多能答对的比例。")
    if _near(found, float(BOUND_KEY_SIZE)):
        return feedback(False, f"{BOUND_KEY_SIZE} values at most, yes; as a share of the {BOUND_PAIRS} questions?",
                        f"最多 {BOUND_KEY_SIZE} 个值，没错；占 {BOUND_PAIRS} 道题的比例是多少？")
    feedback(False, "A state returns exactly at most d_k of the values; divide by N.",
             "一个状态最多能原样读出 d_k 个值；再除以 N。")
