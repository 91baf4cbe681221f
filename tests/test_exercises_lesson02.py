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


def test_dot_from_angles(capsys):
    x = au.example_inputs()
    lengths = x.norm(dim=1)
    unit = x / lengths[:, None]
    degrees = torch.rad2deg(torch.arccos((unit @ unit.T).clamp(-1, 1)))
    lesson02.check_dot_from_angles(torch.outer(lengths, lengths) * torch.cos(degrees))  # forgot radians
    out = verdict(capsys)
    assert "Not yet" in out and "deg2rad" in out
    lesson02.check_dot_from_angles(torch.zeros(6, 6))
    assert "different values" in verdict(capsys)
    lesson02.check_dot_from_angles(torch.ones(6))
    assert "shape (6, 6)" in verdict(capsys)
    lesson02.check_dot_from_angles(torch.outer(lengths, lengths) * torch.cos(torch.deg2rad(degrees)))
    assert "Correct" in verdict(capsys)
    lesson02.check_dot_from_angles(x @ x.T)
    assert "Correct" in verdict(capsys)
    assert math.isclose(float(degrees[4, 5]), 68.28, abs_tol=0.01)
