"""The KV cache: the keys and values each attention layer already computed, kept so a new token never recomputes them.

Generating text token by token, the keys and values of earlier tokens never change (a causal
model never lets them see later tokens). So each layer stores them once, and a new token only
computes its own query, key and value. `LayerCache` holds one layer's; `KVCache` one per layer.

With a sliding window the cache keeps only what a future query may still see: the last
`window` tokens (and the first `sinks`). It then works as a ring buffer: once full, the new
key and value overwrite the oldest ones in place, so its memory stops growing.

The cache counts `position`, the tokens seen so far, apart from the tokens it keeps: the next
token's position is `position`, whatever the window dropped.
"""

from __future__ import annotations

import torch

from .checks import bilingual, check_size, check_tensor
from .sliding_window import check_window


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, tokens: int, bytes_per_value: int = 4,
                   batch: int = 1) -> int:
    """Bytes of keys and values for `tokens` tokens: 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes x batch."""
    return 2 * num_layers * num_kv_heads * head_dim * tokens * bytes_per_value * batch


class LayerCache:
    """The keys and values one attention layer has seen, each (batch, kv_heads, slots, head_dim), and their positions."""

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.positions = torch.empty(0, dtype=torch.long)  # (slots,): the position of the token in each slot
        self.position = 0  # tokens seen so far, which is the position of the next token
        self.window: int | None = None
        self.sinks = 0
        self._oldest = 0  # the ring slot the next token overwrites, once the cache is full

    @property
    def nbytes(self) -> int:
        """Memory held by the keys and values, in bytes (the positions are bookkeeping and not counted)."""
        if self.keys is None:
            return 0
        return self.keys.numel() * self.keys.element_size() + self.values.numel() * self.values.element_size()

    @property
    def capacity(self) -> int | None:
        """The most tokens this cache keeps: window + sinks, or None (no limit) without a window."""
        return None if self.window is None else self.window + self.sinks

    def update(
        self, keys: torch.Tensor, values: torch.Tensor, window: int | None = None, sinks: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Add the new tokens' keys and values (b, kv_heads, T, head_dim); return what their queries may attend to.

        Returns every key and value kept before plus the new ones, and their positions, so the
        caller can build the mask. Then keeps only what later queries may still need.
        """
        window, sinks = check_window(window, sinks)
        self._check(keys, values, window, sinks)
        num_new = keys.shape[2]
        new_positions = torch.arange(self.position, self.position + num_new, device=keys.device)
        self.position += num_new
        full = self.keys is not None and self.keys.shape[2] == self.capacity
        if full and num_new == 1:  # the ring buffer: overwrite the oldest slot in place
            slot = self._oldest
            self.keys[:, :, slot] = keys[:, :, 0]
            self.values[:, :, slot] = values[:, :, 0]
            self.positions[slot] = new_positions[0]
            self._oldest = self.sinks + (slot - self.sinks + 1) % self.window
            return self.keys, self.values, self.positions
        seen_keys = keys if self.keys is None else torch.cat([self.keys, keys], dim=2)
        seen_values = values if self.values is None else torch.cat([self.values, values], dim=2)
        seen_positions = torch.cat([self.positions.to(keys.device), new_positions])
        kept = torch.arange(seen_positions.numel(), device=keys.device)
        if self.capacity is not None and seen_positions.numel() > self.capacity:
            still_visible = (seen_positions < sinks) | (seen_positions >= self.position - window)
            kept = kept[still_visible]
            kept = kept[seen_positions[kept].argsort()]  # sinks first, then the window, oldest first
        self.keys, self.values = seen_keys[:, :, kept], seen_values[:, :, kept]
        self.positions = seen_positions[kept]
        self._oldest = sinks
        return seen_keys, seen_values, seen_positions

    def _check(self, keys: object, values: object, window: int | None, sinks: int) -> None:
        """New keys and values match each other and what is stored; the window never changes."""
        check_tensor(keys, "keys", ranks=(4,))
        check_tensor(values, "values", ranks=(4,))
        if keys.shape != values.shape or keys.dtype != values.dtype:
            raise ValueError(
                bilingual(
                    f"keys {tuple(keys.shape)} {keys.dtype} and values {tuple(values.shape)} {values.dtype} must have "
                    "the same shape (batch, kv_heads, T, head_dim) and dtype.",
                    f"keys {tuple(keys.shape)} {keys.dtype} 与 values {tuple(values.shape)} {values.dtype} 的形状"
                    "（batch, kv_heads, T, head_dim）和类型必须相同。",
                )
            )
        if self.keys is None:
            self.window, self.sinks = window, sinks
            return
        if (window, sinks) != (self.window, self.sinks):
            raise ValueError(
                bilingual(
                    f"This cache was filled with window={self.window}, sinks={self.sinks}, not window={window}, "
                    f"sinks={sinks}; use a new KVCache for a model with another window.",
                    f"这个缓存是按 window={self.window}、sinks={self.sinks} 填充的，而不是 window={window}、sinks={sinks}；"
                    "换了窗口的模型请使用新的 KVCache。",
                )
            )
        stored = (self.keys.shape[0], self.keys.shape[1], self.keys.shape[3], str(self.keys.dtype), str(self.keys.device))
        new = (keys.shape[0], keys.shape[1], keys.shape[3], str(keys.dtype), str(keys.device))
        if stored != new:
            raise ValueError(
                bilingual(
                    f"The new keys (batch, kv_heads, head_dim, dtype, device) = {new} do not match the cached ones "
                    f"{stored}; use a new KVCache for each sequence or batch.",
                    f"新的键 (batch, kv_heads, head_dim, dtype, device) = {new} 与缓存中的 {stored} 不一致；"
                    "每个序列或批次请使用新的 KVCache。",
                )
            )


class KVCache:
    """One LayerCache per attention layer of a model, for one batch of sequences: pass `cache[i]` to layer i."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(check_size(num_layers, "num_layers"))]

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: int) -> LayerCache:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(self.layers):
            raise IndexError(
                bilingual(
                    f"layer must be an integer from 0 to {len(self.layers) - 1}, got {layer!r}.",
                    f"layer 必须是 0 到 {len(self.layers) - 1} 之间的整数，实际是 {layer!r}。",
                )
            )
        return self.layers[layer]

    @property
    def position(self) -> int:
        """Tokens seen so far: the position the next token gets (not the number of tokens kept)."""
        return self.layers[0].position

    @property
    def tokens_kept(self) -> int:
        """Tokens whose keys and values each layer holds now."""
        return self.layers[0].positions.numel()

    @property
    def nbytes(self) -> int:
        """Memory of every layer's keys and values, in bytes."""
        return sum(layer.nbytes for layer in self.layers)
