"""The byte-level BPE tokenizer of lesson 13 gives the token ids of Hugging Face's tokenizers, read from the same GGUF file.

The reference is `transformers`' tokenizer loaded offline from the file (a separate code base: Rust
`tokenizers`). transformers 5.23 does not know this file's pre-tokenizer name ("smollm": every digit
is its own piece, as in SmolLM2's own tokenizer.json and in llama.cpp) and falls back to GPT-2's split.
The two differ only where a run of spaces or newlines stands right before a number: "a  1" is
"a", "  ", "1" for SmolLM2 and "a", " ", " 1" for GPT-2's split. So every string is compared with a
second reference too, the same transformers tokenizer given SmolLM2's pre-tokenizer.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_utils.models.bpe_tokenizer import ByteLevelBPE, byte_alphabet, merge_symbols
from attention_utils.models.gguf_file import find_model_file
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")

LESSON_SENTENCES = [  # every text lesson 13 tokenizes
    "The capital of France is",
    "The largest planet in the solar system is",
    "def fibonacci(n):",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea, there lived an old fisherman. Every morning he took his boat out "
    "before sunrise, and every evening he came back with a basket of fish for the market. The children of the village "
    "loved to sit with him on the beach and listen to his stories about storms, whales and far-away islands. One day, "
    "a stranger arrived in the village and asked the fisherman to take him out to sea, to an island that",
    "The capital of France is Paris. It is known for the Eiffel Tower, which was built in 1889 for the World's Fair.",
    "Yesterday capital of France is Paris. It is known for the Eiffel Tower, which was built in 1889 for the World's Fair.",
    "Banana capital of France is Paris.", "! capital of France is Paris.",
    "注意力机制让模型学会关注重要的词元。",
    "Attention lets the model learn to focus on the important tokens.",
    "中国的首都是",
    "Mr and Mrs Dursley lived at number four, Privet Drive. One morning, Mr and Mrs",
    "Seven blue whales sang quietly under the frozen northern moon",
    " the" * 1000,
]
WORDS = ("the of and to in is was for that it with as his on be at by I this had not are but from or have an they "
         "which one you were her all she there would their we him been has when who will more no if out so said what "
         "up its about into than them can only other new some could time these two may then do first any my now such "
         "like our over man me even most made after also did many before must through back years where much your way "
         "well down should because each just those people Mr how too little state good very make world still own see "
         "men work long get here between both life being under never day same another know while last might us great "
         "old year off come since against go came right used take three attention model token query key value head "
         "don't it's we'll they're I've she'd Paris London AI GPU CPU softmax").split()
PUNCTUATION = [".", ",", "!", "?", ";", ":", "-", "--", "...", "(", ")", '"', "'", "$", "%", "#", "@", "&", "*"]
SPACES = [" ", " ", " ", " ", " ", "  ", "\n", "\n\n", "\t", "   "]


def random_english(rng: random.Random) -> str:
    """A string of English words, numbers, punctuation and uneven spacing."""
    parts = []
    for _ in range(rng.randint(1, 14)):
        kind = rng.random()
        if kind < 0.7:
            word = rng.choice(WORDS)
            parts.append(word.capitalize() if rng.random() < 0.15 else word.upper() if rng.random() < 0.03 else word)
        elif kind < 0.85:
            parts.append(rng.choice(PUNCTUATION))
        else:
            parts.append(str(rng.choice([rng.randint(0, 9), rng.randint(10, 2025), round(rng.uniform(0, 100), 2)])))
        parts.append(rng.choice(SPACES) if rng.random() < 0.8 else "")
    text = "".join(parts)
    return text.strip() if rng.random() < 0.7 else text


RANDOM_STRINGS = [random_english(random.Random(seed)) for seed in range(300)]
SPACES_BEFORE_A_NUMBER = regex.compile(r"\s{2,}\p{N}")


@pytest.fixture(scope="module")
def ours(smollm2) -> ByteLevelBPE:
    return smollm2[1]


@pytest.fixture(scope="module")
def transformers_tokenizers(transformers_tokenizer):
    """transformers' tokenizer as it reads the file (conftest's), and a copy given SmolLM2's own pre-tokenizer."""
    from tokenizers import Tokenizer, pre_tokenizers

    smollm = Tokenizer.from_str(transformers_tokenizer.backend_tokenizer.to_str())  # a copy, then SmolLM2's split
    smollm.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    return transformers_tokenizer, smollm


def test_byte_alphabet_is_gpt2s(ours):
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    assert byte_alphabet() == bytes_to_unicode()
    assert byte_alphabet()[ord(" ")] == "Ġ" and byte_alphabet()[ord("\n")] == "Ċ"


def test_lesson_sentences(ours, transformers_tokenizers):
    as_read, _ = transformers_tokenizers
    for sentence in LESSON_SENTENCES:
        assert ours.encode(sentence) == as_read.encode(sentence), sentence
        assert ours.decode(ours.encode(sentence)) == sentence


def test_a_few_hundred_random_english_strings(ours, transformers_tokenizers):
    as_read, smollm = transformers_tokenizers
    differ = []
    for text in RANDOM_STRINGS:
        ids = ours.encode(text)
        assert ids == smollm.encode(text).ids, text
        assert ours.decode(ids) == text == as_read.decode(ids)
        if ids != as_read.encode(text):
            differ.append(text)
    # only the known difference: spaces (or newlines) right before a number
    assert all(SPACES_BEFORE_A_NUMBER.search(text) for text in differ), differ
    agree = len(RANDOM_STRINGS) - len(differ)
    print(f"\n{agree} of {len(RANDOM_STRINGS)} random strings get the same ids as transformers' tokenizer as it reads "
          f"the file; all {len(RANDOM_STRINGS)} with SmolLM2's pre-tokenizer")


def test_the_known_difference_is_the_digit_split(ours, transformers_tokenizers):
    as_read, smollm = transformers_tokenizers
    text = "Chapter  1"  # two spaces before a digit
    assert ours.encode(text) == smollm.encode(text).ids != as_read.encode(text)
    assert ours.labels(ours.encode(text)) == ["Chapter", "  ", "1"]


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_any_text_at_all(ours, transformers_tokenizers, text):
    """Any Unicode text (Chinese, emoji, control characters): the same ids as SmolLM2's tokenizer, or, where the
    vocabulary cannot write a character (U+40000..U+BFFFF, six control characters), a refusal where it drops bytes."""
    _, smollm = transformers_tokenizers
    try:
        ids = ours.encode(text)
    except ValueError as error:
        assert "cannot write" in str(error) and "写不出" in str(error)
        assert smollm.decode(smollm.encode(text).ids) != text  # theirs loses the character without a word
        return
    assert ids == smollm.encode(text).ids and ours.decode(ids) == text


def test_chinese_becomes_bytes(ours):
    ids = ours.encode("注意力")
    assert len(ids) > 3  # three characters, nine UTF-8 bytes, more tokens than characters
    assert ours.decode(ids) == "注意力"
    assert any(label.startswith("<") for label in ours.labels(ids))  # pieces of characters, shown as bytes


def test_control_tokens_stay_whole(ours):
    assert ours.encode("<|im_start|>hi<|im_end|>")[0] == 1 and ours.encode("<|im_end|>") == [2]


@pytest.mark.parametrize("bad", [None, 3, ["The", "cat"], b"bytes"])
def test_a_prompt_must_be_text(ours, bad):
    with pytest.raises(TypeError, match="must be a str") as error:
        ours.encode(bad)
    assert "字符串" in str(error.value)


@pytest.mark.parametrize("bad", [[1, 49152], [-1], [1.5], [None], [True], ["a"], 5, "5", torch.tensor([[1, 2]]),
                                 np.array([[1, 2]])])
def test_ids_to_decode_are_checked(ours, bad):
    for method in (ours.decode, ours.labels):
        assert_contract_error(lambda: method(bad), "id")


@pytest.mark.parametrize("bad", [49152, -1, 2.0, None, torch.tensor([1, 2])])
def test_one_token_id_is_checked(ours, bad):
    assert_contract_error(lambda: ours.token_bytes(bad), "token id")


def test_ids_in_any_integer_form_decode_alike(ours):
    ids = ours.encode("The capital of France is")
    assert {ours.decode(form) for form in (ids, tuple(ids), torch.tensor(ids), np.array(ids), [np.int64(i) for i in ids])} \
        == {"The capital of France is"}


def merge_by_rescanning(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """The reference: GPT-2's rule as first written, rescanning the whole piece for the best pair each time (quadratic)."""
    symbols = list(symbols)
    while True:
        candidates = {pair for pair in zip(symbols, symbols[1:]) if pair in ranks}
        if not candidates:
            return symbols
        first, second = min(candidates, key=lambda pair: ranks[pair])
        rewritten, position = [], 0
        while position < len(symbols):
            if symbols[position] == first and symbols[position + 1:position + 2] == [second]:
                rewritten.append(first + second)
                position += 2
            else:
                rewritten.append(symbols[position])
                position += 1
        symbols = rewritten


class CountingRanks(dict):
    """The merge ranks, counting how many times a pair is looked up (the work a merge does, without a clock)."""

    lookups = 0

    def __getitem__(self, pair):
        self.lookups += 1
        return super().__getitem__(pair)

    def get(self, pair, default=None):
        self.lookups += 1
        return super().get(pair, default)

    def __contains__(self, pair):
        self.lookups += 1
        return super().__contains__(pair)


def test_equal_ranks_merge_leftmost_first_and_a_round_ends_before_new_pairs():
    """By hand: in "aaa" only the first two join; in "abab" both "ab" join before the better-ranked pair "ab a"
    that the first join creates is looked at (the rescan finishes a rank before it looks again)."""
    assert merge_symbols(list("aaa"), {("a", "a"): 0}) == ["aa", "a"]
    assert merge_symbols(list("aaaaa"), {("a", "a"): 0, ("aa", "aa"): 1}) == ["aaaa", "a"]
    assert merge_symbols(list("abab"), {("a", "b"): 1, ("ab", "a"): 0}) == ["ab", "ab"]
    assert merge_symbols(list("xabab"), {("a", "b"): 1, ("x", "ab"): 0, ("xab", "ab"): 2}) == ["xabab"]
    assert merge_symbols([], {}) == [] and merge_symbols(["a"], {("a", "a"): 0}) == ["a"]


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_heap_merge_equals_the_rescan_on_made_up_merges(data):
    """Random little merge lists over "abc" (a pair may join symbols that no earlier merge made, and a new
    pair may rank better than the one that made it) and random words: the same symbols as the rescan."""
    pieces = ["a", "b", "c", "ab", "ba", "aa", "bc", "abc", "aab", "aaa", "baa"]
    pairs = data.draw(st.lists(st.tuples(st.sampled_from(pieces), st.sampled_from(pieces)), max_size=14, unique=True))
    ranks = {pair: rank for rank, pair in enumerate(pairs)}
    word = data.draw(st.text(alphabet="abc", max_size=40))
    assert merge_symbols(list(word), ranks) == merge_by_rescanning(list(word), ranks)


ADVERSARIAL = [letters * count for letters in ["a", "l", "ab", "aab", "aba", "ing", "the", "ACGT", "é", "注意", "😀", "Ġ",
                                               "=", "-_", " ", "\n", "0", "ss", "mmmm"] for count in (1, 2, 3, 5, 8, 13, 64)]
ADVERSARIAL += ["aaaab" * 7 + "a", "abababa", "aabaabaa" * 3, "ACGGTCA" * 9 + "AC", "Mississippi" * 4, "lll" + "l" * 61]


def assert_like_both_references(ours: ByteLevelBPE, smollm, text: str) -> None:
    """Every piece of `text` merges as the rescan merges it, and the whole text gets transformers' ids."""
    for piece in ours.split(text):
        symbols = [byte_alphabet()[byte] for byte in piece.encode("utf-8")]
        assert merge_symbols(symbols, ours.ranks) == merge_by_rescanning(symbols, ours.ranks), piece
    assert ours.encode(text) == smollm.encode(text).ids, text


@pytest.mark.parametrize("alphabet", ["a", "ab", "ACGT", "lo", "abcdefghijklmnopqrstuvwxyz", "aé注 ", "=+/0aA"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_random_words_over_small_alphabets(ours, transformers_tokenizers, alphabet, data):
    """SmolLM2's merges on long runs, repeats and overlaps: the rescan's symbols, transformers' ids (Rust `tokenizers`)."""
    assert_like_both_references(ours, transformers_tokenizers[1], data.draw(st.text(alphabet=alphabet, max_size=300)))


def test_adversarial_words(ours, transformers_tokenizers):
    for text in ADVERSARIAL:
        assert_like_both_references(ours, transformers_tokenizers[1], text)


def test_a_30000_letter_word(ours, transformers_tokenizers):
    """One long "word" (a run of one letter, a DNA string, a base64-like blob of letters) is tokenized like
    transformers' tokenizer does, with a number of pair look-ups that grows with its length, not its square."""
    _, smollm = transformers_tokenizers
    rng = random.Random(44)
    words = {"run": "a" * 30_000, "dna": "".join(rng.choices("ACGT", k=30_000)),
             "blob": "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", k=30_000))}
    for name, word in words.items():
        ranks = CountingRanks(ours.ranks)
        symbols = merge_symbols([byte_alphabet()[byte] for byte in word.encode("utf-8")], ranks)
        assert [ours.ids[symbol] for symbol in symbols] == smollm.encode(word).ids, name
        # at most 7 a letter: a pair is looked up when it is pushed and when it is popped, a join pushes two at most
        assert ranks.lookups <= 7 * len(word), (name, ranks.lookups)
        if name != "blob":  # the rescan is quick where few different pairs occur (the blob takes it about a minute)
            assert symbols == merge_by_rescanning(list(word), ours.ranks), name
