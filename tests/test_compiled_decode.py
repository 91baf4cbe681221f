"""The compiled decode step over a fixed-size cache computes what the eager model computes with its growing KVCache."""

from __future__ import annotations

import pytest
import torch

from attention_utils.models.compiled_decode import CompiledDecoder
from attention_utils.inference.kv_cache import KVCache
from contract_helpers import assert_contract_error
from tiny_models import tiny_llama


def eager_and_fixed(model, decoder: CompiledDecoder, prompt: torch.Tensor, steps: int) -> list[tuple]:
    """(model's scores, decoder's scores) for the prompt and each greedy step, the model's own KVCache as the reference."""
    cache = KVCache(model.config.num_layers)
    pairs = [(model(prompt, cache=cache), decoder.prefill(prompt))]
    for index in range(steps):
        token = pairs[-1][0][:, -1:].argmax(-1)  # the model's greedy pick, fed to both
        if index % 3 == 2:  # every third step takes two tokens, as a speculative draft does after a pass kept them all
            token = torch.cat([token, (token + 1) % model.config.vocab_size], dim=1)
        pairs.append((model(token, cache=cache), decoder.step(token)))
    return pairs


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_steps_equal_the_models_own_decoding(compiled):
    model = tiny_llama(16, 4, 2, seed=3)  # float64; 4 query heads share 2 key/value heads
    prompt = torch.randint(0, 30, (2, 5), generator=torch.Generator().manual_seed(0))
    decoder = CompiledDecoder(model, 16, batch=2, compiled=compiled)
    pairs = eager_and_fixed(model, decoder, prompt, steps=8)
    assert torch.equal(*pairs[0])  # the prefill is the model's own call
    for eager, fixed in pairs[1:]:
        # empty slots are masked out exactly; the sums run in another order (compiled kernels, longer buffers)
        torch.testing.assert_close(fixed, eager, rtol=1e-12, atol=1e-12)
    assert decoder.position == 15  # 5 + 8 steps, two of them of two tokens
    decoder.prefill(prompt[:, :3])  # a new prompt starts over
    assert decoder.position == 3


def test_a_new_prefill_forgets_the_earlier_tokens():
    model = tiny_llama(16, 4, 4, seed=1)
    decoder = CompiledDecoder(model, 12, compiled=False)
    decoder.prefill(torch.tensor([[5, 6, 7, 8, 9, 10]]))
    decoder.prefill(torch.tensor([[1, 2]]))
    cache = KVCache(2)
    model(torch.tensor([[1, 2]]), cache=cache)
    torch.testing.assert_close(decoder.step(torch.tensor([[3]])), model(torch.tensor([[3]]), cache=cache),
                               rtol=1e-12, atol=1e-12)


def test_errors_say_what_to_do():
    model = tiny_llama(16, 4, 2, seed=0)
    decoder = CompiledDecoder(model, 6, batch=1, compiled=False)
    assert_contract_error(lambda: decoder.step(torch.tensor([[1]])), "prefill", kind=ValueError)
    assert_contract_error(lambda: decoder.prefill(torch.zeros(2, 3, dtype=torch.long)), "batch=2", kind=ValueError)
    assert_contract_error(lambda: decoder.prefill(torch.zeros(1, 7, dtype=torch.long)), "max_tokens", kind=ValueError)
    decoder.prefill(torch.zeros(1, 6, dtype=torch.long))
    assert_contract_error(lambda: decoder.step(torch.tensor([[1]])), "max_tokens", kind=ValueError)
    decoder.prefill(torch.zeros(1, 5, dtype=torch.long))
    assert_contract_error(lambda: decoder.step(torch.tensor([[1, 2]])), "max_tokens", kind=ValueError)  # room for one
    assert_contract_error(lambda: decoder.step(torch.tensor([[1, 2, 3]])), "step", "(1, 3)", kind=ValueError)
    assert_contract_error(lambda: decoder.step(torch.tensor([[99]])), "29", kind=ValueError)  # ids 0..29
    assert_contract_error(lambda: CompiledDecoder("model", 8), "LlamaModel", kind=TypeError)
    assert_contract_error(lambda: CompiledDecoder(model, 65), "max_tokens", kind=ValueError)  # context length 64
    model.blocks[0].attention.window = 4
    assert_contract_error(lambda: CompiledDecoder(model, 8), "CompiledDecoder", "window", kind=ValueError)
    model.blocks[0].attention.window = None
    import torch._inductor.config as inductor_config

    decoder = CompiledDecoder(model, 8)
    decoder.prefill(torch.tensor([[1, 2]]))
    # inductor's own patch, undone on leaving (monkeypatch's undo deleted the setting, breaking later compiles)
    with inductor_config.patch({"cpp.cxx": ("/nonexistent/g++",)}), pytest.raises(RuntimeError, match="C\\+\\+ compiler") as failed:
        decoder.step(torch.tensor([[3]]))
    english, chinese = str(failed.value).splitlines()
    assert "compiled=False" in english and "compiled=False" in chinese and "编译器" in chinese


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_compiled_draft_proposes_what_a_model_draft_proposes_and_keeps_greedy_exact(compiled):
    from attention_utils.inference.generation import generate
    from attention_utils.inference.speculative import ModelDraft, speculative_greedy
    from attention_utils.models.compiled_decode import CompiledDraft

    model, draft_model = tiny_llama(16, 4, 2, seed=3), tiny_llama(16, 4, 2, seed=4)  # the draft: another model
    ours, theirs = CompiledDraft(CompiledDecoder(draft_model, 40, compiled=compiled)), ModelDraft(draft_model, KVCache(2))
    text = [3, 1, 4, 1, 5]
    for k, kept in [(4, 2), (3, 3), (2, 0), (5, 1)]:  # each time keep `kept` of the proposal and add one other token
        proposal = ours.propose(text, k)
        assert proposal == theirs.propose(text, k) and len(proposal) == k
        text = text + proposal[:kept] + [(proposal[kept] + 1) % 30 if kept < k else 7]
    assert ours.propose([9, 8], 3) == theirs.propose([9, 8], 3)  # another text starts over
    assert ours.propose([9], 0) == []
    prompt = torch.tensor([[2, 7, 1, 8]])
    run = speculative_greedy(model, prompt, 12, KVCache(2), CompiledDraft(CompiledDecoder(draft_model, 40, compiled=compiled)), k=3)
    assert torch.equal(run.tokens, generate(model, prompt, 12, KVCache(2)).tokens)
    assert_contract_error(lambda: CompiledDraft(CompiledDecoder(draft_model, 8, batch=2, compiled=False)), "batch=1", "batch=2", kind=TypeError)
    decoder = CompiledDecoder(draft_model, 8, compiled=False)
    decoder.prefill(torch.tensor([[1, 2, 3]]))
    assert_contract_error(lambda: decoder.rewind(4), "rewind", "prefill", kind=ValueError)
    assert_contract_error(lambda: decoder.rewind(0), "rewind", kind=ValueError)


def test_after_a_pass_that_kept_every_drafted_token_the_compiled_draft_reads_both_tokens_in_one_step():
    from attention_utils.models.compiled_decode import CompiledDraft

    decoder = CompiledDecoder(tiny_llama(16, 4, 2, seed=4), 20, compiled=False)
    steps = []
    original = decoder.step
    decoder.step = lambda tokens: steps.append(tokens.shape[1]) or original(tokens)
    draft = CompiledDraft(decoder)
    proposal = draft.propose([3, 1, 4], 3)  # a prefill, then two steps: the last proposed token is not read yet
    assert steps == [1, 1]
    draft.propose([3, 1, 4, *proposal, 7], 1)  # every drafted token kept, then the model's own: one step of both
    assert steps == [1, 1, 2]
