"""The example third-party plugin works from its wheel: build iac-code's wheels and the wheel of
``examples/csv_plugin``, install ``iac-code[a2a]`` and the example (with its ``test`` extra) into a
fresh virtual environment (not the workspace), check that ``iac-code a2a --plugins list`` lists it,
and run the example's own tests there with that environment's pytest.

    uv run python .ci/check_example_plugin.py [--keep]

It reuses ``.ci/check_wheels.py``'s build (every workspace distribution) and installs the kernel
wheel by its file path for the reason given there. Only the package index is contacted, for
third-party dependencies; the tests talk to servers on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_wheels import ROOT, build, run  # noqa: E402

EXAMPLE = ROOT / "examples" / "csv_plugin"
DISTRIBUTION = "iac-code-example-csv"
PLUGIN = "csv"
PACKAGE = "iac_code_example_csv"


def build_example(dist: Path) -> Path:
    done = run(["uv", "build", "--wheel", "-o", str(dist), str(EXAMPLE)], cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"uv build of {EXAMPLE.relative_to(ROOT)} failed:\n{done.stdout}\n{done.stderr}")
    wheels = sorted(dist.glob(f"{PACKAGE}-*-py3-none-any.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one {PACKAGE} wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


def check(work: Path) -> list[str]:
    """Problems found (empty: the example installs, is listed and passes its tests)."""
    dist = work / "dist"
    kernel = build(dist)
    example = build_example(dist)
    print(f"built {', '.join(sorted(p.name for p in dist.glob('*.whl')))}")
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python, bin_dir = venv / "bin" / "python", venv / "bin"
    started = time.monotonic()
    done = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                f"{kernel}[a2a]", f"{example}[test]", "--find-links", str(dist)])
    if done.returncode != 0:
        return [f"pip install failed: {done.stderr.strip()[-2000:]}"]
    print(f"installed iac-code[a2a] and {example.name}[test] in {time.monotonic() - started:.0f}s")

    located = run([str(python), "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"], cwd=work)
    if located.returncode != 0 or not Path(located.stdout.strip()).is_relative_to(venv):
        return [f"{PACKAGE} is not imported from the virtual environment: {located.stdout}{located.stderr}"]

    listed = run([str(bin_dir / "iac-code"), "a2a", "--plugins", "list", "--output", "json"], cwd=work)
    if listed.returncode != 0:
        return [f"--plugins list failed: {listed.stderr.strip()}"]
    rows = [row for row in json.loads(listed.stdout)["plugins"] if row["name"] == PLUGIN]
    if [(r["distribution"], r["status"]) for r in rows] != [(DISTRIBUTION, "active")]:
        return [f"--plugins list does not show {PLUGIN!r} from {DISTRIBUTION} as active: {rows}"]
    print(f"  --plugins list: {PLUGIN} ({DISTRIBUTION} {rows[0]['version']}): {', '.join(rows[0]['hooks'])}")

    # The example's own configuration (its pyproject.toml) applies; pytest is the environment's.
    tests = run([str(bin_dir / "pytest"), "-q", "-p", "no:cacheprovider"], cwd=EXAMPLE, timeout=600)
    print("\n".join("  " + line for line in tests.stdout.strip().splitlines()[-15:]))
    if tests.returncode != 0:
        return [f"the example's tests failed (exit {tests.returncode}): {tests.stderr.strip()[-2000:]}"]
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="iac-code-example-"))
    try:
        problems = check(work)
    finally:
        if args.keep:
            print(f"scratch directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    for problem in problems:
        print(f"FAIL {problem}")
    print("example plugin: " + ("failed" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
