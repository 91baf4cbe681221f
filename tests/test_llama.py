"""Lesson 13's model, built from the series' attention, agrees with transformers' Llama on the same GGUF file.

The reference: `transformers` 5.23 loads the file offline (HF_HUB_OFFLINE=1), dequantizes it itself,
turns the interleaved query/key rows back into its own "halves" rotary layout, and runs its own Llama
code (its RMSNorm, rotary, repeat_kv, attention and MLP). Both sides compute in float32 from the same
dequantized numbers, so only the order of the floating-point operations differs.

Tolerance on logits: 1e-3 absolute, on logits of size 20 to 40. Each float32 operation rounds at
about 1e-7 of its size; through 30 blocks of sums over 576 and 1,536 features this grows to about
1e-4 (the largest difference measured here was 9e-5). A real mistake is far above: a wrong rotary
layout or a wrong pairing of key/value heads moves logits by more than 1 (tested below).
"""

from __future__ import annotations

import pytest
import torch

from attention_utils.inference.generation import generate
from attention_utils.inference.kv_cache import KVCache
from attention_utils.models.llama import LlamaModel, model_inputs
from contract_helpers import assert_contract_error

pytestmark = pytest.mark.usefixtures("one_thread")

TOLERANCE = 1e-3
PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a little",
    "def add(a, b):\n    return",
    "Water boils at a temperature of",
    "The three primary colors are red,",
    "<|im_start|>user\nName a planet.<|im_end|>\n<|im_start|>assistant\n",
]


@pytest.fixture(scope="module")
def ours(smollm2) -> tuple[LlamaModel, object]:
    return smollm2


@pytest.fixture(scope="module")
def reference(transformers_smollm2):
    """transformers' Llama, loading the same GGUF file offline (conftest's, shared with test_batched_generation.py)."""
    return transformers_smollm2


def test_logits_agree_with_transformers(ours, reference):
    model, tokenizer = ours
    largest = 0.0
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = model_inputs(tokenizer, prompt)
            ours_logits, theirs = model(ids), reference(ids).logits
            largest = max(largest, (ours_logits - theirs).abs().max().item())
            assert torch.equal(ours_logits.argmax(-1), theirs.argmax(-1)), prompt
    print(f"\nlargest logit difference over {len(PROMPTS)} prompts: {largest:.2e} (tolerance {TOLERANCE:g})")
    assert largest < TOLERANCE


def test_greedy_tokens_agree_with_transformers(ours, reference):
    model, tokenizer = ours
    for prompt in PROMPTS[:3] + PROMPTS[-1:]:
        ids = model_inputs(tokenizer, prompt)
        theirs = reference.generate(ids, max_new_tokens=8, do_sample=False)
        assert torch.equal(generate(model, ids, 8, KVCache(model.config.num_layers)).tokens, theirs), prompt
    ids = model_inputs(tokenizer, PROMPTS[0])
    assert tokenizer.decode(generate(model, ids, 2, KVCache(30)).tokens[0, ids.shape[1]:]) == " Paris."


def test_cached_and_uncached_generation_give_the_same_tokens(ours):
    model, tokenizer = ours
    ids = model_inputs(tokenizer, PROMPTS[1])
    assert torch.equal(generate(model, ids, 8).tokens, generate(model, ids, 8, KVCache(30)).tokens)


def test_the_wrong_rotary_layout_breaks_the_model(ours, reference):
    """The file stores queries and keys for interleaved pairs; read as halves, the logits move far beyond the tolerance."""
    model, tokenizer = ours
    ids = model_inputs(tokenizer, PROMPTS[0])
    with torch.no_grad():
        for block in model.blocks:
            block.attention.rotary_layout = "halves"
        try:
            wrong = model(ids)
        finally:
            for block in model.blocks:
                block.attention.rotary_layout = "interleaved"
        assert (wrong - reference(ids).logits).abs().max().item() > 1.0


def test_the_shared_angles_and_mask_give_what_each_layer_computes_alone(ours):
    """The model builds rotary tables and the mask once for all layers; each layer checking and masking itself agrees."""
    model, tokenizer = ours
    ids = model_inputs(tokenizer, PROMPTS[1])
    with torch.no_grad():
        torch.testing.assert_close(model(ids), model._forward_layer_by_layer(ids, None), rtol=0, atol=1e-4)


def test_a_window_on_the_layers_is_obeyed(ours):
    """Lesson 13 puts a sliding window on every layer: the model then masks each layer as the layer says."""
    from attention_utils.models.head_scores import windowed

    model, tokenizer = ours
    ids = model_inputs(tokenizer, PROMPTS[1] + " girl who lived in a small house near the forest")
    with torch.no_grad():
        full = model(ids)
        with windowed(model, 4):
            narrow = model(ids)
    assert (narrow[0, -1] - full[0, -1]).abs().max().item() > 0.1  # far keys hidden: the last token's scores move
    torch.testing.assert_close(narrow[0, :4], full[0, :4], rtol=0, atol=1e-4)  # tokens 0-3 see no more than 4 keys anyway


def test_a_hook_that_replaces_an_attention_output_takes_effect(ours):
    """Lesson 13 replaces each attention's output with a hook; the model uses what the hook returns."""
    model, tokenizer = ours
    ids = model_inputs(tokenizer, PROMPTS[0])
    hooks = [block.attention.register_forward_hook(lambda module, inputs, output: torch.zeros_like(output))
             for block in model.blocks]
    try:
        with torch.no_grad():
            silenced = model(ids)
    finally:
        for hook in hooks:
            hook.remove()
    x = model.token_embedding(ids)  # with every attention silenced, only the feed-forward layers act
    with torch.no_grad():
        for block in model.blocks:
            x = x + block.feed_forward(block.feed_forward_norm(x))
        expected = model.final_norm(x) @ model.token_embedding.weight.T
    torch.testing.assert_close(silenced, expected, rtol=0, atol=1e-4)


@pytest.mark.parametrize("bad", [None, 42, ["The", "capital"], b"The capital"])
def test_a_prompt_must_be_text(ours, bad):
    _, tokenizer = ours
    with pytest.raises(TypeError, match="prompt must be a str"):
        model_inputs(tokenizer, bad)


def test_an_empty_prompt_is_refused(ours):
    _, tokenizer = ours
    with pytest.raises(ValueError, match="has no tokens") as error:
        model_inputs(tokenizer, "")
    assert "没有任何词元" in str(error.value)


def test_a_prompt_of_a_character_the_vocabulary_cannot_write_is_named(ours):
    """0x04 has no token in SmolLM2's vocabulary: the prompt is refused, naming it, rather than shortened in silence."""
    _, tokenizer = ours
    with pytest.raises(ValueError, match=r"U\+0004") as error:
        model_inputs(tokenizer, "\x04")
    assert "写不出" in str(error.value)


def test_a_prompt_longer_than_the_context_is_refused(ours):
    model, tokenizer = ours
    with pytest.raises(ValueError, match="8200 tokens") as error:
        model_inputs(tokenizer, " the" * 8200, model.config.context_length)
    assert "at most 8192" in str(error.value) and "上下文长度" in str(error.value)
    cache = KVCache(30)
    model(torch.ones(1, 2, dtype=torch.long), cache=cache)  # the cache now holds 2 tokens
    with pytest.raises(ValueError, match="context_length"):
        model(torch.ones(1, 8191, dtype=torch.long), cache=cache)  # 2 + 8191 > 8192, refused before any work


@pytest.mark.parametrize("bad", [[], KVCache(3), "cache"])
def test_the_cache_must_be_one_kvcache_for_the_model(ours, bad):
    model, _ = ours
    with pytest.raises(TypeError, match="KVCache\\(30\\)"):
        model(torch.tensor([[1, 2]]), cache=bad)


@pytest.mark.parametrize("bad, error", [(torch.zeros(1, 3), TypeError), ([[1, 2]], TypeError),
                                        (torch.tensor([1, 2]), ValueError), (torch.tensor([[1, 49152]]), ValueError)])
def test_token_ids_are_checked(ours, bad, error):
    model, _ = ours
    with pytest.raises(error):
        model(bad)


@pytest.mark.parametrize("bad", [None, "tokenizer", lambda text: [1, 2]])
def test_model_inputs_needs_the_tokenizer(bad):
    assert_contract_error(lambda: model_inputs(bad, "The capital"), "tokenizer", kind=TypeError)


def test_a_new_model_starts_its_table_as_nn_embedding_does():
    """LlamaModel draws its embedding table with randn (see __init__): the same numbers nn.Embedding's own start draws."""
    from attention_utils.models.llama import LlamaConfig

    config = LlamaConfig(vocab_size=50, d_model=8, num_layers=1, num_heads=2, num_kv_heads=1, d_ff=16,
                         context_length=16, rotary_base=10000.0, norm_eps=1e-5)
    torch.manual_seed(7)
    table = LlamaModel(config).token_embedding
    torch.manual_seed(7)
    assert torch.equal(table.weight, torch.nn.Embedding(50, 8).weight)
    assert table.weight.requires_grad


def test_loading_the_model_does_not_import_the_compiler():
    """from_gguf builds its shapes on the meta device; an init that imports torch._dynamo there cost 2.5 s of a 4.5 s load."""
    import subprocess
    import sys

    code = ("import sys; from attention_utils.models.llama import load_smollm2; load_smollm2(); "
            "print('torch._dynamo' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert found.stdout.strip() == "False", found.stdout + found.stderr[-2000:]
