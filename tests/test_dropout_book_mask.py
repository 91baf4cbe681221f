"""Lesson 6's claims about the book's dropout mask, checked against the book's printed matrix.

The book (section 3.5.2, and its chapter 3 notebook) prints the mask of `torch.manual_seed(123)`
followed by `nn.Dropout(0.5)(torch.ones(6, 6))`: BOOK_MASK, typed from the page. PyTorch's CPU
`bernoulli_` with a scalar probability (what `nn.Dropout` uses) branches on the CPU's maker in builds
with MKL (`bernoulli_scalar_kernel`, aten/src/ATen/native/cpu/DistributionKernels.cpp; pytorch#121595):

- on AMD and Apple CPUs it uses torch's own generator: an MT19937 seeded like numpy's legacy one; each
  coin takes one 64-bit draw (two 32-bit words, the first one high), keeps its low 53 bits as a
  uniform u in [0, 1) and keeps the entry when u < 1 - p. Rebuilt here with numpy, that gives the book's mask;
- on Intel CPUs it takes one 32-bit word from torch's generator as a seed and draws the coins from MKL's
  MCG31m1 stream with the inverse-CDF Bernoulli method: x <- 1132489760 * x mod (2^31 - 1),
  u = x / (2^31 - 1), as documented in Intel's Vector Statistics notes. Rebuilt here with numpy, that
  gives INTEL_MKL_MASK, the matrix a Linux reader posted in rasbt/LLMs-from-scratch issue #57.

Both rebuilds run on any CPU; the last test asks `nn.Dropout` itself on the CPU that runs it.
"""

import platform
from pathlib import Path

import numpy as np
import torch

BOOK_MASK = np.array([[1, 1, 0, 1, 1, 0],  # torch.manual_seed(123); nn.Dropout(0.5)(torch.ones(6, 6)) in the book
                      [0, 0, 0, 1, 0, 1],
                      [1, 1, 1, 1, 0, 1],
                      [0, 1, 1, 0, 0, 1],
                      [0, 1, 0, 1, 0, 1],
                      [0, 1, 1, 1, 1, 0]], dtype=bool)
INTEL_MKL_MASK = np.array([[1, 1, 1, 1, 1, 1],  # the same two calls on an Intel CPU (LLMs-from-scratch issue #57)
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


def torch_bernoulli(seed: int, count: int, keep: float) -> np.ndarray:
    """torch's own scalar Bernoulli: per coin one 64-bit draw, its low 53 bits as u in [0, 1), 1 when u < keep."""
    words = torch_generator_words(seed, 2 * count)
    draws = [(high << 32) | low for high, low in zip(words[0::2], words[1::2])]
    return np.array([(draw & (2**53 - 1)) * 2.0**-53 < keep for draw in draws])


def mkl_bernoulli(seed: int, count: int, p: float) -> np.ndarray:
    """MKL's viRngBernoulli (inverse CDF) on an MCG31m1 stream started from `seed`."""
    state = seed % MODULUS or 1
    coins = []
    for _ in range(count):
        coins.append(state / MODULUS < p)
        state = MULTIPLIER * state % MODULUS
    return np.array(coins)


def cpu_is_intel() -> bool:
    """True on an Intel processor (Linux reads /proc/cpuinfo; elsewhere the platform's processor string)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        return "GenuineIntel" in cpuinfo.read_text()
    return "intel" in platform.processor().lower()


def test_the_two_masks_differ_and_the_books_keeps_21():
    assert BOOK_MASK.sum() == 21 and INTEL_MKL_MASK.sum() == 15  # the counts lesson 6 prints and quotes
    assert (BOOK_MASK != INTEL_MKL_MASK).any()


def test_numpy_mt19937_is_torchs_cpu_generator():
    words = torch_generator_words(123, 6)
    torch.manual_seed(123)
    drawn = torch.empty(3, dtype=torch.int64).random_(0, 2**31).tolist()  # one 64-bit draw (two words) each
    assert drawn == [word & 0x7FFFFFFF for word in words[1::2]]


def test_torchs_own_generator_draws_the_books_mask():
    assert (torch_bernoulli(123, 36, 0.5).reshape(6, 6) == BOOK_MASK).all()
    assert not (torch_bernoulli(124, 36, 0.5).reshape(6, 6) == BOOK_MASK).all()  # the seed matters


def test_mkl_stream_draws_the_intel_mask():
    seed = torch_generator_words(123, 1)[0]  # what bernoulli_scalar_kernel takes from torch's generator
    assert (mkl_bernoulli(seed, 36, 0.5).reshape(6, 6) == INTEL_MKL_MASK).all()
    assert not (mkl_bernoulli(seed + 1, 36, 0.5).reshape(6, 6) == INTEL_MKL_MASK).all()  # the seed matters


def test_nn_dropout_on_this_cpu_draws_the_mask_of_its_maker():
    torch.manual_seed(123)
    mask = (torch.nn.Dropout(0.5)(torch.ones(6, 6)) != 0).numpy()
    intel_path = cpu_is_intel() and torch.backends.mkl.is_available()
    assert (mask == (INTEL_MKL_MASK if intel_path else BOOK_MASK)).all()


def test_torch_bernoulli_with_a_probability_tensor_is_neither_mask():
    torch.manual_seed(123)
    tensor_coins = torch.bernoulli(torch.full((6, 6), 0.5)).bool().numpy()
    assert not (tensor_coins == BOOK_MASK).all() and not (tensor_coins == INTEL_MKL_MASK).all()
