"""Lesson 6 checkers accept right answers and explain typical wrong ones (dropout scale, train/eval)."""

import torch

import attention_utils as au
from attention_utils.exercises import lesson06


def verdict(capsys) -> str:
    return capsys.readouterr().out


def right_dropout(x, p):
    return x * (torch.rand_like(x) >= p) / (1 - p)


def test_dropout_function(capsys):
    lesson06.check_dropout_function(...)
    assert "Not yet" in verdict(capsys)

    def unfinished(x, p):
        ...

    lesson06.check_dropout_function(unfinished)
    assert "returns nothing" in verdict(capsys)

    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) >= p) / p)  # the 1/p mistake
    out = verdict(capsys)
    assert "Not yet" in out and "1/p" in out
    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) < p) / (1 - p))  # keeps with probability p
    out = verdict(capsys)
    assert "Not yet" in out and "DROP" in out
    lesson06.check_dropout_function(lambda x, p: x * (torch.rand_like(x) >= p))  # no scaling
    assert "Not yet" in verdict(capsys)

    def in_place(x, p):
        return x.mul_((torch.rand_like(x) >= p) / (1 - p))

    lesson06.check_dropout_function(in_place)
    assert "in place" in verdict(capsys)

    lesson06.check_dropout_function(right_dropout)
    assert "Correct" in verdict(capsys)
    lesson06.check_dropout_function(lambda x, p: torch.nn.functional.dropout(x, p, training=True))
    assert "Correct" in verdict(capsys)


def test_checker_leaves_the_random_stream_alone(capsys):
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    lesson06.check_dropout_function(right_dropout)
    assert torch.equal(torch.rand(3), expected)
    verdict(capsys)


def test_eval_context(capsys):
    torch.manual_seed(123)
    module = au.CausalAttention(3, 2, 6, 0.5)
    lesson06.check_eval_context(module(au.example_batch()))  # still in training mode
    out = verdict(capsys)
    assert "Not yet" in out and ".eval()" in out
    lesson06.check_eval_context(module.eval()(au.example_batch()))
    assert "Correct" in verdict(capsys)
    # the book's printed context vectors for seed 123 (first sentence), typed from the book
    printed = torch.tensor([[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
                            [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]])
    lesson06.check_eval_context(torch.stack([printed, printed]))
    assert "Correct" in verdict(capsys)


def test_eval_context_and_training_average(capsys):
    torch.manual_seed(123)
    module = au.CausalAttention(3, 2, 6, 0.5)
    batch = au.example_batch()
    with torch.no_grad():
        eval_context = module.eval()(batch)
        lesson06.check_eval_context(eval_context, ...)
        assert "Not yet" in verdict(capsys)
        lesson06.check_eval_context(eval_context, eval_context)  # forgot to switch dropout back on
        assert ".train()" in verdict(capsys)
        module.train()
        lesson06.check_eval_context(eval_context, module(batch))  # a single pass is far from its expectation
        assert "more training passes" in verdict(capsys)
        average = torch.stack([module(batch) for _ in range(2000)]).mean(dim=0)
        lesson06.check_eval_context(eval_context, average)
        assert "Correct" in verdict(capsys)
        lesson06.check_eval_context(average, average)  # (a) answered in training mode
        assert ".eval()" in verdict(capsys)


def test_zero_row_probability(capsys):
    lesson06.check_zero_row_probability(...)
    assert "Not yet" in verdict(capsys)
    lesson06.check_zero_row_probability(torch.tensor([0.8, 0.64, 0.512, 0.4096, 0.32768, 0.262144]))
    out = verdict(capsys)
    assert "Not yet" in out and "SURVIVES" in out
    lesson06.check_zero_row_probability(torch.full((6,), 0.2))
    assert "Not yet" in verdict(capsys)
    lesson06.check_zero_row_probability(torch.tensor([0.2, 0.04, 0.008, 0.0016, 0.00032, 0.000064]))
    assert "Correct" in verdict(capsys)
