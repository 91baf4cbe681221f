"""Greedy speculative decoding on SmolLM2 gives transformers' own greedy tokens on the same GGUF file, with each draft.

transformers reads and dequantizes the file itself and decodes with its own cache and attention, so it is a
reference that shares no code with the package. The prompts are not the lesson's.
"""

from __future__ import annotations

import pytest
import torch

from attention_utils.inference.kv_cache import KVCache
from attention_utils.inference.speculative import ModelDraft, PromptLookup, early_exit, speculative_greedy
from attention_utils.inference.weight_formats import to_format

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = ["The three primary colors are", "def fibonacci(n):\n    if n"]
NEW = 20


DRAFTS = {"prompt lookup": lambda model: PromptLookup(3),
          "early exit": lambda model: ModelDraft(early_exit(model, 6), KVCache(6)),
          "bfloat16": lambda model: ModelDraft(to_format(model, "bfloat16"), KVCache(model.config.num_layers))}


@pytest.mark.parametrize("name", DRAFTS)
def test_greedy_speculation_equals_transformers_greedy(name, smollm2, transformers_smollm2):
    model, tokenizer = smollm2
    draft = DRAFTS[name](model)
    for text in PROMPTS:
        ids = torch.tensor([tokenizer.encode(text)])
        with torch.no_grad():
            theirs = transformers_smollm2.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW,
                                                   do_sample=False, pad_token_id=0)
        run = speculative_greedy(model, ids, NEW, KVCache(model.config.num_layers), draft, k=4)
        assert run.tokens[0].tolist() == theirs[0].tolist(), (name, text)
        assert run.passes < NEW - 1 or name != "bfloat16"  # a bfloat16 copy of the model agrees often enough to save passes
