"""What a forward of a Llama-shaped model costs, from its configuration: FLOPs, bytes read, their ratio (lesson 14).

A matrix product (m, k) x (k, n) is m * n * k multiplications and as many additions: 2 m n k
FLOPs. Per new token and per layer the model multiplies by its QKV, output and three
feed-forward matrices (2 FLOPs per weight), and attention scores and mixes the S keys it sees
(2 * heads * head_dim * S each); at the end the output layer (2 * d_model * vocab_size).

The bytes a step reads are every weight once (the embedding table once: it doubles as the output
layer, and a token's own row is a few bytes more) plus the cache of keys and values. FLOPs per byte
is the arithmetic intensity: about 2 / bytes per weight for a decode step at batch 1, and B times
that at batch B, since the weights are read once for all B tokens.

`config` is anything with the sizes of lesson 13's LlamaConfig (d_model, num_layers, num_heads,
num_kv_heads, head_dim, d_ff, vocab_size).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..checks import bilingual, check_real, check_size

SIZES = ("d_model", "num_layers", "num_heads", "num_kv_heads", "head_dim", "d_ff", "vocab_size")


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one forward, and the arithmetic intensity (FLOPs per byte) they give."""

    flops: int  # every FLOP: the matrix products with the weights, and attention's
    attention_flops: int  # attention's share: scores and the mix of values (torch's FlopCounterMode skips CPU SDPA)
    weight_bytes: int
    cache_bytes: int

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.cache_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def weights_per_layer(config: object) -> int:
    """Weights of one layer's matrices: QKV, output, gate, up and down (the norms are a few hundred more)."""
    c = _sizes(config)
    qkv = c["d_model"] * (c["num_heads"] + 2 * c["num_kv_heads"]) * c["head_dim"]
    return qkv + c["d_model"] * c["num_heads"] * c["head_dim"] + 3 * c["d_model"] * c["d_ff"]


def forward_cost(config: object, new_tokens: int, earlier_tokens: int = 0, batch: int = 1,
                 bytes_per_weight: float = 4, bytes_per_value: float = 4) -> Cost:
    """FLOPs and bytes of one call on `new_tokens` tokens after `earlier_tokens` in the cache, for `batch` sequences.

    A decode step is new_tokens=1, earlier_tokens=S; a prefill of T tokens is new_tokens=T. The
    attention FLOPs count every (query, key) pair a query may see: token i sees earlier + i + 1 keys.
    """
    c = _sizes(config)
    new_tokens = check_size(new_tokens, "new_tokens")
    earlier_tokens = check_size(earlier_tokens, "earlier_tokens", minimum=0)
    batch = check_size(batch, "batch")
    bytes_per_weight, bytes_per_value = _positive(bytes_per_weight, "bytes_per_weight"), _positive(bytes_per_value, "bytes_per_value")
    tokens = batch * new_tokens
    pairs = batch * (new_tokens * earlier_tokens + new_tokens * (new_tokens + 1) // 2)  # (query, key) pairs seen
    matrices = c["num_layers"] * weights_per_layer(config) + c["d_model"] * c["vocab_size"]
    attention = c["num_layers"] * 2 * 2 * c["num_heads"] * c["head_dim"] * pairs  # scores, then the mix of values
    cache_values = 2 * c["num_layers"] * c["num_kv_heads"] * c["head_dim"] * batch * (earlier_tokens + new_tokens)
    norms = (2 * c["num_layers"] + 1) * c["d_model"]
    return Cost(flops=2 * tokens * matrices + attention, attention_flops=attention,
                weight_bytes=round((matrices + norms) * bytes_per_weight),
                cache_bytes=round(cache_values * bytes_per_value))


def _sizes(config: object) -> dict[str, int]:
    missing = [name for name in SIZES if not hasattr(config, name)]
    if missing:
        raise TypeError(bilingual(
            f"config must have the sizes of a LlamaConfig ({', '.join(SIZES)}); {type(config).__name__} lacks "
            f"{', '.join(missing)}. Use model.config of load_smollm2().",
            f"config 必须带有 LlamaConfig 的各项尺寸（{'、'.join(SIZES)}）；{type(config).__name__} 缺少 "
            f"{'、'.join(missing)}。请使用 load_smollm2() 所得模型的 model.config。"))
    sizes = {name: check_size(getattr(config, name), f"config.{name}") for name in SIZES}
    if sizes["num_heads"] % sizes["num_kv_heads"]:
        raise ValueError(bilingual(
            f"config.num_kv_heads={sizes['num_kv_heads']} must divide config.num_heads={sizes['num_heads']}: each key/value "
            "head serves the same number of query heads.",
            f"config.num_kv_heads={sizes['num_kv_heads']} 必须能整除 config.num_heads={sizes['num_heads']}：每个键值头服务的查询头一样多。"))
    return sizes


def _positive(value: object, name: str) -> float:
    """Bytes per number: a real number above 0 and below 64 (numpy and 0-d torch numbers count)."""
    value = check_real(value, name, "4", positive=True)
    if value >= 64:
        raise ValueError(bilingual(f"{name} must be a number of bytes below 64 (4 for float32, 2 for bfloat16), got {value:g}.",
                                   f"{name} 必须是小于 64 的字节数（float32 为 4，bfloat16 为 2），实际是 {value:g}。"))
    return value
