"""The learner's one-language copy of the series (`my-lessons/<language>/`): written once, never overwritten.

    python -m attention_utils.course.my_lessons prepare zh my-lessons          # what `make lab LANGUAGE=zh` runs
    python -m attention_utils.course.my_lessons reset zh 03 my-lessons         # `make lab-reset LANGUAGE=zh LESSON=03`

A learner answers exercises and writes notes in these files, so nothing here ever replaces one:
a lesson is written only where it is missing. Each copy records a fingerprint of the lesson it
was made from; when the lesson in `notebooks/` changes later, `prepare` names the lessons that
have a newer version and `reset` brings one in after moving the learner's copy to a dated backup.
The folder lies outside `build/`, so `make clean` never reaches it.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat

from ..checks import bilingual
from .publish import language_copy, lesson_paths, tags

LEGACY = Path("build") / "lab"  # where copies lived before they were kept safe from `make clean`
BACKUPS = "backups"


def fingerprint(nb) -> str:
    """A short digest of what a lesson teaches: its cells' kinds and sources (not outputs, not metadata)."""
    digest = hashlib.sha256()
    for cell in nb.cells:
        digest.update(f"{cell.cell_type}\0{cell.source}\0".encode())
    return digest.hexdigest()[:16]


def learner_copy(source: Path, language: str):
    """The lesson in one language, its plots set to that language, stamped with the source's fingerprint."""
    nb = language_copy(nbformat.read(source, as_version=4), language)
    parameters = next((c for c in nb.cells if "parameters" in tags(c)), None)
    if parameters is not None:
        parameters.source = re.sub(r'^language = "\w+"', f'language = "{language}"', parameters.source, flags=re.MULTILINE)
    nb.metadata.setdefault("attention_series", {})["made_from"] = fingerprint(nb)
    return nb


def _say(en: str, zh: str) -> None:
    print(bilingual(en, zh), flush=True)


def _writable(folder: Path) -> None:
    """Stop with one clear message when the copy cannot be written (a read-only checkout, say)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-test"
        probe.touch()
        probe.unlink()
    except OSError as error:
        raise SystemExit(
            bilingual(
                f"Cannot write your lessons to {folder} ({error.strerror}); choose a folder you can write with "
                "`make lab LANGUAGE=... MY_LESSONS=/path/to/folder`.",
                f"无法把课程写入 {folder}（{error.strerror}）；请用 `make lab LANGUAGE=... MY_LESSONS=/某个可写的文件夹` 另选位置。",
            )
        ) from None


def _move_legacy(language: str, home: Path) -> None:
    """Copies made before this folder existed lived in build/lab/<language>: move them here, once, untouched."""
    old = LEGACY / language
    if (old / "notebooks").is_dir() and not home.exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(old), str(home))
        _say(f"Moved your earlier copy from {old} to {home}, where `make clean` cannot reach it.",
             f"已把你之前的副本从 {old} 移到 {home}，`make clean` 不会删除这里的文件。")


def _copy_figures(source: Path, home: Path) -> None:
    """The lessons show ../figures/*.png: copy the figures that are missing (figures are generated, not learner work)."""
    for figure in sorted(source.parent.joinpath("figures").glob("*.png")):
        target = home / "figures" / figure.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(figure, target)


def prepare(language: str, root: Path, source: Path = Path("notebooks")) -> tuple[list[Path], list[Path]]:
    """Write every missing lesson of `language` into root/<language>/notebooks; return (written, outdated).

    An existing file is never touched. A lesson is outdated when the lesson in `source` has changed
    since the learner's copy was made (their fingerprints differ).
    """
    home = root / language
    _move_legacy(language, home)
    _writable(home / "notebooks")
    _copy_figures(source, home)
    written, outdated = [], []
    for path in lesson_paths(source):
        target = home / "notebooks" / path.name
        fresh = learner_copy(path, language)
        if not target.exists():
            nbformat.write(fresh, target)
            written.append(target)
            continue
        made_from = nbformat.read(target, as_version=4).metadata.get("attention_series", {}).get("made_from")
        if made_from != fresh.metadata["attention_series"]["made_from"]:
            outdated.append(target)
    if written:
        _say(f"Wrote {len(written)} lesson(s) into {home / 'notebooks'}; your edits there are kept from now on.",
             f"已在 {home / 'notebooks'} 中写入 {len(written)} 课；以后你在这里的修改都会保留。")
    if outdated:
        numbers = " ".join(p.name[:2] for p in outdated)
        _say(f"A newer version exists of lesson(s) {numbers}; your copies are kept. To take one, run "
             f"`make lab-reset LANGUAGE={language} LESSON={outdated[0].name[:2]}` (your copy moves to {home / BACKUPS}).",
             f"第 {numbers} 课有了新版本，你的副本保持不变。如需换成新版，请运行 "
             f"`make lab-reset LANGUAGE={language} LESSON={outdated[0].name[:2]}`（你的副本会先移到 {home / BACKUPS}）。")
    return written, outdated


def _new_backup(folder: Path, stem: str) -> Path:
    """A backup name no earlier backup has: the time to the second, then -2, -3, ... for resets within one second.

    The name is reserved by creating the file exclusively, so even two resets at once never share one.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for count in itertools.count(1):
        backup = folder / (f"{stem}.{stamp}.ipynb" if count == 1 else f"{stem}.{stamp}-{count}.ipynb")
        try:
            backup.open("xb").close()
        except FileExistsError:
            continue
        return backup
    raise AssertionError("unreachable")  # itertools.count never ends


def reset(language: str, lesson: str, root: Path, source: Path = Path("notebooks")) -> Path:
    """Move the learner's copy of one lesson to a dated backup, then write the current version in its place."""
    if language not in ("en", "zh"):
        raise SystemExit(bilingual(f"No copy in language {language!r}: say LANGUAGE=en or LANGUAGE=zh.",
                                   f"没有语言为 {language!r} 的副本：请写 LANGUAGE=en 或 LANGUAGE=zh。"))
    number = str(lesson) if isinstance(lesson, int) and not isinstance(lesson, bool) else lesson
    number = number if isinstance(number, str) and number.isascii() else ""  # LESSON=03, or 3 from Python
    matches = [p for p in lesson_paths(source) if p.name.startswith(f"{int(number):02d}_")] if number.isdigit() else []
    if not matches:
        raise SystemExit(bilingual(f"No lesson {lesson!r}: give its number, e.g. LESSON=03.",
                                   f"没有第 {lesson!r} 课：请给出课程编号，例如 LESSON=03。"))
    path, home = matches[0], root / language
    target = home / "notebooks" / path.name
    _writable(home / BACKUPS)
    if target.exists():
        backup = _new_backup(home / BACKUPS, path.stem)
        os.replace(target, backup)  # onto the empty file _new_backup reserved: same folder tree, so a rename
        _say(f"Your copy of {path.name} is now {backup}.", f"你的 {path.name} 副本已移到 {backup}。")
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(learner_copy(path, language), target)
    _say(f"Wrote the current {path.name} to {target}.", f"已把最新的 {path.name} 写到 {target}。")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("prepare", help="write the missing lessons of one language")
    make.add_argument("language", choices=("en", "zh"))
    make.add_argument("root", type=Path)
    again = commands.add_parser("reset", help="back up one lesson's copy and write the current version")
    again.add_argument("language", choices=("en", "zh"))
    again.add_argument("lesson")
    again.add_argument("root", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.language, args.root)
    else:
        reset(args.language, args.lesson, args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
