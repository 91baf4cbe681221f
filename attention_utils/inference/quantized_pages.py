"""A paged cache whose pages hold 8-bit codes: the same pool of pages, about 3.6 times as many tokens per byte (lesson 17).

Each token's key (and value) in each head is one group of head_dim numbers, stored as codes 0..255
with one scale and one offset (lesson 15's `quantize`, grouped per token so a page can be written a
token at a time). For head_dim 64 in float32 that is 64 + 2 x 4 = 72 bytes instead of 256, so a
fixed budget of bytes holds 256 / 72 ≈ 3.6 times the pages. Reading a page gives the numbers back
with a rounding error of at most half a step.
"""

from __future__ import annotations

import torch

from .paged_cache import PagedCache
from .quantized_cache import quantize

BITS = 8


class QuantizedPagedCache(PagedCache):
    """PagedCache with 8-bit codes and, per token and head, a scale and offset for the keys and for the values."""

    def _allocate(self, shape: tuple[int, ...], device: torch.device) -> None:
        """Codes (num_pages, kv_heads, page_size, head_dim) as uint8; scales (..., page_size, 4) in the cache's dtype."""
        self.keys, self.values = (torch.zeros(shape, dtype=torch.uint8, device=device) for _ in range(2))
        self.scales = torch.zeros(*shape[:3], 4, dtype=self.dtype, device=device)  # key scale, key offset, value ...

    @property
    def _stores(self) -> list[torch.Tensor]:
        return [self.keys, self.values, self.scales]

    def _write(self, page: int, slot: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Quantize each token's key and value in each head (one group of head_dim numbers) and store codes and scales."""
        stop = slot + keys.shape[1]
        for store, x, column in ((self.keys, keys, 0), (self.values, values, 2)):
            codes, scale, offset = quantize(x, BITS, dim=-1)
            store[page, :, slot:stop] = codes
            self.scales[page, :, slot:stop, column:column + 2] = torch.cat([scale, offset], dim=-1)

    def _read(self, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pages' keys and values rebuilt from their codes: codes x scale + offset."""
        scales = self.scales[table]
        return tuple(store[table].to(self.dtype) * scales[..., column:column + 1] + scales[..., column + 1:column + 2]
                     for store, column in ((self.keys, 0), (self.values, 2)))
