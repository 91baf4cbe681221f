"""The teaching library of the attention series: what the lessons import and a learner may read.

Two rooms, one package:
- the teaching library (this folder): data; checks, arguments and devices (the input contract);
  functional and modules (attention, lessons 1-7); fused (lessons 8, 12, 13); tiled (lesson 9); tiny_model, tasks and
  training (lesson 10); rotary (lesson 11); kv_cache, grouped_query, sliding_window, flex_window
  and generation (lesson 12); gguf_file, bpe_tokenizer, llama and head_scores (lesson 13); the part
  recurrent/ (lesson 16: linear attention, the delta rule, the recall task);
  language, plotting, widgets and environment; results (saved benchmark numbers); exercises/
  (checkers) and explorers/ (the lessons' interactive figures);
- the workshop, `attention_utils.course`: copies, slides, site, figures and the benchmark. It
  imports the library; the library never imports it.
"""

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
from .fused import FusedMultiHeadAttention
from .modules import (
    CausalAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
)
from .rotary import apply_rotary, halves_order, rotary_frequencies, to_halves_layout
from .tiled import online_softmax, tiled_attention
from .generation import Generation, generate
from .grouped_query import repeat_kv_heads
from .kv_cache import KVCache, LayerCache, kv_cache_bytes
from .sliding_window import hidden_by_window, sliding_window_mask

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
    "apply_rotary",
    "halves_order",
    "rotary_frequencies",
    "to_halves_layout",
    "online_softmax",
    "tiled_attention",
    "Generation",
    "generate",
    "repeat_kv_heads",
    "KVCache",
    "LayerCache",
    "kv_cache_bytes",
    "hidden_by_window",
    "sliding_window_mask",
]
