"""Command line of the benchmark: measure, then write the saved results, figures and README section.

    python -m attention_utils.course.bench            # full run: build/bench/, figures/bench_*.png, README table
    python -m attention_utils.course.bench --quick    # 30-second smoke run into build/bench/quick/
    python -m attention_utils.course.bench --check    # full run that fails unless the fused module meets its targets
    python -m attention_utils.course.bench --kernel   # only lesson 9's kernel memory: explicit vs tiled vs SDPA
    python -m attention_utils.course.bench --same-process --check   # only redo the same-process comparison
    python -m attention_utils.course.bench --tiles    # only redo lesson 9's tiled loop at two tile sizes, against SDPA
    python -m attention_utils.course.bench --decode   # only lesson 12's decoding: KV cache, GQA, window, FlexAttention
    python -m attention_utils.course.bench --recurrent   # only lesson 16's decode step: KV cache against a fixed state
    python -m attention_utils.course.bench --recall   # only lesson 16's recall grid (add --part capacity to train one part)
    python -m attention_utils.course.bench --model    # only the real model: lesson 13's prefill and decode step, lesson 14's formats and batches
    python -m attention_utils.course.bench --quality-split   # only lesson 14's int8 weights with float32 arithmetic (slow: minutes)
    python -m attention_utils.course.bench --cache    # only lesson 15's caches on the real model: bytes and decode step
    python -m attention_utils.course.bench --serving  # only lesson 17's scheduler on the real model: policies, page budget
    python -m attention_utils.course.bench --speculative   # only lesson 18's speculative decoding on the real model

A full run saves what the lessons and the README quote in figures/bench_results.json,
figures/bench_kernel.json, figures/bench_decode.json, figures/bench_recurrent.json, figures/bench_recall.json, figures/bench_model.json and
figures/bench_cache.json and figures/bench_serving.json (committed), and draws every figure in
English and in Chinese.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from ...language import LANGUAGES
from ...results import (ROOT, SAVED, SAVED_ATTENTION_GROWTH, SAVED_DECODE, SAVED_KERNEL, SAVED_MODEL, SAVED_MODEL_BF16, SAVED_QUALITY_SPLIT, SAVED_SPECULATIVE,
                        SAVED_SPECULATIVE_BF16, load_saved)
from .decode import DECODE_FULL, DECODE_QUICK
from .decode_report import run_decode
from .recurrent import RECURRENT_FULL, RECURRENT_QUICK
from .recurrent_report import run_recurrent
from .recall_grid import RECALL_FULL, RECALL_QUICK, run_recall
from .harness import environment, measure_all, measure_interleaved, measure_kernels, run_in_child, time_tile_sizes
from .implementations import FULL, KERNEL_ROUNDS, QUICK, SAME_PROCESS_CALLS
from .model_caches import CACHE_FULL, CACHE_QUICK, SAVED_CACHE, run_caches
from .model_decode import MODEL_FULL, MODEL_QUICK
from .model_report import run_attention_growth, run_model_decode, run_quality_split
from .serving import SAVED_SERVING, SERVING_FULL, SERVING_QUICK, run_serving
from .speculative import SPECULATIVE_FULL, SPECULATIVE_QUICK, run_speculative
from .report import check, markdown, plot, reference_length, report, save_json, summarize, update_readme, write


def main(argv: list[str] | None = None) -> int:
    """Command line: measure (or --replot), write results, figures and README; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m attention_utils.course.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no compile; writes only build/bench/quick/")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the fused module meets its targets")
    parser.add_argument("--replot", action="store_true", help="redraw figures and README from the saved results")
    parser.add_argument("--same-process", action="store_true",
                        help="only redo the same-process comparison into the saved results, then redraw and update the README")
    parser.add_argument("--kernel", action="store_true", help="only measure lesson 9's kernels into figures/bench_kernel.json")
    parser.add_argument("--tiles", action="store_true", help="only redo lesson 9's tile-size timing into figures/bench_kernel.json")
    parser.add_argument("--decode", action="store_true",
                        help="only the decode benchmark (lesson 12) into figures/bench_decode.json (with --quick: build/bench/quick/)")
    parser.add_argument("--recurrent", action="store_true",
                        help="only lesson 16's decode step, KV cache against a fixed state, into figures/bench_recurrent.json "
                             "(with --quick: build/bench/quick/)")
    parser.add_argument("--recall", action="store_true",
                        help="only lesson 16's recall grid (80 small models trained on one core, half a minute each) into "
                             "figures/bench_recall.json (with --quick: build/bench/quick/)")
    parser.add_argument("--part", action="append", choices=sorted(RECALL_FULL.tasks), default=[],
                        help="with --recall: train only this part of the grid (repeatable); the other parts' rows stay")
    parser.add_argument("--model", action="store_true",
                        help="only the real model's prefill and decode step (lesson 13) into figures/bench_model.json")
    parser.add_argument("--quality-split", action="store_true",
                        help="only lesson 14's quality control, int8 weights with float32 arithmetic against float32, into "
                             "figures/bench_quality_split.json (several minutes: float32 int8 is the slow reference path)")
    parser.add_argument("--attention-growth", action="store_true",
                        help="only lesson 14's reason for the step's growth with T: SDPA's own time a step at lesson 13's "
                             "lengths, one thread, and the step's SDPA calls alone (each layer's cache, one layer's, written as products), "
                             "into figures/bench_attention_growth.json (about a minute)")
    parser.add_argument("--bf16-cpu", action="store_true",
                        help="with --model or --speculative, on a CPU with bfloat16 instructions: save into "
                             "figures/bench_model_bf16_cpu.json or figures/bench_speculative_bf16_cpu.json, the second "
                             "machine lessons 14 and 18 read beside the first")
    parser.add_argument("--cache", action="store_true",
                        help="only lesson 15's caches (contiguous, paged, int8, int4) on the real model into "
                             "figures/bench_cache.json (with --quick: build/bench/quick/)")
    parser.add_argument("--serving", action="store_true",
                        help="only lesson 17's scheduler on the real model (policies, page budget, chunked prefill, "
                             "prefix cache) into figures/bench_serving.json (with --quick: build/bench/quick/)")
    parser.add_argument("--speculative", action="store_true",
                        help="only lesson 18's speculative decoding (cost of checking, drafts, speed-up) on the real model into "
                             "figures/bench_speculative.json (with --quick: build/bench/quick/)")
    parser.add_argument("--rounds", type=int, help="fresh processes per configuration (default: 3, or 2 for --kernel)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads (default: all cores)")
    parser.add_argument("--out", type=Path, help="results folder (default build/bench/, or build/bench/quick/)")
    args = parser.parse_args(argv)
    if args.check and args.quick:
        parser.error("--check needs the full workload; leave out --quick")
    out = args.out or ROOT / "build" / "bench" / ("quick" if args.quick else "")
    began = time.perf_counter()
    if args.decode:
        decoded = run_decode(DECODE_QUICK if args.quick else DECODE_FULL, args.threads, out, args.quick, args.replot)
        print(f"decode results in {out if args.quick else SAVED_DECODE}; {time.perf_counter() - began:.0f} s")
        return finish(decoded["checks"] if args.check else [])
    if args.recurrent:
        found = run_recurrent(RECURRENT_QUICK if args.quick else RECURRENT_FULL, args.threads, out, args.quick, args.replot)
        print(f"recurrent results in {out if args.quick else 'figures/bench_recurrent.json'}; {time.perf_counter() - began:.0f} s")
        return finish(found["checks"] if args.check else [])
    if args.recall:
        run_recall(RECALL_QUICK if args.quick else RECALL_FULL, out, args.quick, tuple(args.part))
        print(f"recall grid in {out / 'recall.json' if args.quick else 'figures/bench_recall.json'}; "
              f"{time.perf_counter() - began:.0f} s")
        return 0
    if args.model:
        run_model_decode(MODEL_QUICK if args.quick else MODEL_FULL, args.threads, out, args.quick, args.replot, args.bf16_cpu)
        saved = SAVED_MODEL_BF16 if args.bf16_cpu else SAVED_MODEL
        print(f"model results in {out / 'model.json' if args.quick else saved}; {time.perf_counter() - began:.0f} s")
        return 0
    if args.quality_split:
        run_quality_split(MODEL_QUICK if args.quick else MODEL_FULL, args.threads, out, args.quick)
        print(f"quality split in {out / 'quality_split.json' if args.quick else SAVED_QUALITY_SPLIT}; {time.perf_counter() - began:.0f} s")
        return 0
    if args.attention_growth:
        run_attention_growth(MODEL_QUICK if args.quick else MODEL_FULL, args.threads, out, args.quick)
        print(f"attention growth in {out / 'attention_growth.json' if args.quick else SAVED_ATTENTION_GROWTH}; "
              f"{time.perf_counter() - began:.0f} s")
        return 0
    if args.cache:
        run_caches(CACHE_QUICK if args.quick else CACHE_FULL, args.threads, out, args.quick, args.replot)
        print(f"cache results in {out / 'cache.json' if args.quick else SAVED_CACHE}; {time.perf_counter() - began:.0f} s")
        return 0
    if args.serving:
        run_serving(SERVING_QUICK if args.quick else SERVING_FULL, args.threads, out, args.quick)
        print(f"serving results in {out / 'serving.json' if args.quick else SAVED_SERVING}; {time.perf_counter() - began:.0f} s")
        return 0
    if args.speculative:
        run_speculative(SPECULATIVE_QUICK if args.quick else SPECULATIVE_FULL, args.threads, out, args.quick, args.replot,
                        args.bf16_cpu)
        saved = SAVED_SPECULATIVE_BF16 if args.bf16_cpu else SAVED_SPECULATIVE
        print(f"speculative results in {out / 'speculative.json' if args.quick else saved}; "
              f"{time.perf_counter() - began:.0f} s")
        return 0
    if args.tiles:
        saved = load_saved(SAVED_KERNEL)
        saved["tile_sizes"] = run_in_child(time_tile_sizes, 2048, 7, args.threads)
        save_json(saved, SAVED_KERNEL)
        print(f"tile sizes in {SAVED_KERNEL}; {time.perf_counter() - began:.0f} s")
        return 0
    if args.kernel:
        save_json(measure_kernels(args.threads, args.rounds or KERNEL_ROUNDS), SAVED_KERNEL)
        print(f"kernel results in {SAVED_KERNEL}; {time.perf_counter() - began:.0f} s")
        return 0
    workload = QUICK if args.quick else FULL
    if args.rounds:
        workload = dataclasses.replace(workload, rounds=args.rounds)
    if args.replot or args.same_process:
        results = load_saved()
        if args.same_process:
            length = reference_length(workload.lengths)
            results["interleaved"] = run_in_child(measure_interleaved, workload, length, SAME_PROCESS_CALLS, args.threads)
    else:
        samples, found = measure_all(workload, args.threads)
        length = reference_length(workload.lengths)
        interleaved = run_in_child(measure_interleaved, workload, length, 5 if args.quick else SAME_PROCESS_CALLS, args.threads)
        found.append(f"The measurements took {time.perf_counter() - began:.0f} s.")
        results = {
            "environment": environment(args.threads),
            **summarize(samples, workload),
            "interleaved": interleaved,
            "notes": found,
        }
    if args.check:
        results["checks"] = [{"target": target, "passed": passed} for target, passed in check(results)]
    write(results, out)
    figures = out if args.quick else ROOT / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for language in LANGUAGES:
        plot(results, figures, language)
    if not args.quick:
        save_json(results, SAVED)
        update_readme(markdown(results))
        if not (args.replot or args.same_process):
            save_json(measure_kernels(args.threads, args.rounds or KERNEL_ROUNDS), SAVED_KERNEL)
        if not args.same_process:
            decoded = run_decode(DECODE_FULL, args.threads, out, quick=False, replot=args.replot)
            results.setdefault("checks", []).extend(decoded["checks"] if args.check else [])
            recurrent = run_recurrent(RECURRENT_FULL, args.threads, out, quick=False, replot=args.replot)
            results.setdefault("checks", []).extend(recurrent["checks"] if args.check else [])
            if not args.replot:
                run_recall(RECALL_FULL, out, quick=False)
            run_model_decode(MODEL_FULL, args.threads, out, quick=False, replot=args.replot)
            run_caches(CACHE_FULL, args.threads, out, quick=False, replot=args.replot)
            if not args.replot:
                run_serving(SERVING_FULL, args.threads, out, quick=False)
            run_speculative(SPECULATIVE_FULL, args.threads, out, quick=False, replot=args.replot)
    print(report(results))
    print(f"results in {out}, figures in {figures}; {time.perf_counter() - began:.0f} s in all")
    return finish(results.get("checks", []))


def finish(checks: list[dict]) -> int:
    """Print the targets met and missed; exit status 1 if any was missed."""
    for item in checks:
        print(("PASS " if item["passed"] else "FAIL ") + item["target"])
    return 0 if all(item["passed"] for item in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
