"""Each bad input gets one clear sentence in English and in Chinese; the reviewed defects stay fixed.

The cases follow ../shared/findings/input-review.md; tests/test_contract.py generates many more.
"""

import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import attention_utils as au
from attention_utils.environment import threads_from_environment


def says(error: type[Exception], call, *phrases: str) -> str:
    """Run `call`, expect `error`, and check that the message holds every phrase; return it."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    for phrase in phrases:
        assert phrase in message, message
    return message


def test_wrong_rank_with_a_batch_hint():
    says(ValueError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.rand(6, 3)),
         "must have 3 dimensions", "x.unsqueeze(0)", "应为 3 维张量")


def test_rank_messages_are_composed_in_each_language():
    message = says(ValueError, lambda: au.SelfAttentionV1(3, 2)(torch.rand(2, 2, 6, 3)),
                   "must have 2 or 3 dimensions", "应为 2 维或 3 维张量")
    assert " or " not in message.splitlines()[1]


def test_a_scalar_gets_no_unsqueeze_hint_and_singular_is_right():
    message = says(ValueError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.tensor(1.0)))
    assert "unsqueeze" not in message
    message = says(ValueError, lambda: au.attention_scores(torch.rand(2, 2, 2, 2, 2), torch.rand(2)), "(5 dimensions)")
    message = says(ValueError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.rand(3)), "(1 dimension)")
    assert "(1 dimensions)" not in message


def test_wrong_last_dimension():
    says(ValueError, lambda: au.CausalAttention(3, 2, 6, 0.0)(torch.rand(1, 6, 5)), "must be d_in=3, got 5", "最后一维")


def test_heads_must_divide_d_out():
    says(ValueError, lambda: au.MultiHeadAttention(3, 5, 6, 0.0, num_heads=2),
         "d_out=5 must be divisible by num_heads=2", "整除")


def test_too_many_tokens():
    says(ValueError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.rand(1, 8, 3)),
         "has 8 tokens but the module was built with context_length=6", "词元")


@pytest.mark.parametrize("module", [au.SelfAttentionV1(3, 2), au.SelfAttentionV2(3, 2), au.CausalAttention(3, 2, 6, 0.0),
                                    au.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 2), au.MultiHeadAttention(3, 4, 6, 0.0, 2),
                                    au.FusedMultiHeadAttention(3, 4, 6, 0.0, 2)], ids=lambda m: type(m).__name__)
def test_integer_data_is_the_likeliest_mistake_and_says_what_to_write(module):
    says(TypeError, lambda: module(torch.tensor([[[1, 2, 3], [4, 5, 6]]])),
         "holds integers (torch.int64)", "x.float()", "1.0, 2.0, 3.0", "整数", "dtype=torch.float32")


def test_float64_input_for_a_float32_module_and_the_reverse():
    says(TypeError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.from_numpy(np.random.rand(1, 6, 3))),
         "torch.float64", "torch.float32", "类型")
    says(TypeError, lambda: au.CausalAttention(3, 2, 6, 0.0).double()(torch.rand(1, 6, 3)),
         "module.to(torch.float32)", "转换模块")


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64, torch.int32])
def test_functional_api_refuses_non_float_dtypes(dtype):
    q = torch.ones(2, 5, 4).to(dtype)
    says(TypeError, lambda: au.scaled_dot_product_attention(q, q, q), "`queries`", "floating-point", "浮点数")


def test_queries_keys_values_share_a_dtype():
    q = torch.rand(5, 4)
    says(TypeError, lambda: au.attention_scores(q, q.double()), "same dtype", "类型必须相同")
    says(TypeError, lambda: au.scaled_dot_product_attention(q, q, q.double()), "`values`", "类型必须相同")


def test_a_batch_mask_on_single_head_input_no_longer_mixes_sentences():
    q = torch.randn(2, 5, 4)
    says(ValueError, lambda: au.scaled_dot_product_attention(q, q, q, mask=torch.zeros(2, 1, 1, 5, dtype=torch.bool)),
         "does not fit", "without adding to it", "广播后不能比它大")
    says(ValueError, lambda: au.scaled_dot_product_attention(q, q, q, mask=au.causal_mask(5).expand(4, 1, 5, 5)),
         "does not fit")


def test_a_mask_that_fits_still_works():
    q = torch.randn(2, 5, 4)
    context, weights = au.scaled_dot_product_attention(q, q, q, mask=torch.zeros(2, 1, 5, dtype=torch.bool))
    assert context.shape == (2, 5, 4) and torch.allclose(weights.sum(-1), torch.ones(2, 5))


def test_mask_that_is_not_boolean():
    q = torch.rand(6, 2)
    says(TypeError, lambda: au.scaled_dot_product_attention(q, q, q, mask=torch.zeros(6, 6)), "boolean tensor", "布尔")


def test_padding_mask_must_be_exactly_batch_by_tokens_and_is_named():
    fused = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2).eval()
    x = torch.randn(2, 6, 4)
    for bad in (torch.zeros(2, 6, dtype=torch.bool)[:1].expand(2, 6)[:, :1], torch.zeros(2, 7, dtype=torch.bool),
                torch.zeros(6, dtype=torch.bool), torch.zeros(1, 6, dtype=torch.bool)):
        message = says(ValueError, lambda: fused(x, bad), "`padding_mask`", "(2, 6)", "形状必须是")
        assert "unsqueeze" not in message
    says(ValueError, lambda: fused(x[:1], torch.zeros(2, 6, dtype=torch.bool)), "`padding_mask`", "(1, 6)")
    says(TypeError, lambda: fused(x, torch.zeros(2, 6)), "`padding_mask`", "布尔")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_or_inf_in_queries_keys_and_values(bad):
    x = torch.rand(1, 6, 3)
    x[0, 2, 1] = bad
    says(ValueError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(x), "NaN or inf", "NaN")
    q = torch.rand(5, 4)
    v = q.clone()
    v[1, 1] = bad
    says(ValueError, lambda: au.scaled_dot_product_attention(q, q, v), "`values`", "NaN")


def test_the_fast_finite_check_still_sees_nan_next_to_a_huge_sum():
    x = torch.full((1, 6, 3), 3e38)  # the sum overflows to inf although every entry is finite
    assert torch.allclose(au.stable_softmax(x), torch.full((1, 6, 3), 1 / 3))
    x[0, 0, 0] = math.nan
    says(ValueError, lambda: au.stable_softmax(x), "NaN or inf")
    says(ValueError, lambda: au.FusedMultiHeadAttention(3, 4, 6, 0.0, 2)(x), "NaN or inf")


def test_fully_masked_rows_give_zeros_and_finite_gradients():
    hidden = torch.tensor([[True, True, True], [False, True, True], [False, False, True]])  # row 0 sees nothing
    q = torch.randn(1, 3, 4, requires_grad=True)
    context, weights = au.scaled_dot_product_attention(q, q, q, mask=hidden)
    assert torch.equal(context[0, 0], torch.zeros(4)) and torch.equal(weights[0, 0], torch.zeros(3))
    context.sum().backward()
    assert torch.isfinite(q.grad).all()
    # the same policy as torch's own SDPA (True = may attend there)
    reference = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=~hidden)
    assert torch.allclose(context, reference, atol=1e-6)
    everything_hidden = au.scaled_dot_product_attention(q, q, q, mask=torch.tensor(True))[0]
    assert torch.equal(everything_hidden, torch.zeros_like(everything_hidden))


def test_stable_softmax_gives_zeros_for_a_row_of_minus_inf():
    scores = torch.tensor([[1.0, -math.inf], [-math.inf, -math.inf]])
    assert torch.equal(au.stable_softmax(scores), torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


@pytest.mark.parametrize("call, phrase", [
    (lambda: au.MultiHeadAttention(4, 4, None, 0.0, 2), "context_length must be an integer"),
    (lambda: au.MultiHeadAttention(4, 4, 8.0, 0.0, 2), "write 8"),
    (lambda: au.CausalAttention(4, 4, -1, 0.0), "context_length must be an integer of at least 1, got -1"),
    (lambda: au.CausalAttention(-1, 2, 6, 0.0), "d_in must be an integer of at least 1"),
    (lambda: au.SelfAttentionV1(2.5, 4), "d_in must be an integer"),
    (lambda: au.FusedMultiHeadAttention(4, 4, None, 0.0, 2), "context_length"),
    (lambda: au.MultiHeadAttention(4, 0, 8, 0.0, 2), "d_out must be an integer of at least 1"),
    (lambda: au.MultiHeadAttention(4, 4, 8, 0.0, True), "True and False are not sizes"),
    (lambda: au.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=0), "num_heads must be an integer of at least 1"),
])
def test_sizes(call, phrase):
    message = says((TypeError, ValueError), call, phrase)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in message.splitlines()[1])


def test_numpy_and_torch_integers_are_sizes():
    assert au.MultiHeadAttention(4, 4, 8, 0.0, np.int64(2)).num_heads == 2
    assert au.FusedMultiHeadAttention(4, 4, torch.tensor(8), 0.0, 2).context_length == 8


@pytest.mark.parametrize("p", ["0.1", None, True, False])
def test_dropout_of_the_wrong_type(p):
    says(TypeError, lambda: au.MultiHeadAttention(4, 4, 8, p, 2), "dropout must be a number in [0, 1)", "区间")
    q = torch.rand(5, 4)
    says(TypeError, lambda: au.scaled_dot_product_attention(q, q, q, dropout_p=p), "dropout_p")


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5, math.nan])
def test_dropout_out_of_range(p):
    says(ValueError, lambda: au.CausalAttention(3, 2, 6, p), "dropout must be in [0, 1)", "区间")


def test_a_rate_changed_after_construction_is_checked_where_it_is_used():
    fused = au.FusedMultiHeadAttention(4, 4, 8, 0.0, 2)
    fused.dropout = 1.5
    says(ValueError, lambda: fused(torch.rand(1, 3, 4)), "dropout must be in [0, 1)")
    book = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    book.dropout.p = 1.5
    says(ValueError, lambda: book(torch.rand(1, 3, 4)), "dropout")


def test_training_flag_must_be_a_bool():
    q = torch.rand(5, 4)
    says(TypeError, lambda: au.scaled_dot_product_attention(q, q, q, training="yes"), "training must be True or False")


def test_values_with_the_wrong_number_of_rows_or_batch():
    q = torch.randn(2, 5, 4)
    says(ValueError, lambda: au.scaled_dot_product_attention(q, q, torch.randn(2, 4, 4)), "one row per key", "每个键对应一行")
    says(ValueError, lambda: au.scaled_dot_product_attention(q, q, torch.randn(3, 2, 5, 4)), "more batch dimensions")
    says(ValueError, lambda: au.attention_scores(torch.rand(2, 5, 3), torch.rand(3, 5, 3)), "leading dimensions", "批大小")


@pytest.mark.parametrize("call, error", [
    (lambda: au.stable_softmax([1.0, 2.0]), TypeError),
    (lambda: au.naive_softmax(torch.tensor([1, 2])), TypeError),
    (lambda: au.sum_normalize(torch.tensor([1.0, math.nan])), ValueError),
    (lambda: au.stable_softmax(torch.rand(3), dim=1), ValueError),
    (lambda: au.causal_mask(2.5), TypeError),
    (lambda: au.causal_mask(True), TypeError),
    (lambda: au.causal_mask("3"), TypeError),
    (lambda: au.causal_mask(-1), ValueError),
    (lambda: au.scaled_dot_product_attention(torch.rand(5, 4), torch.rand(5, 4), torch.rand(5, 4).tolist()), TypeError),
    (lambda: au.setup(seed=-1), ValueError),
    (lambda: au.setup(seed=1.5), TypeError),
    (lambda: au.example_batch(-1), ValueError),
    (lambda: au.sliding_window_pairs([1, 2, 3, 4], -2), ValueError),
    (lambda: au.sliding_window_pairs([1, 2, 3, 4], 0), ValueError),
    (lambda: au.sliding_window_pairs("abcd", 2), TypeError),
])
def test_functional_helpers_follow_the_contract(call, error):
    message = says(error, call)
    assert len(message.splitlines()) == 2


def test_softmax_of_an_empty_row_is_empty():
    assert au.stable_softmax(torch.rand(3, 0)).shape == (3, 0)


def test_setup_validates_before_any_side_effect():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    threads = torch.get_num_threads()
    says(ValueError, lambda: au.setup(seed=1, threads=1, language="fr"), "language must be 'en' or 'zh'")
    assert torch.get_num_threads() == threads and torch.equal(torch.rand(3), expected)


def test_example_batch_of_zero_is_empty():
    assert au.example_batch(0).shape == (0, 6, 3)


def test_from_multihead_copies_mode_and_requires_grad():
    source = au.MultiHeadAttention(4, 4, 8, 0.5, 2).eval()
    source.W_key.weight.requires_grad_(False)
    fused = au.FusedMultiHeadAttention.from_multihead(source)
    assert not fused.training
    assert not fused.qkv.weight.requires_grad and fused.out_proj.weight.requires_grad
    x = torch.randn(2, 5, 4)
    assert torch.allclose(fused(x), source(x), atol=1e-5)


class BooksMultiHeadAttention(torch.nn.Module):
    """The attributes of the book's own class: no d_in or context_length, a float `mask` buffer."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = torch.nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = torch.nn.Linear(d_out, d_out)
        self.dropout = torch.nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))


def test_from_multihead_takes_the_books_own_class():
    book = BooksMultiHeadAttention(4, 4, 8, 0.0, 2)
    ours = au.MultiHeadAttention(4, 4, 8, 0.0, 2)
    ours.load_state_dict(book.state_dict())
    fused = au.FusedMultiHeadAttention.from_multihead(book)
    x = torch.randn(2, 8, 4)
    assert fused.context_length == 8 and torch.allclose(fused(x), ours(x), atol=1e-5)


def test_from_multihead_refuses_anything_else():
    says(TypeError, lambda: au.FusedMultiHeadAttention.from_multihead(au.MultiHeadAttentionWrapper(4, 4, 8, 0.0, 2)),
         "from_multihead copies a MultiHeadAttention", "MultiHeadAttentionWrapper", "只能复制")


def test_return_weights_everywhere():
    x = au.example_batch()
    for module in (au.SelfAttentionV1(3, 2), au.SelfAttentionV2(3, 2), au.CausalAttention(3, 2, 6, 0.0),
                   au.MultiHeadAttention(3, 4, 6, 0.0, 2)):
        context, weights = module(x, return_weights=True)
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-6)
    context, weights = au.MultiHeadAttentionWrapper(3, 2, 6, 0.0, 3)(x, return_weights=True)
    assert context.shape == (2, 6, 6) and weights.shape == (2, 3, 6, 6)


def test_not_a_tensor():
    says(TypeError, lambda: au.SelfAttentionV1(3, 2)([[0.1, 0.2, 0.3]]), "must be a torch.Tensor", "张量")


def test_queries_and_keys_of_different_width():
    says(ValueError, lambda: au.attention_scores(torch.rand(6, 2), torch.rand(6, 3)), "same last dimension", "最后一维")


def test_scores_that_overflow_their_dtype_are_an_error_not_nan():
    half = au.MultiHeadAttention(4, 4, 8, 0.0, 2).half()
    says(ValueError, lambda: half((torch.randn(2, 5, 4) * 300).half()), "overflowed torch.float16", "float32", "表示范围")
    says(ValueError, lambda: au.MultiHeadAttention(4, 4, 8, 0.0, 2)(torch.randn(2, 5, 4) * 1e30),
         "overflowed torch.float32", "x.double()")
    assert torch.isfinite(au.MultiHeadAttention(4, 4, 8, 0.0, 2)(torch.randn(2, 5, 4) * 1e4)).all()


def test_input_on_another_device_than_the_module():
    says(TypeError, lambda: au.MultiHeadAttention(3, 4, 6, 0.0, 2)(torch.empty(1, 6, 3, device="meta")),
         "is on meta but the module's weights are on cpu", "x.to('cpu')", "移动输入")


def has_chinese(line: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in line)


def test_the_message_leads_with_the_learners_language():
    """Lesson 5's too-long input: English first in an English run, Chinese first in a Chinese one, same two lines."""
    from attention_utils.language import choose_language

    module = au.CausalAttention(3, 2, 6, 0.0)
    too_long = torch.rand(1, 8, 3)
    english_run = says(ValueError, lambda: module(too_long), "context_length=6", "context_length=6")
    choose_language("zh")
    try:
        chinese_run = says(ValueError, lambda: module(too_long), "context_length=6")
    finally:
        choose_language("en")
    en_first, zh_second = english_run.splitlines()
    zh_first, en_second = chinese_run.splitlines()
    assert not has_chinese(en_first) and has_chinese(zh_second), english_run
    assert has_chinese(zh_first) and not has_chinese(en_second), chinese_run
    assert (en_first, zh_second) == (en_second, zh_first)
    assert str(pytest.raises(ValueError, lambda: module(too_long)).value) == english_run  # back to English first


def test_a_checker_reports_an_error_in_the_learners_language(capsys):
    """A package error inside a checker is quoted by its first line: the Chinese one in a Chinese lesson."""
    from attention_utils.exercises import checker
    from attention_utils.language import choose_language

    @checker
    def check_something(answer):
        au.CausalAttention(3, 2, 6, 0.0)(answer)

    choose_language("zh")
    try:
        check_something(torch.rand(1, 8, 3))
    finally:
        choose_language("en")
    said = capsys.readouterr().out
    assert said.startswith("❌ 还不对") and "输入有 8 个词元" in said and "The input" not in said, said


@pytest.mark.parametrize("value, expected", [("1", 1), ("3,2", 3), (" 4 ", 4), ("", 2), ("0", 2), ("abc", 2),
                                             ("²", 2), ("-1", 2), ("2000", 2)])
def test_default_threads_follow_omp_num_threads_when_it_is_a_usable_count(monkeypatch, value, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads_from_environment() == expected


@pytest.mark.parametrize("value, expected", [(None, "2"), ("1", "1")])
def test_setup_uses_one_thread_under_make_test_and_two_otherwise(value, expected):
    """make test exports OMP_NUM_THREADS=1 to every kernel; a learner without it gets the 2 threads of the stored runs."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | ({"OMP_NUM_THREADS": value} if value else {})
    code = "import torch, attention_utils as au; au.setup(); print(torch.get_num_threads())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected
