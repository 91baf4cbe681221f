"""Multi-head latent attention (MLA, DeepSeek-V2 2024): cache one small latent vector per token, not keys and values.

Each token is projected down to a latent vector c (latent_dim numbers); every head's key and value
are up-projections of it: k_h = c W_uk[h], v_h = c W_uv[h]. The cache keeps only c, so it holds
latent_dim numbers per token and layer instead of 2 x kv_heads x head_dim.

Two ways to compute the same thing:
- naive: up-project the cached latents to keys and values for every head, then attend as usual;
- absorbed: q_h · (c W_uk[h]) = (q_h W_uk[h]^T) · c, so fold W_uk[h] into the query and score the
  latents directly; likewise fold W_uv[h] into the output projection. The heads then share one
  "key" (the latent) like multi-query attention, and nothing is ever up-projected per token.

Rotary positions block the absorption: a key turned by its position, R_j c W_uk, no longer
factors into a fixed matrix times c. So the rotary part is decoupled: each head's query gets
`rope_dim` extra features, turned by rotary, that meet one extra rotary key per token, shared by
all heads and cached beside the latent (rope_dim more numbers per token).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..checks import bilingual, check_flag, check_length, check_real, check_same_dtype, check_size, check_tensor
from ..devices import check_fits
from ..modules import FLOAT_BYTES
from ..overflow import check_result
from ..rotary import apply_rotary


class LatentCache:
    """One layer's cached latents (b, tokens, latent_dim) and rotary keys (b, tokens, rope_dim)."""

    def __init__(self) -> None:
        self.latents: torch.Tensor | None = None
        self.rotary_keys: torch.Tensor | None = None
        self.position = 0  # tokens seen so far: the position of the next token

    def update(self, latents: torch.Tensor, rotary_keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' latents and rotary keys; return everything held."""
        check_tensor(latents, "latents", ranks=(3,))
        check_tensor(rotary_keys, "rotary_keys", ranks=(3,))
        check_same_dtype({"latents": latents, "rotary_keys": rotary_keys})
        if rotary_keys.shape[:2] != latents.shape[:2]:
            raise ValueError(bilingual(
                f"rotary_keys {tuple(rotary_keys.shape)} must have the batch and tokens of latents {tuple(latents.shape)}.",
                f"rotary_keys {tuple(rotary_keys.shape)} 的批次和词元数必须与 latents {tuple(latents.shape)} 相同。"))
        if self.latents is not None and (latents.shape[0], latents.shape[2], rotary_keys.shape[2]) != (
                self.latents.shape[0], self.latents.shape[2], self.rotary_keys.shape[2]):
            raise ValueError(bilingual(
                f"The new latents {tuple(latents.shape)} and rotary_keys {tuple(rotary_keys.shape)} do not match the cached "
                f"{tuple(self.latents.shape)} and {tuple(self.rotary_keys.shape)}; use a new LatentCache for each sequence, "
                "batch or model.",
                f"新的潜在向量 {tuple(latents.shape)} 和 rotary_keys {tuple(rotary_keys.shape)} 与缓存中的 "
                f"{tuple(self.latents.shape)} 和 {tuple(self.rotary_keys.shape)} 不一致；每个序列、批次或模型请使用新的 LatentCache。"))
        if self.latents is not None:
            latents, rotary_keys = torch.cat([self.latents, latents], 1), torch.cat([self.rotary_keys, rotary_keys], 1)
        self.latents, self.rotary_keys = latents, rotary_keys
        self.position = latents.shape[1]
        return latents, rotary_keys

    @property
    def nbytes(self) -> int:
        """Bytes held: (latent_dim + rope_dim) numbers per token."""
        if self.latents is None:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.latents, self.rotary_keys))


def latent_cache_bytes(latent_dim: int, rope_dim: int, num_layers: int, tokens: int, bytes_per_value: int = 4) -> int:
    """Bytes of an MLA cache: (latent_dim + rope_dim) x layers x tokens x bytes per number (no factor 2: no K and V)."""
    sizes = [check_size(latent_dim, "latent_dim"), check_size(rope_dim, "rope_dim", minimum=0),
             check_size(num_layers, "num_layers"), check_size(tokens, "tokens", minimum=0),
             check_size(bytes_per_value, "bytes_per_value")]
    return (sizes[0] + sizes[1]) * sizes[2] * sizes[3] * sizes[4]


class LatentAttention(nn.Module):
    """Causal multi-head latent attention with a decoupled rotary key; `absorbed` picks the form, not the result."""

    def __init__(self, d_model: int, context_length: int, num_heads: int, head_dim: int, latent_dim: int,
                 rope_dim: int = 0, rotary_base: float = 10000.0) -> None:
        super().__init__()
        self.d_model, self.num_heads, self.head_dim, self.latent_dim, self.rope_dim = (
            check_size(d_model, "d_model"), check_size(num_heads, "num_heads"), check_size(head_dim, "head_dim"),
            check_size(latent_dim, "latent_dim"), check_size(rope_dim, "rope_dim", minimum=0))
        if self.rope_dim % 2:
            raise ValueError(bilingual(f"rope_dim must be even (rotary turns pairs), got {rope_dim}.",
                                       f"rope_dim 必须是偶数（旋转位置编码两两配对），实际是 {rope_dim}。"))
        self.context_length = check_size(context_length, "context_length")
        self.rotary_base = check_real(rotary_base, "rotary_base", "10000.0", positive=True)
        _check_fits(self.context_length, d_model=self.d_model, num_heads=self.num_heads, head_dim=self.head_dim,
                    latent_dim=self.latent_dim, rope_dim=self.rope_dim)
        d_model, num_heads, head_dim, latent_dim, rope_dim = (
            self.d_model, self.num_heads, self.head_dim, self.latent_dim, self.rope_dim)  # plain ints from here on
        self.W_query = nn.Linear(d_model, num_heads * (head_dim + rope_dim), bias=False)
        self.W_down = nn.Linear(d_model, latent_dim, bias=False)  # the latent: all the cache keeps (with the rotary key)
        # one rotary key per token, shared by the heads (none without rotary features)
        self.W_key_rope = nn.Linear(d_model, rope_dim, bias=False) if rope_dim else None
        self.W_up_key = nn.Linear(latent_dim, num_heads * head_dim, bias=False)
        self.W_up_value = nn.Linear(latent_dim, num_heads * head_dim, bias=False)
        self.out_proj = nn.Linear(num_heads * head_dim, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(self.context_length, self.context_length), diagonal=1))

    def _project(self, x: torch.Tensor, start: int) -> tuple[torch.Tensor, ...]:
        """Queries (content, rotary) per head, and the new tokens' latents and rotary keys."""
        b, t, _ = x.shape
        # (b, h, T, head_dim + rope_dim): each head's content features, then its rotary features
        queries = self.W_query(x).view(b, t, self.num_heads, self.head_dim + self.rope_dim).transpose(1, 2)
        content, rotary = queries.split([self.head_dim, self.rope_dim], dim=-1)
        rotary = apply_rotary(rotary, start, self.rotary_base) if self.rope_dim else rotary
        if self.rope_dim:
            rotary_keys = apply_rotary(self.W_key_rope(x), start, self.rotary_base)  # (b, T, rope_dim)
        else:
            rotary_keys = x.new_zeros(b, t, 0)
        return content, rotary, self.W_down(x), rotary_keys  # latents (b, T, latent_dim)

    def _weights(self, scores: torch.Tensor, start: int) -> torch.Tensor:
        """Softmax over keys of the scaled scores, the future hidden (queries sit at start, start + 1, ...)."""
        t, s = scores.shape[-2:]
        hidden = self.mask[start:start + t, :s].bool()  # 1 = hide; all zeros when a model clears its masks
        scale = 1 / math.sqrt(self.head_dim + self.rope_dim)
        return torch.softmax((scores * scale).masked_fill(hidden, float("-inf")), dim=-1)

    def _naive(self, content, rotary, latents, rotary_keys, start):
        """Up-project every cached latent to each head's key and value, then attend."""
        b, s, _ = latents.shape
        keys = self.W_up_key(latents).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)  # (b, h, S, head_dim)
        values = self.W_up_value(latents).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        scores = content @ keys.transpose(-2, -1) + rotary @ rotary_keys[:, None].transpose(-2, -1)  # (b, h, T, S)
        weights = self._weights(scores, start)
        context = (weights @ values).transpose(1, 2).flatten(2)  # (b, T, h * head_dim)
        return self.out_proj(context), weights

    def _absorbed(self, content, rotary, latents, rotary_keys, start):
        """Fold W_up_key into the queries and W_up_value into out_proj; attend over the latents themselves."""
        up_key = self.W_up_key.weight.view(self.num_heads, self.head_dim, self.latent_dim)
        latent_queries = content @ up_key  # (b, h, T, latent_dim): q_h W_uk[h]^T, in the latent space
        scores = latent_queries @ latents[:, None].transpose(-2, -1) + rotary @ rotary_keys[:, None].transpose(-2, -1)
        weights = self._weights(scores, start)
        latent_context = weights @ latents[:, None]  # (b, h, T, latent_dim): one weighted sum of latents per head
        out = self.out_proj.weight.view(self.d_model, self.num_heads, self.head_dim)
        up_value = self.W_up_value.weight.view(self.num_heads, self.head_dim, self.latent_dim)
        folded = torch.einsum("mhd,hdl->hlm", out, up_value)  # (h, latent_dim, d_model): W_uv[h] then out_proj
        output = torch.einsum("bhtl,hlm->btm", latent_context, folded)
        return output + self.out_proj.bias if self.out_proj.bias is not None else output, weights

    def forward(self, x: torch.Tensor, return_weights: bool = False, *, cache: LatentCache | None = None,
                absorbed: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attention over x (b, T, d_model); with a LatentCache, x holds only the new tokens."""
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_model, like=self.W_query.weight)
        return_weights, absorbed = check_flag(return_weights, "return_weights"), check_flag(absorbed, "absorbed")
        if cache is not None and not isinstance(cache, LatentCache):
            raise TypeError(bilingual(f"cache must be a LatentCache, got {type(cache).__name__}.",
                                      f"cache 必须是 LatentCache，实际是 {type(cache).__name__}。"))
        start = 0 if cache is None else cache.position
        check_length(start + x.shape[1], self.context_length)
        content, rotary, latents, rotary_keys = self._project(x, start)
        if cache is not None:
            latents, rotary_keys = cache.update(latents, rotary_keys)
        output, weights = (self._absorbed if absorbed else self._naive)(content, rotary, latents, rotary_keys, start)
        check_result(self, output, x)  # NaN or inf from a finite x: the weights hold NaN, or too large for the dtype
        return (output, weights) if return_weights else output


def _check_fits(context_length: int, **sizes: int) -> None:
    """The mask (context_length²) and the weights must fit in memory; each size alone first, so the message names it."""

    def weight_bytes(d_model: int, num_heads: int, head_dim: int, latent_dim: int, rope_dim: int) -> int:
        query, down, up = d_model * num_heads * (head_dim + rope_dim), d_model * (latent_dim + rope_dim), latent_dim * num_heads * head_dim
        return FLOAT_BYTES * (query + down + 2 * up + num_heads * head_dim * d_model + d_model)

    check_fits(context_length, "context_length", lambda n: FLOAT_BYTES * n * n)
    for name, value in sizes.items():
        check_fits(value, name, lambda v, name=name: weight_bytes(**{**dict.fromkeys(sizes, 1), name: v}))
    total = weight_bytes(**sizes)  # together: name the size whose growth costs the most (set to 1, it saves the most)
    largest = max(sizes, key=lambda name: total - weight_bytes(**{**sizes, name: 1}))
    check_fits(sizes[largest], largest, lambda v: weight_bytes(**{**sizes, largest: v}))
