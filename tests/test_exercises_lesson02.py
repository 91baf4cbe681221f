"""Lesson 2 checkers accept the right answer and explain a wrong one, in both languages."""

import math

import torch

import attention_utils as au
from attention_utils.exercises import lesson02


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_angle_your_step(capsys):
    lesson02.check_angle_your_step(...)
    assert "Not yet" in verdict(capsys)
    x = au.example_inputs().double()
    cosine = x[0] @ x[5] / (x[0].norm() * x[5].norm())
    lesson02.check_angle_your_step(torch.arccos(cosine))  # radians
    out = verdict(capsys)
    assert "Not yet" in out and "rad2deg" in out
    lesson02.check_angle_your_step(cosine.item())
    assert "arccos" in verdict(capsys)
    lesson02.check_angle_your_step(torch.rad2deg(torch.arccos(cosine)))
    assert "Correct" in verdict(capsys)
    lesson02.check_angle_your_step(49.51)  # by hand: arccos(0.6491) = 49.51°
    assert "Correct" in verdict(capsys)
    lesson02.check_angle_your_step("49.5")
    assert "one number" in verdict(capsys)


def test_widest_pair(capsys):
    lesson02.check_widest_pair(("Your", "one"))
    assert "Not yet" in verdict(capsys)
    lesson02.check_widest_pair(("one", "one"))
    assert "two different tokens" in verdict(capsys)
    lesson02.check_widest_pair(["step", "One"])  # 68.3°, in any order and case
    out = verdict(capsys)
    assert "Correct" in out and "68.3" in out


def test_rebuild_from_angles(capsys):
    def rebuild(lengths, angles):
        return torch.outer(lengths, lengths) * torch.cos(torch.deg2rad(angles))

    lesson02.check_rebuild_from_angles(rebuild)
    assert "Correct" in verdict(capsys)
    lesson02.check_rebuild_from_angles(lambda lengths, angles: torch.outer(lengths, lengths) * torch.cos(angles))
    out = verdict(capsys)
    assert "Not yet" in out and "deg2rad" in out
    x = au.example_inputs()
    lesson02.check_rebuild_from_angles(lambda lengths, angles: x @ x.T)  # the shortcut ignores its arguments
    out = verdict(capsys)
    assert "Not yet" in out and "made-up vectors" in out
    lesson02.check_rebuild_from_angles(lambda lengths, angles: lengths)
    assert "shape" in verdict(capsys)
    lesson02.check_rebuild_from_angles(lambda lengths, angles: torch.zeros_like(angles))
    assert "our six tokens" in verdict(capsys)
    lesson02.check_rebuild_from_angles(x @ x.T)
    assert "Define a function" in verdict(capsys)


def test_the_angle_between_one_and_step_by_hand():
    x = au.example_inputs().double()
    cosine = x[4] @ x[5] / (x[4].norm() * x[5].norm())  # 0.2935 / (0.8157 × 0.9721)
    assert math.isclose(math.degrees(math.acos(cosine)), 68.28, abs_tol=0.01)
