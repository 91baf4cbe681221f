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

from ..checks import bilingual, check_size, check_tensor, shown
from ..devices import check_device, check_fits
from ..overflow import check_no_overflow
from .kv_cache import KVCache, LayerCache


def pages_needed(lengths: list[int], page_size: int = 16) -> int:
    """Pages a batch of sequences of these lengths holds: each needs ceil(length / page_size)."""
    page_size = check_size(page_size, "page_size")
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__") or getattr(lengths, "ndim", 1) != 1:
        raise TypeError(bilingual(f"lengths must be a list of sequence lengths, such as [37, 5, 64], got {shown(lengths)}.",
                                  f"lengths 必须是由序列长度组成的列表，例如 [37, 5, 64]，实际是 {shown(lengths, True)}。"))
    return sum(-(-check_size(n, f"lengths[{i}]", minimum=0) // page_size) for i, n in enumerate(lengths))


def _check_pool_fits(sizes: dict[str, int], bytes_per_value: int, device: torch.device) -> None:
    """The pool's keys and values must fit in memory: each size alone first, so the message names the one too large."""

    def pool_bytes(num_pages: int, num_kv_heads: int, page_size: int, head_dim: int) -> int:
        return 2 * num_pages * num_kv_heads * page_size * head_dim * bytes_per_value

    for name, value in sizes.items():
        check_fits(value, name, lambda v, name=name: pool_bytes(**{**dict.fromkeys(sizes, 1), name: v}), device)
    check_fits(sizes["num_pages"], "num_pages", lambda n: pool_bytes(**{**sizes, "num_pages": n}), device)


class PagedCache:
    """A pool of `num_pages` pages, each holding `page_size` tokens' keys and values (kv_heads, head_dim).

    The pool lives on `device` (the CPU by default): the device of the model whose keys it keeps.
    """

    def __init__(self, num_pages: int, num_kv_heads: int, head_dim: int, page_size: int = 16,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        sizes = {name: check_size(value, name) for name, value in
                 (("num_pages", num_pages), ("num_kv_heads", num_kv_heads), ("page_size", page_size), ("head_dim", head_dim))}
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(bilingual(f"dtype must be a floating-point torch.dtype such as torch.float32, got {shown(dtype)}.",
                                      f"dtype 必须是浮点类型的 torch.dtype，例如 torch.float32，实际是 {shown(dtype, True)}。"))
        device = check_device(device) or torch.device("cpu")
        _check_pool_fits(sizes, torch.finfo(dtype).bits // 8, device)
        num_pages, self.page_size = sizes["num_pages"], sizes["page_size"]
        self.dtype = dtype
        self._allocate(tuple(sizes.values()), device)  # (num_pages, num_kv_heads, page_size, head_dim)
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
        sequence = self._id(sequence)
        table = self._table(sequence)
        child = self.new_sequence()
        self.block_tables[child], self.lengths[child] = list(table), self.lengths[sequence]
        for page in table:
            self.holders[page] += 1
        return child

    def share(self, pages: list[int]) -> int:
        """A new sequence made of these full pages, each held once more (a prefix cache hands its pages on this way)."""
        if not isinstance(pages, (list, tuple)) or any(
                isinstance(page, bool) or not isinstance(page, int) or not 0 <= page < len(self.holders)
                or not self.holders[page] for page in pages):
            raise ValueError(bilingual(
                f"pages must be a list of page numbers that some sequence holds, got {shown(pages)}.",
                f"pages 必须是由已被某个序列占用的页号组成的列表，实际是 {shown(pages, True)}。"))
        sequence = self.new_sequence()
        self.block_tables[sequence], self.lengths[sequence] = list(pages), len(pages) * self.page_size
        for page in pages:
            self.holders[page] += 1
        return sequence

    @property
    def pages_free(self) -> int:
        """Pages no sequence holds."""
        return self.holders.count(0)

    def free(self, sequence: int) -> None:
        """Give back the pages only this sequence held, and forget it."""
        sequence = self._id(sequence)
        for page in self._table(sequence):
            self.holders[page] -= 1
        del self.block_tables[sequence], self.lengths[sequence]

    def append(self, sequence: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write the new tokens' keys and values (kv_heads, T, head_dim) after the sequence's last token."""
        sequence = self._id(sequence)
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
            chunk = slice(written, written + count)
            self._write(table[-1], slot, keys[:, chunk].detach(), values[:, chunk].detach())  # a cache keeps no graph
            self.lengths[sequence] += count
            written += count

    def gather(self, sequence: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequence's keys and values (kv_heads, length, head_dim): its pages read in block-table order."""
        sequence = self._id(sequence)
        table = torch.tensor(self._table(sequence), dtype=torch.long, device=self.keys.device)
        length = self.lengths[sequence]
        heads, head_dim = self.keys.shape[1], self.keys.shape[3]
        if not length:  # no page yet: no keys and no values
            return tuple(torch.zeros(heads, 0, head_dim, dtype=self.dtype, device=self.keys.device) for _ in range(2))
        return tuple(pages.transpose(0, 1).reshape(heads, -1, head_dim)[:, :length] for pages in self._read(table))

    def _allocate(self, shape: tuple[int, ...], device: torch.device) -> None:
        """The pool's storage: keys and values (num_pages, kv_heads, page_size, head_dim) in the cache's dtype."""
        self.keys, self.values = (torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(2))

    @property
    def _stores(self) -> list[torch.Tensor]:
        """Every tensor that holds pages, page first: what a page's copy copies and its bytes count."""
        return [self.keys, self.values]

    def _write(self, page: int, slot: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Store keys and values (kv_heads, count, head_dim) in a page from `slot` on."""
        self.keys[page, :, slot:slot + keys.shape[1]] = keys
        self.values[page, :, slot:slot + keys.shape[1]] = values

    def _read(self, table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pages of `table`, keys and values each (pages, kv_heads, page_size, head_dim) in the cache's dtype."""
        return self.keys[table], self.values[table]

    @property
    def pages_in_use(self) -> int:
        return sum(1 for holders in self.holders if holders)

    @property
    def page_bytes(self) -> int:
        """Bytes of one page: keys and values of page_size tokens."""
        return sum(store[0].numel() * store.element_size() for store in self._stores)

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
        for store in self._stores:
            store[copy] = store[page]
        self.holders[page] -= 1
        return copy

    def _id(self, sequence: object) -> int:
        """A sequence id this cache knows, as an int (numpy and 0-d torch integers count; True and 1.0 do not)."""
        sequence = check_size(sequence, "sequence")
        self._table(sequence)
        return sequence

    def _table(self, sequence: int) -> list[int]:
        if sequence not in self.block_tables:
            raise ValueError(bilingual(
                f"There is no sequence {sequence!r} in this cache; use an id that new_sequence() or fork() returned.",
                f"这个缓存里没有序列 {sequence!r}；请使用 new_sequence() 或 fork() 返回的编号。"))
        return self.block_tables[sequence]

    def _check_new(self, keys: object, values: object) -> None:
        shape = (self.keys.shape[1], self.keys.shape[3])
        for name, x in (("keys", keys), ("values", values)):
            check_tensor(x, name, ranks=(3,), last_dim=shape[1], last_name="head_dim")
            if x.shape[0] != shape[0] or x.dtype != self.dtype or x.shape != keys.shape:
                raise ValueError(bilingual(
                    f"{name} must be (kv_heads={shape[0]}, T, head_dim={shape[1]}) of {self.dtype}, the same shape "
                    f"for keys and values; got {tuple(x.shape)} {x.dtype}.",
                    f"{name} 的形状应为 (kv_heads={shape[0]}, T, head_dim={shape[1]})、类型为 {self.dtype}，"
                    f"且 keys 与 values 形状相同；实际是 {tuple(x.shape)} {x.dtype}。"))
            if x.device != self.keys.device:
                raise TypeError(bilingual(
                    f"{name} are on {x.device} but the pool's pages are on {self.keys.device}; build the pool with "
                    f"PagedCache(..., device='{x.device}').",
                    f"{name} 在 {x.device} 上，而页池在 {self.keys.device} 上；请用 PagedCache(..., device='{x.device}') 创建页池。"))


def paged_attention(queries: torch.Tensor, cache: PagedCache, sequence: int) -> torch.Tensor:
    """The last T_q tokens' queries (heads, T_q, head_dim) attend causally to the sequence's gathered pages."""
    if not isinstance(cache, PagedCache):
        raise TypeError(bilingual(f"cache must be a PagedCache, got {shown(cache)}.",
                                  f"cache 必须是 PagedCache，实际是 {shown(cache, True)}。"))
    keys, values = cache.gather(sequence)
    check_tensor(queries, "queries", ranks=(3,), last_dim=keys.shape[-1], last_name="head_dim")
    t, s = queries.shape[1], keys.shape[1]
    if queries.shape[0] % keys.shape[0] or t > s or queries.dtype != keys.dtype or queries.device != keys.device:
        raise ValueError(bilingual(
            f"queries {tuple(queries.shape)} {queries.dtype} must be (heads, T_q, head_dim) with heads a multiple of the "
            f"cache's kv_heads={keys.shape[0]}, T_q at most the {s} tokens the sequence holds (the queries are its last "
            f"tokens), and the cache's dtype {keys.dtype} on {keys.device}.",
            f"queries {tuple(queries.shape)} {queries.dtype} 的形状应为 (heads, T_q, head_dim)：heads 是缓存 kv_heads={keys.shape[0]} "
            f"的整数倍，T_q 不超过该序列已存的 {s} 个词元（查询是它最后的几个词元），类型和设备与缓存相同"
            f"（{keys.dtype}，{keys.device}）。"))
    may_attend = torch.ones(t, s, dtype=torch.bool, device=keys.device).tril(diagonal=s - t)  # query i sits at position s - t + i
    out = nn.functional.scaled_dot_product_attention(queries[None], keys[None], values[None], attn_mask=may_attend,
                                                     enable_gqa=queries.shape[0] != keys.shape[0])[0]
    check_no_overflow(out, ("queries", "the cached keys", "the cached values"))
    return out


class PagedLayerCache(LayerCache):
    """One layer's cache for one sequence (batch 1), kept in a PagedCache: a drop-in for LayerCache in LlamaModel."""

    can_forget = False  # its tokens live in pages that other sequences may share: truncate refuses

    def __init__(self, pages: PagedCache, sequence: int | None = None) -> None:
        super().__init__()
        if not isinstance(pages, PagedCache):
            raise TypeError(bilingual(f"pages must be a PagedCache, got {shown(pages)}.",
                                      f"pages 必须是 PagedCache，实际是 {shown(pages, True)}。"))
        self.pages = pages
        self.sequence = pages.new_sequence() if sequence is None else pages._id(sequence)
        self.position = pages.lengths[self.sequence]  # a forked sequence goes on after its shared prefix

    def update(self, keys: torch.Tensor, values: torch.Tensor, window: int | None = None, sinks: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Write the new keys and values (1, kv_heads, T, head_dim) into pages; return the sequence gathered."""
        if window is not None:
            raise ValueError(bilingual(
                "A PagedLayerCache keeps every token; it cannot be combined with a sliding window.",
                "PagedLayerCache 保留全部词元，不能与滑动窗口（window）一起使用。"))
        for name, x in (("keys", keys), ("values", values)):
            check_tensor(x, name, ranks=(4,))
            if x.shape[0] != 1:
                raise ValueError(bilingual(
                    f"{name} must hold one sequence (batch 1), got shape {tuple(x.shape)}; a PagedLayerCache holds one "
                    "sequence: give each sequence its own.",
                    f"{name} 只能有一个序列（批大小 1），实际形状是 {tuple(x.shape)}；一个 PagedLayerCache 只保存一个序列，"
                    "请给每个序列各建一个。"))
        if self.pages.lengths[self.pages._id(self.sequence)] != self.position:  # another layer wrote this sequence
            raise ValueError(bilingual(
                f"sequence {self.sequence} of this pool holds {self.pages.lengths[self.sequence]} tokens but this layer "
                f"wrote {self.position}: another layer's cache writes the same sequence, and its keys would mix with "
                "these. Give each layer its own sequence (`sequences` of paged_kv_cache): paged_kv_cache(pools) makes one per layer.",
                f"这个页池里的序列 {self.sequence} 存了 {self.pages.lengths[self.sequence]} 个词元，而这一层只写了 "
                f"{self.position} 个：另一层的缓存也在写同一个序列，两层的键会混在一起。请给每一层各用一个序列（paged_kv_cache 的 `sequences`）："
                "paged_kv_cache(pools) 会为每层各建一个。"))
        self.pages.append(self.sequence, keys[0], values[0])
        self.position = self.pages.lengths[self.sequence]
        self.positions = torch.arange(self.position, device=keys.device)
        gathered_keys, gathered_values = self.pages.gather(self.sequence)
        return gathered_keys[None], gathered_values[None], self.positions

    def _append(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """LlamaModel's checked-once path: what `update` returns (this cache stores in its own way, so no shortcut)."""
        return self.update(keys, values)[:2]

    @property
    def keys(self) -> torch.Tensor | None:
        return self.pages.gather(self.sequence)[0][None] if self.position else None

    @property
    def nbytes(self) -> int:
        """Bytes of the keys and values this sequence holds, as LayerCache counts them (its pages: reserved_bytes)."""
        _, heads, _, head_dim = self.pages.keys.shape
        return 2 * heads * head_dim * self.position * self.pages.keys.element_size()

    @property
    def reserved_bytes(self) -> int:
        """Bytes of the pages in this sequence's block table (a page it shares counts here too)."""
        return len(self.pages.block_tables[self.sequence]) * self.pages.page_bytes

    @property
    def values(self) -> torch.Tensor | None:
        return self.pages.gather(self.sequence)[1][None] if self.position else None


def paged_kv_cache(pools: list[PagedCache], sequences: list[int] | None = None) -> KVCache:
    """A KVCache for one sequence whose layer i lives in pools[i] (one pool per layer, shared by many sequences)."""
    if not isinstance(pools, (list, tuple)) or not pools or not all(isinstance(pool, PagedCache) for pool in pools):
        raise TypeError(bilingual(f"pools must be a non-empty list of PagedCache, one per layer, got {shown(pools)}.",
                                  f"pools 必须是非空的 PagedCache 列表，每层一个，实际是 {shown(pools, True)}。"))
    if sequences is not None and (not isinstance(sequences, (list, tuple)) or len(sequences) != len(pools)):
        raise ValueError(bilingual(
            f"sequences must be None or one sequence id per pool ({len(pools)}), got {shown(sequences)}.",
            f"sequences 必须是 None，或者每个页池一个序列编号（共 {len(pools)} 个），实际是 {shown(sequences, True)}。"))
    pairs = [(id(pool), pool._id(sequence)) for pool, sequence in zip(pools, sequences or ())]
    shared = next((layer for layer, pair in enumerate(pairs) if pair in pairs[:layer]), None)
    if shared is not None:
        raise ValueError(bilingual(
            f"sequences: layer {shared} gets a sequence of a pool that an earlier layer already writes; each layer "
            "needs its own sequence (pool.new_sequence() or pool.fork(...), one per layer), or one pool per layer.",
            f"sequences：第 {shared} 层拿到的序列已经有前面的一层在写（同一个页池的同一个序列）；每层都要有自己的序列"
            "（每层各调用一次 pool.new_sequence() 或 pool.fork(...)），或者每层各用一个页池。"))
    cache = KVCache(len(pools))
    cache.layers = [PagedLayerCache(pool, None if sequences is None else sequences[i]) for i, pool in enumerate(pools)]
    return cache
