"""Lesson 1's exercise checkers accept the right answer and explain a wrong one, in both languages."""

import torch

import attention_utils as au
from attention_utils.exercises import lesson01


def verdict(capsys) -> str:
    return capsys.readouterr().out


def loop_dot(a, b):
    total = 0.0
    for x, y in zip(a, b):
        total += x * y
    return total


def test_dot_loop_accepts_a_loop_and_reports_step_one(capsys):
    lesson01.check_dot_loop(loop_dot)
    out = verdict(capsys)
    assert "Correct" in out and "0.2935" in out  # 0.05*0.77 + 0.80*0.25 + 0.55*0.10, by hand


def test_dot_loop_explains_each_likely_mistake(capsys):
    lesson01.check_dot_loop(...)
    assert "Replace the ..." in verdict(capsys)

    def unfinished(a, b):
        ...

    lesson01.check_dot_loop(unfinished)
    assert "returns None" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: [x * y for x, y in zip(a, b)])  # forgot to add the products
    out = verdict(capsys)
    assert "add the products" in out and "加起来" in out
    lesson01.check_dot_loop(lambda a, b: torch.tensor(a) * torch.tensor(b))  # the same slip with a tensor
    assert "add the products" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: a @ b)  # the forbidden shortcut fails on plain lists
    assert "plain Python lists" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: torch.dot(a, b))
    assert "plain Python lists" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: sum(a[i] * b[i] for i in range(3)))  # fixed at three features
    assert "Not yet" in verdict(capsys)
    lesson01.check_dot_loop(lambda a, b: sum(a[i] * b[i] for i in range(4)))
    assert "range(len(a))" in verdict(capsys)
    lesson01.check_dot_loop(0.2935)
    assert "Define a function" in verdict(capsys)


def test_cosine_matrix(capsys):
    x = au.example_inputs()
    lesson01.check_cosine_matrix(x @ x.T)  # dot products, not cosines
    assert "different values" in verdict(capsys)
    lesson01.check_cosine_matrix(torch.nn.functional.cosine_similarity(x[:, None], x[None], dim=-1))
    assert "Correct" in verdict(capsys)


def test_ranking_for_step(capsys):
    # cosines with step from torch's own cosine_similarity: with 0.9611, journey 0.9141, starts 0.9038,
    # Your 0.6493, one 0.3701; the dot products put journey (1.0865) and starts (1.0605) ahead of with (0.6565)
    x = au.example_inputs()
    cos = torch.nn.functional.cosine_similarity(x, x[5:6], dim=-1)
    order = [au.TOKENS[i] for i in cos.argsort(descending=True).tolist() if i != 5]
    assert order == ["with", "journey", "starts", "Your", "one"]
    lesson01.check_ranking_for_step(order)
    assert "Correct" in verdict(capsys)
    lesson01.check_ranking_for_step(["journey", "starts", "with", "Your", "one"])
    assert "order of the dot products" in verdict(capsys)
    lesson01.check_ranking_for_step(list(reversed(order)))
    assert "reversed" in verdict(capsys)
    lesson01.check_ranking_for_step(["step", *order[:4]])
    assert "Leave \"step\" itself out" in verdict(capsys)
    lesson01.check_ranking_for_step(["with", "with", "starts", "Your", "one"])
    assert "exactly once" in verdict(capsys)
    lesson01.check_ranking_for_step(["journey", "with", "starts", "Your", "one"])
    assert "Not yet" in verdict(capsys)
    lesson01.check_ranking_for_step("with")
    assert "list of token strings" in verdict(capsys)


def test_numbers_are_read_in_every_form_a_learner_may_produce():
    import fractions

    import numpy as np

    from attention_utils.exercises import as_real_number, as_real_tensor, as_whole_number

    for whole in (136, 136.0, np.int64(136), np.float32(136), torch.tensor(136), torch.tensor(136.0, dtype=torch.float64),
                  np.array(136), fractions.Fraction(272, 2)):
        assert as_whole_number(whole) == 136, whole
    for not_whole in (True, np.bool_(True), 136.5, float("nan"), "136", [136], torch.tensor([136, 1]), torch.tensor(136j),
                      None, np.array([136])):
        assert as_whole_number(not_whole) is None, not_whole
    assert as_real_number(np.float32(0.5)) == 0.5 and as_real_number(torch.tensor(0.5)) == 0.5
    assert as_real_number(float("inf")) is None and as_real_number(False) is None and as_real_number(1j) is None
    assert as_real_tensor(np.ones((2, 2))).dtype == torch.float64
    assert as_real_tensor(torch.ones(2, dtype=torch.cfloat)) is None and as_real_tensor(torch.ones(2).bool()) is None


def test_a_checker_answers_with_a_verdict_whatever_goes_wrong_inside_it(capsys):
    from attention_utils.exercises import checker

    class Awkward:
        def __eq__(self, other):
            raise RuntimeError("no comparing me")

    @checker
    def check_something(answer):
        assert answer == 3

    check_something(Awkward())
    out = capsys.readouterr().out
    assert out.startswith("❌ Not yet / 还不对") and "RuntimeError: no comparing me" in out and "无法检查" in out
