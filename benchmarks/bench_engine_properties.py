"""The property-based request test at scale: >= 50,000 requests composed from the grammar, each checked against its spec.

Uses the tests' grammar (``plugins/runtime_offline/tests/engine/request_grammar.py``): requests in English, Chinese
or both, ROS or Terraform, one to five resources with quantities in every form and stated values, each with the
specification it must produce known by construction. The CI test runs 5,000 of them with a fixed seed; this runs
``--examples`` (default 50,000) with ``--seed`` (default 30) and prints how many ran, how fast, and the smallest
failing request Hypothesis finds, if any.
Usage: ``uv run python benchmarks/bench_engine_properties.py [--examples N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, Phase, given, seed, settings

ENGINE_TESTS = Path(__file__).resolve().parent.parent / "plugins" / "runtime_offline" / "tests" / "engine"


def load_grammar() -> ModuleType:
    spec = importlib.util.spec_from_file_location("request_grammar", ENGINE_TESTS / "request_grammar.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["request_grammar"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=50_000, help="requests to generate and check")
    parser.add_argument("--seed", type=int, default=30, help="Hypothesis seed")
    args = parser.parse_args()
    grammar = load_grammar()
    checked: list[int] = [0]
    languages: dict[str, int] = {}
    formats: dict[str, int] = {}

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, phases=(Phase.generate, Phase.shrink),
              suppress_health_check=list(HealthCheck))
    @given(grammar.requests())
    def run(request: object) -> None:
        checked[0] += 1
        languages[request.lang] = languages.get(request.lang, 0) + 1  # type: ignore[attr-defined]
        formats[request.format] = formats.get(request.format, 0) + 1  # type: ignore[attr-defined]
        grammar.check(request)

    started = time.perf_counter()
    cpu = time.process_time()
    failure: BaseException | None = None
    try:
        run()
    except AssertionError as error:  # Hypothesis re-raises the smallest failing request's error
        failure = error
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"seed {args.seed}: {checked[0]:,} requests generated and checked in {elapsed:.1f} s "
          f"({cpu:.1f} s CPU, {checked[0] / elapsed:,.0f} requests/s)")
    print("by language: " + ", ".join(f"{key} {value:,}" for key, value in sorted(languages.items())))
    print("by format:   " + ", ".join(f"{key} {value:,}" for key, value in sorted(formats.items())))
    if failure is not None:
        print(f"FAILED: {failure}")
        return 1
    print("every request produced the spec expected by construction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
