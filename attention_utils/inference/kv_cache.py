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

import numpy as np
import torch

from ..checks import bilingual, check_size, check_tensor
from .sliding_window import check_window


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, tokens: int, bytes_per_value: int = 4,
                   batch: int = 1) -> int:
    """Bytes of keys and values for `tokens` tokens: 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes x batch."""
    sizes = {"num_layers": num_layers, "num_kv_heads": num_kv_heads, "head_dim": head_dim,
             "bytes_per_value": bytes_per_value, "batch": batch}
    product = check_size(tokens, "tokens", minimum=0)
    for name, size in sizes.items():
        product *= check_size(size, name)
    return 2 * product


class LayerCache:
    """The keys and values one attention layer has seen, each (batch, kv_heads, tokens kept, head_dim), and their positions.

    They live in buffers that grow by doubling, so a decode step writes one token in place instead of
    copying the whole cache into new memory (torch.cat at every step spends its time allocating).
    `nbytes` counts the keys and values held; `reserved_bytes` the buffers: at most twice that while
    the cache grows, and exactly that once a windowed cache is full.
    """

    can_forget = True  # truncate works: the kept tokens are the first slots of the buffers

    def __init__(self) -> None:
        self._keys: torch.Tensor | None = None  # (b, kv_heads, slots reserved, head_dim)
        self._values: torch.Tensor | None = None
        self.positions = torch.empty(0, dtype=torch.long)  # (tokens kept,): the position of the token in each slot
        self.position = 0  # tokens seen so far, which is the position of the next token
        self.window: int | None = None
        self.sinks = 0
        self._oldest = 0  # the ring slot the next token overwrites, once a windowed cache is full

    @property
    def keys(self) -> torch.Tensor | None:
        """The keys kept, (b, kv_heads, tokens kept, head_dim), slot by slot (a ring buffer's slots are not in order)."""
        return None if self._keys is None else self._held()[0]

    @property
    def values(self) -> torch.Tensor | None:
        """The values kept, in the same slots as the keys."""
        return None if self._values is None else self._held()[1]

    def _held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """What the buffers hold for the tokens kept (a subclass may store something else than keys there)."""
        kept = self.positions.numel()
        return self._keys[:, :, :kept], self._values[:, :, :kept]

    @property
    def nbytes(self) -> int:
        """Bytes the buffers hold for the tokens kept: 2 x kv_heads x head_dim x tokens x bytes per value x batch."""
        if self._keys is None:
            return 0
        held = self._held()[0]
        return 2 * held.numel() * held.element_size()

    @property
    def reserved_bytes(self) -> int:
        """Bytes of the buffers that hold them (the positions are bookkeeping and not counted)."""
        if self._keys is None:
            return 0
        return 2 * self._keys.numel() * self._keys.element_size()

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
        num_new, kept = keys.shape[2], self.positions.numel()
        if num_new == 0:  # nothing new: the first call still fixes the buffers' batch, heads, dtype and device
            self._reserve(keys, kept)
            return *self._held(), self.positions
        new_positions = torch.arange(self.position, self.position + num_new, device=keys.device)
        self.position += num_new
        if kept == self.capacity and num_new == 1:  # a full ring buffer: overwrite the oldest slot in place
            slot = self._oldest
            self._keys[:, :, slot], self._values[:, :, slot] = keys[:, :, 0], values[:, :, 0]
            self.positions[slot] = new_positions[0]
            self._oldest = sinks + (slot - sinks + 1) % window
            return *self._held(), self.positions
        self._reserve(keys, kept + num_new)
        self._keys[:, :, kept : kept + num_new] = keys
        self._values[:, :, kept : kept + num_new] = values
        self.positions = torch.cat([self.positions.to(keys.device), new_positions])
        self._oldest = sinks
        if self.capacity is None or self.positions.numel() <= self.capacity:
            return *self._held(), self.positions
        # a chunk under a window: its queries see everything held, then the cache drops what no later query sees
        seen = (*(x.clone() for x in self._held()), self.positions)
        visible = ((self.positions < sinks) | (self.positions >= self.position - window)).nonzero().flatten()
        visible = visible[self.positions[visible].argsort()]  # sinks first, then the window, oldest first
        self._keys, self._values = seen[0][:, :, visible], seen[1][:, :, visible]  # exactly window + sinks slots
        self.positions = self.positions[visible]
        return seen

    def truncate(self, tokens: int) -> None:
        """Forget every token after the first `tokens`, as if they had never been seen (speculative decoding, lesson 18).

        The buffers stay as they are: the next update writes over the forgotten slots.
        """
        if self.window is not None or not self.can_forget:
            raise ValueError(bilingual(
                f"This {type(self).__name__} (window={self.window}) cannot forget its newest tokens: only a cache without "
                "a window that keeps each token in its own slot (KVCache, or the low-rank cache) can; use one of those.",
                f"这个 {type(self).__name__}（window={self.window}）不能丢掉最新的词元：只有不带窗口、每个词元占自己的槽位的缓存"
                "（KVCache 或低秩缓存）才可以；请改用其中一种。"))
        tokens, kept = check_size(tokens, "tokens", minimum=0), self.positions.numel()
        if tokens > kept:
            raise ValueError(bilingual(
                f"tokens={tokens} is more than the {kept} tokens this cache holds; truncate keeps the first `tokens`.",
                f"tokens={tokens} 超过了这个缓存保存的 {kept} 个词元；truncate 只保留最前面的 tokens 个。"))
        self.position, self.positions = tokens, self.positions[:tokens]

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """update without its checks and without a window, for a model that checked its input once.

        Returns every key and value kept, the new ones last (their positions are 0, 1, ..., position - 1).
        """
        num_new, kept = keys.shape[2], self.positions.numel()
        if self._keys is None:
            self.window, self.sinks = None, 0
        self._reserve(keys, kept + num_new)
        self._keys[:, :, kept : kept + num_new] = keys
        self._values[:, :, kept : kept + num_new] = values
        self.position += num_new
        self.positions = torch.arange(self.position, device=keys.device)
        return self._held()

    def _reserve(self, like: torch.Tensor, slots: int) -> None:
        """Make room for `slots` tokens: double the buffers when they are full (up to the window, if any)."""
        reserved = 0 if self._keys is None else self._keys.shape[2]
        if slots <= reserved and self._keys is not None:
            return
        grown = max(slots, 2 * reserved)
        if self.capacity is not None:
            grown = max(slots, min(grown, self.capacity))
        b, heads, _, head_dim = like.shape
        kept = self.positions.numel()
        for name in ("_keys", "_values"):
            buffer = like.new_empty(b, heads, grown, head_dim)
            if kept:
                buffer[:, :, :kept] = getattr(self, name)[:, :, :kept]
            setattr(self, name, buffer)

    def _check(self, keys: object, values: object, window: int | None, sinks: int) -> None:
        """New keys and values match each other and what is stored; the window never changes."""
        self._check_pair(keys, values)
        if self._keys is None:
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
        # _keys has the batch, heads, last size, dtype and device of what is stored (a quantized cache keeps a tensor
        # of no tokens there, a low-rank cache its coordinates): cheaper than the keys property, which rebuilds keys there
        stored = (self._keys.shape[0], self._keys.shape[1], self._keys.shape[3], str(self._keys.dtype), str(self._keys.device))
        new = (keys.shape[0], keys.shape[1], keys.shape[3], str(keys.dtype), str(keys.device))
        if stored != new:
            raise ValueError(
                bilingual(
                    f"The new keys (batch, kv_heads, head_dim, dtype, device) = {new} do not match the cached ones "
                    f"{stored}; use a new KVCache for each sequence or batch.",
                    f"新的 keys (batch, kv_heads, head_dim, dtype, device) = {new} 与缓存中的 {stored} 不一致；"
                    "每个序列或批次请使用新的 KVCache。",
                )
            )

    @staticmethod
    def _check_pair(keys: object, values: object) -> None:
        """Keys and values are (b, kv_heads, T, head_dim) tensors of the same shape and dtype."""
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


class KVCache:
    """One LayerCache per attention layer of a model, for one batch of sequences: pass `cache[i]` to layer i."""

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(check_size(num_layers, "num_layers", maximum=1024))]
        # (batch, tokens seen) True at the padding tokens a model was given (left-padded batches), or None: no padding
        self.padding: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, layer: int) -> LayerCache:
        if not isinstance(layer, (bool, np.bool_)) and isinstance(layer, (int, np.integer)) and 0 <= layer < len(self.layers):
            return self.layers[int(layer)]  # numpy integers count, as everywhere in the package
        raise IndexError(
            bilingual(
                f"layer must be an integer from 0 to {len(self.layers) - 1}, got {layer!r}.",
                f"layer 必须是 0 到 {len(self.layers) - 1} 之间的整数，实际是 {layer!r}。",
            )
        )

    @property
    def position(self) -> int:
        """Tokens seen so far: the position the next token gets (not the number of tokens kept)."""
        return self.layers[0].position

    @property
    def tokens_kept(self) -> int:
        """Tokens whose keys and values each layer holds now."""
        return self.layers[0].positions.numel()

    def truncate(self, tokens: int) -> None:
        """Every layer forgets the tokens after the first `tokens` (a rejected draft's keys and values)."""
        for layer in self.layers:
            layer.truncate(tokens)

    @property
    def nbytes(self) -> int:
        """Memory of every layer's keys and values, in bytes."""
        return sum(layer.nbytes for layer in self.layers)


def check_layer_cache(cache: object, padding_mask: object = None) -> int:
    """A module gets one layer's cache (cache[i] of a KVCache), and no padding with it; returns the next position."""
    if not isinstance(cache, LayerCache):
        hint_en, hint_zh = (" (the whole KVCache was passed: give layer i its cache[i])",
                            "（传入的是整个 KVCache：请把 cache[i] 交给第 i 层）") if isinstance(cache, KVCache) else ("", "")
        raise TypeError(
            bilingual(
                f"cache must be one layer's LayerCache, got {type(cache).__name__}{hint_en}.",
                f"cache 必须是某一层的 LayerCache，实际是 {type(cache).__name__}{hint_zh}。",
            )
        )
    if padding_mask is not None:
        raise ValueError(
            bilingual(
                "A cache decodes one batch of sequences of the same length; padding_mask cannot be combined with it. "
                "Generate each sequence on its own, or without a cache.",
                "缓存用于解码一批等长的序列，不能与 padding_mask 一起使用。请逐个序列生成，或者不用缓存。",
            )
        )
    return cache.position


def check_model_cache(cache: object, num_layers: int) -> int:
    """A model gets a whole KVCache with one LayerCache per layer; returns the next token's position."""
    if not isinstance(cache, KVCache) or len(cache) != num_layers:
        got = f"a KVCache of {len(cache)} layers" if isinstance(cache, KVCache) else type(cache).__name__
        got_zh = f"{len(cache)} 层的 KVCache" if isinstance(cache, KVCache) else type(cache).__name__
        raise TypeError(
            bilingual(
                f"cache must be KVCache({num_layers}), one LayerCache per layer of the model, got {got}.",
                f"cache 必须是 KVCache({num_layers})，模型的每一层对应一个 LayerCache，实际是 {got_zh}。",
            )
        )
    return cache.position
