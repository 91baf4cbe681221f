"""One model step over many sequences at once, each at its own place in its own pages (lesson 17).

A server's step mixes sequences that are far apart: one decodes its 40th token, another starts
its prompt, a third feeds the next chunk of a long prompt. Padding them into a rectangle (lesson
14) wastes work, so the step packs every sequence's new tokens into one row instead (a "ragged"
batch): the projections and the feed-forward layers, which treat each token alone, run once over
the whole row and read each weight once; only attention is done sequence by sequence, each piece
of the row reading its own pages of the paged cache (lesson 15).

`LayerPools` keeps one PagedCache per layer and uses them in lockstep, so a sequence has the same
id and the same page numbers in every layer: one page number stands for that page in all layers.
"""

from __future__ import annotations

import torch
from torch import nn

from ..checks import bilingual, check_size, shown
from ..rotary import rotary_cos_sin, turn
from .paged_cache import PagedCache


class LayerPools:
    """One PagedCache per layer of a model, all with `num_pages` pages, changed together."""

    def __init__(self, model: nn.Module, num_pages: int, page_size: int = 16, kind: type = PagedCache) -> None:
        check_ragged_model(model)
        config = model.config
        dtype, device = model.final_norm.weight.dtype, model.final_norm.weight.device
        self.pools = [kind(num_pages, config.num_kv_heads, config.head_dim, page_size, dtype=dtype, device=device)
                      for _ in model.blocks]
        self.num_pages, self.page_size = check_size(num_pages, "num_pages"), check_size(page_size, "page_size")

    def _together(self, method: str, *args: object) -> int | None:
        """Call the same method on every layer's pool; they all answer the same (the lockstep)."""
        answers = {getattr(pool, method)(*args) for pool in self.pools}
        assert len(answers) == 1, f"the layers' pools went out of step in {method}"
        return answers.pop()

    def new_sequence(self) -> int:
        return self._together("new_sequence")

    def share(self, pages: list[int]) -> int:
        return self._together("share", pages)

    def free(self, sequence: int) -> None:
        self._together("free", sequence)

    def length(self, sequence: int) -> int:
        return self.pools[0].lengths[sequence]

    def table(self, sequence: int) -> list[int]:
        return self.pools[0].block_tables[sequence]

    def holders(self, page: int) -> int:
        return self.pools[0].holders[page]

    @property
    def pages_free(self) -> int:
        return self.pools[0].pages_free

    @property
    def pages_in_use(self) -> int:
        return self.pools[0].pages_in_use

    @property
    def page_bytes(self) -> int:
        """Bytes of one page number: that page in every layer."""
        return sum(pool.page_bytes for pool in self.pools)

    def pages_to_grow(self, sequence: int, new_tokens: int) -> int:
        """New pages appending `new_tokens` to the sequence takes (its last page shared: one more, the copy)."""
        length, table = self.length(sequence), self.table(sequence)
        wanted = -(-(length + new_tokens) // self.page_size) - len(table)
        shared_last = length % self.page_size != 0 and new_tokens > 0 and self.holders(table[-1]) > 1
        return wanted + int(shared_last)


def check_ragged_model(model: object) -> nn.Module:
    """A model built like lesson 13's LlamaModel, every layer as loaded (no window): what ragged_forward runs."""
    parts = ("config", "blocks", "final_norm", "_embed", "_scores", "_plain_attention")
    if not isinstance(model, nn.Module) or not all(hasattr(model, part) for part in parts) or not model._plain_attention():
        raise TypeError(bilingual(
            f"model must be lesson 13's LlamaModel (load_smollm2()[0], or tests' tiny_llama) with every layer as loaded "
            f"(no sliding window), got {shown(model)}.",
            f"model 必须是第 13 课的 LlamaModel（load_smollm2()[0]，或测试里的 tiny_llama），且各层保持加载时的设置"
            f"（没有滑动窗口），实际是 {shown(model, True)}。"))
    return model


@torch.no_grad()
def ragged_forward(model: nn.Module, pools: LayerPools, pieces: list[tuple[int, list[int]]]) -> torch.Tensor:
    """Next-token scores (pieces, vocab) after the last token of each piece (sequence id, its new token ids).

    Each piece's tokens go after what its sequence holds; their keys and values are written to its
    pages. Only the last token of each piece is scored: the others' scores are never used.
    """
    device = model.final_norm.weight.device
    starts = [pools.length(sequence) for sequence, _ in pieces]
    sizes = [len(ids) for _, ids in pieces]
    tokens = torch.tensor([token for _, ids in pieces for token in ids], dtype=torch.long, device=device)[None]
    positions = torch.cat([torch.arange(start, start + size, device=device) for start, size in zip(starts, sizes)])
    cos, sin = (t.to(model.final_norm.weight.dtype) for t in
                rotary_cos_sin(positions, model.config.head_dim, model.config.rotary_base))
    x = model._embed(tokens)  # (1, N, d_model): every piece's tokens in one row
    for block, pool in zip(model.blocks, pools.pools):
        context = _attend(block.attention, block.attention_norm(x), pool, pieces, starts, sizes, (cos, sin))
        x = x + block.attention._combine_heads(context)
        x = x + block.feed_forward(block.feed_forward_norm(x))
    last = torch.tensor(sizes, device=device).cumsum(0) - 1
    return model._scores(x[:, last])[0]


def _attend(attention: nn.Module, x: torch.Tensor, pool: PagedCache, pieces: list[tuple[int, list[int]]],
            starts: list[int], sizes: list[int], rotation: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """One layer's attention: one projection for the whole row, then each piece attends to its own pages."""
    heads, kv_heads = attention.num_heads, attention.num_kv_heads
    qkv = attention.qkv(x)[0]  # (N, (h + 2 kv) * head_dim)
    split = qkv.view(qkv.shape[0], heads + 2 * kv_heads, attention.head_dim).transpose(0, 1)  # (all heads, N, hd)
    queries, keys = turn(split[:heads + kv_heads], *rotation, attention.rotary_layout).split([heads, kv_heads])
    values = split[heads + kv_heads:]
    contexts, offset = [], 0
    for (sequence, _), start, size in zip(pieces, starts, sizes):
        piece = slice(offset, offset + size)
        pool.append(sequence, keys[:, piece], values[:, piece])
        cached_keys, cached_values = pool.gather(sequence)
        may_attend = None if size == 1 else torch.ones(size, start + size, dtype=torch.bool, device=x.device).tril(start)
        contexts.append(nn.functional.scaled_dot_product_attention(
            queries[None, :, piece], cached_keys[None], cached_values[None], attn_mask=may_attend,
            enable_gqa=heads != kv_heads)[0])
        offset += size
    return torch.cat(contexts, dim=1)[None]  # (1, h, N, head_dim)
