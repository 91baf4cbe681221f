"""Attention at inference time (lessons 12, 14, 15, 18): the KV cache, shared key/value heads, windows, generation.

- `kv_cache`: the cache of keys and values a decode step reads, and its size in bytes (lesson 12);
- `grouped_query`: several query heads sharing one key/value head (GQA, MQA);
- `sliding_window`: which keys a window with attention sinks keeps; `flex_window`: the same with FlexAttention;
- `generation`: greedy decoding with or without a cache; `batched_generation`: several prompts at once, left-padded (lesson 14);
- `weight_formats`: the weights in bfloat16 or int8 with one scale per row (lesson 14);
- `decode_cost`: the bytes a forward pass reads and the FLOPs it does, from the model's configuration (lesson 14);
- `decode_profile`: a few decode steps under torch.profiler, and the share of their time in matrix products (lesson 14);
- `quantized_cache`, `low_rank_cache`: caches that keep fewer bytes per token; `cache_quality`: what that costs (lesson 15);
- `latent_attention`: multi-head latent attention, whose cache is one latent vector per token (lesson 15);
- `paged_cache`: the cache in fixed pages with block tables, prefix sharing and copy-on-write (lesson 15);
- `quantized_pages`: pages of 8-bit codes; `ragged_step`: one model step over many sequences, each in its own pages;
- `scheduler`: requests served one at a time, in static batches or continuously, with admission, preemption, chunked
  prefill and a prefix cache; `serving_stream`: seeded request streams and their latencies (lesson 17);
- `speculative`: drafts (prompt lookup, a cheaper model, an early exit), greedy verification that gives plain greedy
  decoding's tokens, the sampled accept-or-resample rule, and the cache's rollback (lesson 18, to come).
Modules here import from the top of `attention_utils` and from each other, never from `models` or `recurrent`.
"""
