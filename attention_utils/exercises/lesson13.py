"""Checkers for lesson 13: the batch whose cache outweighs the weights, induction scores, a window without sinks."""

from __future__ import annotations

import math

import torch

from . import as_real_number, as_whole_number, checker, feedback, missing

CACHE_TOKENS = 2048  # exercise 1: sequences of 2,048 tokens, batched until their cache outweighs the weights
FLOAT32_BYTES = 4
WINDOW, LAST = 32, 100  # exercise 3: a window of 32 keys; the loss is averaged over the last 100 predictions


def _batch_hint(batch: int, per_sequence: int, weights: int, config) -> tuple[str, str] | None:
    """The usual slip that leads to `batch`, named in English and Chinese, or None."""
    def first_over(per: int) -> int:
        return weights // per + 1

    if batch == first_over(per_sequence) - 1:
        return (f"{batch} sequences cache {batch * per_sequence / 1e6:.1f} MB, still less than the {weights / 1e6:.0f} MB of "
                "weights: a batch holds whole sequences, so round up.",
                f"{batch} 个序列的缓存是 {batch * per_sequence / 1e6:.1f} MB，仍比 {weights / 1e6:.0f} MB 的权重少："
                "批次里的序列是整数个，要向上取整。")
    hints = {
        first_over(per_sequence // 2): (
            "That uses half the cache of a sequence: only the keys (or only the values), 2 bytes a number instead of "
            "float32's 4, or 1,000 tokens instead of 2,048.",
            "这是按一半的缓存算的：要么只算了键（或只算了值），要么按每个数 2 字节而不是 float32 的 4 字节算了，"
            "要么用了 1,000 个词元而不是 2,048 个。"),
        first_over(per_sequence // config.num_kv_heads * config.num_heads): (
            f"You gave every one of the {config.num_heads} query heads its own keys and values; this model keeps "
            f"{config.num_kv_heads} key/value heads per layer.",
            f"你给 {config.num_heads} 个查询头各算了一份键和值；这个模型每层只有 {config.num_kv_heads} 个键值头。"),
        first_over(per_sequence // config.num_layers): (
            f"Every one of the {config.num_layers} layers caches its own keys and values.",
            f"{config.num_layers} 层中的每一层都缓存自己的键和值。"),
    }
    return hints.get(batch)


@checker
def check_batch_for_cache(answer: object, model: torch.nn.Module) -> None:
    """The smallest batch of CACHE_TOKENS-token sequences whose float32 KV cache takes more bytes than the model's weights."""
    if missing(answer):
        return
    config = model.config
    head_dim = config.d_model // config.num_heads
    per_sequence = 2 * config.num_layers * config.num_kv_heads * head_dim * CACHE_TOKENS * FLOAT32_BYTES
    weights = sum(p.numel() for p in model.parameters()) * FLOAT32_BYTES
    expected = weights // per_sequence + 1
    batch = as_whole_number(answer)
    if batch is None:
        number = as_real_number(answer)
        if number is not None and expected - 1 < number < expected:
            return feedback(False, f"{number:g} is the ratio of the two; a batch holds whole sequences, so round it up.",
                            f"{number:g} 是两者之比；批次里的序列是整数个，要向上取整。")
        return feedback(False, "Give a whole number of sequences.", "请给出序列的个数，一个整数。")
    if batch == expected:
        return feedback(True, f"One sequence of {CACHE_TOKENS:,} tokens caches {per_sequence / 1e6:.1f} MB; the weights take "
                        f"{weights / 1e6:.0f} MB, {weights / per_sequence:.1f} times as much, so from {expected} sequences on a "
                        "decode step reads more cache than weights. Lesson 14 batches requests for this reason.",
                        f"一个 {CACHE_TOKENS:,} 个词元的序列缓存 {per_sequence / 1e6:.1f} MB；权重占 {weights / 1e6:.0f} MB，"
                        f"是它的 {weights / per_sequence:.1f} 倍，所以从 {expected} 个序列起，一步解码读取的缓存就比权重多。"
                        "第 14 课正是因此把多个请求合成一批。")
    hint = _batch_hint(batch, per_sequence, weights, config)
    if hint is not None:
        return feedback(False, *hint)
    feedback(False, "Divide the weights' bytes (4 per parameter) by one sequence's cache: 2 (keys and values) × layers × "
             "key/value heads × head size × 2,048 tokens × 4 bytes, and round up.",
             "用权重的字节数（每个参数 4 字节）除以一个序列的缓存：2（键和值）× 层数 × 键值头数 × 每个头的维数 × "
             "2,048 个词元 × 4 字节，再向上取整。")


@torch.no_grad()
def _weights_by_hand(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Attention weights (layers, heads, T, T), computed here apart from the package.

    Hooks keep what each attention layer receives; queries and keys come from the rows of its qkv
    weight, each interleaved feature pair is turned as one complex number, and a score is the real
    part of q times the conjugate of k (which equals the dot product of the two turned real vectors).
    """
    inputs = []
    hooks = [block.attention.register_forward_pre_hook(lambda _m, args: inputs.append(args[0][0]))
             for block in model.blocks]
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    num_tokens = tokens.shape[1]
    layers = []
    for block, x in zip(model.blocks, inputs):
        attention = block.attention
        h, g, d = attention.num_heads, attention.num_kv_heads, attention.head_dim
        weight = attention.qkv.weight.double()
        angles = torch.arange(num_tokens, dtype=torch.float64)[:, None] * attention.rotary_base ** (
            -torch.arange(0, d, 2, dtype=torch.float64) / d)  # (T, d/2)
        turn = torch.polar(torch.ones_like(angles), angles)

        def turned(part: torch.Tensor, heads: int) -> torch.Tensor:
            pairs = (x.double() @ part.T).view(num_tokens, heads, d // 2, 2)
            return torch.view_as_complex(pairs.contiguous()) * turn[:, None]  # (T, heads, d/2)

        q, k = turned(weight[: h * d], h), turned(weight[h * d : (h + g) * d], g)
        k = k[:, torch.arange(h) // (h // g)]  # query head i reads key/value head i // (h / g)
        scores = torch.einsum("qhp,khp->hqk", q, k.conj()).real / math.sqrt(d)
        scores = scores.masked_fill(torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1), float("-inf"))
        layers.append(scores.softmax(dim=-1))
    return torch.stack(layers)


def _diagonal_mean(weights: torch.Tensor, period: int, back: int) -> torch.Tensor:
    """(layers, heads): the average weight the queries of the second copy give to the key `back` steps behind them."""
    rows = torch.arange(period, 2 * period)
    return weights[..., rows, rows - back].mean(dim=-1)


def _induction_table(model: torch.nn.Module, tokens: torch.Tensor, period: int) -> torch.Tensor:
    """Induction scores (layers, heads) by hand: queries of the second copy, keys period - 1 steps back."""
    return _diagonal_mean(_weights_by_hand(model, tokens), period, period - 1)


def _as_table(answer: object) -> torch.Tensor | None:
    """A tensor, numpy array or nested list of real numbers, as a float64 tensor; None for anything else."""
    try:
        table = torch.as_tensor(answer.detach() if isinstance(answer, torch.Tensor) else answer, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None
    return table if table.dim() >= 1 else None


def _top_heads(table: torch.Tensor, language: str) -> str:
    """The three highest-scoring heads: "(18, 6) 0.92, ..." or "（层 18，头 6）0.92，……"."""
    values, indices = table.flatten().topk(3)
    heads = [divmod(int(i), table.shape[1]) for i in indices]
    if language == "zh":
        return "，".join(f"（层 {layer}，头 {head}）{v:.2f}" for (layer, head), v in zip(heads, values.tolist()))
    return ", ".join(f"(layer {layer}, head {head}) {v:.2f}" for (layer, head), v in zip(heads, values.tolist()))


@checker
def check_induction_scores(scores: object, model: torch.nn.Module, tokens: torch.Tensor, period: int) -> None:
    """Exercise 2: the learner's (layers, heads) induction scores, indexed from the maps, against the checker's own."""
    if missing(scores):
        return
    table = _as_table(scores)
    layers, heads = len(model.blocks), model.config.num_heads
    if table is None:
        return feedback(False, "scores should be a tensor of numbers, one per head.", "scores 应该是一个数值张量，每个头一个数。")
    if tuple(table.shape[:2]) == (layers, heads) and table.dim() > 2:
        return feedback(False, f"One number per head: average over the queries of the second copy, so the shape is "
                        f"({layers}, {heads}), not {tuple(table.shape)}.",
                        f"每个头只要一个数：对后半段的查询取平均，形状应为 ({layers}, {heads})，而不是 {tuple(table.shape)}。")
    if tuple(table.shape) != (layers, heads):
        return feedback(False, f"scores should have shape ({layers}, {heads}), one number per head; got {tuple(table.shape)}.",
                        f"scores 的形状应为 ({layers}, {heads})，每个头一个数；实际是 {tuple(table.shape)}。")
    weights = _weights_by_hand(model, tokens)
    expected = _diagonal_mean(weights, period, period - 1)

    def close(other: torch.Tensor) -> bool:
        return torch.allclose(table, other, atol=2e-3)

    if close(expected):
        return feedback(True, f"Right: query t of the second copy, key t - {period} + 1. Top three: "
                        f"{_top_heads(expected, 'en')}.",
                        f"对了：后半段的查询 t，看向键 t - {period} + 1。得分最高的三个：{_top_heads(expected, 'zh')}。")
    hints = [
        (_diagonal_mean(weights, period, period), "That is the weight on the earlier copy of the query's own token "
         "(key t - period). The induction head reads the token one step after it, the one to predict next.",
         "这是查询给自己词元上一次出现处（键 t - period）的权重。归纳头读的是它后面的那个词元，也就是接下来要预测的词元。"),
        (_diagonal_mean(weights, period, 1), "That is the previous-token score (key t - 1). The induction score looks "
         "period - 1 steps back.", "这是前一词元得分（键 t - 1）。归纳得分要往回看 period - 1 步。"),
        (expected * period, "That is a sum over the queries; take the mean.", "这是对查询求和；请取平均。"),
    ]
    for wrong, hint_en, hint_zh in hints:
        if close(wrong):
            return feedback(False, hint_en, hint_zh)
    feedback(False, "Take the queries of the second copy, rows period to 2 × period - 1, and for query t the key "
             "t - period + 1; average over those queries for every layer and head.",
             "取后半段的查询，也就是索引为 period 到 2 × period - 1 的行；对查询 t 取键 t - period + 1；"
             "再对这些查询取平均，每一层、每个头各得一个数。")


def _losses(model: torch.nn.Module, tokens: torch.Tensor, window: int | None, sinks: int) -> torch.Tensor:
    """Cross-entropy of every next-token prediction (T - 1,), with the window (and sinks) on every layer."""
    from ..models.head_scores import windowed

    with torch.no_grad(), windowed(model, window, sinks):
        logits = model(tokens)[0, :-1]
    return torch.nn.functional.cross_entropy(logits.double(), tokens[0, 1:], reduction="none")


def _as_loss_pair(answer: object) -> tuple[float, float] | None:
    """{0: loss, 4: loss} with real-number values, as (loss without sinks, loss with 4 sinks); None otherwise."""
    if not isinstance(answer, dict) or len(answer) != 2:
        return None
    keys = {as_whole_number(key): value for key, value in answer.items()}
    if set(keys) != {0, 4}:
        return None
    values = tuple(as_real_number(keys[sinks]) for sinks in (0, 4))
    return None if any(v is None or not math.isfinite(v) for v in values) else values


@checker
def check_sink_losses(losses: object, model: torch.nn.Module, tokens: torch.Tensor) -> None:
    """Exercise 3: the mean loss of the last LAST predictions with a window of WINDOW keys, sinks=0 and sinks=4."""
    if missing(losses):
        return
    pair = _as_loss_pair(losses)
    if pair is None:
        return feedback(False, "losses should be a dict with two numbers: {0: loss without sinks, 4: loss with 4 sinks}.",
                        "losses 应该是一个含两个数的字典：{0: 不保留汇聚点时的损失, 4: 保留 4 个汇聚点时的损失}。")
    per_token = {sinks: _losses(model, tokens, WINDOW, sinks) for sinks in (0, 4)}
    full = _losses(model, tokens, None, 0)[-LAST:].mean().item()
    expected = tuple(per_token[sinks][-LAST:].mean().item() for sinks in (0, 4))

    def close(found: tuple[float, float], wanted: tuple[float, float]) -> bool:
        return all(math.isclose(f, w, rel_tol=2e-3, abs_tol=2e-3) for f, w in zip(found, wanted))

    if close(pair, expected):
        return feedback(True, f"Full attention: {full:.2f}. Window of {WINDOW} without sinks: {expected[0]:.2f}; with the "
                        f"first 4 tokens kept: {expected[1]:.2f}. Dropping the first tokens costs "
                        f"{expected[0] - full:.2f} in loss, keeping them {expected[1] - full:.2f}: the model needs the "
                        "first tokens as a place to park attention, whatever they say (StreamingLLM).",
                        f"完整注意力：{full:.2f}。窗口为 {WINDOW}、不保留汇聚点：{expected[0]:.2f}；保留前 4 个词元："
                        f"{expected[1]:.2f}。丢掉开头的词元，损失增加 {expected[0] - full:.2f}；保留它们，只增加 "
                        f"{expected[1] - full:.2f}：不管开头的词元写的是什么，模型都需要它们来停放注意力（StreamingLLM）。")
    if close(pair, expected[::-1]):
        return feedback(False, "The two numbers are swapped: the key is the number of sinks kept.",
                        "两个数放反了：字典的键是保留的汇聚点个数。")
    if close(pair, tuple(math.exp(v) for v in expected)):
        return feedback(False, "That is the perplexity, exp(loss); give the loss itself.", "这是困惑度 exp(损失)；请给出损失本身。")
    if close(pair, tuple(per_token[sinks].mean().item() for sinks in (0, 4))):
        return feedback(False, f"That averages every prediction; take only the last {LAST}, where the window has dropped "
                        "the start of the text.", f"这是对全部预测取平均；请只取最后 {LAST} 个，那时窗口已经丢掉了文本的开头。")
    feedback(False, f"For each setting: the cross-entropy of the predictions (logits[0, :-1] against tokens[0, 1:]), "
             f"averaged over the last {LAST}, with head_scores.windowed(model, {WINDOW}, sinks) around the forward pass.",
             f"对每种设置：计算预测的交叉熵（logits[0, :-1] 对 tokens[0, 1:]），取最后 {LAST} 个的平均；"
             f"前向计算要放在 head_scores.windowed(model, {WINDOW}, sinks) 之内。")
