"""Lesson 10 checkers accept right answers and explain typical wrong ones (keys, positions, silenced heads)."""

import math

import torch

from attention_utils import tasks, training
from attention_utils.exercises import lesson10
from attention_utils.tiny_model import TinyAttentionModel


def verdict(capsys) -> str:
    return capsys.readouterr().out


def test_predicted_keys(capsys):
    lesson10.check_predicted_keys(..., 2, "b")
    assert "Not yet" in verdict(capsys)
    lesson10.check_predicted_keys(3, 2, "b")  # the query itself, not one step back
    assert "Not yet" in verdict(capsys)
    lesson10.check_predicted_keys(8, 2, "b")  # one step back from the other query
    assert "Not yet" in verdict(capsys)
    lesson10.check_predicted_keys(2, 5, "b")  # where 'g' was, not the step after it
    out = verdict(capsys)
    assert "Not yet" in out and "one step after" in out
    lesson10.check_predicted_keys(2, 6, "g")  # right keys, wrong letter
    assert "Not yet" in verdict(capsys)
    # by hand: "dgbf" repeats; position 3 is 'f', one step back is 2;
    # position 9 is 'g'; 'g' sat at 1 and 5, followed by 'b' at 2 and 6
    for key in (2, 6):
        lesson10.check_predicted_keys(2, key, "b")
        assert "Correct" in verdict(capsys)
    lesson10.check_predicted_keys(2.0, torch.tensor(6), "b")
    assert "Correct" in verdict(capsys)


def test_sinusoidal(capsys):
    table = torch.zeros(8, 4)
    for t in range(8):
        table[t] = torch.tensor([math.sin(t), math.cos(t), math.sin(t / 100), math.cos(t / 100)])  # 10000 ** (2/4) = 100
    lesson10.check_sinusoidal(table)
    assert "Correct" in verdict(capsys)
    lesson10.check_sinusoidal(table[:, [1, 0, 3, 2]])
    out = verdict(capsys)
    assert "Not yet" in out and "swapped" in out
    lesson10.check_sinusoidal(table[:, [0, 2, 1, 3]])  # all sines first
    assert "Not yet" in verdict(capsys)
    lesson10.check_sinusoidal(table[:6])
    assert "Not yet" in verdict(capsys)


def test_silenced(capsys):
    task = tasks.RepeatTask()
    torch.manual_seed(0)
    model = TinyAttentionModel(task.vocab_size, task.length, num_heads=1, num_layers=2)
    training.train(model, task, steps=600, seed=0, progress=False)
    batch = training.held_out_batch(task, 0)
    lesson10.check_silenced(..., model, batch)
    assert "Not yet" in verdict(capsys)
    lesson10.check_silenced({0: 0.5}, model, batch)
    assert "Not yet" in verdict(capsys)
    full = training.accuracy(model, batch)
    lesson10.check_silenced({0: full, 1: full}, model, batch)  # nothing silenced
    assert "Not yet" in verdict(capsys)
    answer = {}
    for layer in (0, 1):  # silenced by zeroing the head's rows of W_value, not by the checker's hook
        saved = model.layers[layer].W_value.weight.detach().clone()
        with torch.no_grad():
            model.layers[layer].W_value.weight.zero_()
        answer[layer] = training.accuracy(model, batch)
        with torch.no_grad():
            model.layers[layer].W_value.weight.copy_(saved)
    lesson10.check_silenced(answer, model, batch)
    out = verdict(capsys)
    assert "Correct" in out and "both" in out
    assert max(answer.values()) < 0.5 < full
