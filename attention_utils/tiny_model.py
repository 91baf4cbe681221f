"""A tiny attention-only model for lesson 10: token embeddings, positions, the package's attention, a read-out.

Each layer is the package's `MultiHeadAttention` added to its input (a residual connection), so
the only way information moves between positions is the attention maps the lesson plots.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from .checks import bilingual, check_size
from .modules import MultiHeadAttention

POSITION_KINDS = ("learned", "sinusoidal", "none")


def sinusoidal_positions(num_positions: int, dim: int) -> torch.Tensor:
    """(num_positions, dim) fixed position vectors of "Attention Is All You Need": sin on even, cos on odd columns."""
    check_size(num_positions, "num_positions")
    check_size(dim, "dim", minimum=2)
    positions = torch.arange(num_positions, dtype=torch.float32)[:, None]  # (T, 1)
    frequencies = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)  # (ceil(dim/2),)
    angles = positions * frequencies  # (T, ceil(dim/2)): slow waves in the last columns
    table = torch.zeros(num_positions, dim)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return table


def check_tokens(tokens: object, vocab_size: int, context_length: int) -> torch.Tensor:
    """Token ids must be an integer tensor (b, T) with 0 <= id < vocab_size and T <= context_length."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
        kind = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise TypeError(
            bilingual(
                f"tokens must be an integer tensor of token ids, got {kind}; use tasks.encode('abc', vocab_size).",
                f"tokens 必须是由词元编号组成的整数张量，实际是 {kind}；请用 tasks.encode('abc', vocab_size) 生成。",
            )
        )
    if tokens.dim() != 2 or not 1 <= tokens.shape[1] <= context_length:
        raise ValueError(
            bilingual(
                f"tokens must have shape (batch, T) with 1 <= T <= {context_length}, got {tuple(tokens.shape)}.",
                f"tokens 的形状应为 (batch, T)，且 1 <= T <= {context_length}，实际是 {tuple(tokens.shape)}。",
            )
        )
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            bilingual(
                f"token ids must lie in 0..{vocab_size - 1}, got values from {int(tokens.min())} to {int(tokens.max())}.",
                f"词元编号应在 0 到 {vocab_size - 1} 之间，实际范围是 {int(tokens.min())} 到 {int(tokens.max())}。",
            )
        )
    return tokens


class TinyAttentionModel(nn.Module):
    """Embeddings + positions, then `num_layers` residual MultiHeadAttention layers, then a linear read-out."""

    def __init__(
        self,
        vocab_size: int,
        context_length: int,
        d_model: int = 32,
        num_heads: int = 2,
        num_layers: int = 1,
        positions: str = "learned",
        causal: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = check_size(vocab_size, "vocab_size")
        self.context_length = check_size(context_length, "context_length")
        check_size(num_layers, "num_layers")
        if positions not in POSITION_KINDS:
            raise ValueError(
                bilingual(
                    f"positions must be one of {POSITION_KINDS}, got {positions!r}.",
                    f"positions 必须是 {POSITION_KINDS} 之一，实际是 {positions!r}。",
                )
            )
        self.positions = positions
        self.causal = causal
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        if positions == "learned":
            self.position_embedding = nn.Parameter(0.1 * torch.randn(context_length, d_model))
        elif positions == "sinusoidal":
            self.register_buffer("position_embedding", sinusoidal_positions(context_length, d_model))
        else:
            self.position_embedding = None
        self.layers = nn.ModuleList(
            MultiHeadAttention(d_model, d_model, context_length, dropout=0.0, num_heads=num_heads)
            for _ in range(num_layers)
        )
        if not causal:
            for layer in self.layers:
                layer.mask.zero_()  # the causal mask is a buffer; all zeros hides nothing: every token sees every token
        self.readout = nn.Linear(d_model, vocab_size)

    def run(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (b, T, vocab_size) and every layer's attention weights (layers, b, heads, T, T)."""
        check_tokens(tokens, self.vocab_size, self.context_length)
        hidden = self.token_embedding(tokens)  # (b, T, d_model)
        if self.position_embedding is not None:
            hidden = hidden + self.position_embedding[: tokens.shape[1]]  # the same vector for position t in every row
        maps = []
        for layer in self.layers:
            context, weights = layer(hidden, return_weights=True)
            hidden = hidden + context  # residual: each layer adds what it read to what was there
            maps.append(weights)
        return self.readout(hidden), torch.stack(maps)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (b, T, vocab_size): a score for every possible answer at every position."""
        return self.run(tokens)[0]

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The most likely answer at every position (b, T) and the attention maps, without training effects."""
        was_training = self.training
        self.eval()
        logits, maps = self.run(tokens)
        self.train(was_training)
        return logits.argmax(dim=-1), maps


@contextmanager
def silence_head(model: TinyAttentionModel, layer: int, head: int) -> Iterator[None]:
    """Inside the `with` block one head contributes nothing: the rows of W_value that feed it are zeros."""
    attention = model.layers[layer]
    if not 0 <= head < attention.num_heads:
        raise ValueError(
            bilingual(
                f"head must be between 0 and {attention.num_heads - 1}, got {head}.",
                f"head 应在 0 到 {attention.num_heads - 1} 之间，实际是 {head}。",
            )
        )
    rows = slice(head * attention.head_dim, (head + 1) * attention.head_dim)  # this head's slice of d_out
    saved = attention.W_value.weight[rows].detach().clone()
    with torch.no_grad():
        attention.W_value.weight[rows] = 0.0  # its values are zero, so its context vectors are zero
    try:
        yield
    finally:
        with torch.no_grad():
            attention.W_value.weight[rows] = saved
