"""Saved benchmark results, as the lessons read them: `make bench` writes them, nothing here measures.

Lessons quote numbers from the JSON files in `figures/`, so a lesson shows the same numbers on every
machine and never waits for a timing run. `saved` finds and checks the files; one module per bench
holds the readers of its lessons. Lessons call them all as `results.<name>`.
"""

from .decode import decode_rows, decode_split, decode_split_lines, decode_table, flex_summary
from .kernels import STEP_NAMES, headline, same_process_pairs
from .model import (COMPILED_ROWS, FORMATS, ROW_FIELDS, SHOWN_ZH, TARGETS, TRANSFORMERS, chosen_rows, compile_line, machine_name, model_batch_table,
                    model_decode_lines, model_format_table, model_machines_table, model_roofs, model_rows, model_timing,
                    model_verdict_lines, model_verdicts, roofline_point, second_run, step_factors, step_split)
from .speculative import best_rows, draft_name, speculative_table, speculative_verdict_lines
from .saved import (ROOT, SAVED, SAVED_ATTENTION_GROWTH, SAVED_CACHE, SAVED_DECODE, SAVED_KERNEL, SAVED_MODEL, SAVED_MODEL_BF16, SAVED_QUALITY_SPLIT, SAVED_RECALL,
                    SAVED_RECURRENT, SAVED_SERVING, SAVED_SPECULATIVE, SAVED_SPECULATIVE_BF16, at_length, by_run, load_saved, loglog_slope, reads)
