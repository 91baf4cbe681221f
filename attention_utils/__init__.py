"""The teaching library of the attention series: what the lessons import and a learner may read.

The folder a module sits in names the part of the series it serves:
- the top level, what lessons 1-11 build on: data; checks, arguments and devices (the input contract); functional
  and modules (lessons 1-7); fused (lesson 8); tiled (lesson 9); tiny_model, tasks and training (lesson 10); rotary and
  alibi (lesson 11); language, plotting and environment; results (saved benchmark numbers);
- `inference/`, attention at inference time (lessons 12, 14, 15): kv_cache, grouped_query, sliding_window,
  flex_window, generation;
- `models/`, a real language model (lesson 13): gguf_file, bpe_tokenizer, llama, head_scores;
- `recurrent/`, layers with a fixed-size state (lesson 16): linear_attention, delta_rule, recall;
- `explorers/` (with their shared frame, `explorers/widgets`) and `exercises/`: one module per lesson.
A module imports only from its own part and earlier ones. The workshop, `attention_utils.course` (copies, slides,
site, figures, the benchmark), imports the library; the library never imports it. The README maps every lesson to
the modules it uses.
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
from .inference.generation import Generation, generate
from .inference.grouped_query import repeat_kv_heads
from .inference.kv_cache import KVCache, LayerCache, kv_cache_bytes
from .inference.sliding_window import hidden_by_window, sliding_window_mask

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
