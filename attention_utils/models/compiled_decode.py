"""The real model's decode step compiled by torch.compile over a fixed-size cache (lesson 14's overhead, measured away).

An eager decode step of SmolLM2 runs about a thousand small operators around its matrix products
(norms, rotary turns, copies, conversions), each dispatched from Python. torch.compile turns the
step into a few generated C++ kernels per layer, called from generated C++ (`cpp_wrapper`), but it
wants the same shapes at every call: a growing cache would change them. So the keys and values live
in buffers reserved once for `max_tokens`, each step writes its tokens' slots, and a mask hides the
slots not yet written. The blocks are the model's own (its `prepared` path), so the step computes
what the eager one does, in another order of additions. Compiling takes a minute or two; the bench
(`make bench BENCH_ARGS=--model`) times the result against the eager step.

`CompiledDraft` proposes tokens for lesson 18's speculative decoding with such a step: rewinding is
only moving the position back, since the mask hides every slot after it.
"""

from __future__ import annotations

import torch

from ..checks import bilingual, check_size
from .llama import LlamaModel, check_token_ids
from ..overflow import check_result
from ..rotary import rotary_cos_sin
from ..inference.kv_cache import KVCache
from ..inference.speculative import kept_prefix

COMPILE_OPTIONS = {"fx_graph_cache": False, "cpp_wrapper": True}  # no graph cache: one made under other ATen kernels answered wrong


STEP_MOST = 2  # new tokens one step may take: one, or two when a speculative draft reads the model's token after its own


class FixedLayerCache:
    """One layer's keys and values in buffers (b, kv_heads, max_tokens, head_dim) reserved once; `slots` say where the new go."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, slots: torch.Tensor) -> None:
        self.keys, self.values, self.slots = keys, values, slots

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens' keys and values into their slots; return the whole buffers (the mask hides the empty slots)."""
        written = self.slots[:keys.shape[2]]
        self.keys.index_copy_(2, written, keys)
        self.values.index_copy_(2, written, values)
        return self.keys, self.values


class CompiledDecoder:
    """Greedy-ready decoding of a LlamaModel: an eager prefill, then decode steps of fixed shapes, compiled once.

    `prefill(tokens)` reads the prompt (b, T) through the model with a KVCache and copies the cache into
    the fixed buffers; `step(tokens)` takes the next token of each row (b, 1), or the next two (b, 2), and
    returns their scores (b, t, vocab_size); each t compiles once. With `compiled=False` the same fixed-size
    step runs eagerly (a control).
    """

    def __init__(self, model: LlamaModel, max_tokens: int, *, batch: int = 1, compiled: bool = True) -> None:
        if not isinstance(model, LlamaModel):
            raise TypeError(bilingual(
                f"model must be the LlamaModel that load_smollm2() returns (or a copy in a weight format), got "
                f"{type(model).__name__}.",
                f"model 必须是 load_smollm2() 返回的 LlamaModel（或它某种权重格式的副本），实际是 {type(model).__name__}。"))
        if not model._plain_attention():
            raise ValueError(bilingual(
                "CompiledDecoder needs every layer as loaded (no sliding window, no changed rotary base); restore them first.",
                "CompiledDecoder 要求每一层都保持加载时的样子（没有滑动窗口，旋转底数未改）；请先恢复。"))
        config = model.config
        self.max_tokens = check_size(max_tokens, "max_tokens", maximum=config.context_length)
        self.batch = check_size(batch, "batch")
        self.model, self.position = model, 0
        dtype, device = model.final_norm.weight.dtype, model.final_norm.weight.device
        shape = (self.batch, config.num_kv_heads, self.max_tokens, config.head_dim)
        self._written = torch.zeros(STEP_MOST, dtype=torch.long, device=device)  # shared by every layer: the slots a step writes
        self.layers = [FixedLayerCache(torch.zeros(shape, dtype=dtype, device=device),
                                       torch.zeros(shape, dtype=dtype, device=device), self._written)
                       for _ in range(config.num_layers)]
        self._slots = torch.arange(self.max_tokens, device=device)
        self._run = torch.compile(self._forward, dynamic=False, options=COMPILE_OPTIONS) if compiled else self._forward

    def _forward(self, tokens: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The model's blocks on the new tokens of each row, against the fixed buffers: what torch.compile compiles."""
        x, probes = self.model._embed(tokens), []
        for block, layer in zip(self.model.blocks, self.layers):
            x = block(x, cache=layer, prepared=((cos, sin), mask, probes))
        return self.model._scores(x)

    @torch.no_grad()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """The prompt's scores (b, T, vocab_size), its keys and values copied into the buffers; starts the decoder anew."""
        check_token_ids(tokens, self.model.config.vocab_size)
        self._check_room(tokens, tokens.shape[1])
        cache = KVCache(len(self.layers))
        logits = self.model(tokens, cache=cache)
        for layer, held in zip(self.layers, cache.layers):
            layer.keys[:, :, :tokens.shape[1]] = held.keys
            layer.values[:, :, :tokens.shape[1]] = held.values
        self.position = tokens.shape[1]
        return logits

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Scores (b, t, vocab_size) of the new tokens (b, t), t = 1 or 2 per row; the first call of each t compiles."""
        check_token_ids(tokens, self.model.config.vocab_size)
        new = tokens.shape[1]
        if not 1 <= new <= STEP_MOST or not self.position:
            raise ValueError(bilingual(
                f"step takes one or {STEP_MOST} new tokens per row, (batch, 1) or (batch, {STEP_MOST}), after prefill(prompt); got "
                f"{tuple(tokens.shape)}{'' if self.position else ' before any prefill'}.",
                f"step 每行接收一个或 {STEP_MOST} 个新词元，即 (batch, 1) 或 (batch, {STEP_MOST})，并且要先调用 prefill(prompt)；实际是 "
                f"{tuple(tokens.shape)}{'' if self.position else '，而且还没有预填充'}。"))
        self._check_room(tokens, self.position + new)
        config, dtype = self.model.config, self.model.final_norm.weight.dtype
        positions = torch.arange(self.position, self.position + new, device=tokens.device)
        cos, sin = rotary_cos_sin(positions, config.head_dim, config.rotary_base)
        self._written[:new] = positions
        try:
            logits = self._run(tokens, cos.to(dtype), sin.to(dtype), self._slots <= positions[:, None])
        except torch._dynamo.exc.BackendCompilerFailed as error:  # most often: no working C++ compiler
            raise RuntimeError(bilingual(
                f"torch.compile could not build the step ({str(error).splitlines()[0]}); it needs a C++ compiler (g++: "
                "apt install g++, or Xcode's command-line tools): install one, or pass compiled=False.",
                f"torch.compile 没能生成这一步的代码（{str(error).splitlines()[0]}）；它需要 C++ 编译器（g++：apt install g++，"
                "或 Xcode 命令行工具）：请装一个，或者传入 compiled=False。")) from error
        self.position += new
        return check_result(self.model, logits)

    def rewind(self, position: int) -> None:
        """Forget every token from `position` on: the next step writes that slot, and the mask hides the later ones."""
        if isinstance(position, bool) or not isinstance(position, int) or not 1 <= position <= self.position:
            raise ValueError(bilingual(
                f"rewind takes a position from 1 to the tokens held ({self.position}), got {position!r}; call prefill for a new text.",
                f"rewind 的位置必须在 1 到已有的词元数（{self.position}）之间，实际是 {position!r}；换一段新文本请调用 prefill。"))
        self.position = position

    def _check_room(self, tokens: torch.Tensor, needed: int) -> None:
        """Refuse a batch of another size, and tokens past the buffers' end, each with what to do instead."""
        if tokens.shape[0] != self.batch:
            raise ValueError(bilingual(
                f"This decoder was made for batch={self.batch}, but tokens has {tokens.shape[0]} rows; make one with "
                f"CompiledDecoder(model, max_tokens, batch={tokens.shape[0]}).",
                f"这个解码器是按 batch={self.batch} 建的，而 tokens 有 {tokens.shape[0]} 行；请用 "
                f"CompiledDecoder(model, max_tokens, batch={tokens.shape[0]}) 新建一个。"))
        if needed > self.max_tokens:
            raise ValueError(bilingual(
                f"This decoder holds at most max_tokens={self.max_tokens} tokens and would need {needed}; make one with a "
                "larger max_tokens (up to the model's context length).",
                f"这个解码器最多容纳 max_tokens={self.max_tokens} 个词元，这里需要 {needed} 个；请用更大的 max_tokens"
                "（不超过模型的上下文长度）新建一个。"))


class CompiledDraft:
    """A greedy draft for speculative_greedy whose steps are a CompiledDecoder's (batch 1): a draft step without overhead.

    Like inference.speculative.ModelDraft it keeps the keys of the text it has seen; each call rewinds to the
    longest prefix the new text shares with it and feeds the rest in steps of at most two tokens (after a pass
    that kept every drafted token: the last one and the model's own), so a pass costs k draft steps, as for ModelDraft.
    """

    def __init__(self, decoder: CompiledDecoder) -> None:
        if not isinstance(decoder, CompiledDecoder) or decoder.batch != 1:
            got = f"batch={decoder.batch}" if isinstance(decoder, CompiledDecoder) else type(decoder).__name__
            raise TypeError(bilingual(
                f"decoder must be a CompiledDecoder(model, max_tokens) with batch=1 (a draft follows one text), got {got}.",
                f"decoder 必须是 batch=1 的 CompiledDecoder(model, max_tokens)（草稿只跟着一段文本），实际是 {got}。"))
        self.decoder, self.seen = decoder, []  # seen: the tokens whose keys the decoder's buffers hold
        self.device = decoder.model.final_norm.weight.device

    def propose(self, tokens: list[int], k: int) -> list[int]:
        """Up to k greedy tokens after `tokens` (the text so far, as ids)."""
        if k == 0:
            return []
        common = kept_prefix(self.seen, tokens)
        if common == 0:  # a new text: its keys are read in one eager pass
            scores = self.decoder.prefill(torch.tensor([tokens], device=self.device))[0, -1]
        else:
            self.decoder.rewind(common)
            for start in range(common, len(tokens), STEP_MOST):  # most often one token, or two after a pass kept them all
                scores = self.decoder.step(torch.tensor([tokens[start:start + STEP_MOST]], device=self.device))[0, -1]
        self.seen, proposal = list(tokens), []
        while True:
            proposal.append(int(scores.argmax()))
            if len(proposal) == k:
                return proposal
            scores = self.decoder.step(torch.tensor([proposal[-1:]], device=self.device))[0, -1]
            self.seen.append(proposal[-1])
