"""Sentences of lessons 6 and 7 that read a stored number or verdict agree with it, in both languages.

As in tests/test_claims_01_05.py, the numbers come from the stored (English-run) outputs, never from this
file, so a re-run that changes them fails here until the prose is re-read.
"""

from __future__ import annotations

from test_claims_01_05 import lesson, prose, stored


def test_lesson_6_names_the_machine_that_stored_the_outputs():
    nb = lesson("06_dropout")
    kept = stored(nb, "kept_by_book = ")
    assert "kept in the book's mask: 21 of 36" in kept
    cell = next(c for c in nb.cells if c.cell_type == "code" and "same_as_book = " in c.source)
    assert "nbval-ignore-output" in cell.metadata.get("tags", []), "the reader's own CPU decides this line"
    assert "draws the book's mask: True" in "".join(o.get("text", "") for o in cell.outputs)
    en, zh = prose(nb, "## Why your `nn.Dropout` mask may differ from the book's (optional)")
    en = " ".join(en.split())  # the English source wraps its lines
    assert "The machine that stored this lesson's outputs runs Linux on an AMD CPU" in en
    assert "保存本课输出的那台机器是 AMD CPU 上的 Linux" in zh and "这台机器" not in zh
    assert "True on AMD and Apple CPUs and False on Intel ones" in en
    assert "AMD 或 Apple 芯片上是 True，Intel 上是 False" in zh
    assert "#519" in en and "#519" in zh and "#84030" in en and "#84030" in zh


def test_lesson_7_hand_set_heads_read_as_printed():
    nb = lesson("07_multi_head_attention")
    out = stored(nb, "hand_context, hand_weights = two_heads")
    assert "'with', head 0: tensor([0., 0., 1., 0., 0., 0.])" in out  # index 2: "starts"
    assert "'with', head 1: tensor([0., 0., 0., 1., 0., 0.])" in out  # index 3: "with" itself
    en, zh = prose(nb, '"with" (index 3) gets two separate answers')
    assert "(index 2)" in en and "（索引为 2）" in zh
    assert "“starts”" in zh and "`starts`" not in zh
