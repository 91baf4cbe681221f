"""A low-rank KV cache: each key and value kept as `rank` coordinates in a basis fitted per layer and head (lesson 15).

If a layer's keys all lie near a few directions, a key of head_dim numbers is well described by its
coordinates along the first `rank` of them: the cache keeps rank numbers instead of head_dim and
rebuilds k ≈ coordinates @ basisᵀ when a query reads it. The basis comes from a singular value
decomposition (SVD) of the keys (and values) the model cached on one text; a test on another
text says whether it generalizes.

The keys the model caches are turned by rotary, so a basis fitted on them has to cover every angle a
key is seen at. Published low-rank caches (Palu, ShadowKV, 2024) fit the keys before the turn and turn
the rebuilt keys at every read: `rotary_base=` gives that variant. The model hands the cache turned
keys, so the cache turns each one back by its position first (a rotation is undone by the opposite
angle), which gives the keys before the turn up to rounding without changing the model.
"""

from __future__ import annotations

import torch

from ..checks import bilingual, check_orthonormal, check_real, check_same_dtype, check_size, check_tensor, shown
from ..rotary import rotary_cos_sin, turn
from .kv_cache import KVCache, LayerCache


def turned(keys: torch.Tensor, positions: torch.Tensor, base: float, back: bool = False) -> torch.Tensor:
    """keys (..., T, head_dim) turned by rotary (interleaved pairs, as SmolLM2) at positions (T,), or back to before the turn."""
    cos, sin = (t.to(keys.dtype) for t in rotary_cos_sin(positions, keys.shape[-1], base))
    return turn(keys, cos, -sin if back else sin)


def fit_basis(vectors: torch.Tensor) -> torch.Tensor:
    """Orthonormal directions (kv_heads, head_dim, head_dim), most important first, of vectors (b, kv_heads, T, head_dim).

    The right singular vectors of each head's (b * T, head_dim) matrix: the first r span the
    r-dimensional subspace closest (in squared error) to those vectors.
    """
    check_tensor(vectors, "vectors", ranks=(4,))
    rows = vectors.transpose(0, 1).flatten(1, 2)  # (kv_heads, b * T, head_dim)
    # the reduced SVD gives all head_dim directions once there are at least head_dim vectors; only fewer need the
    # full one, whose U of (b * T) x (b * T) is small then (the full SVD of 4,096 keys took 5.4 s here, the reduced 0.1 s)
    full = rows.shape[1] < rows.shape[2]
    return torch.linalg.svd(rows.double(), full_matrices=full).Vh.transpose(1, 2).to(vectors.dtype)


def fit_bases(cache: KVCache, rotary_base: float | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One (key basis, value basis) per layer, from what a filled KVCache holds; with rotary_base, keys before the turn."""
    if not isinstance(cache, KVCache) or cache.tokens_kept == 0:
        raise (ValueError if isinstance(cache, KVCache) else TypeError)(bilingual(
            f"cache must be a KVCache filled by running the model on a text, got {shown(cache)}.",
            f"cache 必须是一个已经把模型在文本上跑过一遍、填满了的 KVCache，实际是 {shown(cache, True)}。"))
    if rotary_base is None:
        return [(fit_basis(layer.keys), fit_basis(layer.values)) for layer in cache.layers]
    base = check_real(rotary_base, "rotary_base", "100000.0", True)
    return [(fit_basis(turned(layer.keys, layer.positions, base, back=True)), fit_basis(layer.values)) for layer in cache.layers]


class LowRankLayerCache(LayerCache):
    """Keeps `rank` coordinates per key and value; a later query reads them rebuilt, its own chunk as computed.

    The buffers hold the coordinates (b, kv_heads, tokens, rank), so `nbytes` is what they hold: 2 x kv_heads x rank
    x tokens x bytes per number x batch. The bases are fixed per layer and not counted. With `rotary_base`, the key
    basis is one fitted before the turn (fit_bases(..., rotary_base)): keys are turned back before their coordinates
    are taken, and turned again at their positions when rebuilt. Positions are the slots 0, 1, ... (no padding mask).
    """

    def __init__(self, key_basis: torch.Tensor, value_basis: torch.Tensor, rank: int, rotary_base: float | None = None) -> None:
        super().__init__()
        self.rotary_base = None if rotary_base is None else check_real(rotary_base, "rotary_base", "100000.0", True)
        for name, basis in (("key_basis", key_basis), ("value_basis", value_basis)):
            check_tensor(basis, name, ranks=(3,))  # (kv_heads, head_dim, head_dim), as fit_bases returns
            if basis.shape != key_basis.shape or basis.shape[1] != basis.shape[2]:
                raise ValueError(bilingual(
                    f"`{name}` must be (kv_heads, head_dim, head_dim) as fit_bases returns it, the same for keys and "
                    f"values; got key_basis {tuple(key_basis.shape)} and value_basis {tuple(value_basis.shape)}.",
                    f"`{name}` 的形状必须是 fit_bases 返回的 (kv_heads, head_dim, head_dim)，键和值的相同；实际 key_basis 是 "
                    f"{tuple(key_basis.shape)}，value_basis 是 {tuple(value_basis.shape)}。"))
        check_same_dtype({"key_basis": key_basis, "value_basis": value_basis})
        self.rank = check_size(rank, "rank")
        if self.rank > key_basis.shape[-1]:
            raise ValueError(bilingual(
                f"rank={self.rank} must be at most head_dim={key_basis.shape[-1]}: a basis has that many directions.",
                f"rank={self.rank} 不能超过 head_dim={key_basis.shape[-1]}：基里只有这么多个方向。"))
        check_orthonormal(key_basis, "key_basis", columns=self.rank)  # else the coordinates would not rebuild the keys
        check_orthonormal(value_basis, "value_basis", columns=self.rank)
        self.key_basis, self.value_basis = key_basis[..., :self.rank], value_basis[..., :self.rank]  # (kv_heads, head_dim, rank)

    def update(self, keys: torch.Tensor, values: torch.Tensor, window: int | None = None, sinks: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Store the new tokens' coordinates; return the earlier tokens rebuilt and the new ones as computed."""
        if window is not None:
            raise ValueError(bilingual("A LowRankLayerCache keeps every token; it cannot be combined with a sliding window.",
                                       "LowRankLayerCache 保留全部词元，不能与滑动窗口（window）一起使用。"))
        self._check_basis_fits(keys, values)
        new_positions = torch.arange(self.position, self.position + keys.shape[2], device=keys.device)
        plain = keys if self.rotary_base is None else turned(keys, new_positions, self.rotary_base, back=True)
        # what LayerCache holds and returns here are coordinates, (b, kv_heads, tokens kept, rank)
        held_keys, held_values, positions = super().update(plain @ self.key_basis, values @ self.value_basis)
        earlier = held_keys.shape[2] - keys.shape[2]
        return (torch.cat([self._rebuilt_keys(held_keys[:, :, :earlier], positions[:earlier]), keys], 2),
                torch.cat([held_values[:, :, :earlier] @ self.value_basis.mT, values], 2), positions)

    def _rebuilt_keys(self, coordinates: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Keys from their coordinates, turned at their positions if the basis was fitted before the turn."""
        keys = coordinates @ self.key_basis.mT
        return keys if self.rotary_base is None else turned(keys, positions, self.rotary_base)

    @property
    def keys(self) -> torch.Tensor | None:
        """The keys kept, rebuilt from their coordinates: (b, kv_heads, tokens kept, head_dim)."""
        return None if self._keys is None else self._rebuilt_keys(self._held()[0], self.positions)

    @property
    def values(self) -> torch.Tensor | None:
        """The values kept, rebuilt from their coordinates."""
        return None if self._values is None else self._held()[1] @ self.value_basis.mT

    def _check_basis_fits(self, keys: object, values: object) -> None:
        """Keys and values (b, kv_heads, T, head_dim) with the bases' kv_heads and head_dim."""
        self._check_pair(keys, values)
        heads, head_dim = self.key_basis.shape[:2]
        if (keys.dtype, keys.device) != (self.key_basis.dtype, self.key_basis.device):
            raise TypeError(bilingual(
                f"keys are {keys.dtype} on {keys.device} but the bases are {self.key_basis.dtype} on "
                f"{self.key_basis.device}; fit the bases on this model's cache, or convert them with .to(keys.dtype).",
                f"keys 的类型是 {keys.dtype}、在 {keys.device} 上，而基的类型是 {self.key_basis.dtype}、在 "
                f"{self.key_basis.device} 上；请用这个模型的缓存拟合基，或用 .to(keys.dtype) 转换。"))
        if (keys.shape[1], keys.shape[3]) != (heads, head_dim):
            raise ValueError(bilingual(
                f"keys {tuple(keys.shape)} must have kv_heads={heads} and head_dim={head_dim}, as the bases were fitted; "
                "fit the bases on this model's cache.",
                f"keys {tuple(keys.shape)} 的 kv_heads 应为 {heads}、head_dim 应为 {head_dim}，与拟合基时一致；"
                "请用这个模型的缓存来拟合基。"))

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """LlamaModel's checked-once path: what `update` returns (this cache stores in its own way, so no shortcut)."""
        return self.update(keys, values)[:2]


def low_rank_kv_cache(bases: list[tuple[torch.Tensor, torch.Tensor]], rank: int, rotary_base: float | None = None) -> KVCache:
    """A KVCache whose layer i keeps `rank` coordinates in bases[i] (from fit_bases, with the same rotary_base)."""
    if not isinstance(bases, (list, tuple)) or not bases or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in bases):
        raise TypeError(bilingual(
            f"bases must be the list of (key basis, value basis) pairs that fit_bases returns, one per layer, got {shown(bases)}.",
            f"bases 必须是 fit_bases 返回的列表，每层一对 (键的基, 值的基)，实际是 {shown(bases, True)}。"))
    cache = KVCache(len(bases))
    cache.layers = [LowRankLayerCache(keys, values, rank, rotary_base) for keys, values in bases]
    return cache
