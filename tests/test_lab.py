"""`make lab` serves JupyterLab on 127.0.0.1 only, and refuses requests without the token."""

import json
import urllib.request
from pathlib import Path

import pytest

from lab_server import http_status as status
from lab_server import running_lab

ROOT = Path(__file__).resolve().parents[1]


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


def test_one_language_copy_for_chinese_learners():
    """`make lab LANGUAGE=zh` serves a Chinese-only copy whose plots are set to Chinese, with its figures."""
    with running_lab(make_args=("LANGUAGE=zh",)) as (base, _, token):
        assert status(f"{base}/api/contents/notebooks") == 403
        listing = get_json(f"{base}/api/contents/notebooks?token={token}")["content"]
        names = sorted(item["name"] for item in listing if item["name"].endswith(".ipynb"))
        assert names == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
        lesson = get_json(f"{base}/api/contents/notebooks/{names[0]}?token={token}")["content"]
        languages = {tag for cell in lesson["cells"] if cell["cell_type"] == "markdown"
                     for tag in cell["metadata"].get("tags", []) if tag in ("en", "zh")}
        assert languages == {"zh"}
        parameters = next(c for c in lesson["cells"] if "parameters" in c["metadata"].get("tags", []))
        assert 'language = "zh"' in parameters["source"]
        figures = get_json(f"{base}/api/contents/figures?token={token}")["content"]
        assert any(item["name"] == "attention_pipeline_zh.png" for item in figures)
