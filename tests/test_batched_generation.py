"""Batched greedy generation with left padding (lesson 14) gives what each prompt alone gives, and what transformers gives.

Two independent references: the package's one-prompt-at-a-time `generate` (no padding, no mask,
positions from 0), and transformers' own batched `generate` on the same GGUF file with its
tokenizer padding on the left (its attention mask and position ids are its own code).

Tolerance on logits: 1e-3 absolute, as in test_llama.py. A batch multiplies the weights by a
(B, d) matrix instead of a vector, so torch may sum in another order; the rounding of float32 through
30 blocks stays near 1e-4. A padding token that leaked into attention, or positions that did not
start at the prompt's first real token, moves the logits by far more than 1e-3 (tested below).
"""

from __future__ import annotations

import copy

import pytest
import torch

from attention_utils.inference.batched_generation import generate_batch, left_pad
from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")

TOLERANCE = 1e-3
PROMPTS = ["The capital of France is", "Water boils at a temperature of", "One, two, three, four,",
           "Once upon a time, there was a little girl who"]
NEW = 8


@pytest.fixture(scope="module")
def batched(smollm2):
    model, tokenizer = smollm2
    ids = [tokenizer.encode(prompt) for prompt in PROMPTS]
    assert len({len(row) for row in ids}) > 1, "the prompts must differ in length, or nothing is padded"
    return ids, generate_batch(model, ids, NEW, KVCache(model.config.num_layers))


def test_left_pad_by_hand():
    tokens, padding = left_pad([[5, 6, 7], [8]], pad_id=2)
    assert tokens.tolist() == [[5, 6, 7], [2, 2, 8]]
    assert padding.tolist() == [[False, False, False], [True, True, False]]


def test_each_row_equals_its_prompt_alone(smollm2, batched):
    model, _ = smollm2
    ids, together = batched
    largest = 0.0
    for row, prompt in enumerate(ids):
        alone = generate(model, torch.tensor([prompt]), NEW, KVCache(model.config.num_layers))
        assert together.new_tokens[row].tolist() == alone.tokens[0, len(prompt):].tolist(), PROMPTS[row]
        largest = max(largest, (together.logits[row] - alone.logits[0]).abs().max().item())
    print(f"\nlargest logit difference, batch vs alone: {largest:.2e} (tolerance {TOLERANCE:g})")
    assert largest < TOLERANCE


def test_padding_that_leaks_changes_the_logits(smollm2, batched):
    """The failure the mask prevents: the same padded batch without its mask is far from the prompt alone."""
    model, _ = smollm2
    ids, together = batched
    tokens, _ = left_pad(ids)
    with torch.no_grad():
        unmasked = model(tokens)[:, -1]
    assert (unmasked - together.logits[:, 0]).abs().max() > 100 * TOLERANCE


def test_batch_equals_transformers_batched_generation(smollm2, batched, transformers_smollm2, transformers_tokenizer):
    reference = transformers_smollm2  # conftest's, shared with test_llama.py
    their_tokenizer = copy.deepcopy(transformers_tokenizer)  # shared with test_bpe_tokenizer.py: padded on a copy
    their_tokenizer.padding_side = "left"
    their_tokenizer.pad_token = their_tokenizer.eos_token
    inputs = their_tokenizer(PROMPTS, return_tensors="pt", padding=True)
    ids, together = batched
    assert inputs["input_ids"].shape[1] == together.padding.shape[1]
    with torch.no_grad():
        theirs = reference.generate(**inputs, max_new_tokens=NEW, do_sample=False,
                                    pad_token_id=their_tokenizer.pad_token_id)
    assert torch.equal(theirs[:, inputs["input_ids"].shape[1]:], together.new_tokens)


def test_contract(smollm2):
    model, _ = smollm2
    assert_contract_error(lambda: left_pad("The capital"), "prompts", kind=TypeError)
    assert_contract_error(lambda: left_pad([]), "prompts", kind=TypeError)
    assert_contract_error(lambda: left_pad([[1, 2], []]), "prompts[1]", kind=ValueError)
    assert_contract_error(lambda: left_pad([[1, -2]]), "prompts[0]", kind=ValueError)
    assert_contract_error(lambda: left_pad([torch.ones(2, 2, dtype=torch.long)]), "prompts[0]", kind=TypeError)
    assert_contract_error(lambda: left_pad([[1]], pad_id=-1), "pad_id", kind=ValueError)
    assert_contract_error(lambda: generate_batch(model, [[1]], -1, KVCache(30)), "new_tokens")
    assert_contract_error(lambda: generate_batch("model", [[1]], 1, KVCache(30)), "model", kind=TypeError)
    assert_contract_error(lambda: generate_batch(model, [[1]], 1, None), "cache", kind=ValueError)
    used = KVCache(30)
    generate_batch(model, [[1, 2]], 1, used)
    assert_contract_error(lambda: generate_batch(model, [[1]], 1, used), "cache", kind=ValueError)
    assert_contract_error(lambda: model(torch.tensor([[1], [2]]), cache=used), "cache", kind=ValueError)
    assert_contract_error(lambda: model(torch.tensor([[1, 2]]), padding_mask=torch.zeros(1, 3, dtype=torch.bool)),
                          "padding_mask", kind=ValueError)
