"""Attention at inference time (lessons 12, 14, 15): the KV cache, shared key/value heads, windows, generation.

- `kv_cache`: the cache of keys and values a decode step reads, and its size in bytes (lesson 12);
- `grouped_query`: several query heads sharing one key/value head (GQA, MQA);
- `sliding_window`: which keys a window with attention sinks keeps; `flex_window`: the same with FlexAttention;
- `generation`: greedy decoding with or without a cache;
- `decode_cost`: the bytes a forward pass reads and the FLOPs it does, from the model's configuration (lesson 14).
Modules here import from the top of `attention_utils` and from each other, never from `models` or `recurrent`.
"""
