"""Reading a GGUF model file: its settings, its tokenizer's vocabulary and merges, and its weights as torch tensors.

A GGUF file (the format of llama.cpp) is three parts in a row:
1. a header of named settings ("llama.block_count" = 30, "tokenizer.ggml.tokens" = [...]);
2. a table of tensors: name, shape, number format and where its bytes start;
3. the bytes of every tensor, most of them quantized: Q4_1 stores blocks of 32 weights as 4-bit
   integers with one scale and one minimum each, so a weight is scale * q + minimum.
The header and the table are read here with `struct`; the quantized blocks are turned back into
float32 numbers by `block_formats` (Q4_1 and Q8_0, in torch) or by the `gguf` package (any other
format). A file is read as untrusted: every count and length is checked against the bytes left
before anything is read or allocated, and every tensor's bytes must lie inside the file, so a cut
download or a damaged byte gets an error that names the byte and the field instead of a crash deep
inside `struct` or numpy. A tensor's bytes are read through a file handle when it is asked for, not
through a memory map: a file cut on disk after it was opened then gives a short read and a clear
error, where a map would kill the process (SIGBUS).

Lesson 13's model file is found by `model_package.find_model_file` (nothing is downloaded).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from ..checks import bilingual, shown
from .block_formats import dequantize
from .model_package import MODEL_FILE, REINSTALL, find_model_file

MAGIC = b"GGUF"
# value type number -> struct format, for the numbers a header may hold (8 is a string, 9 an array)
NUMBER_FORMATS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32
VERSIONS = (2, 3)  # version 1 counted with 32-bit numbers; later versions may change the layout
MAX_DIMS = 4  # GGML tensors have at most 4 dimensions
MAX_NESTING = 8  # arrays of arrays: far more than any model needs, few enough that Python's recursion never runs out
# the fewest bytes one item can take, to check a count against the bytes left before reading it
SMALLEST = {STRING: 8, ARRAY: 12, **{kind: struct.calcsize(layout) for kind, layout in NUMBER_FORMATS.items()}}
SMALLEST_SETTING = 8 + 4 + 1  # name length, value type, the smallest value
SMALLEST_TENSOR = 8 + 4 + 8 + 4 + 8  # name length, dimension count, one size, number format, offset
LENGTH = struct.Struct("<Q")  # a string's length, or a count


@dataclass(frozen=True)
class TensorEntry:
    """One row of the tensor table: where a tensor's bytes are and how to read them."""

    name: str
    shape: tuple[int, ...]  # in torch order: (rows, columns) for a matrix, as nn.Linear stores its weight
    kind: int  # the GGML number format: 0 float32, 3 Q4_1, 8 Q8_0, ...
    offset: int  # from the start of the data part


def tensor_bytes(entry: TensorEntry) -> int:
    """How many bytes a tensor takes in the file; ValueError for a number format or shape that cannot be read."""
    import gguf

    try:
        kind = gguf.GGMLQuantizationType(entry.kind)
        block_size, block_bytes = gguf.GGML_QUANT_SIZES[kind]
    except (ValueError, KeyError):
        raise ValueError(bilingual(
            f"Tensor {entry.name!r} has number format {entry.kind}, which this reader does not know; the file is "
            "damaged or made by a newer llama.cpp: use a file with float32, float16 or llama.cpp's quantized formats.",
            f"张量 {entry.name!r} 的数值格式是 {entry.kind}，这个读取器不认识；文件可能已损坏，或是由更新的 llama.cpp 生成的："
            "请使用 float32、float16 或 llama.cpp 量化格式的文件。")) from None
    if not 1 <= len(entry.shape) <= MAX_DIMS or min(entry.shape) < 1 or entry.shape[-1] % block_size:
        raise ValueError(bilingual(
            f"Tensor {entry.name!r} has shape {entry.shape}: a tensor needs 1 to {MAX_DIMS} sizes of at least 1, and "
            f"its last size must be a multiple of {block_size} for {kind.name}; the file is damaged: {_fix_en()}.",
            f"张量 {entry.name!r} 的形状是 {entry.shape}：张量应有 1 到 {MAX_DIMS} 个不小于 1 的维度，而且 {kind.name} "
            f"格式要求最后一维是 {block_size} 的倍数；文件已损坏：{_fix_zh()}。"))
    return int(np.prod(entry.shape, dtype=object)) // block_size * block_bytes


@dataclass
class GGUFFile:
    """The settings and the tensor table of a GGUF file; a tensor's bytes stay on disk until it is read."""

    path: Path
    metadata: dict[str, object]
    tensors: dict[str, TensorEntry]
    start: int  # the byte where the data part begins: a tensor's offset counts from here

    def entry(self, name: object) -> TensorEntry:
        """The table row of a tensor; ValueError naming the tensor when the file has none of that name."""
        if not isinstance(name, str):
            raise TypeError(bilingual(
                f"name must be a tensor's name (a str) such as 'blk.0.attn_q.weight', got {shown(name)}.",
                f"name 必须是张量的名字（字符串），例如 'blk.0.attn_q.weight'，实际是 {shown(name, True)}。"))
        if name not in self.tensors:
            some = ", ".join(repr(n) for n in list(self.tensors)[:3])
            raise ValueError(bilingual(
                f"{self.path.name} has no tensor named {name!r}; its {len(self.tensors)} names are in "
                f"file.tensors ({some}, ...).",
                f"{self.path.name} 里没有名为 {name!r} 的张量；它的 {len(self.tensors)} 个名字都在 file.tensors 里"
                f"（{some}……）。"))
        return self.tensors[name]

    def kind_name(self, name: str) -> str:
        """The number format of a tensor as llama.cpp names it ("Q4_1", "F32", ...)."""
        import gguf

        entry = self.entry(name)
        tensor_bytes(entry)  # refuses a number format gguf does not know
        return gguf.GGMLQuantizationType(entry.kind).name

    def blocks(self, name: str) -> np.ndarray:
        """One tensor's bytes as stored, (rows, bytes per row) uint8: quantized blocks, not yet numbers (lesson 14 reads them)."""
        entry = self.entry(name)
        size = tensor_bytes(entry)
        rows = int(np.prod(entry.shape[:-1], dtype=object))
        return self.read_bytes(entry, size).reshape(rows, size // rows)

    def tensor(self, name: str) -> torch.Tensor:
        """One tensor as float32, its quantized blocks turned back into numbers (scale * q + minimum for Q4_1)."""
        import gguf
        import gguf.quants

        raw, entry = self.blocks(name), self.entry(name)
        fast = dequantize(raw, entry.kind)  # the model's two block formats, read with torch
        if fast is not None:
            return fast.reshape(entry.shape)
        kind = gguf.GGMLQuantizationType(entry.kind)
        try:
            numbers = gguf.quants.dequantize(raw, kind)  # (rows, columns) float32
        except NotImplementedError:  # formats gguf can measure but not turn into numbers (F64, I32, ...)
            raise ValueError(bilingual(
                f"Tensor {name!r} is stored as {kind.name}, which the gguf package cannot turn into numbers; use a file "
                "whose weights are float32, float16, bfloat16 or llama.cpp's quantized formats.",
                f"张量 {name!r} 以 {kind.name} 格式存储，gguf 包无法把它还原成数值；请使用权重为 float32、float16、bfloat16 "
                "或 llama.cpp 量化格式的文件。")) from None
        return torch.from_numpy(np.asarray(numbers, dtype=np.float32)).reshape(entry.shape)

    def read_bytes(self, entry: TensorEntry, size: int) -> np.ndarray:
        """A tensor's `size` bytes, read from the file now; ValueError when the file holds fewer (cut since it was read)."""
        raw, begin = np.empty(size, dtype=np.uint8), self.start + entry.offset
        try:
            with open(self.path, "rb") as file:
                file.seek(begin)
                if file.readinto(raw) != size:
                    raise _cut_short(self.path, entry.name, begin, begin + size, os.fstat(file.fileno()).st_size, True)
        except OSError as error:
            raise _unreadable(self.path, error) from None
        return raw


def read_gguf(path: str | os.PathLike | None = None) -> GGUFFile:
    """Read the header and the tensor table of a GGUF file (by default lesson 13's model); map its data part.

    Every tensor's bytes are checked to lie inside the file here, so a cut download is refused at
    once rather than when the 200th tensor is read.
    """
    path = find_model_file() if path is None else check_path(path)
    try:
        with open(path, "rb") as file:
            header = _Header(file, path, os.fstat(file.fileno()).st_size)
            try:
                metadata, tensors, start = header.read()
            finally:
                header.close()
    except OSError as error:
        raise _unreadable(path, error) from None
    for entry in tensors.values():
        end = start + entry.offset + tensor_bytes(entry)
        if end > header.size:
            raise _cut_short(path, entry.name, start + entry.offset, end, header.size)
    return GGUFFile(path, metadata, tensors, start)


def check_path(path: object) -> Path:
    """A path to read: a str or os.PathLike naming an existing file (not a folder)."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(bilingual(
            f"path must be the path of a .gguf file, a str or pathlib.Path, got {shown(path)}; for lesson 13's "
            "model call read_gguf() with no argument.",
            f"path 必须是 .gguf 文件的路径（字符串或 pathlib.Path），实际是 {shown(path, True)}；"
            "要读第 13 课的模型，直接调用 read_gguf() 即可。"))
    path = Path(path)
    try:
        path.is_dir()  # raises for a name the system cannot look up at all (too long, for one)
    except OSError as error:
        raise ValueError(bilingual(
            f"path {shown(str(path))} cannot be looked up ({error.strerror}); check the name of the .gguf file.",
            f"无法查找 path {shown(str(path), True)}（{error.strerror}）；请检查 .gguf 文件的名字。")) from None
    if not path.exists():
        raise FileNotFoundError(bilingual(
            f"path {str(path)!r} does not exist; check the name, or call read_gguf() with no argument for lesson 13's model.",
            f"path {str(path)!r} 不存在；请检查文件名，或者直接调用 read_gguf() 读取第 13 课的模型。"))
    if path.is_dir():
        raise ValueError(bilingual(
            f"path {str(path)!r} is a folder; give the .gguf file inside it, such as {str(path / MODEL_FILE)!r}.",
            f"path {str(path)!r} 是一个文件夹；请给出其中的 .gguf 文件，例如 {str(path / MODEL_FILE)!r}。"))
    if not path.is_file():  # a pipe or a device: reading it could wait forever
        raise ValueError(bilingual(
            f"path {str(path)!r} is not a regular file (a pipe or a device); give the path of a .gguf file.",
            f"path {str(path)!r} 不是普通文件（而是管道或设备）；请给出 .gguf 文件的路径。"))
    return path


def _unreadable(path: Path, error: OSError) -> OSError:
    """A file that cannot be read (permissions, a disk error, deleted): the same kind of error, in both languages."""
    return type(error)(bilingual(f"{path} cannot be read ({error.strerror or error}); check the file and its permissions.",
                                 f"无法读取 {path}（{error.strerror or error}）；请检查这个文件及其权限。"))


def _cut_short(path: Path, name: str, begin: int, end: int, size: int, since_read: bool = False) -> ValueError:
    """A tensor whose bytes go past the end of the file: a cut download, or a file cut on disk since read_gguf read it."""
    when_en, when_zh = (" now: it was cut after read_gguf read it", "：它在 read_gguf 读过之后被截短了") if since_read else ("", "")
    return ValueError(bilingual(
        f"{path.name} is cut short or damaged: tensor {name!r} needs bytes {begin:,} to {end:,}, but the file has "
        f"{size:,}{when_en}; {_fix_en()}, then call read_gguf again.",
        f"{path.name} 不完整或已损坏：张量 {name!r} 需要第 {begin:,} 到第 {end:,} 个字节，而文件只有 {size:,} 个字节"
        f"{when_zh}；{_fix_zh()}，然后重新调用 read_gguf。"))


def _fix_en() -> str:
    return f"download it again, or for lesson 13's model run `{REINSTALL}`"


def _fix_zh() -> str:
    return f"请重新下载；如果是第 13 课的模型，请运行 `{REINSTALL}`"


# a part of the header, named in English and in Chinese: ("the tensor count", "张量个数"); or a function that
# names it, so that the ~100,000 strings of a tokenizer are read without writing a name for each
Field = tuple[str, str] | Callable[[], tuple[str, str]]


def _named(field: Field) -> tuple[str, str]:
    return field() if callable(field) else field


def _length_of(field: Field) -> Field:
    return lambda: (f"the length of {_named(field)[0]}", f"{_named(field)[1]}的长度")


class _Header:
    """Reads a GGUF header field by field, checking each length against the bytes left before reading it."""

    def __init__(self, file: BinaryIO, path: Path, size: int) -> None:
        # the file mapped, so each field is a slice rather than a read call (the tokenizer alone is ~100,000 strings)
        self.path, self.size, self.at = path, size, 0
        self.bytes = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def damaged(self, field: Field, why_en: str, why_zh: str, at: int | None = None) -> ValueError:
        """The error for a file that is cut short or damaged, naming the byte and the field."""
        at, field = self.at if at is None else at, _named(field)
        return ValueError(bilingual(
            f"{self.path.name} is cut short or damaged at byte {at:,} ({field[0]}): {why_en}; {_fix_en()}.",
            f"{self.path.name} 在第 {at:,} 个字节处（{field[1]}）不完整或已损坏：{why_zh}；{_fix_zh()}。"))

    def need(self, count: int, field: Field) -> None:
        """Refuse to read `count` bytes when fewer are left."""
        left = self.size - self.at
        if count > left:
            raise self.damaged(field, f"it needs {count:,} bytes, only {left:,} are left",
                               f"需要 {count:,} 个字节，只剩 {left:,} 个")

    def take(self, count: int, field: Field) -> bytes:
        """The next `count` bytes."""
        self.need(count, field)
        self.at += count
        return self.bytes[self.at - count : self.at]

    def unpack(self, layout: str, field: Field) -> tuple:
        """The little-endian values `layout` describes (struct's notation)."""
        count = struct.calcsize(layout)
        self.need(count, field)
        self.at += count
        return struct.unpack_from(layout, self.bytes, self.at - count)

    def close(self) -> None:
        if isinstance(self.bytes, mmap.mmap):
            self.bytes.close()

    def count(self, field: Field, smallest: int) -> int:
        """A count of things that take at least `smallest` bytes each, checked against the bytes left."""
        at = self.at
        (count,) = self.unpack("<Q", field)
        if count * smallest > self.size - self.at:
            raise self.damaged(field, f"{count:,} items cannot fit in the {self.size - self.at:,} bytes left",
                               f"剩下的 {self.size - self.at:,} 个字节放不下 {count:,} 项", at)
        return count

    def string(self, field: Field) -> str:
        """A GGUF string: its length in bytes (8 bytes), then UTF-8 text."""
        length = self.count(_length_of(field), 1)
        at = self.at
        try:
            return self.take(length, field).decode("utf-8")
        except UnicodeDecodeError:
            raise self.damaged(field, "it is not UTF-8 text", "它不是 UTF-8 文本", at) from None

    def strings(self, count: int, item: Callable[[int], Field]) -> list[str]:
        """`count` strings in one tight loop (a tokenizer holds ~100,000); where one is cut or not UTF-8,
        string() reads it again and raises the error that names its byte and `item(i)`."""
        data, size, at, found = self.bytes, self.size, self.at, []
        for i in range(count):
            if size - at >= 8:
                (length,) = LENGTH.unpack_from(data, at)
                if length <= size - at - 8:
                    try:
                        found.append(str(data[at + 8 : at + 8 + length], "utf-8"))
                        at += 8 + length
                        continue
                    except UnicodeDecodeError:
                        pass
            self.at = at
            found.append(self.string(item(i)))  # the careful reader: it raises, naming the byte and the field
            at = self.at
        self.at = at
        return found

    def value(self, kind: int, field: Field, depth: int = 0) -> object:
        """One value of the given type: a number, a string, or an array (item type, count, items)."""
        if kind == STRING:
            return self.string(field)
        if kind == ARRAY:
            at, item_field = self.at, lambda: (f"the item type of {_named(field)[0]}", f"{_named(field)[1]}的元素类型")
            (item_kind,) = self.unpack("<I", item_field)
            if item_kind not in SMALLEST or (item_kind == ARRAY and depth >= MAX_NESTING):
                raise self.unknown_type(item_kind, item_field, at)
            count = self.count(_length_of(field), SMALLEST[item_kind])
            if item_kind in NUMBER_FORMATS:
                return list(self.unpack(f"<{count}{NUMBER_FORMATS[item_kind]}", field))
            item = lambda i: lambda: (f"item {i} of {_named(field)[0]}", f"{_named(field)[1]}的第 {i} 项")  # noqa: E731
            if item_kind == STRING:
                return self.strings(count, item)
            return [self.value(item_kind, item(i), depth + 1) for i in range(count)]
        (value,) = self.unpack("<" + NUMBER_FORMATS[kind], field)
        return value

    def unknown_type(self, kind: int, field: Field, at: int) -> ValueError:
        if kind == ARRAY:
            return self.damaged(field, f"arrays nested more than {MAX_NESTING} deep", f"数组嵌套超过了 {MAX_NESTING} 层", at)
        known = ", ".join(str(k) for k in sorted(SMALLEST))
        return self.damaged(field, f"value type {kind} is not one of GGUF's ({known})",
                            f"值类型 {kind} 不是 GGUF 的类型（{known}）之一", at)

    def read(self) -> tuple[dict[str, object], dict[str, TensorEntry], int]:
        """The settings, the tensor table and the byte where the data part starts."""
        self.version()
        tensor_count = self.count(("the tensor count", "张量个数"), SMALLEST_TENSOR)
        setting_count = self.count(("the setting count", "设置项个数"), SMALLEST_SETTING)
        metadata = {}
        for i in range(setting_count):
            at, field = self.at, (f"the name of setting {i}", f"第 {i} 个设置项的名字")
            name = self.string(field)
            if name in metadata:
                raise self.damaged(field, f"{name!r} appears twice", f"{name!r} 出现了两次", at)
            at, field = self.at, (f"the value type of {name!r}", f"{name!r} 的值类型")
            (kind,) = self.unpack("<I", field)
            if kind not in SMALLEST:
                raise self.unknown_type(kind, field, at)
            metadata[name] = self.value(kind, (f"the value of {name!r}", f"{name!r} 的值"))
        tensors = {}
        for i in range(tensor_count):
            at, field = self.at, (f"the name of tensor {i}", f"第 {i} 个张量的名字")
            name = self.string(field)
            if name in tensors:
                raise self.damaged(field, f"{name!r} appears twice", f"{name!r} 出现了两次", at)
            field = (f"the dimension count of {name!r}", f"{name!r} 的维数")
            (dims,) = self.unpack("<I", field)
            if not 1 <= dims <= MAX_DIMS:
                raise self.damaged(field, f"{dims} is not 1 to {MAX_DIMS}", f"{dims} 不在 1 到 {MAX_DIMS} 之间", self.at - 4)
            sizes = self.unpack(f"<{dims}Q", (f"the shape of {name!r}", f"{name!r} 的形状"))  # GGML order: fastest first
            kind, offset = self.unpack("<IQ", (f"the number format and offset of {name!r}", f"{name!r} 的数值格式和偏移"))
            tensors[name] = TensorEntry(name, tuple(reversed(sizes)), kind, offset)
        return metadata, tensors, self.data_start(metadata)

    def version(self) -> None:
        """The magic bytes, then a version this reader knows (2 or 3), little-endian."""
        if self.size < 4 or self.bytes[:4] != MAGIC:
            what_en, what_zh = ("it is empty", "它是空的") if self.size == 0 else (
                "it does not start with b'GGUF'", "开头不是 b'GGUF'")
            raise ValueError(bilingual(
                f"{self.path.name} is not a GGUF file ({what_en}); give the path of a .gguf model file.",
                f"{self.path.name} 不是 GGUF 文件（{what_zh}）；请给出 .gguf 模型文件的路径。"))
        self.at = 4
        (version,) = self.unpack("<I", ("the version", "版本号"))
        if version in VERSIONS:
            return
        if struct.unpack(">I", struct.pack("<I", version))[0] in VERSIONS:
            raise ValueError(bilingual(
                f"{self.path.name} is a big-endian GGUF file; this reader reads little-endian files only (the usual "
                "kind): use the little-endian version of the model.",
                f"{self.path.name} 是大端字节序的 GGUF 文件；这个读取器只读小端字节序的文件（最常见的那种）："
                "请使用该模型的小端版本。"))
        raise ValueError(bilingual(
            f"{self.path.name} is GGUF version {version}; this reader knows versions 2 and 3 only: use a file "
            "of version 3 (what llama.cpp writes today).",
            f"{self.path.name} 的 GGUF 版本是 {version}；这个读取器只认识版本 2 和 3：请使用版本 3 的文件"
            "（llama.cpp 目前写出的版本）。"))

    def data_start(self, metadata: dict[str, object]) -> int:
        """The data part starts at the next multiple of `general.alignment` (32 unless the header says otherwise)."""
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        # the format asks for a power of two; the data of a file with any other alignment would be read shifted
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment < 1 or alignment & (alignment - 1):
            raise ValueError(bilingual(
                f"{self.path.name} is damaged: its setting 'general.alignment' is {shown(alignment)}, not a power of "
                f"two; {_fix_en()}.",
                f"{self.path.name} 已损坏：它的设置项 'general.alignment' 是 {shown(alignment, True)}，"
                f"不是 2 的幂；{_fix_zh()}。"))
        return -(-self.at // alignment) * alignment


def setting(file: GGUFFile, key: str) -> object:
    """One header setting a model needs; ValueError naming it when the file lacks it."""
    if key not in file.metadata:
        raise ValueError(bilingual(
            f"{file.path.name} has no setting {key!r}, which this model needs; the file is not a complete "
            "model of this kind: use the file the lesson names (read_gguf() with no argument).",
            f"{file.path.name} 里没有这个模型需要的设置项 {key!r}；它不是这种模型的完整文件："
            "请使用课程指定的文件（直接调用 read_gguf()）。"))
    return file.metadata[key]


def check_file(file: object, caller: str) -> GGUFFile:
    """What `from_gguf` takes: a GGUFFile, or a path, which is read here with read_gguf."""
    if isinstance(file, GGUFFile):
        return file
    if isinstance(file, (str, os.PathLike)):
        return read_gguf(file)
    raise TypeError(bilingual(
        f"{caller} takes a GGUF file, read_gguf(path) or a path, got {shown(file)}; for lesson 13's model use "
        "read_gguf() with no argument.",
        f"{caller} 需要一个 GGUF 文件：read_gguf(path) 的结果或文件路径，实际是 {shown(file, True)}；"
        "要用第 13 课的模型，请传入 read_gguf()（不带参数）。"))
