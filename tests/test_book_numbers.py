"""The package reproduces the values printed in the book's chapter 3, to 4 decimals.

Expected tensors are typed from the book's printed outputs: an independent source. (Seed 004, a
reader's annotated copy of the chapter's notebook, prints the same values except in its dropout
cells, which show the mask an Intel CPU draws; the book's dropout mask is in test_dropout_book_mask.py.)
"""

import torch

import attention_utils as au


def close(actual: torch.Tensor, printed: list) -> bool:
    return torch.allclose(actual.detach(), torch.tensor(printed), atol=6e-5)


def test_scores_and_weights_for_journey():
    inputs = au.example_inputs()
    scores = au.attention_scores(inputs[1], inputs)
    assert close(scores, [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    assert close(au.sum_normalize(scores), [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])
    weights = au.naive_softmax(scores)
    assert close(weights, [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
    assert close(weights @ inputs, [0.4419, 0.6515, 0.5683])


def test_all_pairs_scores_weights_and_context():
    inputs = au.example_inputs()
    scores = au.attention_scores(inputs, inputs)
    assert close(scores[0], [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310])
    weights = au.stable_softmax(scores)
    assert close(weights[0], [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452])
    assert close((weights @ inputs)[0], [0.4421, 0.5931, 0.5790])


def test_self_attention_v1_seed_123():
    torch.manual_seed(123)
    sa_v1 = au.SelfAttentionV1(3, 2)
    out = sa_v1(au.example_inputs())
    assert close(out, [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                       [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    # the step-by-step numbers for the second token
    assert close(au.example_inputs()[1] @ sa_v1.W_query, [0.4306, 1.4551])


def test_self_attention_v2_seed_789():
    torch.manual_seed(789)
    out = au.SelfAttentionV2(3, 2)(au.example_inputs())
    assert close(out, [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                       [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])


def test_causal_weights_from_v2():
    torch.manual_seed(789)
    sa_v2 = au.SelfAttentionV2(3, 2)
    inputs = au.example_inputs()
    queries, keys, values = sa_v2.W_query(inputs), sa_v2.W_key(inputs), sa_v2.W_value(inputs)
    _, weights = au.scaled_dot_product_attention(queries, keys, values, mask=au.causal_mask(6))
    assert close(weights[1], [0.5517, 0.4483, 0, 0, 0, 0])
    assert close(weights[4], [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0])


CAUSAL_OUT = [[-0.4519, 0.2216], [-0.5874, 0.0058], [-0.6300, -0.0632],
              [-0.5675, -0.0843], [-0.5526, -0.0981], [-0.5299, -0.1081]]


def test_causal_attention_seed_123():
    torch.manual_seed(123)
    out = au.CausalAttention(3, 2, 6, 0.0)(au.example_batch())
    assert out.shape == (2, 6, 2)
    assert close(out[0], CAUSAL_OUT) and close(out[1], CAUSAL_OUT)


def test_wrapper_seed_123():
    torch.manual_seed(123)
    out = au.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)(au.example_batch())
    assert out.shape == (2, 6, 4)
    second_head = [[0.4772, 0.1063], [0.5891, 0.3257], [0.6202, 0.3860],
                   [0.5478, 0.3589], [0.5321, 0.3428], [0.5077, 0.3493]]
    assert close(out[0, :, :2], CAUSAL_OUT) and close(out[1, :, 2:], second_head)


def test_multihead_attention_seed_123():
    torch.manual_seed(123)
    out = au.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)(au.example_batch())
    printed = [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593],
               [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]]
    assert out.shape == (2, 6, 2)
    assert close(out[0], printed) and close(out[1], printed)


def test_four_d_matmul_example():
    a = torch.tensor([[[[0.2745, 0.6584, 0.2775, 0.8573],
                        [0.8993, 0.0390, 0.9268, 0.7388],
                        [0.7179, 0.7058, 0.9156, 0.4340]],
                       [[0.0772, 0.3565, 0.1479, 0.5331],
                        [0.4066, 0.2318, 0.4545, 0.9737],
                        [0.4606, 0.5159, 0.4220, 0.5786]]]])
    scores = au.attention_scores(a, a)
    assert close(scores[0, 0, 1], [1.1631, 2.2150, 1.8424])
    assert close(scores[0, 1, 2], [0.5903, 1.0620, 0.9912])
