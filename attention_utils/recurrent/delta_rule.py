"""The delta rule (DeltaNet; Schlag et al. 2021, Yang et al. 2024) and its gated version (Yang et al. 2025).

Linear attention only adds: S ← S + v kᵀ. A second value written under a key that overlaps an
earlier one lands on top of the first, and reading that key returns the sum. The delta rule first
asks the state what it already predicts for the key, S k, and writes only the difference:

    S ← S − β (S k − v) kᵀ          (β in [0, 1]: how much of the error to correct)

With a unit key and β = 1, reading k right after the write returns exactly v. The gated delta
rule also lets the whole state fade by a factor α in (0, 1] before the write:

    S ← α S − β (α S k − v) kᵀ

States here are d_v × d_k matrices and read with S q, as in the papers. `delta_rule_recurrent`
walks the tokens; `delta_rule_parallel` gives the same outputs without a loop over tokens, by
solving one triangular system (the form used to train the lesson's models quickly).
"""

from __future__ import annotations

import torch

from ..checks import bilingual, cannot_read, check_flag, check_real, check_same_dtype, check_tensor
from .linear_attention import check_qkv, check_scores_fit, check_steps


def _check_rates(rates: object, name: str, queries: torch.Tensor, low_open: bool) -> torch.Tensor:
    """β or α: a finite tensor (..., T) matching the queries, or a number for every token; within its range.

    A number may be a Python, numpy or 0-d torch number, as everywhere in the package.
    """
    if not isinstance(rates, torch.Tensor) or rates.dim() == 0:
        rate = check_real(rates, name, "0.5")
        rates = torch.full(queries.shape[:-1], rate, dtype=queries.dtype, device=queries.device)
    rates = check_tensor(rates, name, ranks=(1, 2, 3))
    check_tensor(queries, "queries", ranks=(2, 3, 4))
    if rates.shape != queries.shape[:-1] or rates.dtype != queries.dtype or rates.device != queries.device:
        raise (ValueError if rates.shape != queries.shape[:-1] else TypeError)(
            bilingual(
                f"`{name}` must hold one number per token, shape {tuple(queries.shape[:-1])} with the queries' dtype "
                f"{queries.dtype} and device {queries.device}, got {rates.dtype} {tuple(rates.shape)} on {rates.device}.",
                f"`{name}` 必须每个词元一个数：形状 {tuple(queries.shape[:-1])}，类型和设备与 queries 相同"
                f"（{queries.dtype}，{queries.device}），实际是 {rates.dtype} {tuple(rates.shape)}，在 {rates.device} 上。",
            )
        )
    low = rates <= 0 if low_open else rates < 0
    if rates.numel() and not cannot_read(rates) and bool((low | (rates > 1)).any()):
        interval = "(0, 1]" if low_open else "[0, 1]"
        raise ValueError(
            bilingual(
                f"every value of `{name}` must lie in {interval}, got values from {rates.min().item():.3g} to "
                f"{rates.max().item():.3g}; squash them with torch.sigmoid.",
                f"`{name}` 的每个值都必须在 {interval} 之内，实际范围是 {rates.min().item():.3g} 到 "
                f"{rates.max().item():.3g}；可以先用 torch.sigmoid 压进这个区间。",
            )
        )
    return rates


def _check_all(queries, keys, values, beta, decay):
    queries, keys, values = check_qkv(queries, keys, values)
    beta = _check_rates(beta, "beta", queries, low_open=False)
    decay = None if decay is None else _check_rates(decay, "decay", queries, low_open=True)
    return queries, keys, values, beta, decay


def delta_rule_step(
    state: torch.Tensor, key: torch.Tensor, value: torch.Tensor, beta: torch.Tensor | float, decay: torch.Tensor | float = 1.0
) -> torch.Tensor:
    """One write: S ← α S − β (α S k − v) kᵀ for a state (..., d_v, d_k), a key (..., d_k) and a value (..., d_v)."""
    state = check_tensor(state, "state", ranks=(2, 3, 4))
    key = check_tensor(key, "key", ranks=(1, 2, 3), last_dim=state.shape[-1], last_name="d_k")
    value = check_tensor(value, "value", ranks=(1, 2, 3), last_dim=state.shape[-2], last_name="d_v")
    check_same_dtype({"state": state, "key": key, "value": value})
    beta = _check_step_rate(beta, "beta", state, low_open=False)
    decay = _check_step_rate(decay, "decay", state, low_open=True)
    lead = state.shape[:-2]  # one state per leading index: the others must broadcast to these sizes, not beyond
    for name, shape in (("key", key.shape[:-1]), ("value", value.shape[:-1]), ("beta", beta.shape), ("decay", decay.shape)):
        try:
            fits = torch.broadcast_shapes(shape, lead) == lead
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(bilingual(
                f"`{name}` has leading sizes {tuple(shape)}, but the state {tuple(state.shape)} holds {tuple(lead)} "
                "states: give one per state (or one for all).",
                f"`{name}` 的前几维是 {tuple(shape)}，而 state {tuple(state.shape)} 里有 {tuple(lead)} 个状态："
                "请每个状态给一个（或者所有状态共用一个）。"))
    return _check_grew(_step(state, key, value, beta, decay))


def _check_step_rate(rate: object, name: str, state: torch.Tensor, low_open: bool) -> torch.Tensor:
    """β or α of one step: a real number, or a tensor of one number per state (its leading sizes), within range."""
    if isinstance(rate, torch.Tensor):
        rate = check_tensor(rate, name, ranks=(0, 1, 2))
    else:
        rate = torch.tensor(check_real(rate, name, "0.5"), dtype=state.dtype, device=state.device)
    rate = rate.to(state.device, state.dtype)
    low = rate <= 0 if low_open else rate < 0
    outside = low | (rate > 1)
    if not cannot_read(rate) and bool(outside.any()):
        interval, found = "(0, 1]" if low_open else "[0, 1]", rate[outside].flatten()[0].item()
        raise ValueError(bilingual(f"`{name}` must lie in {interval}, got {found:.3g}.",
                                   f"`{name}` 必须在 {interval} 之内，实际是 {found:.3g}。"))
    return rate


def _step(state: torch.Tensor, key: torch.Tensor, value: torch.Tensor, beta: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """The update itself, without checks (the recurrent loop calls it T times)."""
    state = decay[..., None, None] * state  # the gate: everything fades a little first
    predicted = (state @ key[..., :, None])[..., 0]  # S k: what the state already says for this key
    error = value - predicted  # write only what it does not predict
    return state + beta[..., None, None] * error[..., :, None] * key[..., None, :]  # S + β (v − S k) kᵀ


def delta_rule_recurrent(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    beta: torch.Tensor | float,
    decay: torch.Tensor | float | None = None,
    return_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Outputs (..., T, d_v): write token t into the state, then read it with q_t. `decay` None means α = 1.

    With `return_state=True`, also the final state (..., d_v, d_k).
    """
    queries, keys, values, beta, decay = _check_all(queries, keys, values, beta, decay)
    return_state = check_flag(return_state, "return_state")
    *lead, length, d_k = queries.shape
    check_steps(length, f"queries of {length:,} tokens", f"{length:,} 个词元的 queries",
                "use delta_rule_parallel for long inputs", "长输入请用 delta_rule_parallel")
    state = queries.new_zeros(*lead, values.shape[-1], d_k)
    ones = torch.ones(lead, dtype=queries.dtype, device=queries.device)
    outputs = []
    for t in range(length):
        alpha = ones if decay is None else decay[..., t]
        state = _step(state, keys[..., t, :], values[..., t, :], beta[..., t], alpha)
        outputs.append((state @ queries[..., t, :, None])[..., 0])  # read: S q
    out = _check_grew(torch.stack(outputs, dim=-2) if outputs else values.new_zeros(values.shape))
    return (out, state) if return_state else out


def delta_rule_parallel(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    beta: torch.Tensor | float,
    decay: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """The same outputs as `delta_rule_recurrent`, with no loop over tokens.

    Write the state as S_t = Σ_{i≤t} (γ_t/γ_i) u_i k_iᵀ, γ_t the product of the decays up to t. Putting
    that into the update gives u_t = β_t (v_t − Σ_{i<t} (γ_t/γ_i)(k_i·k_t) u_i): a lower-triangular
    system (I + A) U = β V, solved at once. Then out_t = S_t q_t = Σ_{i≤t} (γ_t/γ_i)(k_i·q_t) u_i.
    """
    queries, keys, values, beta, decay = _check_all(queries, keys, values, beta, decay)
    length = queries.shape[-2]
    wide = torch.float32 if queries.element_size() < 4 else queries.dtype  # CPU torch cannot solve in float16 or bfloat16
    # about 8 (T, T) matrices live at the peak: log γ gaps, fade, overlap, its tril, β × tril, the system (and its copy
    # in the wide dtype), q·k; counted in the wide dtype's size
    check_scores_fit(queries, held=8, element_size=torch.finfo(wide).bits // 8)
    if length == 0:
        return values.new_zeros(values.shape)
    later = torch.ones(length, length, dtype=torch.bool, device=queries.device).tril()  # i <= t
    if decay is None:
        fade = later.to(queries.dtype)
    else:
        total = torch.cumsum(torch.log(decay), dim=-1)  # log γ_t
        gap = total[..., :, None] - total[..., None, :]  # log(γ_t / γ_i)
        fade = torch.exp(torch.where(later, gap, torch.full_like(gap, -torch.inf)))  # 0 above the diagonal
    overlap = fade * (keys @ keys.transpose(-2, -1))  # (γ_t/γ_i) k_t·k_i
    system = torch.eye(length, dtype=queries.dtype, device=queries.device) + beta[..., :, None] * overlap.tril(-1)
    corrections = torch.linalg.solve_triangular(system.to(wide), (beta[..., :, None] * values).to(wide), upper=False,
                                                unitriangular=True).to(queries.dtype)
    return _check_grew((fade * (queries @ keys.transpose(-2, -1))) @ corrections)


def _check_grew(out: torch.Tensor) -> torch.Tensor:
    """Finite inputs gave inf or NaN: the state grew past the dtype, as it does when β ‖k‖² > 2 (each write amplifies)."""
    if out.numel() and not cannot_read(out) and not torch.isfinite(out.sum()) and not torch.isfinite(out).all():
        raise ValueError(bilingual(
            f"The delta rule's state grew beyond {out.dtype}: with beta × |k|² above 2 every write amplifies it; "
            "normalize the keys (F.normalize(keys, dim=-1)) or lower beta.",
            f"delta 规则的状态超出了 {out.dtype} 的表示范围：beta × |k|² 大于 2 时，每次写入都会把它放大；"
            "请把 keys 归一化（F.normalize(keys, dim=-1)），或调小 beta。"))
    return out
