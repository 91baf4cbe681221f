"""A quantized KV cache: keys and values kept as 8-bit or 4-bit integers, one scale and offset per group (lesson 15).

A group of numbers is stored as integer codes 0 .. 2**bits - 1 plus two floats: the group's
smallest value (the offset) and the step between codes (the scale). Rounding to the nearest code
errs by at most half a step. The choice that matters is which numbers share a group (KIVI,
Liu et al. 2024):

- keys per channel: a few channels of a key carry large values in every token (outliers), so one
  scale per channel, over a group of `group_size` tokens, keeps each channel's range its own. Those
  tokens must all exist first: the newest keys wait in full precision until their group is full;
- values per token: each token's value vector is one group (or `value_group` numbers of it), since
  the attention weights mix whole value rows.

The first `keep_first` tokens may stay in full precision: lesson 13's attention sink, whose keys and
values look like no other token's. What a query sees: everything stored before its chunk (quantized
where it is), and its own chunk's keys and values as computed, the way a prefill attends to its
fresh keys before storing them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..checks import bilingual, cannot_read, check_dim, check_same_dtype, check_size, check_tensor, shown
from .kv_cache import KVCache, LayerCache

BITS = (8, 4)


def check_bits(bits: object) -> int:
    """Bits per stored number: 8 or 4 (an integer, as every size)."""
    bits = check_size(bits, "bits")
    if bits not in BITS:
        raise ValueError(bilingual(f"bits must be 8 or 4, got {bits}.", f"bits 必须是 8 或 4，实际是 {bits}。"))
    return bits


def quantize(x: torch.Tensor, bits: int, dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Integer codes (uint8, one per number), scale and offset of x, one group along `dim`: x ≈ codes * scale + offset.

    The scale and offset keep `dim` with size 1, so they broadcast back over the group.
    """
    check_tensor(x, "x", ranks=(1, 2, 3, 4, 5))
    bits = check_bits(bits)
    dim = check_dim(dim, x, "x")
    if x.shape[dim] == 0:  # groups of no numbers: no codes, and a scale and offset of 0 that nothing uses
        shape = list(x.shape)
        shape[dim] = 1
        return torch.zeros_like(x, dtype=torch.uint8), x.new_zeros(shape), x.new_zeros(shape)
    low, high = x.amin(dim=dim, keepdim=True), x.amax(dim=dim, keepdim=True)
    scale = (high - low) / (2**bits - 1)
    if not cannot_read(scale) and not torch.isfinite(scale).all():
        raise ValueError(bilingual(
            f"The range of `x` (largest minus smallest, along dim={dim}) overflows {x.dtype}; "
            "quantize x.float() (or x.double()) instead.",
            f"`x` 的取值范围（沿 dim={dim} 的最大值减最小值）超出了 {x.dtype} 的表示范围；请改为量化 x.float()（或 x.double()）。"))
    step = torch.where(scale > 0, scale, torch.ones_like(scale))  # a constant group: every code 0, offset exact
    codes = torch.round((x - low) / step).clamp(0, 2**bits - 1).to(torch.uint8)
    return codes, scale, low


def dequantize(codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The numbers the codes stand for: codes * scale + offset, in the scale's dtype."""
    _check_codes(codes, "codes")
    check_tensor(scale, "scale", ranks=range(codes.dim() + 1))
    check_tensor(offset, "offset", ranks=range(codes.dim() + 1))
    check_same_dtype({"scale": scale, "offset": offset})
    if codes.device != scale.device:
        raise TypeError(bilingual(
            f"`codes` are on {codes.device} but `scale` and `offset` on {scale.device}; move them together, for "
            f"example codes.to('{scale.device}').",
            f"`codes` 在 {codes.device} 上，而 `scale` 和 `offset` 在 {scale.device} 上；请把它们放到一起，"
            f"例如 codes.to('{scale.device}')。"))
    for name, x in (("scale", scale), ("offset", offset)):
        try:
            fits = torch.broadcast_shapes(x.shape, codes.shape) == codes.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(bilingual(
                f"`{name}` {tuple(x.shape)} must broadcast to the codes' shape {tuple(codes.shape)}: pass the scale and "
                "offset that quantize returned with these codes.",
                f"`{name}` {tuple(x.shape)} 必须能广播到 codes 的形状 {tuple(codes.shape)}：请传入 quantize 与这些 codes "
                "一起返回的 scale 和 offset。"))
    return _dequantize(codes, scale, offset)


def _dequantize(codes: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """dequantize without its checks, for blocks this module quantized itself (every layer reads them at every step)."""
    return codes.to(scale.dtype) * scale + offset


def pack_int4(codes: torch.Tensor) -> torch.Tensor:
    """Two 4-bit codes in one byte along the last dimension (which must be even): half the bytes."""
    _check_codes(codes, "codes")
    if codes.dim() == 0 or codes.shape[-1] % 2 or (codes.numel() and not cannot_read(codes) and int(codes.max()) > 15):
        raise ValueError(bilingual(
            f"`codes` must be 4-bit codes (0 to 15) with an even last dimension, two to a byte; got shape "
            f"{tuple(codes.shape)}.",
            f"`codes` 必须是 4 位编码（0 到 15），且最后一维为偶数，每两个放进一个字节；实际形状是 {tuple(codes.shape)}。"))
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The codes pack_int4 stored: low half-byte first."""
    _check_codes(packed, "packed")
    if packed.dim() == 0:
        raise ValueError(bilingual("`packed` must have at least one dimension, as pack_int4 returns it; got a 0-d tensor.",
                                   "`packed` 至少要有一维（pack_int4 返回的就是这样）；实际是 0 维张量。"))
    return _unpack_int4(packed)


def _unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """unpack_int4 without its check."""
    return torch.stack((packed & 15, packed >> 4), dim=-1).flatten(-2)


def _check_codes(codes: object, name: str) -> None:
    """Codes are the uint8 tensor quantize (or pack_int4) returns."""
    if not isinstance(codes, torch.Tensor) or codes.dtype != torch.uint8:
        raise TypeError(bilingual(
            f"`{name}` must be the uint8 tensor that quantize returns, got {shown(codes)}.",
            f"`{name}` 必须是 quantize 返回的 uint8 张量，实际是 {shown(codes, True)}。"))


class _Stored:
    """One quantized block: codes (packed when 4-bit), scale and offset; `nbytes` counts all three."""

    def __init__(self, x: torch.Tensor, bits: int, dim: int) -> None:
        codes, self.scale, self.offset = quantize(x, bits, dim)
        self.bits = bits
        self.codes = pack_int4(codes) if bits == 4 else codes

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.scale, self.offset))


class QuantizedLayerCache(LayerCache):
    """One layer's keys and values in `bits`-bit codes: keys per channel over `group_size` tokens, values per token.

    A drop-in for LayerCache without a window: LlamaModel decodes with a KVCache whose layers are
    these (see `quantized_kv_cache`). `keys`/`values` give what is stored, dequantized, in order;
    `nbytes` counts the codes, scales, offsets and every number still kept in full precision.
    """

    can_forget = False  # its keys are quantized in groups of tokens: truncate refuses

    def __init__(self, bits: int = 8, group_size: int = 32, value_group: int | None = None, keep_first: int = 0) -> None:
        super().__init__()
        self.bits = check_bits(bits)
        self.group_size = check_size(group_size, "group_size", maximum=1 << 20)
        self.value_group = None if value_group is None else check_size(value_group, "value_group")
        self.keep_first = check_size(keep_first, "keep_first", minimum=0)
        self._first: tuple[torch.Tensor, torch.Tensor] | None = None  # full-precision first tokens
        self._key_groups: list[_Stored] = []  # each group_size tokens, quantized per channel
        self._value_blocks: list[_Stored] = []  # each chunk's values, quantized per token
        self._recent_keys: torch.Tensor | None = None  # keys waiting for their group to fill, full precision

    def update(self, keys: torch.Tensor, values: torch.Tensor, window: int | None = None, sinks: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return what the new queries see (stored keys and values, then the new ones as given); then store the new ones."""
        if window is not None:
            raise ValueError(bilingual(
                "A QuantizedLayerCache keeps every token; it cannot be combined with a sliding window.",
                "QuantizedLayerCache 保留全部词元，不能与滑动窗口（window）一起使用。"))
        self._check(keys, values, None, 0)
        self._check_groups(keys)
        stored_keys, stored_values = self.keys, self.values
        seen_keys = keys if stored_keys is None else torch.cat([stored_keys, keys], dim=2)
        seen_values = values if stored_values is None else torch.cat([stored_values, values], dim=2)
        self._store(keys, values)
        # anything stored? (asking self.keys would dequantize every key)
        if self._first is not None or self._key_groups or self._recent_keys is not None:
            self._keys = keys[:, :, :0]  # marks the cache as filled, for LayerCache's checks of later chunks
        self.position += keys.shape[2]
        self.positions = torch.arange(self.position, device=keys.device)
        return seen_keys, seen_values, self.positions

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """LlamaModel's checked-once path: what `update` returns (this cache stores in its own way, so no shortcut)."""
        return self.update(keys, values)[:2]

    def _check_groups(self, keys: torch.Tensor) -> None:
        """4-bit codes pack in pairs, and a value group divides the head size."""
        head_dim = keys.shape[-1]
        group = self.value_group or head_dim
        if head_dim % group or (self.bits == 4 and group % 2):
            raise ValueError(bilingual(
                f"value_group={group} must divide head_dim={head_dim} (and be even for 4-bit codes).",
                f"value_group={group} 必须整除 head_dim={head_dim}（4 位编码时还必须是偶数）。"))

    def _store(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Keep the first tokens as they are; quantize values at once and keys a full group at a time."""
        first = max(0, min(self.keep_first - self.position, keys.shape[2]))
        if first:
            head = (keys[:, :, :first], values[:, :, :first])
            self._first = head if self._first is None else tuple(torch.cat(p, dim=2) for p in zip(self._first, head))
            keys, values = keys[:, :, first:], values[:, :, first:]
        if keys.shape[2] == 0:
            return
        b, h, t, d = values.shape
        group = self.value_group or d
        self._value_blocks.append(_Stored(values.reshape(b, h, t, d // group, group), self.bits, dim=-1))
        recent = keys if self._recent_keys is None else torch.cat([self._recent_keys, keys], dim=2)
        full = recent.shape[2] // self.group_size * self.group_size
        for start in range(0, full, self.group_size):
            self._key_groups.append(_Stored(recent[:, :, start:start + self.group_size], self.bits, dim=2))
        self._recent_keys = recent[:, :, full:]

    @property
    def keys(self) -> torch.Tensor | None:
        """Every stored key as a query of a later chunk sees it: first tokens, dequantized groups, recent keys."""
        parts = [] if self._first is None else [self._first[0]]
        if self._key_groups:  # the groups stacked first: one dequantize, the same numbers as group by group
            parts.append(self._dequantize(self._key_groups, lambda blocks: torch.stack(blocks, dim=2)).flatten(2, 3))
        parts += [] if self._recent_keys is None else [self._recent_keys]
        return torch.cat(parts, dim=2) if parts else None

    @property
    def values(self) -> torch.Tensor | None:
        """Every stored value, dequantized, in order."""
        parts = [] if self._first is None else [self._first[1]]
        if self._value_blocks:  # the blocks joined along the tokens first: one dequantize, the same numbers
            parts.append(self._dequantize(self._value_blocks, lambda blocks: torch.cat(blocks, dim=2)).flatten(-2))
        return torch.cat(parts, dim=2) if parts else None

    def _dequantize(self, blocks: list[_Stored], join: Callable[[list[torch.Tensor]], torch.Tensor]) -> torch.Tensor:
        """The numbers of all `blocks`, their codes, scales and offsets joined by `join` (every layer reads them every step)."""
        codes, scale, offset = (join([getattr(block, name) for block in blocks]) for name in ("codes", "scale", "offset"))
        return _dequantize(_unpack_int4(codes) if self.bits == 4 else codes, scale, offset)

    @property
    def nbytes(self) -> int:
        """Bytes held: codes, scales and offsets, plus the full-precision first tokens and recent keys."""
        full = [] if self._first is None else list(self._first)
        full += [] if self._recent_keys is None else [self._recent_keys]
        stored = sum(part.nbytes for part in self._key_groups + self._value_blocks)
        return stored + sum(t.numel() * t.element_size() for t in full)

    @property
    def reserved_bytes(self) -> int:
        return self.nbytes


def quantized_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, tokens: int, bits: int, group_size: int = 32,
                          value_group: int | None = None, bytes_per_value: int = 4) -> int:
    """Bytes a QuantizedLayerCache per layer holds for `tokens`: codes, a scale and an offset per group, the unfinished keys.

    Keys: each full group of group_size tokens keeps head_dim channels of codes plus 2 numbers per channel; the
    tokens of the last, unfinished group wait in full precision. Values: each token keeps head_dim codes plus
    2 numbers per value group (the whole head by default). Scales, offsets and waiting keys take bytes_per_value.
    """
    sizes = [check_size(n, name) for n, name in ((num_layers, "num_layers"), (num_kv_heads, "num_kv_heads"),
                                                  (head_dim, "head_dim"), (bytes_per_value, "bytes_per_value"))]
    layers, heads, head_dim, number = sizes
    tokens, bits = check_size(tokens, "tokens", minimum=0), check_bits(bits)
    group_size, value_group = check_size(group_size, "group_size"), check_size(value_group or head_dim, "value_group")
    groups, waiting = divmod(tokens, group_size)
    keys = groups * head_dim * (group_size * bits // 8 + 2 * number) + waiting * head_dim * number
    values = tokens * (head_dim * bits // 8 + head_dim // value_group * 2 * number)
    return layers * heads * (keys + values)


def quantized_kv_cache(num_layers: int, bits: int = 8, group_size: int = 32, value_group: int | None = None,
                       keep_first: int = 0) -> KVCache:
    """A KVCache for a model of `num_layers` layers whose every layer is a QuantizedLayerCache with these settings."""
    cache = KVCache(num_layers)
    cache.layers = [QuantizedLayerCache(bits, group_size, value_group, keep_first) for _ in range(num_layers)]
    return cache
