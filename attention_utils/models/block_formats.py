"""llama.cpp's two block formats in SmolLM2's file, read with torch: Q4_1 (w = d·q + m) and Q8_0 (w = d·q).

Both store blocks of 32 weights with a float16 scale d. Turning them into float32 numbers here takes
the same float32 steps as the `gguf` package's numpy code (a product, then a sum), so the numbers are
the same bit for bit (tests/test_gguf_file.py compares every tensor of the file). gguf works through
groups of rows in Python; with these whole-tensor steps (and the model built without random weights)
loading SmolLM2 took 1.0-1.3 s here instead of 2.4-3.7 s. Other formats are left to gguf.
"""

from __future__ import annotations

import numpy as np
import torch

GROUP = 32  # weights per block in both formats
Q4_1, Q8_0 = 3, 8  # GGML's numbers for the two formats
Q4_1_BYTES = 20  # float16 d, float16 m, 16 bytes holding 32 codes of 4 bits
Q8_0_BYTES = 34  # float16 d, 32 int8 codes


def _scales(blocks: torch.Tensor, at: int) -> torch.Tensor:
    """The float16 number stored at byte `at` of every block, as float32: (rows, blocks)."""
    return blocks[..., at:at + 2].contiguous().view(torch.float16)[..., 0].float()


def q4_1_blocks(raw: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Codes (rows, cols) as uint8 0..15, and d and m (rows, cols / 32) as float32, from Q4_1 bytes (rows, bytes per row).

    In a block, byte j holds code j in its low 4 bits and code j + 16 in its high 4 bits.
    """
    rows = raw.shape[0]
    blocks = torch.from_numpy(np.array(raw)).view(rows, -1, Q4_1_BYTES)  # (rows, blocks, 20), a copy the caller cannot change
    packed = blocks[..., 4:]  # (rows, blocks, 16)
    codes = torch.cat([packed & 0x0F, packed >> 4], dim=-1)  # (rows, blocks, 32): codes 0..15, then 16..31
    return codes.reshape(rows, -1), _scales(blocks, 0), _scales(blocks, 2)


def q4_1_numbers(codes: torch.Tensor, d: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """d·q + m for every weight, float32 (rows, cols): a product, then a sum, as gguf computes it."""
    rows, cols = codes.shape
    return (d[..., None] * codes.view(rows, -1, GROUP).float() + m[..., None]).view(rows, cols)


def dequantize(raw: np.ndarray, kind: int) -> torch.Tensor | None:
    """A Q4_1 or Q8_0 tensor's bytes (rows, bytes per row) as float32 numbers (rows, cols); None for other formats."""
    if kind == Q4_1:
        return q4_1_numbers(*q4_1_blocks(raw))
    if kind == Q8_0:
        rows = raw.shape[0]
        blocks = torch.from_numpy(np.array(raw)).view(rows, -1, Q8_0_BYTES)
        codes = blocks[..., 2:].contiguous().view(torch.int8).float()  # (rows, blocks, 32)
        return (_scales(blocks, 0)[..., None] * codes).view(rows, -1)
    return None
