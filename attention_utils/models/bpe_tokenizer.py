"""A byte-level BPE tokenizer (GPT-2's kind, used by SmolLM2): text to token ids and back, from a vocabulary and merges.

How a text becomes tokens:
1. control tokens such as `<|im_start|>` are cut out whole;
2. the rest is split into pieces: every digit alone, then words with their leading space,
   runs of punctuation, runs of spaces (the "smollm" split that llama.cpp uses for this model);
3. each piece becomes its UTF-8 bytes, each byte one printable character (GPT-2's byte alphabet:
   a space is "Ġ", a newline "Ċ"), so any text at all, Chinese included, can be written;
4. the merges, best first, join neighbouring symbols ("Ġ" + "t" -> "Ġt", ...) until no merge applies.
Every symbol left is a token of the vocabulary. Decoding runs the other way: token texts, bytes, UTF-8.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from functools import lru_cache

import regex  # the standard `re` has no \p{L} (any letter) or \p{N} (any digit or number sign)
import torch

from ..checks import bilingual, check_size, shown
from .gguf_file import GGUFFile, check_file, setting

CONTROL = 3  # GGUF's token type for control tokens such as <|endoftext|>
DIGIT = regex.compile(r"(\p{N})")  # the parentheses keep each digit as a piece of its own when splitting
# GPT-2's split: English contractions, words with one leading space, numbers, punctuation, spaces
WORDS = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@lru_cache(maxsize=1)
def byte_alphabet() -> dict[int, str]:
    """GPT-2's printable character for each of the 256 byte values.

    Printable bytes ("!" to "~", "¡" to "¬", "®" to "ÿ") stand for themselves; the others (space,
    newline, control bytes) borrow the characters from chr(256) on, in order: a space (32) is "Ġ".
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    alphabet = {byte: chr(byte) for byte in printable}
    borrowed = (byte for byte in range(256) if byte not in alphabet)
    alphabet.update({byte: chr(256 + i) for i, byte in enumerate(borrowed)})
    return dict(sorted(alphabet.items()))


def check_text(text: object, name: str = "text") -> str:
    """A text to tokenize must be a str (a prompt, not a list of words or bytes)."""
    if not isinstance(text, str):
        if isinstance(text, bytes):
            hint_en, hint_zh = " decode it first with .decode('utf-8')", "请先用 .decode('utf-8') 解码"
        elif isinstance(text, (list, tuple)):
            hint_en, hint_zh = " join a list of words with ' '.join(words)", "单词列表请先用 ' '.join(words) 连成一句"
        else:
            hint_en, hint_zh = " write it in quotes, such as 'The capital of France is'", "请用引号写出，例如 'The capital of France is'"
        raise TypeError(
            bilingual(
                f"{name} must be a str, got {type(text).__name__};{hint_en}.",
                f"{name} 必须是字符串（str），实际是 {type(text).__name__}；{hint_zh}。",
            )
        )
    return text


def check_strings(values: object, name: str, minimum: int = 0) -> list[str]:
    """A list (or tuple) of strings, at least `minimum` of them: a vocabulary, its merges or its control tokens."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) < minimum \
            or not all(isinstance(value, str) for value in values):
        raise TypeError(bilingual(
            f"{name} must be a list of at least {minimum} str, got {shown(values)}; ByteLevelBPE.from_gguf(read_gguf()) "
            "builds the tokenizer of lesson 13's model.",
            f"{name} 必须是至少 {minimum} 个字符串组成的列表，实际是 {shown(values, True)}；"
            "ByteLevelBPE.from_gguf(read_gguf()) 可以得到第 13 课模型的分词器。"))
    return list(values)


def check_ids(ids: object, vocab_size: int) -> list[int]:
    """Token ids to decode: a 1-D tensor or array, or a list, of whole numbers in 0..vocab_size - 1."""
    if hasattr(ids, "tolist") and getattr(ids, "ndim", 1) != 1:
        raise ValueError(bilingual(
            f"ids must be one sequence of token ids (1-D), got shape {tuple(ids.shape)}; for a batch (1, T) pass tokens[0].",
            f"ids 应为一条词元编号序列（一维），实际形状是 {tuple(ids.shape)}；如果是批次 (1, T)，请传入 tokens[0]。"))
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(bilingual(
            f"ids must be a list or 1-D tensor of token ids, got {type(ids).__name__}; for one id write [id].",
            f"ids 应为词元编号的列表或一维张量，实际是 {type(ids).__name__}；只有一个编号时请写成 [id]。"))
    ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
    return [check_id(i, vocab_size) for i in ids]


def check_id(token_id: object, vocab_size: int) -> int:
    """One token id: a whole number in 0..vocab_size - 1."""
    token_id = check_size(token_id, "token id", minimum=0)
    if token_id >= vocab_size:
        raise ValueError(bilingual(
            f"token id {token_id} is outside the vocabulary: ids run from 0 to {vocab_size - 1}.",
            f"词元编号（token id）{token_id} 超出了词表范围：编号应在 0 到 {vocab_size - 1} 之间。"))
    return token_id


def merge_symbols(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """BPE's merges on one piece's symbols, in time about n log n for n symbols (a 30,000-letter word: well under a second).

    The rule is GPT-2's: take the best-ranked pair of neighbours, join every occurrence of it from left to
    right (in "a a a" only the first two), repeat. Instead of rescanning the whole piece for each rank, a
    heap holds (rank, position) of every pair that the merges join, and a linked list holds the symbols.
    Each round pops all entries of the best rank, leftmost first, and skips an entry whose pair has changed
    since it was pushed; the pairs a round creates go on the heap only when the round ends, as in the rescan.
    """
    symbols = list(symbols)  # a copy to merge in place: the caller's list stays as it was
    following = [*range(1, len(symbols)), -1]  # the symbol's right neighbour; -1 at the end
    preceding = list(range(-1, len(symbols) - 1))  # its left neighbour; -1 at the start
    heap = [(ranks[pair], i) for i, pair in enumerate(zip(symbols, symbols[1:])) if pair in ranks]
    heapq.heapify(heap)
    while heap:
        best, joined = heap[0][0], []
        while heap and heap[0][0] == best:
            left = heapq.heappop(heap)[1]
            right = following[left]
            if symbols[left] and right >= 0 and ranks.get((symbols[left], symbols[right])) == best:
                symbols[left], symbols[right] = symbols[left] + symbols[right], ""  # "" marks a symbol merged away
                following[left] = following[right]
                if following[right] >= 0:
                    preceding[following[right]] = left
                joined.append(left)
        for middle in joined:  # the new pairs on both sides of each joined symbol
            for left, right in ((preceding[middle], middle), (middle, following[middle])):
                rank = ranks.get((symbols[left], symbols[right])) if left >= 0 and right >= 0 else None
                if rank is not None:
                    heapq.heappush(heap, (rank, left))
    return [symbol for symbol in symbols if symbol]


class ByteLevelBPE:
    """Turns text into token ids with a vocabulary (id -> token text) and merges ("Ġ t" = join "Ġ" and "t")."""

    def __init__(self, tokens: Sequence[str], merges: Sequence[str], control_tokens: Sequence[str] = ()) -> None:
        self.tokens = check_strings(tokens, "tokens", minimum=1)
        self.ids = {token: index for index, token in enumerate(self.tokens)}
        merges = check_strings(merges, "merges")
        pairs = [tuple(merge.split(" ")) for merge in merges]
        self.ranks = {pair: rank for rank, pair in enumerate(pairs)}  # lower rank = merged first
        broken = next((merge for merge, pair in zip(merges, pairs)
                       if len(pair) != 2 or not all(pair) or "".join(pair) not in self.ids), None)
        if broken is not None:
            raise ValueError(bilingual(
                f"each merge must be two tokens separated by one space whose join is a token too; {broken!r} is not.",
                f"每条 merges 必须是用一个空格隔开的两个词元，而且两者连起来也是一个词元；{broken!r} 不是。"))
        self.to_byte = {character: byte for byte, character in byte_alphabet().items()}
        unknown = [token for token in check_strings(control_tokens, "control_tokens") if token not in self.ids or not token]
        if unknown:
            raise ValueError(bilingual(
                f"control_tokens must be non-empty tokens of the vocabulary; {unknown[0]!r} is empty or not one of `tokens`.",
                f"control_tokens 必须是词表里非空的词元；{unknown[0]!r} 是空串，或者不在 `tokens` 里。"))
        self.control = {token: self.ids[token] for token in control_tokens}
        longest_first = sorted(self.control, key=len, reverse=True)
        self.control_split = regex.compile("(" + "|".join(map(regex.escape, longest_first)) + ")") if longest_first else None
        self._merged: dict[str, list[str]] = {}  # piece -> its symbols after merging, remembered
        # the bytes the vocabulary has no token for (in SmolLM2's: six control characters, and 0xF1 and 0xF2,
        # which begin the UTF-8 of U+40000..U+BFFFF); a text holding one is refused, never silently shortened
        self.unwritable = bytes(byte for byte, character in byte_alphabet().items() if character not in self.ids)
        self._writable = bytes(byte for byte in range(256) if byte not in self.unwritable)

    @classmethod
    def from_gguf(cls, file: GGUFFile | str | os.PathLike) -> ByteLevelBPE:
        """The tokenizer stored in a GGUF file (`gguf_file.read_gguf()`, or a path): tokens, merges, control tokens."""
        file = check_file(file, "ByteLevelBPE.from_gguf")
        kind = setting(file, "tokenizer.ggml.model")
        if kind != "gpt2":
            raise ValueError(bilingual(
                f"This file's tokenizer is {kind!r}, not byte-level BPE ('gpt2').",
                f"这个文件的分词器是 {kind!r}，不是字节级 BPE（'gpt2'）。"))
        tokens = setting(file, "tokenizer.ggml.tokens")
        types = setting(file, "tokenizer.ggml.token_type")
        if not isinstance(types, list) or not isinstance(tokens, list) or len(types) != len(tokens) or not all(
                isinstance(kind, int) for kind in types):
            raise ValueError(bilingual(
                f"{file.path.name}: 'tokenizer.ggml.token_type' must give one integer type per token of "
                "'tokenizer.ggml.tokens'; the file is damaged.",
                f"{file.path.name}：'tokenizer.ggml.token_type' 应为 'tokenizer.ggml.tokens' 的每个词元给出一个整数类型；文件已损坏。"))
        control = [token for token, kind in zip(tokens, types) if kind == CONTROL]
        return cls(tokens, setting(file, "tokenizer.ggml.merges"), control)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def split(self, text: str) -> list[str]:
        """Step 2: the pieces BPE works on, each digit alone, then GPT-2's split of what is between digits."""
        return [piece for part in DIGIT.split(text) if part for piece in WORDS.findall(part)]

    def merge(self, piece: str) -> list[str]:
        """Steps 3-4 for one piece: its bytes as symbols, then the best-ranked merge of two neighbours, again and again."""
        if piece not in self._merged:
            alphabet = byte_alphabet()
            symbols = [alphabet[byte] for byte in piece.encode("utf-8")]  # encode() refused bytes without a token
            self._merged[piece] = merge_symbols(symbols, self.ranks)
        return self._merged[piece]

    def encode(self, text: str) -> list[int]:
        """The token ids of a text (no beginning-of-text token is added: this model's file asks for none).

        Decoding the ids gives the text back. A character the vocabulary cannot write (its UTF-8 holds
        a byte with no token) is refused with its position; Hugging Face's tokenizer and llama.cpp
        drop such bytes without a word.
        """
        self.check_writable(check_text(text))
        parts = self.control_split.split(text) if self.control_split else [text]
        ids = []
        for part in parts:
            if part in self.control:
                ids.append(self.control[part])
            else:
                ids += [self.ids[symbol] for piece in self.split(part) for symbol in self.merge(piece)]
        return ids

    def check_writable(self, text: str, name: str = "text") -> str:
        """Refuse a lone surrogate (not text at all) and a character whose bytes this vocabulary has no token for."""
        text = check_text(text, name)
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError as error:
            character = text[error.start]
            raise ValueError(bilingual(
                f"{name} holds a lone surrogate {ascii(character)} at position {error.start}, half of a character, which "
                "is not text; remove it (it often comes from text cut in the middle of an emoji).",
                f"{name} 在位置 {error.start} 有一个单独的代理码位 {ascii(character)}，它只是半个字符，不是文本；"
                "请删掉它（它常常来自在表情符号中间截断的文本）。")) from None
        if encoded.translate(None, delete=self._writable):  # any byte left is one without a token
            position, character = next((i, c) for i, c in enumerate(text) if set(c.encode("utf-8")) & set(self.unwritable))
            missing = next(byte for byte in character.encode("utf-8") if byte in self.unwritable)
            raise ValueError(bilingual(
                f"{name} holds {ascii(character)} (U+{ord(character):04X}) at position {position}, which this model's "
                f"vocabulary cannot write (it has no token for the byte 0x{missing:02X}); remove or replace it.",
                f"{name} 在位置 {position} 有字符 {ascii(character)}（U+{ord(character):04X}），这个模型的词表写不出它"
                f"（没有表示字节 0x{missing:02X} 的词元）；请删掉或换掉它。"))
        return text

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for (a control token: its own text)."""
        token = self.tokens[check_id(token_id, self.vocab_size)]
        if token in self.control:
            return token.encode("utf-8")
        return bytes(self.to_byte[character] for character in token)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """The text of a list of token ids; bytes that do not form whole UTF-8 characters show as "�"."""
        return b"".join(self.token_bytes(i) for i in check_ids(ids, self.vocab_size)).decode("utf-8", errors="replace")

    def labels(self, ids: Sequence[int] | torch.Tensor) -> list[str]:
        """A short readable label per token for plots: its text, a newline as "↵", broken UTF-8 as hex bytes <e4 bd>."""
        found = []
        for i in check_ids(ids, self.vocab_size):
            raw = self.token_bytes(i)
            try:
                found.append(raw.decode("utf-8").replace("\n", "↵"))
            except UnicodeDecodeError:
                found.append("<" + " ".join(f"{byte:02x}" for byte in raw) + ">")
        return found
