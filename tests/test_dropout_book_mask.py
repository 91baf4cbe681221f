"""Lesson 6's claim: the book's printed dropout mask is what MKL draws on Intel CPUs for seed 123.

On an Intel CPU, PyTorch's CPU `bernoulli_` with a scalar probability (what `nn.Dropout` uses) takes
one 32-bit number from torch's generator as a seed and draws the coins from MKL's MCG31m1 stream
with the inverse-CDF Bernoulli method (`bernoulli_scalar_kernel` in PyTorch's
aten/src/ATen/native/cpu/DistributionKernels.cpp). MCG31m1 is x <- 1132489760 * x mod (2^31 - 1),
u = x / (2^31 - 1), as documented in Intel's Vector Statistics notes; a coin is 1 when u < p.
Rebuilt here with numpy, that stream gives the book's mask exactly, whatever CPU runs the test.
"""

import numpy as np
import torch

BOOK_MASK = np.array([[1, 1, 1, 1, 1, 1],  # torch.manual_seed(123); nn.Dropout(0.5)(torch.ones(6, 6)) in the book
                      [0, 1, 0, 0, 0, 0],
                      [0, 0, 1, 0, 1, 0],
                      [1, 1, 0, 0, 0, 1],
                      [1, 0, 0, 0, 0, 1],
                      [0, 1, 0, 0, 0, 0]], dtype=bool)
MODULUS, MULTIPLIER = 2**31 - 1, 1132489760


def torch_generator_words(seed: int, count: int) -> list[int]:
    """The first 32-bit outputs of torch's CPU generator after manual_seed(seed): an MT19937 seeded like numpy's legacy one."""
    bits = np.random.MT19937(0)
    bits._legacy_seeding(seed)
    return [int(bits.random_raw()) for _ in range(count)]


def mkl_bernoulli(seed: int, count: int, p: float) -> np.ndarray:
    """MKL's viRngBernoulli (inverse CDF) on an MCG31m1 stream started from `seed`."""
    state = seed % MODULUS or 1
    coins = []
    for _ in range(count):
        coins.append(state / MODULUS < p)
        state = MULTIPLIER * state % MODULUS
    return np.array(coins)


def test_numpy_mt19937_is_torchs_cpu_generator():
    words = torch_generator_words(123, 6)
    torch.manual_seed(123)
    drawn = torch.empty(3, dtype=torch.int64).random_(0, 2**31).tolist()  # one 64-bit draw (two words) each
    assert drawn == [word & 0x7FFFFFFF for word in words[1::2]]


def test_mkl_stream_reproduces_the_books_mask():
    seed = torch_generator_words(123, 1)[0]  # what bernoulli_scalar_kernel takes from torch's generator
    assert (mkl_bernoulli(seed, 36, 0.5).reshape(6, 6) == BOOK_MASK).all()
    assert not (mkl_bernoulli(seed + 1, 36, 0.5).reshape(6, 6) == BOOK_MASK).all()  # the seed matters


def test_torch_bernoulli_with_a_probability_tensor_is_not_the_mkl_path():
    torch.manual_seed(123)
    tensor_coins = torch.bernoulli(torch.full((6, 6), 0.5)).bool().numpy()
    assert not (tensor_coins == BOOK_MASK).all()  # torch's own generator, on every CPU
