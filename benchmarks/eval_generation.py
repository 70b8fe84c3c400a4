"""How well the offline engine understands requests: pass rates of the request corpora (issue 30).

Scores ``generation_requests.yaml`` (the part the engine is tuned with) and
``generation_requests_heldout.yaml`` (the frozen held-out third, never tuned on) of
``plugins/runtime_offline/tests/engine`` with that directory's ``request_corpus`` scorer and
prints one table per half: pass rate by language (rows) and format (columns: ROS, Terraform,
requests that must not generate). Targets: >= 97 % tuned, >= 90 % held-out.

``--failures`` lists the failing cases of the tuned part with their problems (never of the
held-out part: looking at those would tune on them).
Usage: ``uv run python benchmarks/eval_generation.py [--failures]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ENGINE_TESTS = Path(__file__).resolve().parent.parent / "plugins" / "runtime_offline" / "tests" / "engine"


def load_scorer() -> ModuleType:
    """The tests' scorer module, loaded from its file (the tests directory is not a package on sys.path)."""
    spec = importlib.util.spec_from_file_location("request_corpus", ENGINE_TESTS / "request_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["request_corpus"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failures", action="store_true", help="list the failing cases of the tuned part")
    args = parser.parse_args()
    scorer = load_scorer()
    halves = [("tuned part (generation_requests.yaml)", scorer.TUNED, 0.97),
              ("held-out third (generation_requests_heldout.yaml, never tuned on)", scorer.HELD_OUT, 0.90)]
    ok = True
    for title, path, target in halves:
        outcomes = [scorer.score(case) for case in scorer.load(path)]
        rate = scorer.pass_rate(outcomes)
        ok = ok and rate >= target
        print(scorer.table(outcomes, f"{title}: {100 * rate:.1f}% (target >= {100 * target:.0f}%)"))
        print()
        if args.failures and path == scorer.TUNED:
            for outcome in outcomes:
                if not outcome.passed:
                    context = f"[{outcome.case['context']}] " if "context" in outcome.case else ""
                    print(f"- {context}{outcome.case['prompt']!r}: {'; '.join(outcome.problems)}")
            print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
