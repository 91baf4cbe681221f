"""A paged KV cache (PagedAttention, Kwon et al. 2023): keys and values in fixed pages of a shared pool.

A cache reserved for the longest possible text wastes what shorter texts never fill. Here memory is
a pool of pages of `page_size` tokens each; a sequence holds a list of page numbers, its block table,
and takes a new page only when its last one is full, so at most one page per sequence is part empty.

Two sequences that start with the same tokens (a shared system prompt) can share those pages: a
fork copies the block table, not the pages, and counts how many tables hold each page. When a
sequence writes into a page another sequence also holds, it first copies that page for itself
(copy-on-write), so the other sequence never sees the change.

Attention reads a sequence's pages in block-table order (gathers them) and gives exactly what the
same keys and values in one contiguous tensor give.
"""

from __future__ import annotations

import torch
from torch import nn

from ..arguments import check_size
from ..checks import bilingual, check_tensor
from .kv_cache import KVCache, LayerCache


def pages_needed(lengths: list[int], page_size: int = 16) -> int:
    """Pages a batch of sequences of these lengths holds: each needs ceil(length / page_size)."""
    page_size = check_size(page_size, "page_size")
    return sum(-(-check_size(n, "length", minimum=0) // page_size) for n in lengths)


class PagedCache:
    """A pool of `num_pages` pages, each holding `page_size` tokens' keys and values (kv_heads, head_dim)."""

    def __init__(self, num_pages: int, num_kv_heads: int, head_dim: int, page_size: int = 16,
                 dtype: torch.dtype = torch.float32) -> None:
        self.page_size = check_size(page_size, "page_size")
        shape = (check_size(num_pages, "num_pages"), check_size(num_kv_heads, "num_kv_heads"), self.page_size,
                 check_size(head_dim, "head_dim"))
        self.keys, self.values = torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype)
        self.holders = [0] * num_pages  # how many block tables hold each page; 0 = free
        self.block_tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self._next_id = 0

    def new_sequence(self) -> int:
        """An empty sequence; returns its id."""
        self._next_id += 1
        self.block_tables[self._next_id], self.lengths[self._next_id] = [], 0
        return self._next_id

    def fork(self, sequence: int) -> int:
        """A new sequence that shares every page of `sequence` (no copy until one of them writes to a shared page)."""
        table = self._table(sequence)
        child = self.new_sequence()
        self.block_tables[child], self.lengths[child] = list(table), self.lengths[sequence]
        for page in table:
            self.holders[page] += 1
        return child

    def free(self, sequence: int) -> None:
        """Give back the pages only this sequence held, and forget it."""
        for page in self._table(sequence):
            self.holders[page] -= 1
        del self.block_tables[sequence], self.lengths[sequence]

    def append(self, sequence: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write the new tokens' keys and values (kv_heads, T, head_dim) after the sequence's last token."""
        table = self._table(sequence)
        self._check_new(keys, values)
        length = self.lengths[sequence]
        wanted = -(-(length + keys.shape[1]) // self.page_size) - len(table)
        wanted += int(length % self.page_size != 0 and keys.shape[1] > 0 and self.holders[table[-1]] > 1)
        if wanted > self.holders.count(0):  # checked before anything is written
            self._out_of_pages()
        written = 0
        while written < keys.shape[1]:
            length = self.lengths[sequence]
            slot = length % self.page_size
            if slot == 0:
                table.append(self._take_page())
            elif self.holders[table[-1]] > 1:  # a shared last page: copy it before writing (copy-on-write)
                table[-1] = self._copy_page(table[-1])
            count = min(self.page_size - slot, keys.shape[1] - written)
            page = table[-1]
            self.keys[page, :, slot:slot + count] = keys[:, written:written + count]
            self.values[page, :, slot:slot + count] = values[:, written:written + count]
            self.lengths[sequence] += count
            written += count

    def gather(self, sequence: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequence's keys and values (kv_heads, length, head_dim): its pages read in block-table order."""
        table = torch.tensor(self._table(sequence), dtype=torch.long)
        length = self.lengths[sequence]
        heads, head_dim = self.keys.shape[1], self.keys.shape[3]
        return tuple(pool[table].transpose(0, 1).reshape(heads, -1, head_dim)[:, :length]
                     for pool in (self.keys, self.values))

    @property
    def pages_in_use(self) -> int:
        return sum(1 for holders in self.holders if holders)

    @property
    def page_bytes(self) -> int:
        """Bytes of one page: keys and values of page_size tokens."""
        return 2 * self.keys[0].numel() * self.keys.element_size()

    @property
    def nbytes(self) -> int:
        """Bytes of the pages some sequence holds (a shared page counts once)."""
        return self.pages_in_use * self.page_bytes

    def _take_page(self) -> int:
        for page, holders in enumerate(self.holders):
            if holders == 0:
                self.holders[page] = 1
                return page
        self._out_of_pages()

    def _out_of_pages(self) -> None:
        raise ValueError(bilingual(
            f"All {len(self.holders)} pages are in use; free a finished sequence or build the cache with more num_pages.",
            f"全部 {len(self.holders)} 页都已占用；请释放已完成的序列，或用更大的 num_pages 创建缓存。"))

    def _copy_page(self, page: int) -> int:
        copy = self._take_page()
        self.keys[copy], self.values[copy] = self.keys[page], self.values[page]
        self.holders[page] -= 1
        return copy

    def _table(self, sequence: object) -> list[int]:
        if sequence not in self.block_tables:
            raise ValueError(bilingual(
                f"There is no sequence {sequence!r} in this cache; use an id that new_sequence() or fork() returned.",
                f"这个缓存里没有序列 {sequence!r}；请使用 new_sequence() 或 fork() 返回的编号。"))
        return self.block_tables[sequence]

    def _check_new(self, keys: object, values: object) -> None:
        shape = (self.keys.shape[1], self.keys.shape[3])
        for name, x in (("keys", keys), ("values", values)):
            check_tensor(x, name, ranks=(3,), last_dim=shape[1], last_name="head_dim")
            if x.shape[0] != shape[0] or x.dtype != self.keys.dtype or x.shape != keys.shape:
                raise ValueError(bilingual(
                    f"{name} must be (kv_heads={shape[0]}, T, head_dim={shape[1]}) of {self.keys.dtype}, the same shape "
                    f"for keys and values; got {tuple(x.shape)} {x.dtype}.",
                    f"{name} 的形状应为 (kv_heads={shape[0]}, T, head_dim={shape[1]})、类型为 {self.keys.dtype}，"
                    f"且 keys 与 values 形状相同；实际是 {tuple(x.shape)} {x.dtype}。"))


def paged_attention(queries: torch.Tensor, cache: PagedCache, sequence: int) -> torch.Tensor:
    """The last T_q tokens' queries (heads, T_q, head_dim) attend causally to the sequence's gathered pages."""
    keys, values = cache.gather(sequence)
    check_tensor(queries, "queries", ranks=(3,), last_dim=keys.shape[-1], last_name="head_dim")
    t, s = queries.shape[1], keys.shape[1]
    may_attend = torch.ones(t, s, dtype=torch.bool).tril(diagonal=s - t)  # query i sits at position s - t + i
    return nn.functional.scaled_dot_product_attention(queries[None], keys[None], values[None], attn_mask=may_attend,
                                                      enable_gqa=queries.shape[0] != keys.shape[0])[0]


class PagedLayerCache(LayerCache):
    """One layer's cache for one sequence (batch 1), kept in a PagedCache: a drop-in for LayerCache in LlamaModel."""

    def __init__(self, pages: PagedCache, sequence: int | None = None) -> None:
        super().__init__()
        self.pages = pages
        self.sequence = pages.new_sequence() if sequence is None else sequence
        self.position = pages.lengths[self.sequence]  # a forked sequence goes on after its shared prefix

    def update(self, keys: torch.Tensor, values: torch.Tensor, window: int | None = None, sinks: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write the new keys and values (1, kv_heads, T, head_dim) into pages; return the sequence gathered."""
        if window is not None or keys.dim() != 4 or keys.shape[0] != 1:
            raise ValueError(bilingual(
                "A PagedLayerCache holds one sequence (batch 1) without a window; give each sequence its own.",
                "PagedLayerCache 只保存一个序列（批大小 1），不带窗口；请给每个序列各建一个。"))
        self.pages.append(self.sequence, keys[0], values[0])
        self.position = self.pages.lengths[self.sequence]
        self.positions = torch.arange(self.position)
        gathered_keys, gathered_values = self.pages.gather(self.sequence)
        return gathered_keys[None], gathered_values[None], self.positions

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """LlamaModel's checked-once path: what `update` returns (this cache stores in its own way, so no shortcut)."""
        return self.update(keys, values)[:2]

    @property
    def keys(self) -> torch.Tensor | None:
        return self.pages.gather(self.sequence)[0][None] if self.position else None

    @property
    def values(self) -> torch.Tensor | None:
        return self.pages.gather(self.sequence)[1][None] if self.position else None


def paged_kv_cache(pools: list[PagedCache], sequences: list[int] | None = None) -> KVCache:
    """A KVCache for one sequence whose layer i lives in pools[i] (one pool per layer, shared by many sequences)."""
    cache = KVCache(len(pools))
    cache.layers = [PagedLayerCache(pool, None if sequences is None else sequences[i]) for i, pool in enumerate(pools)]
    return cache
