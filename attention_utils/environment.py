"""One call that puts a notebook into the state the stored outputs were produced in."""

from __future__ import annotations

import torch

from .checks import bilingual, check_flag, check_size
from .language import LANGUAGES

# Large reductions depend on the number of threads; pinning it keeps printed digits the same
# on a laptop with 8 cores and on the 2-core CI machine.
DEFAULT_THREADS = 2


LARGEST_SEED = 2**64 - 1  # torch.manual_seed takes at most this


def setup(seed: int = 123, threads: int = DEFAULT_THREADS, language: str = "en", quick: bool = False) -> None:
    """Seed torch, fix the thread count and print precision, and choose the language of plots and printouts.

    Every argument is checked before anything changes, so a bad call leaves the session as it was.
    `quick` is only checked here (papermill's `-p quick false` arrives as the string "false", which
    would silently count as true); each lesson reads it itself.
    """
    seed = check_size(seed, "seed", minimum=0)
    if seed > LARGEST_SEED:
        raise ValueError(
            bilingual(
                f"seed must be at most 2**64 - 1 = {LARGEST_SEED}, got {seed}; any smaller whole number will do.",
                f"seed 不能超过 2**64 - 1 = {LARGEST_SEED}，实际是 {seed}；换一个更小的整数即可。",
            )
        )
    check_flag(quick, "quick")
    threads = check_size(threads, "threads")
    if language not in LANGUAGES:
        raise ValueError(
            bilingual(
                f"language must be 'en' or 'zh', got {language!r}.",
                f"language 只能是 'en' 或 'zh'，实际是 {language!r}。",
            )
        )
    from .plotting import set_language  # plotting imports matplotlib: keep it out of the package import

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.set_printoptions(precision=4, sci_mode=False)
    set_language(language)
