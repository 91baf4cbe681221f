"""The language a learner reads: plot labels, printed lines and tables all follow one setting.

`setup(language="zh")` (or `plotting.fonts.set_language`) chooses it; `text(en, zh)` picks a label,
`say(en, zh)` prints one, and `table` lines up columns by how wide they look on screen, where
a Chinese character takes the room of two Latin letters.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

LANGUAGES = ("en", "zh")
_state = {"language": "en"}


def bilingual(english: str, chinese: str) -> str:
    """Join an English and a Chinese sentence into the two-line message used across the package.

    The line in the learner's language comes first: English then Chinese, or Chinese then English
    while `language` is "zh" (what a Chinese lesson prints follows `language`, errors included).
    """
    return f"{chinese}\n{english}" if _state["language"] == "zh" else f"{english}\n{chinese}"


def check_language(language: object) -> str:
    """A language argument: "en" or "zh" (a table in another language would quietly come out in English)."""
    if not isinstance(language, str) or language not in LANGUAGES:
        raise (ValueError if isinstance(language, str) else TypeError)(
            bilingual(
                f"language must be 'en' or 'zh', got {language!r}.",
                f"language 只能是 'en' 或 'zh'，实际是 {language!r}。",
            )
        )
    return language


def choose_language(language: object) -> str:
    """Set the language of everything the package prints and draws ("en" or "zh")."""
    _state["language"] = check_language(language)
    return language


def get_language() -> str:
    """The current language: "en" or "zh"."""
    return _state["language"]


def text(en: str, zh: str) -> str:
    """The English or the Chinese version of a label, following the current language."""
    return zh if _state["language"] == "zh" else en


def say(en: str, zh: str) -> None:
    """Print one line in the current language."""
    print(text(en, zh))


def display_width(value: str) -> int:
    """Columns a string fills in a monospaced font: wide (CJK) characters count two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in value)


def pad(value: object, width: int, align: str = "<") -> str:
    """`value` as text, padded with spaces to `width` display columns ("<" left, ">" right)."""
    value = str(value)
    room = " " * max(0, width - display_width(value))
    return value + room if align == "<" else room + value


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None) -> str:
    """Rows under headers, columns aligned by display width; `align` has one "<" or ">" per column.

    By default the first column is left-aligned and the others (usually numbers) right-aligned.
    """
    cells = [[str(h) for h in headers]] + [[str(v) for v in row] for row in rows]
    align = align or "<" + ">" * (len(headers) - 1)
    widths = [max(display_width(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(pad(v, w, a) for v, w, a in zip(row, widths, align)).rstrip() for row in cells]
    return "\n".join(lines)
