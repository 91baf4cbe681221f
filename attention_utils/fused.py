"""FusedMultiHeadAttention: one QKV projection and one fused SDPA call, as fast as PyTorch allows (lesson 8).

For inference it also takes grouped key/value heads, rotary positions, a KV cache and a sliding
window (lesson 12), which is how lesson 13 runs a real language model.
"""

from __future__ import annotations

import torch
from torch import nn

from .checks import (
    bilingual,
    cannot_read,
    check_flag,
    check_heads,
    check_length,
    check_padding_mask,
    check_rate,
    check_size,
    check_tensor,
)
from .functional import future
from .inference.grouped_query import check_kv_heads
from .inference.kv_cache import LayerCache, check_layer_cache
from .overflow import check_result
from .rotary import apply_rotary, check_rotary_heads, turn
from .inference.sliding_window import check_window, hidden_by_window

from .modules import check_settings, check_sizes


class FusedMultiHeadAttention(nn.Module):
    """Multi-head attention as fast as PyTorch allows: one QKV projection and one fused SDPA call.

    torch's scaled_dot_product_attention never stores the (T, T) attention weights and, told that
    the mask is causal, skips the blocks above the diagonal; the book's version computes every
    score, masks half of them and keeps the whole matrix in memory.

    For generation (lesson 12) it also takes, keyword-only: `num_kv_heads` key/value heads shared by
    groups of query heads (GQA; 1 is MQA), rotary positions (`rotary_base`, `rotary_layout`), a
    sliding `window` with `sinks`; and in forward a `cache` (one LayerCache of a KVCache) that keeps
    the keys and values of earlier calls. With the defaults it is lesson 8's module.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
        *,
        num_kv_heads: int | None = None,
        rotary_base: float | None = None,
        rotary_layout: str = "interleaved",
        window: int | None = None,
        sinks: int = 0,
    ) -> None:
        super().__init__()
        # no (context_length, context_length) mask is stored here (SDPA hides the future itself): a long context
        # such as Llama 3.2's 131,072 must not be refused for a mask of 68 GB that is never built
        d_in, d_out, num_heads = check_sizes(d_in=d_in, d_out=d_out, num_heads=num_heads)
        context_length = check_size(context_length, "context_length")
        check_heads(d_out, num_heads)
        qkv_bias = check_flag(qkv_bias, "qkv_bias")
        self.d_in = d_in
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.dropout = check_rate(dropout)  # a rate, not an nn.Dropout: SDPA applies it to the weights itself
        self.num_kv_heads = num_heads if num_kv_heads is None else check_kv_heads(num_heads, num_kv_heads)
        rotary_base, rotary_layout = check_rotary_heads(d_out, num_heads, rotary_base, rotary_layout)
        self.rotary_base, self.rotary_layout = rotary_base, rotary_layout
        self.window, self.sinks = check_window(window, sinks)
        # rows: the queries of every head, then the keys and the values of the key/value heads (3 * d_out without groups)
        self.qkv = nn.Linear(d_in, (num_heads + 2 * self.num_kv_heads) * self.head_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    @classmethod
    def from_multihead(cls, mha: nn.Module, *, window: int | None = None, sinks: int = 0) -> FusedMultiHeadAttention:
        """The fused module with the weights, train/eval mode and requires_grad of a MultiHeadAttention.

        Works for the package's class and the book's own (the same parameter names); in eval mode,
        or with dropout 0, both give the same outputs. The fused module is always causal, so a source
        whose mask is not the causal one (lesson 10's reverse model clears it) is refused. Rotary
        positions come along; `window` and `sinks` add a sliding window (lesson 12).
        """
        parts = ("W_query", "W_key", "W_value", "out_proj")
        if not all(isinstance(getattr(mha, name, None), nn.Linear) for name in parts) or not hasattr(mha, "num_heads"):
            raise TypeError(
                bilingual(
                    f"from_multihead copies a MultiHeadAttention (W_query, W_key, W_value, out_proj, num_heads), "
                    f"got {type(mha).__name__}; build FusedMultiHeadAttention(...) directly for anything else.",
                    f"from_multihead 只能复制 MultiHeadAttention（含 W_query、W_key、W_value、out_proj、num_heads），"
                    f"你传入的是 {type(mha).__name__}；其他模块请直接创建 FusedMultiHeadAttention(...)。",
                )
            )
        _check_causal_source(mha)
        projections = [getattr(mha, name) for name in parts[:3]]
        has_bias = mha.W_query.bias is not None
        context_length = mha.mask.shape[-1] if hasattr(mha, "mask") else mha.context_length
        fused = cls(mha.W_query.in_features, mha.W_query.out_features, context_length,
                    getattr(mha.dropout, "p", mha.dropout), mha.num_heads, has_bias,
                    rotary_base=getattr(mha, "rotary_base", None),
                    rotary_layout=getattr(mha, "rotary_layout", "interleaved"), window=window, sinks=sinks)
        fused = fused.to(mha.out_proj.weight)  # same device and dtype first: float64 weights are copied exactly
        with torch.no_grad():
            fused.qkv.weight.copy_(torch.cat([p.weight for p in projections]))  # (3 * d_out, d_in)
            if has_bias:
                fused.qkv.bias.copy_(torch.cat([p.bias for p in projections]))
        fused.out_proj.load_state_dict(mha.out_proj.state_dict())
        for fused_param, source in ((fused.qkv.weight, [p.weight for p in projections]),
                                    (fused.qkv.bias, [p.bias for p in projections]),
                                    (fused.out_proj.weight, [mha.out_proj.weight]),
                                    (fused.out_proj.bias, [mha.out_proj.bias])):
            if fused_param is not None:
                fused_param.requires_grad_(all(p.requires_grad for p in source))
        return fused.to(mha.out_proj.weight).train(mha.training)  # same device, dtype and mode

    def _check_settings(self) -> None:
        check_settings(self, num_heads=self.num_heads * self.head_dim == self.d_out == self.out_proj.in_features,
                       d_in=self.qkv.in_features == self.d_in)

    def project_heads(self, x: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries (b, h, T, head_dim), keys and values (b, kv_heads, T, head_dim) from one matrix multiply.

        With rotary positions, queries and keys are turned for positions start, start + 1, ...
        """
        self._check_settings()
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.qkv.weight)
        return self._project_heads(x, check_size(start, "start", minimum=0))

    def _project_heads(self, x: torch.Tensor, start: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """project_heads without the input check, for forward, which has checked x already."""
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x)  # (b, T, (h + 2 * kv_heads) * head_dim)
        # torch's fused kernels may turn a NaN projection into zeros instead of passing it on, so NaN weights are
        # looked for here; a NaN or inf weight spoils that column for every token, so the first token is enough
        check_result(self, qkv[:, :1], x)
        sizes = [self.num_heads * self.head_dim] + [self.num_kv_heads * self.head_dim] * 2
        heads = (self.num_heads, self.num_kv_heads, self.num_kv_heads)
        queries, keys, values = (
            part.view(b, num_tokens, n, self.head_dim).transpose(1, 2) for part, n in zip(qkv.split(sizes, dim=-1), heads)
        )  # (b, h, T, head_dim), then (b, kv_heads, T, head_dim) twice
        if self.rotary_base is not None:  # queries and keys turned at their positions; values never
            queries = apply_rotary(queries, start, self.rotary_base, self.rotary_layout)
            keys = apply_rotary(keys, start, self.rotary_base, self.rotary_layout)
        return queries, keys, values

    def combine_heads(self, context: torch.Tensor) -> torch.Tensor:
        """Put the heads' context vectors side by side and mix them with out_proj."""
        self._check_settings()
        check_tensor(context, "context", ranks=(4,), last_dim=self.head_dim, like=self.out_proj.weight,
                     last_name="head_dim")
        if context.shape[1] != self.num_heads:
            raise ValueError(
                bilingual(
                    f"`context` must have shape (batch, num_heads={self.num_heads}, num_tokens, head_dim), "
                    f"got {tuple(context.shape)}; its second dimension counts the heads.",
                    f"`context` 的形状应为 (batch, num_heads={self.num_heads}, num_tokens, head_dim)，"
                    f"实际是 {tuple(context.shape)}；第二维是头的个数。",
                )
            )
        return check_result(self, self._combine_heads(context), context, "context")

    def _combine_heads(self, context: torch.Tensor) -> torch.Tensor:
        """combine_heads without its checks, for forward."""
        b, _, num_tokens, _ = context.shape
        return self.out_proj(context.transpose(1, 2).reshape(b, num_tokens, self.d_out))  # (b, T, d_out)

    def forward(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None = None, *, cache: LayerCache | None = None,
        prepared: tuple | None = None,
    ) -> torch.Tensor:
        """Causal attention over x (b, T, d_in); `padding_mask` (b, T) is True at padding tokens to ignore.

        The padding mask follows the package's convention (True = hide). SDPA's boolean attn_mask
        means the opposite (True = may attend), so we merge padding and causal masks in our
        convention and invert once. A query that can see no key at all (left padding) gets a zero
        context vector, in eager mode and under torch.compile alike.

        With a `cache` (lesson 12), x holds only the new tokens: they sit at positions cache.position,
        cache.position + 1, ..., their keys and values join the cache, and their queries attend to
        everything the cache keeps for them.

        `prepared` is for a model of many layers only (lesson 13's LlamaModel passes it; leave it None):
        (rotary tables, SDPA mask) built once per call, which skips this layer's checks (see _step).
        Going through forward keeps hooks working (lesson 13's head measurements hook each attention).
        """
        if prepared is not None:  # a model (LlamaModel) checked its input and built these once for all its layers
            return self._step(x, cache, *prepared)  # the output, as below; see _step
        self._check_settings()
        check_tensor(x, "x", ranks=(3,), last_dim=self.d_in, like=self.qkv.weight)
        b, num_tokens, _ = x.shape
        start = 0 if cache is None else check_layer_cache(cache, padding_mask)  # the position of x's first token
        check_length(start + num_tokens, self.context_length)
        dropout_p = check_rate(self.dropout) if self.training else 0.0
        queries, keys, values = self._project_heads(x, start)  # (b, h, T, head_dim), (b, kv_heads, T, head_dim)
        positions = key_positions = torch.arange(start, start + num_tokens, device=x.device)
        if cache is not None:
            keys, values, key_positions = cache.update(keys, values, self.window, self.sinks)
        # SDPA's causal flag only where queries and keys start together and nothing more is hidden;
        # a single new token sees everything a cache returns, so it needs no mask at all
        causal = start == 0 and self.window is None
        hidden = None if causal or num_tokens == 1 else hidden_by_window(positions, key_positions, self.window, self.sinks)
        attn_mask = sees_nothing = None
        if padding_mask is not None:
            hidden_keys = check_padding_mask(padding_mask, b, num_tokens, x.device)[:, None, None, :]  # (b, 1, 1, T)
            hidden = (future(num_tokens, x.device) if hidden is None else hidden) | hidden_keys  # (b, 1, T, T)
            # A query that sees no key (left padding) may look everywhere, so no kernel ever meets a row
            # of -inf; its context is set to zero below, the package's policy for such rows.
            sees_nothing = hidden.all(dim=-1, keepdim=True)  # (b, 1, T, 1)
            attn_mask = ~hidden | sees_nothing  # SDPA's convention: True = may attend
        elif hidden is not None:
            attn_mask = ~hidden
        context = nn.functional.scaled_dot_product_attention(
            queries,
            keys,
            values,
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=causal and attn_mask is None,  # the flag lets the kernel skip the future instead of masking it
            enable_gqa=self.num_kv_heads != self.num_heads,  # query heads share key/value heads in groups
        )  # (b, h, T, head_dim)
        if sees_nothing is not None:
            context = context.masked_fill(sees_nothing, 0.0)
        return check_result(self, self._combine_heads(context), x)  # NaN from finite x: an overflow, or NaN weights


    def _step(
        self,
        x: torch.Tensor,
        cache: LayerCache | None,
        rotation: tuple[torch.Tensor, torch.Tensor] | None,
        attn_mask: torch.Tensor | None,
        probes: list[torch.Tensor],
    ) -> torch.Tensor:
        """forward without its checks, for a model that checked its input once and built what every layer shares.

        A model of many layers (lesson 13's Llama) checks its tokens at its entry and computes the
        rotary tables `rotation` (cos, sin of the new tokens' positions) and SDPA's boolean
        `attn_mask` (True = may attend; None = causal from position 0, or one new token that sees
        every key) once per call, instead of once in every layer. No window. Returns the output and
        appends the first token's QKV projection to `probes`, which the model checks once for NaN or
        inf (a fused kernel may turn a NaN projection into zeros, hiding NaN weights).
        """
        b, num_tokens, _ = x.shape
        qkv = self.qkv(x)  # (b, T, (h + 2 * kv_heads) * head_dim)
        turned = self.num_heads + self.num_kv_heads  # the query heads and the key heads, side by side in qkv
        heads = qkv.view(b, num_tokens, turned + self.num_kv_heads, self.head_dim).transpose(1, 2)  # (b, heads, T, hd)
        values = heads[:, turned:]
        if rotation is not None:  # queries and keys turned together: one set of small operations per layer, not two
            queries, keys = turn(heads[:, :turned], *rotation, self.rotary_layout).split([self.num_heads, self.num_kv_heads], 1)
        else:
            queries, keys = heads[:, :self.num_heads], heads[:, self.num_heads:turned]
        if cache is not None:
            keys, values = cache._append(keys, values)
        context = nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=attn_mask, is_causal=attn_mask is None and num_tokens > 1,
            enable_gqa=self.num_kv_heads != self.num_heads,
        )  # (b, h, T, head_dim)
        probes.append(qkv[:, :1])  # (b, 1, width): views, looked at once by the model
        return self._combine_heads(context)


def _check_causal_source(mha: nn.Module) -> None:
    """Refuse a source whose mask hides something other than the future: the fused module is always causal."""
    mask = getattr(mha, "mask", None)
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or cannot_read(mask):
        return
    if not torch.equal(mask.bool(), future(mask.shape[-1], mask.device)):
        raise ValueError(
            bilingual(
                f"from_multihead copies causal attention, but this {type(mha).__name__}'s mask is not the causal "
                "mask (a model built with causal=False clears it); FusedMultiHeadAttention always hides the "
                "future, so it would compute something else.",
                f"from_multihead 只复制因果注意力，而这个 {type(mha).__name__} 的掩码不是因果掩码"
                "（用 causal=False 创建的模型会把它清空）；FusedMultiHeadAttention 总是遮住未来，算出的结果会不一样。",
            )
        )
