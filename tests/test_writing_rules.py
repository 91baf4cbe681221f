"""The Chinese follows the series' writing rules wherever a learner reads it.

Checked: every lesson's `zh` markdown cells, the Chinese string literals of the package and of
the lessons' code cells (messages, verdicts, plot labels), and the README. The rules come from
the project's glossary, `docs/GLOSSARY.md`: every line of `../shared/GLOSSARY.md` plus the terms
later lessons added (a test keeps it a superset of the shared one). Each failure names the place (lesson and cell index, file and line) and
quotes the offending text, so it can be fixed without searching.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from attention_utils.course.publish import language_of, lesson_paths

ROOT = Path(__file__).resolve().parents[1]
SHARED_GLOSSARY = ROOT.parent / "shared" / "GLOSSARY.md"
GLOSSARY_COPY = ROOT / "docs" / "GLOSSARY.md"
# The project's glossary holds every line of the shared one plus the terms new lessons added.
GLOSSARY = GLOSSARY_COPY
LESSONS = lesson_paths(ROOT / "notebooks")
README = ROOT / "README.md"

CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
# Where a banned variant is ordinary Chinese with another meaning, these uses stay allowed.
ALLOWED_USES = {
    "标记": ("标记为", "标记出"),  # the verb "to tag/mark", not a name for a token
    "令牌": ("带令牌（token）的网址",),  # JupyterLab's login token, not a word token
    "可以看": ("可以看到", "可以看出", "可以看看", "可以看成", "可以看作"),  # "can see/regard as", not "may attend"
    # the rotary base is 旋转底数 (底数 once introduced), never a bare 底; the other words only contain the character
    "底": ("底数", "底层", "到底", "底面", "底部", "彻底", "底色"),
}
# English function words that have no place in a Chinese sentence (code and quoted tokens aside;
# single letters are left out because they are variable names: dot(a, b), Z = A X).
ENGLISH_WORDS = {
    "an", "and", "are", "be", "but", "by", "expected", "for", "from", "got", "if", "is", "it",
    "must", "not", "of", "on", "or", "should", "than", "that", "the", "then", "this", "to", "vs",
    "was", "when", "with", "you", "your",
}


@dataclass(frozen=True)
class Text:
    """A piece of Chinese a learner reads, and where it lives."""

    where: str
    source: str


# ---------------------------------------------------------------------------------------------
# Collecting the Chinese text


def lesson_id(path: Path) -> str:
    return path.stem


def zh_cells(path: Path) -> list[Text]:
    """The `zh` markdown cells of a lesson, each with its cell index."""
    nb = nbformat.read(path, as_version=4)
    return [Text(f"{path.name} cell {i}", cell.source) for i, cell in enumerate(nb.cells)
            if cell.cell_type == "markdown" and language_of(cell) == "zh"]


def en_cells(path: Path) -> list[Text]:
    nb = nbformat.read(path, as_version=4)
    return [Text(f"{path.name} cell {i}", cell.source) for i, cell in enumerate(nb.cells)
            if cell.cell_type == "markdown" and language_of(cell) == "en"]


def chinese_literals(code: str, where: str) -> list[Text]:
    """String literals (and the literal parts of f-strings) that contain Chinese, docstrings left out."""
    try:
        tree = ast.parse(code)
    except SyntaxError:  # a cell with IPython magics; the lessons have none today
        return []
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            value = "".join(part.value if isinstance(part, ast.Constant) else "{…}" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            if id(node) in docstrings:
                continue
            value = node.value
        else:
            continue
        if CJK.search(value):
            found.append(Text(f"{where} line {node.lineno}", value))
    return found


def package_messages() -> list[Text]:
    """The Chinese strings of the helper package: errors, checker verdicts, plot labels."""
    texts = []
    for path in sorted((ROOT / "attention_utils").rglob("*.py")):
        texts += chinese_literals(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return texts


def lesson_code_labels(path: Path) -> list[Text]:
    """The Chinese strings in a lesson's code cells (plot labels, widget labels)."""
    nb = nbformat.read(path, as_version=4)
    texts = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            texts += chinese_literals(cell.source, f"{path.name} cell {i} (code),")
    return texts


def readme_paragraphs() -> list[Text]:
    """The README's paragraphs (outside code blocks) that contain Chinese, with their first line."""
    paragraphs, current, start, fenced = [], [], 0, False
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines() + [""], start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip():
            start = start if current else number
            current.append(line)
        elif current:
            paragraphs.append(Text(f"README.md line {start}", "\n".join(current)))
            current = []
    return [p for p in paragraphs if CJK.search(p.source)]


def mostly_chinese(text: str) -> bool:
    """True when a paragraph is Chinese prose: more Chinese characters than Latin letters."""
    plain = strip_markup(text)
    return len(CJK.findall(plain)) >= len(re.findall(r"[A-Za-z]", plain))


# ---------------------------------------------------------------------------------------------
# Reading markdown: keep the prose, drop code, math, link targets and HTML


# A Python list or tuple of strings shown as an example, e.g. ["journey", "Your", ...]
PYTHON_SEQUENCE = re.compile(r"""[\[(]\s*(["'])[^\]\)]*\1\s*(,\s*\.\.\.\s*)?[\])]""")


def strip_markup(source: str) -> str:
    """The prose of a markdown text, line by line: code, math, URLs and HTML tags are blanked."""
    lines, fenced, math = [], False, False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            fenced = not fenced
            lines.append("")
            continue
        if stripped.startswith("$$") and not (len(stripped) > 2 and stripped.endswith("$$")):
            math = not math
            lines.append("")
            continue
        if fenced or math or (stripped.startswith("$$") and stripped.endswith("$$")):
            lines.append("")
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        line = PYTHON_SEQUENCE.sub(" ", line)
        line = re.sub(r"\$[^$]*\$", " ", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"<[^>]+>", " ", line)
        lines.append(line)
    return "\n".join(lines)


def snippet(text: str, start: int, end: int, margin: int = 10) -> str:
    """The match with a few characters either side, newlines shown as ⏎."""
    return "…" + text[max(0, start - margin):end + margin].replace("\n", "⏎") + "…"


# ---------------------------------------------------------------------------------------------
# The rules. Each takes a text and returns the offending snippets.

BLOCK_START = re.compile(r"^\s*([-*+]\s|\d+[.)]\s|#|\||>|!\[|<|\$\$|```|:::)")


def hard_line_breaks(source: str) -> list[str]:
    """A newline between two lines of one paragraph (list items, headings, tables, code, math aside)."""
    found, fenced, math, previous = [], False, False, None
    for line in source.splitlines():
        stripped = line.strip()
        if fenced or math:
            fenced = fenced and not stripped.startswith("```")
            math = math and not stripped.endswith("$$")
            previous = None
            continue
        if stripped.startswith("```") or stripped.startswith("$$"):
            fenced = stripped.startswith("```")
            math = stripped.startswith("$$") and not (len(stripped) > 2 and stripped.endswith("$$"))
            previous = None
            continue
        if previous is not None and stripped and not BLOCK_START.match(line):
            found.append("…" + previous.strip()[-14:] + "⏎" + stripped[:14] + "…")
        is_prose = stripped and not re.match(r"^\s*(#|\||<|!\[[^\]]*\]\([^)]*\)\s*$)", line)
        previous = line if is_prose else None
    return found


def glossary_variants(text: str, banned: list[tuple[str, str, str]]) -> list[str]:
    """Terms the glossary lists as "never"/"not"; a rule with a context ("长度 for d_k") applies per sentence."""
    found = []
    for line in text.splitlines():
        for sentence in re.split(r"(?<=[。；！？])", line):
            prose = strip_markup(sentence)
            for variant, context, rule in banned:
                if context and context not in sentence:
                    continue
                for match in re.finditer(re.escape(variant), prose):
                    if not allowed_use(prose, match.start(), variant):
                        found.append(f"{snippet(prose, match.start(), match.end())} ({rule})")
    return found


def allowed_use(prose: str, position: int, variant: str) -> bool:
    """True when the variant at `position` is part of one of its ALLOWED_USES."""
    for allowed in ALLOWED_USES.get(variant, ()):
        start = position - allowed.index(variant)
        if start >= 0 and prose.startswith(allowed, start):
            return True
    return False


def slow_ratio(text: str) -> list[str]:
    """'慢 1.2 倍' / '快 3 倍': write '耗时是……的 1.2 倍' (GLOSSARY: readers take 慢 2.6 倍 as 3.6×)."""
    prose = strip_markup(text)
    return [snippet(prose, m.start(), m.end()) for m in re.finditer(r"[快慢]了?\s*约?\s*[\d.]+\s*倍", prose)]


def ascii_quotes(text: str) -> list[str]:
    """Straight double quotes in Chinese prose; write “ ” (straight quotes only inside code)."""
    prose = strip_markup(text)
    return [snippet(prose, m.start(), m.end(), 4) for m in re.finditer(r'"[^"\n]{1,40}"', prose)]


def italics_on_cjk(text: str) -> list[str]:
    """*斜体* on Chinese characters; Chinese has no italics, use **bold**."""
    prose = strip_markup(text)
    pattern = r"(?<![*\\])\*(?=[^\s*])([^*\n]*?[^\s*\\])\*(?!\*)"
    return [snippet(prose, m.start(), m.end(), 2) for m in re.finditer(pattern, prose) if CJK.search(m.group(1))]


def nested_parentheses(text: str) -> list[str]:
    """（…（…）…）: never nest parentheses in Chinese."""
    prose = strip_markup(text)
    found, depth, opened = [], 0, 0
    for i, char in enumerate(prose):
        if char == "（":
            depth += 1
            opened = i if depth == 1 else opened
            if depth == 2:
                found.append(snippet(prose, opened, i + 1, 6))
        elif char == "）":
            depth = max(0, depth - 1)
        elif char == "\n":
            depth = 0
    return found


def ordinal_zero(text: str) -> list[str]:
    """'第 0 行': index 0 written as a Chinese ordinal; write 索引为 0 的行 (or name the token)."""
    prose = strip_markup(text)
    return [snippet(prose, m.start(), m.end()) for m in re.finditer(r"第\s*0\s*[行列个项]", prose)]


def letter_x_for_times(text: str) -> list[str]:
    """'T x T': sizes are multiplied with ×."""
    prose = strip_markup(text)
    return [snippet(prose, m.start(), m.end(), 4) for m in re.finditer(r"[A-Za-z0-9)]\s+x\s+[A-Za-z0-9(]", prose)]


def english_words(text: str) -> list[str]:
    """English words inside a Chinese message ('2 or 3 维'); compose it in Chinese ('2 维或 3 维')."""
    if not CJK.search(text):
        return []
    plain = re.sub(r"`[^`]*`|'[^'\n]*'|“[^”]*”|（[A-Za-z][A-Za-z ,\-]*）|\{…\}", " ", PYTHON_SEQUENCE.sub(" ", text))
    plain = re.sub(r"[A-Za-z][A-Za-z ]* / (?=[\u3400-\u9fff])", " ", plain)  # a bilingual label: "Not yet / 还不对"
    return [f"“{word}” in {snippet(plain, m.start(), m.end(), 8)}"
            for m in re.finditer(r"(?<![A-Za-z0-9_.])[A-Za-z][A-Za-z0-9_]*(?![A-Za-z0-9_(.])", plain)
            if (word := m.group(0)).lower() in ENGLISH_WORDS]


BOLD_RUN = re.compile(r"\*\*")


def bold_closed_after_punctuation(text: str) -> list[str]:
    """“**因果掩码改变了什么。**加上”: a closing ** after 。，；：？！）” and before a Chinese character is not a
    closer in CommonMark, so the rest of the paragraph turns bold on the site; close the bold before the punctuation."""
    found = []
    for paragraph in strip_markup(text).splitlines():  # a Chinese paragraph, list item or heading is one line
        for number, match in enumerate(BOLD_RUN.finditer(paragraph)):
            before, after = paragraph[match.start() - 1:match.start()], paragraph[match.end():match.end() + 1]
            if number % 2 == 1 and before in "。，；：？！）”" and before and CJK.match(after):
                found.append(snippet(paragraph, match.start(), match.end(), 8))
    return found


COMMON_RULES = {
    "ratios": slow_ratio,
    "quotes": ascii_quotes,
    "italics": italics_on_cjk,
    "nested parentheses": nested_parentheses,
    "0-based ordinals": ordinal_zero,
    "× for sizes": letter_x_for_times,
}


# ---------------------------------------------------------------------------------------------
# The glossary's banned variants


def banned_variants(glossary: Path = GLOSSARY) -> list[tuple[str, str, str]]:
    """(variant, context, rule) for each "never …"/"not …" of the glossary's term table.

    "never 标记/令牌" bans both everywhere; "never 长度 for d_k" bans 长度 in a sentence about d_k. A note that
    names one sense ("a page is 页, never 块") is left to readers: 块 and 分块 are right in their other senses.
    """
    banned = []
    for line in glossary.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3:
            continue
        english, chinese, notes = cells[0], cells[1], cells[2]
        if re.search(r"\bis \S+, never ", notes):
            continue
        for phrase in re.findall(r"\b(?:never|not)\s+([^;,.()]+)", notes):
            variants, _, context = phrase.partition(" for ")
            for variant in variants.split("/"):
                variant = variant.strip()
                if CJK.search(variant):
                    rule = f"glossary: {english} → {chinese}, never {variant}" + (f" for {context.strip()}" if context else "")
                    banned.append((variant, context.strip(), rule))
    return banned


BANNED = banned_variants() if GLOSSARY.is_file() else []


def check(texts: list[Text], rules: dict) -> list[str]:
    """Every problem the rules find in the texts, as 'place: snippet' lines."""
    problems = []
    for text in texts:
        for name, rule in rules.items():
            problems += [f"{text.where} [{name}]: {found}" for found in rule(text.source)]
    return problems


def report(problems: list[str]) -> str:
    return f"{len(problems)} problem(s):\n" + "\n".join(problems)


# ---------------------------------------------------------------------------------------------
# Tests


def test_glossary_is_found_and_parsed():
    assert GLOSSARY.is_file(), "docs/GLOSSARY.md is missing"
    variants = {variant for variant, _, _ in BANNED}
    assert {"标记", "令牌", "拷贝", "长度"} <= variants, f"the glossary's term table was not parsed: {variants}"


def test_glossary_copy_is_current():
    if not SHARED_GLOSSARY.is_file():
        pytest.skip("../shared/GLOSSARY.md is not here; docs/GLOSSARY.md is the reference")
    ours = set(GLOSSARY_COPY.read_text(encoding="utf-8").splitlines())
    missing = [line for line in SHARED_GLOSSARY.read_text(encoding="utf-8").splitlines() if line not in ours]
    assert not missing, f"docs/GLOSSARY.md lacks lines of ../shared/GLOSSARY.md: copy them over: {missing}"


def test_rules_catch_the_reviewed_mistakes():
    """Each rule flags the example the review found, and leaves the corrected sentence alone."""
    assert hard_line_breaks("随机关掉一部分\n流经模型的数值。") and not hard_line_breaks("第一段。\n\n- 列表\n- 列表")
    assert slow_ratio("在 $T = 1024$ 时慢 1.2 倍") and not slow_ratio("耗时是它的 1.2 倍")
    assert ascii_quotes('旅程应该关注 "journey"') and not ascii_quotes('写成 `language = "zh"`')
    assert italics_on_cjk("这就是*查询*向量") and not italics_on_cjk("这就是**查询**向量，$a*b*c$")
    assert nested_parentheses("（在 GPT 里没有对应的位置嵌入（positional embedding））")
    assert not nested_parentheses("位置嵌入（positional embedding）和因果掩码（causal mask）")
    assert ordinal_zero("第 0 行是书中的分数") and not ordinal_zero("索引为 0 的行")
    assert letter_x_for_times("请计算 批大小 x 头数 x T x T") and not letter_x_for_times("把 x 传进去")
    assert english_words("`x` 应该是 2 or 3 维张量") and not english_words("应为 2 维或 3 维张量，并排除“with”本身")
    banned = [("长度", "d_k", "d_k"), ("可以看", "", "attend")]
    assert glossary_variants("$d_k$ 是查询向量的长度", banned) and not glossary_variants("向量的长度（范数）", banned)
    assert glossary_variants("True 表示可以看", banned) and not glossary_variants("可以看到权重", banned)
    assert bold_closed_after_punctuation("**因果掩码改变了什么。**加上掩码后")
    assert not bold_closed_after_punctuation("**因果掩码改变了什么**。加上掩码后，全毁了。**注意**这里")
    assert not bold_closed_after_punctuation("它叫**置换等变**（permutation equivariance）。")


@pytest.fixture(params=LESSONS, ids=lesson_id)
def lesson(request) -> Path:
    return request.param


@pytest.mark.parametrize("rule", ["line breaks", "glossary", "bold after punctuation", *COMMON_RULES])
def test_lesson_chinese(lesson, rule):
    texts = zh_cells(lesson)
    if rule == "line breaks":
        problems = check(texts, {rule: hard_line_breaks})
    elif rule == "bold after punctuation":
        problems = check(texts, {rule: bold_closed_after_punctuation})
    elif rule == "glossary":
        problems = check(texts, {rule: lambda source: glossary_variants(source, BANNED)})
    else:
        problems = check(texts, {rule: COMMON_RULES[rule]})
    assert not problems, report(problems)


def test_lesson_glosses_once(lesson):
    """An English gloss（causal mask）appears once per lesson, where the term first appears."""
    seen, problems = {}, []
    for text in zh_cells(lesson):
        for match in re.finditer(r"（([A-Za-z][A-Za-z \-]+)）", strip_markup(text.source)):
            gloss = match.group(1).strip().lower()
            if gloss in seen:
                problems.append(f"{text.where}: “（{match.group(1)}）” again (first in {seen[gloss]})")
            else:
                seen[gloss] = text.where
    assert not problems, report(problems)


def test_lesson_english_cells_hold_no_chinese(lesson):
    problems = [f"{text.where}: {snippet(text.source, m.start(), m.end())}"
                for text in en_cells(lesson) for m in CJK.finditer(strip_markup(text.source))]
    assert not problems, report(problems)


def test_lesson_code_labels(lesson):
    rules = {"glossary": lambda source: glossary_variants(source, BANNED), "English words": english_words,
             **COMMON_RULES}
    problems = check(lesson_code_labels(lesson), rules)
    assert not problems, report(problems)


@pytest.mark.parametrize("rule", ["glossary", "English words", *COMMON_RULES])
def test_package_messages(rule):
    rules = {"glossary": lambda source: glossary_variants(source, BANNED), "English words": english_words,
             **COMMON_RULES}
    problems = check(package_messages(), {rule: rules[rule]})
    assert not problems, report(problems)


def test_readme_chinese():
    paragraphs = readme_paragraphs()
    problems = check([p for p in paragraphs if mostly_chinese(p.source)], {"line breaks": hard_line_breaks})
    rules = {"glossary": lambda source: glossary_variants(source, BANNED), **COMMON_RULES}
    problems += check(paragraphs, rules)
    assert not problems, report(problems)


# ---------------------------------------------------------------------------------------------
# One title per lesson: heading, README table, every link

EN_HEADING = re.compile(r"^# Lesson (\d+) · (.+)$", re.MULTILINE)
ZH_HEADING = re.compile(r"^# 第 (\d+) 课 · (.+)$", re.MULTILINE)
LESSON_LINK = re.compile(r"\[(Lesson (\d+)(?: · ([^\]]+))?|第 (\d+) 课(?: · ([^\]]+))?)\]\(([^)#\s]*?)(\d\d_\w+\.ipynb)[^)]*\)")


def titles() -> dict[int, tuple[str, str, str]]:
    """Lesson number → (file name, English title, Chinese title), from each lesson's headings."""
    found = {}
    for path in LESSONS:
        nb = nbformat.read(path, as_version=4)
        markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
        en, zh = EN_HEADING.search(markdown), ZH_HEADING.search(markdown)
        assert en and zh, f"{path.name}: no '# Lesson N · Title' and '# 第 N 课 · 标题' headings"
        found[int(en.group(1))] = (path.name, en.group(2).strip(), zh.group(2).strip())
    return found


def test_each_lesson_number_matches_its_file():
    for number, (name, _, _) in titles().items():
        assert name.startswith(f"{number:02d}_"), f"{name} calls itself lesson {number}"


def test_readme_table_uses_the_lesson_titles():
    rows = re.findall(r"^\| (\d+) \| \[([^\]]+)\]\(notebooks/([^)]+)\) \| ([^|]+) \|", README.read_text(encoding="utf-8"),
                      re.MULTILINE)
    table = {int(n): (name, en.strip(), zh.strip()) for n, en, name, zh in rows}
    problems = [f"README table, lesson {n}: {table.get(n)} but the lesson says {expected}"
                for n, expected in titles().items() if table.get(n) != expected]
    assert not problems, report(problems)


def link_problems(where: str, source: str, known: dict[int, tuple[str, str, str]]) -> list[str]:
    """Links to a lesson whose number, file or title differs from that lesson's heading."""
    problems = []
    for match in LESSON_LINK.finditer(source):
        number = int(match.group(2) or match.group(4))
        title = match.group(3) or match.group(5)
        target = match.group(7)
        if number not in known:
            problems.append(f"{where}: link to lesson {number}, which does not exist: {match.group(0)}")
            continue
        name, en, zh = known[number]
        expected_title = en if match.group(2) else zh
        if target != name:
            problems.append(f"{where}: “{match.group(1)}” points to {target}, not {name}")
        if title is not None and title.strip() != expected_title:
            problems.append(f"{where}: “{match.group(1)}” but the heading says “{expected_title}”")
    return problems


def test_links_to_lessons_use_their_titles():
    known = titles()
    problems = []
    for path in LESSONS:
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                problems += link_problems(f"{path.name} cell {i}", cell.source, known)
    problems += link_problems("README.md", README.read_text(encoding="utf-8"), known)
    assert not problems, report(problems)
