"""Checkers for lesson 16: the bytes of a state against the bytes of a cache, and one delta-rule update by hand."""

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
    if found == expected * 2:
        return feedback(False, "A state is one d_v × d_k matrix per head; there is no separate one for keys and values.",
                        "每个头的状态只是一个 d_v × d_k 的矩阵，并没有键和值各一份。")
    if found == expected // BYTES_PER_VALUE:
        return feedback(False, "That is the count of numbers; each bfloat16 number takes 2 bytes.",
                        "这是数的个数；每个 bfloat16 数占 2 个字节。")
    if found == expected * 2 // BYTES_PER_VALUE:
        return feedback(False, "bfloat16 takes 2 bytes per number, not 4.", "bfloat16 每个数占 2 个字节，而不是 4 个。")
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
