"""Lesson 16's part of the library: attention with a state of fixed size instead of a growing cache.

- `linear_attention`: φ(q)·φ(k) in place of exp(q·k), in three forms that give the same output
  (parallel, recurrent, chunked);
- `delta_rule`: the delta rule and its gated version, token by token and all at once;
- `recall_task`: the multi-query associative recall task, and its rebind and boundary variants;
- `recall`: the small models that learn it, their training loop and the grid of seeds and sizes.

Modules here import only from the top of `attention_utils`, never from its other parts.
"""

from .delta_rule import delta_rule_parallel, delta_rule_recurrent, delta_rule_step
from .linear_attention import (
    feature_map,
    linear_attention_chunked,
    linear_attention_parallel,
    linear_attention_recurrent,
)

__all__ = [
    "feature_map",
    "linear_attention_parallel",
    "linear_attention_recurrent",
    "linear_attention_chunked",
    "delta_rule_step",
    "delta_rule_recurrent",
    "delta_rule_parallel",
]
