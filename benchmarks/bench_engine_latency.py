"""Latency of the offline engine per request: choosing the skill and generating, as the offline runtime does.

Every request of the engine's corpora (the first generation corpus and both halves of the request corpora, with
their contexts) is run ``--rounds`` times after a warm-up: ``intent.classify`` (the runtime's ``choose_skill``)
and, for a generation, ``generation.generate`` with the conversation's previous spec. Prints p50/p95/p99/max per
request and by part (classify, generate). Target: p99 under 50 ms. Exits 1 when the target is missed.
Usage: ``uv run python benchmarks/bench_engine_latency.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from iac_code_runtime_offline.engine.generation import generate
from iac_code_runtime_offline.engine.intent import GENERATION, classify

ENGINE_TESTS = Path(__file__).resolve().parent.parent / "plugins" / "runtime_offline" / "tests" / "engine"
CORPORA = ("generation_corpus.yaml", "generation_requests.yaml", "generation_requests_heldout.yaml")
TARGET_P99_MS = 50.0


def requests() -> list[tuple[str, dict[str, Any] | None]]:
    """(prompt, previous spec) for every request of the corpora."""
    found: list[tuple[str, dict[str, Any] | None]] = []
    for name in CORPORA:
        for case in yaml.safe_load((ENGINE_TESTS / name).read_text(encoding="utf-8")):
            previous = generate(case["context"]).spec if "context" in case else None
            found.append((case["prompt"], previous))
    return found


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="times each request is run")
    args = parser.parse_args()
    cases = requests()
    for prompt, previous in cases:  # warm-up: compiled patterns, imports
        if classify(prompt, previous) == GENERATION:
            generate(prompt, previous)
    total: list[float] = []
    parts: dict[str, list[float]] = {"classify": [], "generate": []}
    for _ in range(args.rounds):
        for prompt, previous in cases:
            started = time.perf_counter()
            skill = classify(prompt, previous)
            classified = time.perf_counter()
            if skill == GENERATION:
                generate(prompt, previous)
            done = time.perf_counter()
            parts["classify"].append(classified - started)
            if skill == GENERATION:
                parts["generate"].append(done - classified)
            total.append(done - started)
    print(f"{len(cases)} requests x {args.rounds} rounds = {len(total):,} runs")
    print("                 p50       p95       p99       max      mean (ms)")
    for name, values in (("per request", total), *parts.items()):
        millis = [1000 * value for value in values]
        print(f"{name:<12} {percentile(millis, 0.5):8.2f}  {percentile(millis, 0.95):8.2f}  {percentile(millis, 0.99):8.2f}  "
              f"{max(millis):8.2f}  {statistics.mean(millis):8.2f}")
    p99 = 1000 * percentile(total, 0.99)
    print(f"p99 per request {p99:.2f} ms (target < {TARGET_P99_MS:.0f} ms): {'ok' if p99 < TARGET_P99_MS else 'MISSED'}")
    return 0 if p99 < TARGET_P99_MS else 1


if __name__ == "__main__":
    sys.exit(main())
