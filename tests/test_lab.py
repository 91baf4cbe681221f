"""`make lab` serves JupyterLab on 127.0.0.1 only, and refuses requests without the token."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    port, token = free_port(), "test-token-123"
    workspaces = tmp_path_factory.mktemp("workspaces")
    args = f"--no-browser --port={port} --IdentityProvider.token={token} --LabApp.workspaces_dir={workspaces}"
    process = subprocess.Popen(
        ["make", "-s", "lab", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                status(f"{base}/api/status")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.25)
        else:
            pytest.fail("JupyterLab did not answer within 30 s")
        yield base, port, token
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


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
