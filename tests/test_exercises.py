"""Exercise checkers accept the right answer and explain a wrong one, in both languages."""

import torch

import attention_utils as au
from attention_utils.exercises import lesson01


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_lesson01_checkers(capsys):
    lesson01.check_step_one_score(...)
    assert "Not yet" in verdict(capsys)
    lesson01.check_step_one_score(0.05 * 0.77 + 0.80 * 0.25 + 0.55 * 0.10)
    assert "Correct" in verdict(capsys)
    lesson01.check_step_one_score(0.3)
    out = verdict(capsys)
    assert "Not yet" in out and "相乘" in out

    x = au.example_inputs()
    lesson01.check_cosine_matrix(x @ x.T)  # dot products, not cosines
    assert "different values" in verdict(capsys)
    lesson01.check_cosine_matrix(torch.nn.functional.cosine_similarity(x[:, None], x[None], dim=-1))
    assert "Correct" in verdict(capsys)

    lesson01.check_closest_to_with("starts")
    assert "Not yet" in verdict(capsys)
    lesson01.check_closest_to_with("journey")  # cosine 0.9817 vs 0.9782 for starts, by hand
    assert "Correct" in verdict(capsys)
