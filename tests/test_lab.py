"""`make lab` serves JupyterLab on 127.0.0.1 only, and refuses requests without the token."""

from pathlib import Path

import pytest

from lab_server import http_status as status
from lab_server import running_lab


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
