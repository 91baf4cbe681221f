"""Helpers for the attention notebook series: the running example, attention functions and modules."""

from .environment import setup
from .data import TOKENS, example_batch, example_inputs, sliding_window_pairs
from .functional import (
    attention_scores,
    causal_mask,
    naive_softmax,
    scaled_dot_product_attention,
    stable_softmax,
    sum_normalize,
)
from .modules import (
    CausalAttention,
    FusedMultiHeadAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
)
from .tiled import online_softmax, tiled_attention

__all__ = [
    "setup",
    "TOKENS",
    "example_batch",
    "example_inputs",
    "sliding_window_pairs",
    "attention_scores",
    "causal_mask",
    "naive_softmax",
    "scaled_dot_product_attention",
    "stable_softmax",
    "sum_normalize",
    "CausalAttention",
    "FusedMultiHeadAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "online_softmax",
    "tiled_attention",
]
