"""Lesson 13's figures and explorer, driven headless: every control redraws, a bad prompt draws its message, both languages."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch
from explorer_harness import drive, language  # noqa: F401 (a fixture)

from attention_utils.models import head_scores
from attention_utils.explorers import lesson13

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def loaded(smollm2):
    return smollm2


def test_every_control_redraws(loaded, language):
    model, tokenizer = loaded
    label = "prompt" if language == "en" else "提示词"
    redrawn = drive(lesson13.show_attention, model, tokenizer, "Harry Potter went to school. Later, Harry",
                    moves={label: "The cost is $5. The cost is"})  # a "$" must not start a formula
    assert len(redrawn) == 3 and all(redrawn.values()), redrawn
    plt.close("all")


@pytest.mark.parametrize("prompt, words", [("", "no tokens"), (" word" * 41, "at most 40")])
def test_a_bad_prompt_draws_its_message(loaded, prompt, words):
    model, tokenizer = loaded
    run = lesson13._LastRun(model, tokenizer)
    figure = lesson13.draw_attention(run, prompt, 0, 0)
    shown = " ".join(t.get_text() for t in figure.axes[0].texts)
    assert words in shown
    plt.close(figure)


def test_the_induction_head_reads_the_token_after_the_earlier_copy(loaded):
    """The lesson's explorer prompt: from the last "Mrs", layer 18 head 6 looks hardest at " D", which came after "Mrs" before."""
    model, tokenizer = loaded
    ids = torch.tensor([tokenizer.encode("Mr and Mrs Dursley lived at number four, Privet Drive. One morning, Mr and Mrs")])
    _, maps = head_scores.attention_maps(model, ids)
    assert tokenizer.labels(ids[0])[int(maps[18, 6, -1].argmax())] == " D"


def test_static_figures(loaded):
    model, tokenizer = loaded
    share = torch.rand(30, 9)
    assert len(lesson13.draw_sinks(share).axes) == 2
    maps = torch.rand(2, 6, 6).softmax(-1)
    assert len(lesson13.draw_head_maps(maps, list("abc$de"), ["x", "y"]).axes) == 3
    plt.close("all")
