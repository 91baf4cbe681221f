"""Start JupyterLab exactly as `make lab` does (127.0.0.1, a token, --allow-root as root) for tests, and the
Chromium that the browser tests drive."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")  # Debian's; `playwright install` cannot download browsers here
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(url: str) -> int:
    """The HTTP status of a GET, including error statuses such as 403."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


@contextlib.contextmanager
def running_lab(
    lab_dir: Path | None = None,
    make_args: tuple[str, ...] = (),
    wrapper: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> Iterator[tuple[str, int, str]]:
    """Run `make lab` (with extra `make_args` such as LANGUAGE=zh, inside `wrapper` such as unshare, with
    `env` added) with a fresh workspace on a free port; yield (base URL, port, token). Output goes to `log`."""
    port, token = free_port(), secrets.token_hex(16)
    with tempfile.TemporaryDirectory() as workspaces:
        args = (f"--no-browser --port={port} --IdentityProvider.token={token} "
                f"--LabApp.workspaces_dir={workspaces}")
        command = [*wrapper, "make", "-s", "lab", f"LAB_ARGS={args}", *make_args] + ([f"LAB_DIR={lab_dir}"] if lab_dir else [])
        output = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
        process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})},
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                with contextlib.suppress(urllib.error.URLError, ConnectionError):
                    http_status(f"{base}/api/status")
                    break
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("JupyterLab did not start within 60 s")
                time.sleep(0.25)
            yield base, port, token
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
            if log:
                output.close()
