"""One call that puts a notebook into the state the stored outputs were produced in."""

from __future__ import annotations

import os

import torch

from .checks import bilingual, check_flag, check_seed, check_size, shown
from .language import LANGUAGES

MOST_THREADS = 1024  # far beyond any machine's cores; torch accepts a million, then crashes the process


def threads_from_environment(fallback: int = 2) -> int:
    """OMP_NUM_THREADS when it holds a positive whole number (its first, for a nested list like "4,2"), else `fallback`.

    `make test` sets it to 1: its parallel workers and notebook kernels share the cores, and a kernel
    with two threads then waits for a core at every parallel step (lessons 13-16 ran 2.6 times slower).
    """
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isascii() and first.isdigit() and 0 < int(first) <= MOST_THREADS else fallback


# Large reductions depend on the number of threads; pinning it keeps printed digits the same
# on a laptop with 8 cores and on the 2-core CI machine. The stored outputs also hold with 1 thread.
DEFAULT_THREADS = threads_from_environment()


def setup(seed: int = 123, threads: int = DEFAULT_THREADS, language: str = "en", quick: bool = False) -> None:
    """Seed torch, fix the thread count and print precision, and choose the language of plots and printouts.

    Every argument is checked before anything changes, so a bad call leaves the session as it was.
    `quick` is only checked here (papermill's `-p quick false` arrives as the string "false", which
    would silently count as true); each lesson reads it itself.
    """
    seed = check_seed(seed)
    check_flag(quick, "quick")
    threads = check_size(threads, "threads")
    if threads > MOST_THREADS:
        raise ValueError(
            bilingual(
                f"threads must be at most {MOST_THREADS}, got {threads}; this machine has {os.cpu_count()} cores, "
                "and more threads than cores only wait.",
                f"threads 不能超过 {MOST_THREADS}，实际是 {threads}；这台机器有 {os.cpu_count()} 个核心，"
                "线程比核心多只会互相等待。",
            )
        )
    if not isinstance(language, str) or language not in LANGUAGES:
        raise (ValueError if isinstance(language, str) else TypeError)(
            bilingual(
                f"language must be 'en' or 'zh', got {shown(language)}.",
                f"language 只能是 'en' 或 'zh'，实际是 {shown(language, True)}。",
            )
        )
    from .plotting.fonts import set_language  # plotting imports matplotlib: keep it out of the package import

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.set_printoptions(precision=4, sci_mode=False)
    set_language(language)
