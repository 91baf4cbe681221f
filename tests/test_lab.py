"""`make lab`: 127.0.0.1 only, the token required, no terminals, no package index; a learner's copy is never lost."""

import contextlib
import json
import os
import socket
import threading
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from attention_utils.course import my_lessons
from lab_server import http_status as status
from lab_server import running_lab

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
can_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
    reason="needs root, unshare and ip for a namespace of its own",
)


@pytest.fixture(scope="module")
def lab():
    with running_lab() as server:
        yield server


def test_answers_with_the_token(lab):
    base, _, token = lab
    assert status(f"{base}/api/status?token={token}") == 200
    assert status(f"{base}/lab?token={token}") == 200


def test_refuses_without_the_token(lab):
    base, _, _ = lab
    assert status(f"{base}/api/status") == 403
    assert status(f"{base}/api/contents?token=wrong") == 403


def test_no_terminal_unless_asked(lab):
    """A terminal is a shell in the browser (a root shell when run as root): off by default."""
    base, _, token = lab
    request = urllib.request.Request(f"{base}/api/terminals?token={token}", method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (403, 404)


def listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as the kernel lists them) of sockets listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux's /proc/net/tcp")
def test_listens_on_loopback_only(lab):
    _, port, _ = lab
    addresses = listening_addresses(port)
    assert addresses, "nothing listens on the lab's port"
    assert addresses <= {"0100007F"}, f"JupyterLab listens beyond 127.0.0.1: {addresses}"


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def test_one_language_copy_for_chinese_learners(tmp_path):
    """`make lab LANGUAGE=zh` serves a Chinese-only copy whose plots are set to Chinese, with its figures."""
    with running_lab(make_args=("LANGUAGE=zh", f"MY_LESSONS={tmp_path}")) as (base, _, token):
        assert status(f"{base}/api/contents/notebooks") == 403
        listing = get_json(f"{base}/api/contents/notebooks?token={token}")["content"]
        names = sorted(item["name"] for item in listing if item["name"].endswith(".ipynb"))
        assert names == LESSONS
        lesson = get_json(f"{base}/api/contents/notebooks/{names[0]}?token={token}")["content"]
        languages = {tag for cell in lesson["cells"] if cell["cell_type"] == "markdown"
                     for tag in cell["metadata"].get("tags", []) if tag in ("en", "zh")}
        assert languages == {"zh"}
        parameters = next(c for c in lesson["cells"] if "parameters" in c["metadata"].get("tags", []))
        assert 'language = "zh"' in parameters["source"]
        figures = get_json(f"{base}/api/contents/figures?token={token}")["content"]
        assert any(item["name"] == "attention_pipeline_zh.png" for item in figures)


def make(*args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run(["make", "-s", *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def add_learner_note(path: Path, words: str) -> None:
    """What a learner does in JupyterLab: answer in a cell, save."""
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(words))
    nbformat.write(nb, path)


def has_note(path: Path, words: str) -> bool:
    return any(words in cell.source for cell in nbformat.read(path, as_version=4).cells)


def test_the_learners_work_survives_restarts_clean_and_new_lessons(tmp_path, monkeypatch):
    """Play the learner: copy, edit and save, start again, make clean, the source lesson changes, take it."""
    source = tmp_path / "series" / "notebooks"
    shutil.copytree(ROOT / "notebooks", source)
    shutil.copytree(ROOT / "figures", source.parent / "figures")
    mine = tmp_path / "my-lessons"
    written, outdated = my_lessons.prepare("zh", mine, source)
    assert [p.name for p in written] == LESSONS and outdated == []
    lesson = mine / "zh" / "notebooks" / LESSONS[2]
    add_learner_note(lesson, "LEARNER: softmax subtracts the maximum first")

    written, outdated = my_lessons.prepare("zh", mine, source)  # the next day
    assert written == [] and outdated == [] and has_note(lesson, "LEARNER")

    # the lesson in notebooks/ gets a new version: the learner is told, and keeps their copy
    nb = nbformat.read(source / LESSONS[2], as_version=4)
    nb.cells.insert(3, nbformat.v4.new_code_cell("print('new in this version')"))
    nbformat.write(nb, source / LESSONS[2])
    written, outdated = my_lessons.prepare("zh", mine, source)
    assert written == [] and outdated == [lesson] and has_note(lesson, "LEARNER")

    # taking the new version moves the learner's copy to a dated backup first; the clock stands still, so the
    # second reset below falls within the same second as this one (backups are named by the second)
    monkeypatch.setattr(my_lessons.time, "strftime", lambda layout: "20261125-093000")
    fresh = my_lessons.reset("zh", LESSONS[2][:2], mine, source)
    backups = list((mine / "zh" / "backups").glob(f"{Path(LESSONS[2]).stem}.*.ipynb"))
    assert len(backups) == 1 and has_note(backups[0], "LEARNER")
    assert fresh == lesson and not has_note(lesson, "LEARNER") and has_note(lesson, "new in this version")
    assert my_lessons.prepare("zh", mine, source) == ([], [])

    # a second reset within the same second takes a new backup name: the first backup keeps the work
    add_learner_note(lesson, "LEARNER: second try")
    my_lessons.reset("zh", LESSONS[2][:2], mine, source)
    again = sorted((mine / "zh" / "backups").glob(f"{Path(LESSONS[2]).stem}.*.ipynb"))
    assert len(again) == 2 and backups[0] in again
    assert has_note(backups[0], "LEARNER: softmax") and not has_note(backups[0], "second try")
    (second,) = set(again) - {backups[0]}
    assert has_note(second, "LEARNER: second try") and not has_note(lesson, "LEARNER")


@pytest.mark.parametrize("language, lesson", [("fr", "03"), ("zh", "99"), ("zh", None), ("zh", "٣")])
def test_a_reset_names_a_language_or_lesson_it_does_not_know(tmp_path, language, lesson):
    with pytest.raises(SystemExit) as error:
        my_lessons.reset(language, lesson, tmp_path / "mine")
    english, chinese = str(error.value).splitlines()
    assert "LANGUAGE=" in english + chinese or "LESSON=03" in english and "课" in chinese


def test_make_lab_says_which_lessons_are_newer(tmp_path):
    """The bilingual line on start names the lesson and the command, through make itself."""
    mine = tmp_path / "mine"
    make("lab", "LANGUAGE=en", f"MY_LESSONS={mine}", "LAB_ARGS=--version")
    copy = mine / "en" / "notebooks" / LESSONS[0]
    nb = nbformat.read(copy, as_version=4)
    nb.metadata["attention_series"]["made_from"] = "an older lesson"
    nbformat.write(nb, copy)
    add_learner_note(copy, "LEARNER: my answer")
    said = make("lab", "LANGUAGE=en", f"MY_LESSONS={mine}", "LAB_ARGS=--version")
    assert f"make lab-reset LANGUAGE=en LESSON={LESSONS[0][:2]}" in said and "新版本" in said
    assert has_note(copy, "LEARNER")
    make("lab-reset", "LANGUAGE=en", f"LESSON={LESSONS[0][:2]}", f"MY_LESSONS={mine}")
    assert not has_note(copy, "LEARNER") and len(list((mine / "en" / "backups").iterdir())) == 1


def test_make_clean_keeps_learner_work(tmp_path):
    """`make clean` removes build outputs only: my-lessons/ and an older copy in build/lab/ stay."""
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for kept in ("my-lessons/zh/notebooks/03_normalization.ipynb", "build/lab/zh/notebooks/03_normalization.ipynb"):
        (tmp_path / kept).parent.mkdir(parents=True)
        (tmp_path / kept).write_text("learner's work")
    (tmp_path / "build" / "run" / "en").mkdir(parents=True)
    (tmp_path / "build" / "slides.html").write_text("built")
    make("clean", cwd=tmp_path)
    assert (tmp_path / "my-lessons/zh/notebooks/03_normalization.ipynb").read_text() == "learner's work"
    assert (tmp_path / "build/lab/zh/notebooks/03_normalization.ipynb").read_text() == "learner's work"
    assert not (tmp_path / "build" / "run").exists() and not (tmp_path / "build" / "slides.html").exists()


def test_an_earlier_copy_in_build_lab_is_moved_not_overwritten(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / "figures", tmp_path / "figures")
    old = tmp_path / "build" / "lab" / "zh" / "notebooks" / LESSONS[0]
    old.parent.mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / LESSONS[0], old)
    add_learner_note(old, "LEARNER: written before the move")
    my_lessons.prepare("zh", Path("my-lessons"), Path("notebooks"))
    assert has_note(Path("my-lessons/zh/notebooks") / LESSONS[0], "LEARNER")
    assert not old.exists()


def test_a_folder_that_cannot_be_written_gets_one_clear_message(tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    with pytest.raises(SystemExit) as stopped:
        my_lessons.prepare("zh", blocked, ROOT / "notebooks")
    assert "MY_LESSONS=" in str(stopped.value) and "无法" in str(stopped.value)


@pytest.fixture
def connection_trap():
    """A local socket posing as the web proxy: every outside connection the server tries lands here."""
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    caught: list[bytes] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = trap.accept()
                caught.append(connection.recv(200))
                connection.close()

    threading.Thread(target=accept, daemon=True).start()
    proxy = f"http://127.0.0.1:{trap.getsockname()[1]}"
    env = {name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env.update({name: "127.0.0.1,localhost" for name in ("NO_PROXY", "no_proxy")})
    yield env, caught
    trap.close()


@pytest.mark.parametrize("manager, contacts", [(None, False), ("pypi", True)], ids=["make-lab", "pypi-manager-would"])
def test_the_extensions_panel_contacts_no_package_index(connection_trap, manager, contacts):
    """Opening the Extensions panel (GET /lab/api/extensions) makes no outside connection: the extension
    manager is read-only. The same request with JupyterLab's PyPI manager is caught connecting."""
    env, caught = connection_trap
    flags = ("LAB_FLAGS=--LabApp.extension_manager=pypi",) if manager else ()
    with running_lab(make_args=flags, env=env) as (base, _, token):
        status(f"{base}/lab/api/extensions?token={token}&query=attention")
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=30) as response:
            page = response.read().decode()
    assert bool(caught) == contacts, caught
    if not manager:
        assert '"can_install": false' in page and '"name": "read-only"' in page


@can_unshare
def test_a_read_only_home_still_starts_the_lab(tmp_path):
    """A locked-down PC: $HOME cannot be written; make lab says so in one line and starts anyway."""
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "lab.log"
    # as after an earlier session: with an IPython folder present, Jupyter writes a "migrated" marker into its
    # config folder at start, which must not be in the read-only home
    (ROOT / "build" / "home" / "ipython").mkdir(parents=True, exist_ok=True)
    script = (
        f"mount --bind {home} {home} && mount -o remount,bind,ro {home} && "
        f"HOME={home} {sys.executable} -c \"$PROBE\""
    )
    probe = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from pathlib import Path\n"
        "from lab_server import running_lab, http_status\n"
        f"with running_lab(log=Path('{log}')) as (base, _, token):\n"
        "    print('STATUS', http_status(f'{base}/api/status?token={token}'))\n"
    )
    result = subprocess.run(["unshare", "--mount", "sh", "-c", script], cwd=ROOT, env={**os.environ, "PROBE": probe},
                            capture_output=True, text=True, timeout=180)
    assert "STATUS 200" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:] + log.read_text()[-2000:]
    assert "build/home" in log.read_text()
