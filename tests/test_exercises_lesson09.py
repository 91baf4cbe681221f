"""Lesson 9 checkers accept right answers, computed here by other routes, and name typical mistakes."""

import math

import torch

from attention_utils.exercises import lesson09


def verdict(capsys) -> str:
    return capsys.readouterr().out


def softmax_route():
    """The statistics after both blocks from torch.logsumexp over all five scores (no running update)."""
    scores = torch.tensor(lesson09._FIRST_SCORES + lesson09.NEW_SCORES, dtype=torch.float64)
    values = torch.tensor(lesson09._FIRST_VALUES + lesson09.NEW_VALUES, dtype=torch.float64)
    new_max = scores.max()
    new_sum = torch.exp(torch.logsumexp(scores, 0) - new_max)
    return new_max.item(), new_sum.item(), torch.softmax(scores, 0) @ values * new_sum


def test_update_by_hand(capsys):
    lesson09.check_update(..., 1.0, torch.zeros(2))
    assert "Not yet" in verdict(capsys)
    new_max, new_sum, new_output = softmax_route()
    lesson09.check_update(new_max, new_sum, new_output.float())
    assert "Correct" in verdict(capsys)
    assert math.isclose(new_max, 2.9)
    old_max, old_sum, old_output = lesson09.first_block_state()
    lesson09.check_update(2.1, new_sum, new_output)
    assert "larger of the old maximum" in verdict(capsys)
    new_terms = torch.exp(torch.tensor(lesson09.NEW_SCORES, dtype=torch.float64) - 2.9)
    lesson09.check_update(2.9, old_sum + new_terms.sum().item(), new_output)
    assert "exp(2.1 - 2.9)" in verdict(capsys)
    not_rescaled = old_output + new_terms @ torch.tensor(lesson09.NEW_VALUES, dtype=torch.float64)
    lesson09.check_update(2.9, new_sum, not_rescaled)
    assert "same factor" in verdict(capsys)
    lesson09.check_update(2.9, new_sum, new_output / new_sum)
    assert "already divided" in verdict(capsys)
    lesson09.check_update(2.9, new_sum, torch.zeros(3))
    assert "shape (2,)" in verdict(capsys)
    lesson09.check_update(torch.tensor(2.9), torch.tensor(new_sum), new_output)
    assert "Correct" in verdict(capsys)


def test_first_block_state_is_what_a_softmax_gives():
    old_max, old_sum, old_output = lesson09.first_block_state()
    scores = torch.tensor(lesson09._FIRST_SCORES)
    assert math.isclose(old_max, 2.1, abs_tol=1e-6)
    assert math.isclose(old_sum, sum(math.exp(s - 2.1) for s in lesson09._FIRST_SCORES), rel_tol=1e-6)
    expected = torch.softmax(scores, 0).double() @ torch.tensor(lesson09._FIRST_VALUES, dtype=torch.float64) * old_sum
    assert torch.allclose(old_output, expected, atol=1e-6)


def test_visited_tiles(capsys):
    # 1000 = 15 * 64 + 40: 16 block rows; block row i visits key blocks 0..i, so 1 + 2 + ... + 16 = 136
    lesson09.check_visited_tiles(136)
    assert "Correct" in verdict(capsys)
    lesson09.check_visited_tiles(136.0)
    assert "Correct" in verdict(capsys)
    for wrong, words in ((256, "every tile"), (120, "diagonal tiles"), (120, "shorter block"), (5, "0 to i")):
        lesson09.check_visited_tiles(wrong)
        out = verdict(capsys)
        assert "Not yet" in out and words in out, (wrong, out)
    lesson09.check_visited_tiles("136")
    assert "whole number" in verdict(capsys)


def test_tile_elements(capsys):
    lesson09.check_tile_elements(8 * 12 * 128 * 256)
    assert "Correct" in verdict(capsys)
    for wrong, words in ((8 * 12 * 4096 * 4096, "whole (T, T)"), (128 * 256, "every sentence and head"),
                         (8 * 12 * 128 * 256 * 4, "not bytes"), (8 * 12 * 128 * 64, "running output"), (7, "T does not appear")):
        lesson09.check_tile_elements(wrong)
        out = verdict(capsys)
        assert "Not yet" in out and words in out, (wrong, out)
