"""The whole series runs with the network cut off: a fresh network namespace with only loopback.

This runs `make run LANGUAGE=zh`, so it also proves every lesson runs headlessly under papermill
with Chinese plot labels.
"""

import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NO_NETWORK_PROOF = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('151.101.0.223', 443), timeout=3)\n"
    "except OSError:\n"
    "    pass\n"
    "else:\n"
    "    raise SystemExit('the network is still reachable')\n"
)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"),
    reason="needs root, unshare and ip to make a network namespace",
)


def test_series_runs_offline_in_chinese():
    script = (
        "ip link set lo up && "
        f".venv/bin/python -c \"{NO_NETWORK_PROOF}\" && "
        "make -s run LANGUAGE=zh"
    )
    result = subprocess.run(["unshare", "--net", "sh", "-c", script], cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ran = sorted((ROOT / "build" / "run" / "zh").glob("[0-9][0-9]_*.ipynb"))
    assert [p.name for p in ran] == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in ran:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                assert output.get("name") != "stderr", f"{path.name}: warning printed: {output.get('text', '')[:200]}"
