"""Checkers for lesson 10: predict where two trained heads look, train with sinusoidal positions, silence heads."""

from __future__ import annotations

import numpy as np
import torch

from ..tiny_model import TinyAttentionModel
from . import as_real_number, as_whole_number, checker, feedback, missing

SEQUENCE = "dgbfdgbfdgbfdgbf"  # the repeating input of exercise 1 (period 4)
FIRST_ROUND_QUERY = 3  # exercise 1 asks where layer 0 looks from here (counted from 0): the letter "f"
QUERY = 9  # and where layer 1 looks from here, and what comes next: the letter "g"


def _as_letter(answer: object) -> str | None:
    """A one-letter answer as a lower-case str (a numpy string counts), or None."""
    if isinstance(answer, np.ndarray) and answer.ndim == 0 and answer.dtype.kind == "U":
        answer = answer.item()
    if not isinstance(answer, str) or len(answer.strip()) != 1:
        return None
    return answer.strip().lower()


@checker
def check_predicted_keys(layer0_key: object, layer1_key: object, next_letter: object) -> None:
    """In SEQUENCE: the previous-token head's key from FIRST_ROUND_QUERY; from QUERY an induction key and the letter."""
    if missing(layer0_key) or missing(layer1_key) or missing(next_letter):
        return
    keys = [as_whole_number(layer0_key), as_whole_number(layer1_key)]
    if None in keys:
        return feedback(False, "Give both keys as whole numbers (positions counted from 0).",
                        "请用整数给出两个键的位置（从 0 开始数）。")
    if not all(0 <= key < len(SEQUENCE) for key in keys):
        return feedback(False, f"Positions run from 0 to {len(SEQUENCE) - 1}; got {keys[0]} and {keys[1]}.",
                        f"位置的范围是 0 到 {len(SEQUENCE) - 1}，你给出的是 {keys[0]} 和 {keys[1]}。")
    letter = _as_letter(next_letter)
    if letter is None:
        return feedback(False, "Give the next letter as a string of one letter, such as next_letter = 'd'.",
                        "请用只含一个字母的字符串作答，例如 next_letter = 'd'。")
    query_letter = SEQUENCE[QUERY]
    # keys whose previous letter equals the query's letter: where the same letter was seen, one step later
    induction_keys = [key for key in range(1, QUERY + 1) if SEQUENCE[key - 1] == query_letter]
    if keys[0] != FIRST_ROUND_QUERY - 1:
        return feedback(False, f"Layer 0's head looks one step back: from position {FIRST_ROUND_QUERY}, which position "
                        "is that?", f"层 0 的头往回看一步：从位置 {FIRST_ROUND_QUERY} 出发，那是哪个位置？")
    if keys[1] not in induction_keys:
        same_letter = keys[1] < QUERY and SEQUENCE[keys[1]] == query_letter
        hint_en = " (That is where the same letter was; the head looks one step after it.)" if same_letter else ""
        hint_zh = "（那是同一个字母出现的位置；这个头看的是它的下一个位置。）" if same_letter else ""
        return feedback(False, f"Layer 1's head looks for a key whose previous letter is '{query_letter}'.{hint_en}",
                        f"层 1 的头寻找前一个字母是“{query_letter}”的键。{hint_zh}")
    expected_letter = SEQUENCE[induction_keys[-1]]
    if letter != expected_letter:
        return feedback(False, "The keys are right; the prediction is the letter at layer 1's key.",
                        "两个键都对了；预测就是层 1 所看的键上的那个字母。")
    feedback(True, f"Position {FIRST_ROUND_QUERY - 1} for layer 0; any of {induction_keys} for layer 1; the next letter is "
             f"'{expected_letter}'. Run the next cell to compare with the trained model.",
             f"层 0 看位置 {FIRST_ROUND_QUERY - 1}；层 1 看 {induction_keys} 中的任意一个；下一个字母是"
             f"“{expected_letter}”。运行下一个单元格，和训练好的模型对照。")


def _accuracy(model: TinyAttentionModel, batch: tuple, silenced: tuple[int, int] | None = None) -> float:
    """Held-out accuracy computed here, optionally with head (layer, head)'s context zeroed before out_proj.

    A second route to the number (a forward hook, not `silence_head`'s zeroed W_value rows); the model's
    train/eval mode is put back as it was.
    """
    hooks = []
    if silenced is not None:
        layer, head = silenced
        attention = model.layers[layer]
        width = attention.head_dim

        def zero_head(_module: torch.nn.Module, inputs: tuple) -> tuple:
            merged = inputs[0].clone()  # (b, T, d_out): the heads side by side
            merged[..., head * width : (head + 1) * width] = 0.0
            return (merged,)

        hooks.append(attention.out_proj.register_forward_pre_hook(zero_head))
    was_training = model.training
    try:
        inputs, targets, scored = batch
        with torch.no_grad():
            predictions = model.eval()(inputs).argmax(-1)
        return (predictions[scored] == targets[scored]).float().mean().item()
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()


def _as_share(answer: object, name: str) -> float | None:
    """An accuracy between 0 and 1, or None after saying so."""
    value = as_real_number(answer)
    if value is None or not 0 <= value <= 1:
        feedback(False, f"{name} should be a number between 0 and 1 (the share of right answers).",
                 f"{name} 应是 0 到 1 之间的数（答对的比例）。")
        return None
    return value


@checker
def check_sinusoidal_accuracy(accuracy: object, model: object, batch: tuple) -> None:
    """Exercise 2: a reverse model trained with sinusoidal positions, and its held-out accuracy as the learner measured it."""
    if missing(accuracy) or missing(model):
        return
    if not isinstance(model, TinyAttentionModel):
        return feedback(False, f"Pass the model you trained (a TinyAttentionModel), not {type(model).__name__}.",
                        f"请传入你训练的模型（TinyAttentionModel），而不是 {type(model).__name__}。")
    if model.positions != "sinusoidal":
        return feedback(False, f"This model was built with positions={model.positions!r}; build it with "
                        'positions="sinusoidal", then train it.',
                        f"这个模型创建时用的是 positions={model.positions!r}；请用 positions='sinusoidal' 创建，再训练它。")
    value = _as_share(accuracy, "accuracy")
    if value is None:
        return
    expected = _accuracy(model, batch)
    if abs(value - expected) > 0.01:
        return feedback(False, f"Your number, {value:.3f}, differs from this model's held-out accuracy; measure it with "
                        "training.accuracy(model, held_out).",
                        f"你给出的 {value:.3f} 与这个模型的留出准确率不符；请用 training.accuracy(model, held_out) 测量。")
    if expected < 0.5:
        return feedback(False, f"The number matches, but this model gets only {expected:.0%} right: train it first, as in "
                        "section 4.", f"数值对上了，但这个模型只答对 {expected:.0%}：请先像第 4 节那样训练它。")
    feedback(True, f"{expected:.0%} held out with fixed sine and cosine waves: no trained position table is needed, the "
             "attention layer learns to read the waves.",
             f"用固定的正弦、余弦波，留出准确率为 {expected:.0%}：不需要可训练的位置表，注意力层自己学会了读取这些波形。")


@checker
def check_silenced(answer: object, model: TinyAttentionModel, batch: tuple) -> None:
    """Exercise 3: {layer: held-out accuracy with that layer's head 0 silenced} for every layer of `model`."""
    if missing(answer):
        return
    layers = list(range(len(model.layers)))
    if not isinstance(answer, dict):
        return feedback(False, f"Give a dict with one accuracy per layer, keys {layers}.",
                        f"请给出一个字典（dict），每层一个准确率，键为 {layers}。")
    by_layer = {as_whole_number(key): value for key, value in answer.items()}
    if None in by_layer or sorted(by_layer) != layers:
        found = ", ".join(repr(key) for key in answer)
        return feedback(False, f"The keys should be the layer numbers {layers} (ints); yours are {found or 'none'}.",
                        f"字典的键应为层号 {layers}（整数），你的是 {found or '空的'}。")
    for layer in layers:
        value = _as_share(by_layer[layer], f"answer[{layer}]")
        if value is None:
            return
        if abs(value - _accuracy(model, batch, silenced=(layer, 0))) > 0.01:
            return feedback(False, f"answer[{layer}] = {value:.3f} differs from what silencing gives; silence only "
                            f"layer {layer}'s head, and score only the scored positions.",
                            f"answer[{layer}] = {value:.3f} 与屏蔽后的结果不符；只屏蔽层 {layer} 的头，"
                            "并且只统计需要打分的位置。")
    if all(by_layer[layer] < 0.5 for layer in layers):
        return feedback(True, "Both numbers match, and both are far below the trained model's accuracy: the task needs "
                        "both heads, the previous-token head and the induction head.",
                        "两个数都对，而且都远低于训练好的模型的准确率：这个任务两个头缺一不可，前一词元头和归纳头都要有。")
    feedback(True, "Both numbers match. One of them stays high: in this model that head's job is partly done "
             "elsewhere. Look at its map again.",
             "两个数都对。其中一个仍然很高：在这个模型里，那个头的工作有一部分由别处完成。再看看它的注意力图。")
