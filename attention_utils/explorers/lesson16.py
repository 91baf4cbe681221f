"""Lesson 16's explorer, figures and tables: pairs written into a linear-attention state and a delta-rule state.

A pool of 6 keys is written in turn, each key again after 6 pairs with a new value, as a variable
is given a new value in a program. After each write the explorer reads every key seen so far back
from both states and counts the key as recalled when the answer lies closer to the key's latest
value than to any other key's latest value. With d_k of 6 or more the keys are orthonormal: the
delta rule recalls every latest value exactly, linear attention returns old and new value added
together. With d_k below 6 the keys cannot all be orthogonal, and the delta rule loses some too.
"""

from __future__ import annotations

import math
import numbers

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from ..arguments import check_seed
from ..checks import bilingual, check_size, shown
from ..language import check_language, table, text
from ..recurrent.delta_rule import delta_rule_step
from ..recurrent.recall import MODEL_NAMES
from ..results import reads
from .widgets import explore

VALUE_SIZE = 4  # d_v: each value is a vector of 4 numbers
POOL = 6  # distinct keys, written in turn


def recall_example(num_pairs: int, key_size: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Unit keys (num_pairs, key_size) cycling through POOL keys, values (num_pairs, VALUE_SIZE), and each pair's key id.

    The pool's first min(POOL, key_size) keys are orthonormal; any others are random unit vectors.
    """
    num_pairs, key_size = check_size(num_pairs, "num_pairs", minimum=0, maximum=1000), check_size(key_size, "key_size", maximum=1000)
    generator = torch.Generator().manual_seed(check_seed(seed))
    basis = torch.linalg.qr(torch.randn(key_size, key_size, generator=generator, dtype=torch.float64)).Q
    extra = torch.randn(max(0, POOL - key_size), key_size, generator=generator, dtype=torch.float64)
    pool = torch.cat([basis.T[:POOL], torch.nn.functional.normalize(extra, dim=-1)])
    ids = [i % POOL for i in range(num_pairs)]
    values = torch.randn(num_pairs, VALUE_SIZE, generator=generator, dtype=torch.float64)
    return pool[ids], values, ids


def _states_after(keys: torch.Tensor, values: torch.Tensor, written: int) -> dict[str, torch.Tensor]:
    """The linear-attention state (sum of v kᵀ) and the delta-rule state (β = 1) after the first `written` pairs."""
    linear = torch.zeros(values.shape[1], keys.shape[1], dtype=keys.dtype)
    delta = linear.clone()
    for key, value in zip(keys[:written], values[:written]):
        linear = linear + value[:, None] * key[None, :]
        delta = delta_rule_step(delta, key, value, 1.0)
    return {"linear": linear, "delta": delta}


def _latest(keys: torch.Tensor, values: torch.Tensor, ids: list[int], written: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct keys seen in the first `written` pairs, and the value each was given last."""
    last = {key_id: index for index, key_id in enumerate(ids[:written])}  # later writes win
    order = sorted(last)
    if not order:
        return keys[:0], values[:0]
    return keys[[last[i] for i in order]], values[[last[i] for i in order]]


def _recalled(state: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(n,) True where reading key i returns an answer nearest to value i among the n values."""
    answers = keys @ state.T  # (n, d_v): S k for every key
    distances = torch.cdist(answers, values)  # (n, n)
    return distances.argmin(dim=1) == torch.arange(len(keys))


def draw_states(num_pairs: int, key_size: int, written: int) -> Figure:
    """Both states as heatmaps, and for each key seen so far the error ‖S k − v‖ against its latest value."""
    keys, values, ids = recall_example(num_pairs, key_size)
    written = min(check_size(written, "written", minimum=0), num_pairs)
    states = _states_after(keys, values, written)
    seen_keys, seen_values = _latest(keys, values, ids, written)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), width_ratios=(1, 1, 1.6), layout="constrained")
    limit = max(1.0, max(s.abs().max().item() for s in states.values()))
    names = {"linear": text("linear attention", "线性注意力"), "delta": text("delta rule", "delta 规则")}
    count = len(seen_keys)
    for ax, (kind, state) in zip(axes, states.items()):
        image = ax.imshow(state.numpy(), cmap="RdBu", vmin=-limit, vmax=limit)
        hits = _recalled(state, seen_keys, seen_values).sum().item() if count else 0
        ax.set_title(text(f"{names[kind]}: {hits} of {count} keys recalled", f"{names[kind]}：{count} 个键中回忆出 {hits} 个"),
                     fontsize=10)
        ax.set_xlabel(text("key feature (d_k)", "键的特征（d_k）"))
        ax.set_ylabel(text("value feature (d_v)", "值的特征（d_v）"))
        fig.colorbar(image, ax=ax, shrink=0.7)
    bars = axes[2]
    positions = torch.arange(count)
    for offset, (kind, state) in zip((-0.2, 0.2), states.items()):
        errors = (seen_keys @ state.T - seen_values).norm(dim=1) if count else torch.zeros(0)
        bars.bar((positions + offset).numpy(), errors.numpy(), width=0.4, label=names[kind])
    bars.set_xticks(range(count), [text(f"key {i}", f"键 {i}") for i in range(count)])
    bars.set_ylabel("‖S k − v‖")
    bars.set_title(text(f"error against each key's latest value; d_k = {key_size}",
                        f"与每个键最新的值之间的误差；d_k = {key_size}"), fontsize=10)
    bars.legend(fontsize=8, loc="upper left")
    return fig


def show_states(num_pairs: int = 12, key_size: int = 8, written: int = 9) -> None:
    """The explorer: how many pairs are written, and the key size d_k (2 to 8 on its slider)."""
    num_pairs = check_size(num_pairs, "num_pairs", maximum=1000)
    key_size, written = check_size(key_size, "key_size", minimum=2), check_size(written, "written", minimum=0)
    for name, value, most in (("key_size", key_size, 8), ("written", written, num_pairs)):
        if value > most:
            raise ValueError(bilingual(f"{name} must be at most {most} here (the slider's end), got {value}.",
                                       f"{name} 在这里不能超过 {most}（滑块的最大值），实际是 {value}。"))
    explore(
        lambda written, key_size: draw_states(num_pairs, key_size, written),
        written=widgets.IntSlider(value=written, min=0, max=num_pairs, description=text("pairs written", "写入的键值对")),
        key_size=widgets.IntSlider(value=key_size, min=2, max=8, description=text("key size d_k", "键的维数 d_k")),
    )


ROW_FIELDS = ("model", "pairs", "accuracy", "kept_floats")  # what recall_grid writes in every row


def _check_rows(rows: object, *fields: str) -> None:
    """Rows as recall_grid returns them: a non-empty list of dicts with the fields the figures read."""
    needed = ROW_FIELDS + fields
    if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, dict) and set(needed) <= r.keys() for r in rows):
        raise TypeError(bilingual(
            f"rows must be the non-empty list that recall_grid returns (dicts with {', '.join(needed)}), got {shown(rows)}.",
            f"rows 必须是 recall_grid 返回的非空列表（字典，带有 {'、'.join(needed)}），实际是 {shown(rows, True)}。"))
    for row in rows:
        sizes = [row[key] for key in ("pairs", "kept_floats", *(("key_size",) if "key_size" in needed else ()))]
        accuracy = row["accuracy"]
        if not (all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n >= 1 for n in sizes)
                and isinstance(accuracy, numbers.Real) and not isinstance(accuracy, bool) and 0 <= accuracy <= 1):
            raise ValueError(bilingual(
                f"each row needs an accuracy from 0 to 1 and whole numbers of at least 1 for pairs, kept_floats and key_size, "
                f"as recall_grid writes them; got {shown(row)}.",
                f"每一行的 accuracy 必须在 0 到 1 之间，pairs、kept_floats 和 key_size 必须是不小于 1 的整数（recall_grid 就是这样写的）；"
                f"实际是 {shown(row, True)}。"))


def _names(model: str) -> tuple[str, str]:
    """A model's name in English and Chinese: lesson 16's five, or the name recall_grid's `models` gave it."""
    return MODEL_NAMES.get(model, (str(model), str(model)))


def _by_model(rows: list[dict]) -> dict[str, dict[int, list[float]]]:
    """{model: {pairs: [accuracy of each seed]}} in the order the rows came."""
    _check_rows(rows)
    found: dict[str, dict[int, list[float]]] = {}
    for row in rows:
        found.setdefault(row["model"], {}).setdefault(row["pairs"], []).append(row["accuracy"])
    return found


def recall_table(rows: list[dict], language: str = "en") -> str:
    """Held-out recall per model (rows) and number of pairs (columns); each cell one number per seed, 'a / b'."""
    found = _by_model(rows)
    pairs = sorted({row["pairs"] for row in rows})
    zh = check_language(language) == "zh"
    headers = ["模型" if zh else "model"] + [f"N = {n}" for n in pairs]
    body = [[_names(name)[zh]] + [" / ".join(f"{a:.2f}" for a in found[name][n]) for n in pairs] for name in found]
    return table(headers, body)


def draw_recall(rows: list[dict]) -> Figure:
    """Accuracy against the number of pairs (mean of the seeds, the seeds' range shaded), and the numbers each model keeps."""
    found = _by_model(rows)
    kept = {(row["model"], row["pairs"]): row["kept_floats"] for row in rows}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    for index, (name, by_pairs) in enumerate(found.items()):
        label = text(*_names(name))
        pairs = sorted(by_pairs)
        accuracies = [by_pairs[n] for n in pairs]
        means = [sum(a) / len(a) for a in accuracies]
        left.plot(pairs, means, marker="o", color=f"C{index}", label=label)
        left.fill_between(pairs, [min(a) for a in accuracies], [max(a) for a in accuracies], color=f"C{index}", alpha=0.2)
        right.plot(pairs, [kept[name, n] for n in pairs], marker="o", color=f"C{index}", label=label)
    left.set(xlabel=text("key–value pairs N", "键值对数 N"), ylabel=text("held-out recall", "留出准确率"), ylim=(0, 1.02),
             title=text("recall as the pairs grow", "键值对增多时的回忆准确率"))
    right.set(xlabel=text("key–value pairs N", "键值对数 N"), ylabel=text("numbers kept while decoding", "解码时保存的数的个数"),
              title=text("state or cache at the end of the sequence", "序列末尾的状态或缓存"))
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def _by_size(rows: list[dict]) -> dict[tuple[str, int], dict[int, list[float]]]:
    """{(model, key size): {pairs: [accuracy of each seed]}}, models in the order they came, key sizes ascending."""
    _check_rows(rows, "key_size")
    found: dict[tuple[str, int], dict[int, list[float]]] = {}
    for row in sorted(rows, key=lambda r: r["key_size"]):
        found.setdefault((row["model"], row["key_size"]), {}).setdefault(row["pairs"], []).append(row["accuracy"])
    order = list(dict.fromkeys(row["model"] for row in rows))
    return dict(sorted(found.items(), key=lambda item: (order.index(item[0][0]), item[0][1])))


def state_size_table(rows: list[dict], language: str = "en") -> str:
    """Held-out recall per model and key size d_k (rows), number of pairs (columns); each cell one number per seed.

    The third column is what the layer keeps at the largest N: the fixed state, or the cache.
    """
    found = _by_size(rows)
    pairs = sorted({row["pairs"] for row in rows})
    kept = {(row["model"], row["key_size"], row["pairs"]): row["kept_floats"] for row in rows}
    zh = check_language(language) == "zh"
    headers = ["模型" if zh else "model", "d_k", f"保存的数（N = {pairs[-1]}）" if zh else f"numbers kept (N = {pairs[-1]})"]
    # "–" where a model was not run at that N (rows of two recall_grid runs with different pairs)
    body = [[_names(name)[zh], key_size, f"{kept[name, key_size, pairs[-1]]:,}" if (name, key_size, pairs[-1]) in kept else "–"]
            + [" / ".join(f"{a:.2f}" for a in by_pairs[n]) if n in by_pairs else "–" for n in pairs]
            for (name, key_size), by_pairs in found.items()]
    return table(headers + [f"N = {n}" for n in pairs], body)


def draw_state_sizes(rows: list[dict], reference: str = "softmax") -> Figure:
    """One panel per fixed-state model: recall against N for each key size (seeds' mean, range shaded).

    The reference model (softmax attention with the smallest key size) is drawn dashed in every panel.
    """
    found = _by_size(rows)
    if not isinstance(reference, str):
        raise TypeError(bilingual(f"reference must be the name of a model in rows, such as 'softmax', got {shown(reference)}.",
                                  f"reference 必须是 rows 里某个模型的名字，例如 'softmax'，实际是 {shown(reference, True)}。"))
    names = list(dict.fromkeys(name for name, _ in found))
    if reference not in names and reference != "softmax":  # a name given by hand must be there (rows of one's own
        # models may lack the default); else it would be left out silently
        raise ValueError(bilingual(f"reference={reference!r} is not a model in rows; the rows hold {names}.",
                                   f"reference={reference!r} 不是 rows 里的模型；rows 里有 {names}。"))
    models = [name for name in names if name != reference]
    if not models:
        raise ValueError(bilingual(f"rows hold no model besides the reference {reference!r}: nothing to draw a panel for.",
                                   f"rows 里除了参照模型 {reference!r} 之外没有别的模型：没有可画的子图。"))
    fig, axes = plt.subplots(1, len(models), figsize=(5.5 * len(models), 4.0), layout="constrained", sharey=True,
                             squeeze=False)
    axes = axes[0]  # one row of panels, also when there is one
    smallest = min((size for name, size in found if name == reference), default=None)
    for ax, name in zip(axes, models):
        sizes = sorted(size for model, size in found if model == name)
        for index, size in enumerate(sizes):
            _recall_line(ax, found[name, size], f"C{index}", text(f"d_k = {size}", f"d_k = {size}"))
        if smallest is not None:
            _recall_line(ax, found[reference, smallest], "0.4",
                         text(f"{_names(reference)[0]}, d_k = {smallest}", f"{_names(reference)[1]}，d_k = {smallest}"),
                         linestyle="--")
        ax.set(xlabel=text("key–value pairs N", "键值对数 N"), ylim=(0, 1.02), title=text(*_names(name)))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel(text("held-out recall", "留出准确率"))
    return fig


def _recall_line(ax, by_pairs: dict[int, list[float]], color: str, label: str, linestyle: str = "-") -> None:
    """The seeds' mean against N, with the range between the seeds shaded."""
    pairs = sorted(by_pairs)
    accuracies = [by_pairs[n] for n in pairs]
    ax.plot(pairs, [sum(a) / len(a) for a in accuracies], marker="o", color=color, linestyle=linestyle, label=label)
    ax.fill_between(pairs, [min(a) for a in accuracies], [max(a) for a in accuracies], color=color, alpha=0.2)


# make bench's decode step, KV cache against a fixed state (python -m attention_utils.course.bench --recurrent)

@reads("SAVED_RECURRENT", "rows", "softmax_ms")
def recurrent_table(results: dict, language: str = "en") -> str:
    """The numbers lesson 16 quotes: ms per decode step and bytes kept, by context length, for the three layers."""
    headers = (["T", "softmax + 缓存（毫秒）", "线性注意力（毫秒）", "delta 规则（毫秒）", "缓存（MiB）", "状态（MiB）"]
               if language == "zh" else
               ["T", "softmax + cache (ms)", "linear attention (ms)", "delta rule (ms)", "cache (MiB)", "state (MiB)"])
    rows = [[f"{r['length']:,}", f"{r['softmax_ms']:.2f}", f"{r['linear_ms']:.2f}", f"{r['delta_ms']:.2f}",
             f"{r['softmax_bytes'] / 2**20:.2f}", f"{r['linear_bytes'] / 2**20:.2f}"]
            for r in sorted(results["rows"], key=lambda r: r["length"])]
    return table(headers, rows)


@reads("SAVED_RECURRENT", "rows", "softmax_ms")
def crossovers(results: dict) -> dict:
    """Where the cache starts to cost more than the delta rule's state: in bytes (exact) and in time (interpolated).

    memory: the T at which 2 × T × d_model × 4 bytes of cache equal the state's bytes. time: the first
    pair of measured lengths between which the softmax step becomes slower than the delta-rule step,
    interpolated on log axes (None if it never does, or is slower from the first length on).
    """
    rows = sorted(results["rows"], key=lambda r: r["length"])
    d_model = results["workload"]["d_model"]
    memory = rows[0]["delta_bytes"] / (2 * d_model * 4)
    when = None
    for before, after in zip(rows, rows[1:]):
        gap_before = math.log(before["softmax_ms"] / before["delta_ms"])
        gap_after = math.log(after["softmax_ms"] / after["delta_ms"])
        if gap_before < 0 <= gap_after:
            share = -gap_before / (gap_after - gap_before)
            when = math.exp(math.log(before["length"]) + share * (math.log(after["length"]) - math.log(before["length"])))
            break
    longest = rows[-1]
    ratio = longest["softmax_ms"] / longest["delta_ms"]
    grow = longest["softmax_bytes"] / rows[0]["softmax_bytes"]
    first = rows[0]
    already = first["softmax_ms"] >= first["delta_ms"]
    if when is not None:
        time_en = (f"In time, the softmax step becomes slower than the delta-rule step between T = {before['length']:,} and "
                   f"{after['length']:,} (about T = {when:,.0f})")
        time_zh = (f"在耗时上，softmax 的一步解码在 T = {before['length']:,} 和 {after['length']:,} 之间（约 T = {when:,.0f}）"
                   "开始慢于 delta 规则")
    elif already:
        time_en = (f"In time, the softmax step was already the slower one at T = {first['length']:,}, the shortest context "
                   f"measured ({first['softmax_ms']:.2f} ms against {first['delta_ms']:.2f} ms)")
        time_zh = (f"在耗时上，即使在测量的最短上下文 T = {first['length']:,} 时，softmax 的一步解码也已经更慢"
                   f"（{first['softmax_ms']:.2f} 毫秒对 {first['delta_ms']:.2f} 毫秒）")
    else:
        time_en = "In time, the softmax step stayed faster than the delta-rule step at every length measured"
        time_zh = "在耗时上，测量的每个长度下 softmax 的一步解码都比 delta 规则快"
    en = (f"The cache holds as many bytes as the state at T = {memory:,.0f} tokens, and more after. {time_en}; at "
          f"T = {longest['length']:,} it takes "
          f"{ratio:.1f}× as long. From T = {first['length']:,} to {longest['length']:,} the cache grew {grow:,.0f}-fold and "
          "the states not at all.")
    zh = (f"T = {memory:,.0f} 个词元时，缓存与状态一样大，之后就超过它。{time_zh}；到 T = {longest['length']:,} 时，耗时是 delta 规则的 "
          f"{ratio:.1f} 倍。从 T = {first['length']:,} 到 {longest['length']:,}，缓存增大到原来的 {grow:,.0f} 倍，状态则一点没变。")
    return {"memory": memory, "time": when, "en": en, "zh": zh}
