"""Checkers for lesson 10: predict where two trained heads look, build sinusoidal positions, silence heads."""

from __future__ import annotations

import math

import torch

from . import as_whole_number, check_tensor_answer, feedback, missing

SEQUENCE = "dgbfdgbfdgbfdgbf"  # the repeating input of exercise 1 (period 4)
FIRST_ROUND_QUERY = 3  # exercise 1 asks where layer 0 looks from here (counted from 0): the letter 'f'
QUERY = 9  # and where layer 1 looks from here, and what comes next: the letter 'g'


def check_predicted_keys(layer0_key: object, layer1_key: object, next_letter: object) -> None:
    """In SEQUENCE: the previous-token head's key from FIRST_ROUND_QUERY; from QUERY an induction key and the letter."""
    if missing(layer0_key) or missing(layer1_key) or missing(next_letter):
        return
    keys = [as_whole_number(layer0_key), as_whole_number(layer1_key)]
    if None in keys:
        return feedback(False, "Give both keys as whole numbers (positions counted from 0).",
                        "请用整数给出两个键的位置（从 0 开始数）。")
    letter = SEQUENCE[QUERY]
    # keys whose previous letter equals the query's letter: where the same letter was seen, one step later
    induction_keys = [key for key in range(1, QUERY + 1) if SEQUENCE[key - 1] == letter]
    if keys[0] != FIRST_ROUND_QUERY - 1:
        return feedback(False, f"Layer 0's head looks one step back: from position {FIRST_ROUND_QUERY}, which position "
                        "is that?", f"层 0 的头往回看一步：从位置 {FIRST_ROUND_QUERY} 出发，那是哪个位置？")
    if keys[1] not in induction_keys:
        hint_en = " (That is where the same letter was; the head looks one step after it.)" if (
            keys[1] < QUERY and SEQUENCE[keys[1]] == letter) else ""
        hint_zh = "（那是同一个字母出现的位置；这个头看的是它的下一个位置。）" if hint_en else ""
        return feedback(False, f"Layer 1's head looks for a key whose previous letter is '{letter}'.{hint_en}",
                        f"层 1 的头寻找前一个字母是 '{letter}' 的键。{hint_zh}")
    expected_letter = SEQUENCE[induction_keys[-1]]
    if next_letter != expected_letter:
        return feedback(False, "The keys are right; the prediction is the letter at layer 1's key.",
                        "两个键都对了；预测就是层 1 所看的键上的那个字母。")
    feedback(True, f"Position {FIRST_ROUND_QUERY - 1} for layer 0; any of {induction_keys} for layer 1; the next letter is "
             f"'{expected_letter}'. Run the next cell to compare with the trained model.",
             f"层 0 看位置 {FIRST_ROUND_QUERY - 1}；层 1 看 {induction_keys} 中的任意一个；下一个字母是 "
             f"'{expected_letter}'。运行下一个单元格，和训练好的模型对照。")


def check_sinusoidal(answer: object, num_positions: int = 8, dim: int = 4) -> None:
    """The (num_positions, dim) sinusoidal table, checked against the formula written out with math."""
    expected = torch.tensor(
        [[(math.sin if column % 2 == 0 else math.cos)(t / 10000 ** ((column - column % 2) / dim))
          for column in range(dim)] for t in range(num_positions)]
    )
    if isinstance(answer, torch.Tensor) and answer.shape == expected.shape:
        swapped = expected.view(num_positions, dim // 2, 2).flip(-1).reshape(num_positions, dim)
        if torch.allclose(answer.detach().float(), swapped, atol=1e-4):
            return feedback(False, "Sine and cosine are swapped: even columns (0, 2, ...) take the sine.",
                            "正弦和余弦弄反了：偶数列（0、2……）用正弦。")
    check_tensor_answer(answer, expected, "Your position table", "你的位置表")


def _silenced_accuracy(model: torch.nn.Module, batch: tuple, layer: int, head: int) -> float:
    """Held-out accuracy with one head's context vectors set to zero right before out_proj (a forward hook)."""
    attention = model.layers[layer]
    width = attention.head_dim

    def zero_head(_module: torch.nn.Module, inputs: tuple) -> tuple:
        merged = inputs[0].clone()  # (b, T, d_out): the heads side by side
        merged[..., head * width : (head + 1) * width] = 0.0
        return (merged,)

    hook = attention.out_proj.register_forward_pre_hook(zero_head)
    try:
        inputs, targets, scored = batch
        with torch.no_grad():
            predictions = model.eval()(inputs).argmax(-1)
        return (predictions[scored] == targets[scored]).float().mean().item()
    finally:
        hook.remove()


def check_silenced(answer: object, model: torch.nn.Module, batch: tuple) -> None:
    """answer: {layer: held-out accuracy with that layer's head 0 silenced} for every layer of `model`."""
    if missing(answer):
        return
    layers = list(range(len(model.layers)))
    if not isinstance(answer, dict) or sorted(answer) != layers:
        return feedback(False, f"Give a dict with one accuracy per layer, keys {layers}.",
                        f"请给出一个 dict，每层一个准确率，键为 {layers}。")
    expected = {layer: _silenced_accuracy(model, batch, layer, 0) for layer in layers}
    for layer in layers:
        value = answer[layer]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return feedback(False, f"answer[{layer}] should be a number between 0 and 1.",
                            f"answer[{layer}] 应是 0 到 1 之间的数。")
        if abs(value - expected[layer]) > 0.01:
            return feedback(False, f"answer[{layer}] = {value:.3f} differs from what silencing gives; silence only "
                            f"layer {layer}'s head, and score only the scored positions.",
                            f"answer[{layer}] = {value:.3f} 与屏蔽后的结果不符；只屏蔽层 {layer} 的头，"
                            "并且只统计需要打分的位置。")
    if all(value < 0.5 for value in expected.values()):
        return feedback(True, "Both numbers match, and both are far below the trained model's: the task needs both "
                        "heads, the previous-token head and the induction head.",
                        "两个数都对，而且都远低于训练好的模型：这个任务两个头缺一不可，前一词元头和归纳头都要有。")
    feedback(True, "Both numbers match. One of them stays high: in this model that head's job is partly done "
             "elsewhere. Look at its map again.",
             "两个数都对。其中一个仍然很高：在这个模型里，那个头的工作有一部分由别处完成。再看看它的注意力图。")
