"""Reading the saved results: where `make bench` writes them, load_saved, and the `reads` check every reader wears."""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import statistics
from collections.abc import Callable, Hashable
from pathlib import Path

from ..checks import bilingual, shown
from ..language import check_language


ROOT = Path(__file__).resolve().parents[2]
SAVED = ROOT / "figures" / "bench_results.json"  # what lesson 8 and the README quote
SAVED_KERNEL = ROOT / "figures" / "bench_kernel.json"  # what lesson 9 quotes
SAVED_RECURRENT = ROOT / "figures" / "bench_recurrent.json"  # lesson 16's tables (explorers/lesson16) read it
SAVED_RECALL = ROOT / "figures" / "bench_recall.json"  # lesson 16's recall grid (make bench, or --recall)
SAVED_CACHE = ROOT / "figures" / "bench_cache.json"  # what lesson 15 quotes (bench --cache writes it)
SAVED_DECODE = ROOT / "figures" / "bench_decode.json"  # lessons 12 and 14: decoding with and without a KV cache
SAVED_SPECULATIVE = ROOT / "figures" / "bench_speculative.json"  # lesson 18: speculative decoding (bench --speculative)
SAVED_SPECULATIVE_BF16 = ROOT / "figures" / "bench_speculative_bf16_cpu.json"  # the same on a CPU with bfloat16 instructions
SAVED_MODEL = ROOT / "figures" / "bench_model.json"  # lesson 14: the real model's decode step in each weight format
SAVED_MODEL_BF16 = ROOT / "figures" / "bench_model_bf16_cpu.json"  # the same bench on a CPU with bfloat16 instructions (--bf16-cpu)
SAVED_ATTENTION_GROWTH = ROOT / "figures" / "bench_attention_growth.json"  # lesson 14: SDPA's own time a step by length (--attention-growth)
SAVED_QUALITY_SPLIT = ROOT / "figures" / "bench_quality_split.json"  # lesson 14: int8 weights with float32 arithmetic (--quality-split)
SAVED_SERVING = ROOT / "figures" / "bench_serving.json"  # lesson 17: the scheduler on SmolLM2 (bench --serving)


def load_saved(path: Path = SAVED) -> dict:
    """The results of the last full `make bench`, as committed next to the figures."""
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(bilingual(f"path must be a str or pathlib.Path such as results.SAVED_MODEL, got {shown(path)}.",
                                  f"path 必须是字符串或 pathlib.Path，例如 results.SAVED_MODEL，实际是 {shown(path, True)}。"))
    path = Path(path)
    if not path.is_file():
        missing = not path.exists()
        raise (FileNotFoundError if missing else ValueError)(bilingual(
            f"{str(path)!r} {'does not exist' if missing else 'is not a file'}; `make bench` writes the results into "
            "figures/, and `git checkout -- figures/` brings back the committed ones.",
            f"{str(path)!r} {'不存在' if missing else '不是文件'}；`make bench` 会把结果写进 figures/，"
            "`git checkout -- figures/` 可以找回仓库里保存的那一份。"))
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(bilingual(
            f"{path.name} is not readable JSON ({error}); run `make bench` again, or `git checkout -- figures/`.",
            f"{path.name} 不是可读的 JSON（{error}）；请重新运行 `make bench`，或者 `git checkout -- figures/`。")) from None
    if not isinstance(results, dict):
        raise ValueError(bilingual(f"{path.name} holds {type(results).__name__}, not the dict `make bench` writes.",
                                   f"{path.name} 里是 {type(results).__name__}，不是 `make bench` 写出的字典。"))
    return results


def reads(saved: str, table: str, column: str, *keys: str) -> Callable:
    """Decorate a function of `results`: it must get what load_saved(<saved>) returns, whose `table` rows have `column`,
    with `keys` beside it (the results of another bench would fail later with a KeyError that names nothing passed)."""
    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        takes_language = "language" in signature.parameters
        none_is_current = takes_language and signature.parameters["language"].default is None  # the package's language

        @functools.wraps(function)
        def checked(results: dict, *args, **kwargs):
            if takes_language:
                bound = signature.bind(results, *args, **kwargs)
                bound.apply_defaults()
                if not (bound.arguments["language"] is None and none_is_current):
                    check_language(bound.arguments["language"])
            rows = results.get(table) if isinstance(results, dict) else None
            if not (isinstance(rows, list) and rows and all(isinstance(row, dict) and column in row for row in rows)
                    and all(key in results for key in keys)):
                raise (ValueError if isinstance(results, dict) else TypeError)(bilingual(
                    f"results must be what results.load_saved(results.{saved}) returns (rows of '{table}' with "
                    f"'{column}'{''.join(f', {key!r}' for key in keys)}), got {shown(results)}.",
                    f"results 必须是 results.load_saved(results.{saved}) 返回的结果（'{table}' 的每行都有 '{column}'"
                    f"{''.join(f'，还有 {key!r}' for key in keys)}），实际是 {shown(results, True)}。"))
            read = results if isinstance(results, _Read) else _Read(results, "", [])  # one list of nulls read
            try:
                return function(read, *args, **kwargs)
            except (KeyError, TypeError) as error:  # a field of a hand-edited file is missing, or null where read
                field = repr(error.args[0]) if isinstance(error, KeyError) else read.nulls[-1] if read.nulls else None
                if field is None:
                    raise
                raise ValueError(bilingual(
                    f"the saved results of load_saved(results.{saved}) lack the field {field} (missing or null): run "
                    "`make bench` again, or `git checkout -- figures/` to bring back the committed file.",
                    f"load_saved(results.{saved}) 读出的结果缺少字段 {field}（不存在或为 null）：请重新运行 `make bench`，"
                    "或者用 `git checkout -- figures/` 找回仓库里保存的那一份。")) from None
        return checked
    return decorate


class _Read(dict):
    """Saved results that note each null they hand out ("['roofs']['bandwidth_gb_s']"): a TypeError then names it."""

    def __init__(self, data: dict, path: str, nulls: list[str]) -> None:
        super().__init__(data)
        self.path, self.nulls = path, nulls

    def __getitem__(self, key: object) -> object:
        return self._wrap(key, super().__getitem__(key))

    def _wrap(self, key: object, value: object) -> object:
        path = f"{self.path}[{key!r}]"
        if value is None:
            self.nulls.append(path)
        if isinstance(value, list):
            return [_Read(v, f"{path}[{i}]", self.nulls) if isinstance(v, dict) else v for i, v in enumerate(value)]
        return _Read(value, path, self.nulls) if isinstance(value, dict) else value


def at_length(rows: dict[int, dict], length: object) -> dict:
    """The saved row measured at `length`, or an error that lists the lengths measured (a quick run saves fewer)."""
    row = rows.get(length) if isinstance(length, Hashable) and not isinstance(length, bool) else None
    if row is None:
        raise ValueError(bilingual(f"length={shown(length)} was not measured; the saved lengths are {sorted(rows)}.",
                                   f"没有测量过 length={shown(length, True)}；已保存的长度有 {sorted(rows)}。"))
    return row


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    """Exponent k of y ~ x^k: least-squares slope on log-log axes (nan with fewer than two points)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y > 0]
    if len(points) < 2:
        return math.nan
    return statistics.linear_regression(*zip(*points)).slope


def by_run(rows: list[dict]) -> dict[tuple[str, str, int], dict]:
    """Index summary rows by (implementation, mode, length)."""
    return {(row["implementation"], row["mode"], row["length"]): row for row in rows}


