"""Terraform → ROS conversion measured on real-world configurations.

Give it the examples of the alicloud Terraform provider (or any folders of .tf files, or Markdown docs
with ```terraform blocks): every folder holding .tf files is one configuration (its files joined), and
every terraform/hcl block of a Markdown file is one configuration. For each, the offline engine's
``convert`` runs and the report says:

* the share converted without a loss report: nothing unconverted (resource, data source, module,
  output) and no argument reported as "was not converted" (or only partly: "only the first of");
* the share of resource blocks converted, and the resource types most often left unconverted
  (the types with no ROS mapping), and the most common reasons for a loss;
* conversion latency per configuration: the first pass (a rule is parsed when a configuration first
  needs it, the first call also builds the rules' index), then warm passes (the fastest of
  ``--repeat`` runs per configuration, on a shared machine), split into python-hcl2's parsing and
  the rest.

    uv run python benchmarks/bench_conversion_corpus.py /tmp/terraform-provider-alicloud/examples
    uv run python benchmarks/bench_conversion_corpus.py /tmp/terraform-provider-alicloud/website/docs/r

The same definitions read the older ConversionResult (no ``lossless`` field), so the script measures
a checkout from before the rostran rules too (put its plugin first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import hcl2
from iac_code_runtime_offline.engine.terraform_to_ros import ConversionResult, convert

_FENCE = re.compile(r"^```[ \t]*(?:terraform|hcl|tf)[ \t]*\n(.*?)^```", re.M | re.S)
_UNSUPPORTED_TYPE = re.compile(r"^([A-Za-z0-9_-]+)\.[^:]+: resource type not supported")
_RESOURCE = re.compile(r'^\s*resource\s+"([^"]+)"\s+"[^"]+"', re.M)


def configurations(paths: list[Path], file_per_config: bool = False) -> Iterator[tuple[str, str]]:
    """(name, HCL text) of every configuration under the given folders or files."""
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        by_folder: dict[Path, list[Path]] = {}
        for path in files:
            if path.suffix == ".tf":
                by_folder.setdefault(path if file_per_config else path.parent, []).append(path)
            elif path.suffix in (".md", ".markdown"):
                text = path.read_text(encoding="utf-8", errors="replace")
                for index, match in enumerate(_FENCE.finditer(text)):
                    yield f"{path.name}#{index + 1}", match.group(1)
        for folder, tf_files in sorted(by_folder.items()):
            yield str(folder), "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(tf_files))


def _losses(result: ConversionResult) -> list[str]:
    """What the result reports as not carried over (the same reading for old and new results)."""
    return list(result.unconverted) + [w for w in result.warnings if "was not converted" in w or "only the first of" in w]


def _is_resource(entry: str) -> bool:
    """Whether an ``unconverted`` entry is about a resource block ("type.name: reason")."""
    address = entry.split(": ", 1)[0]
    return address.count(".") == 1 and address.split(".")[0] not in ("data", "module", "output", "var", "local")


def _reason(loss: str) -> str:
    """A loss entry without its addresses, so equal reasons group together."""
    reason = loss.split(": ", 1)[-1]
    reason = re.sub(r"`[^`]*`", "`…`", reason)
    reason = re.sub(r"\b(?:alicloud|data|module|var|local)[\w.\[\]-]*", "X", reason)
    return re.sub(r"property \S+ was", "property was", reason)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="folders of .tf files and/or Markdown docs")
    parser.add_argument("--top", type=int, default=15, help="how many unmapped types and loss reasons to list")
    parser.add_argument("--repeat", type=int, default=3, help="warm runs per configuration (the fastest counts)")
    parser.add_argument("--file-per-config", action="store_true",
                        help="each .tf file is a configuration (default: each folder of .tf files is one)")
    args = parser.parse_args()
    corpus = list(configurations(args.paths, args.file_per_config))
    if not corpus:
        print("no configurations found", file=sys.stderr)
        return 2

    results: list[ConversionResult] = []
    cold: list[float] = []  # the first pass: a rule is parsed when a configuration first needs it
    for _, text in corpus:
        started = time.perf_counter()
        results.append(convert(text))
        cold.append((time.perf_counter() - started) * 1000)
    # The warm passes: every rule a configuration needs was parsed above. The machine is shared, so each
    # configuration runs --repeat times and keeps its fastest run; python-hcl2's share is timed inside the call.
    parse_clock = [0.0]
    real_loads = hcl2.loads

    def timed_loads(*args: object, **kwargs: object) -> object:
        started = time.perf_counter()
        try:
            return real_loads(*args, **kwargs)
        finally:
            parse_clock[0] += time.perf_counter() - started

    hcl2.loads = timed_loads  # type: ignore[assignment]  # the converter calls hcl2.loads
    latencies: list[float] = []
    parsing: list[float] = []
    engine: list[float] = []
    for _, text in corpus:
        runs = []
        for _ in range(args.repeat):
            parse_clock[0] = 0.0
            started = time.perf_counter()
            convert(text)
            total = time.perf_counter() - started
            runs.append((total * 1000, parse_clock[0] * 1000))
        latencies.append(min(total for total, _ in runs))
        parsing.append(min(parse for _, parse in runs))
        engine.append(min(total - parse for total, parse in runs))
    hcl2.loads = real_loads  # type: ignore[assignment]

    invalid = sum(result.unconverted == ["<input>: not valid HCL"] for result in results)
    valid = [(name, text, result) for (name, text), result in zip(corpus, results, strict=True)
             if result.unconverted != ["<input>: not valid HCL"]]
    lossless = sum(not _losses(result) for _, _, result in valid)
    all_resources = sum(not any(_is_resource(entry) for entry in result.unconverted) for _, _, result in valid)
    declared = sum(len(_RESOURCE.findall(text)) for _, text, _ in valid)
    converted = sum(sum(1 for item in result.converted if not item.startswith("output.")) for _, _, result in valid)
    unmapped_configs: Counter[str] = Counter()
    unmapped_blocks: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    mismatch = 0
    for _, _, result in valid:
        types = [m.group(1) for m in map(_UNSUPPORTED_TYPE.match, result.unconverted) if m]
        unmapped_blocks.update(types)
        unmapped_configs.update(set(types))
        reasons.update({_reason(loss) for loss in _losses(result)})
        if hasattr(result, "lossless") and result.lossless != (not _losses(result)):
            mismatch += 1

    n = len(valid)
    print(f"configurations: {len(corpus)} ({invalid} not parsed by python-hcl2, left out), measured: {n}")
    print(f"converted without a loss report: {lossless}/{n} = {lossless / n:.1%}")
    print(f"every resource block converted:  {all_resources}/{n} = {all_resources / n:.1%}")
    print(f"resource blocks converted:       {converted}/{declared} = {converted / max(declared, 1):.1%}")
    if mismatch:
        print(f"WARNING: result.lossless disagrees with the warnings in {mismatch} configurations")
    print(f"\nmost common unmapped resource types (configurations, blocks): {len(unmapped_configs)} types")
    for kind, count in unmapped_configs.most_common(args.top):
        print(f"  {count:5d} {unmapped_blocks[kind]:5d}  {kind}")
    print("\nmost common reasons for a loss report (configurations):")
    for reason, count in reasons.most_common(args.top):
        print(f"  {count:5d}  {reason}")
    print(f"\nlatency per configuration over {len(latencies)}:")
    print(f"  first pass (rules parsed on first use): first call {cold[0]:.1f} ms, p50 {statistics.median(cold):.2f} ms, "
          f"p99 {percentile(cold, 0.99):.2f} ms, max {max(cold):.2f} ms")
    print(f"  warm (rules loaded), fastest of {args.repeat}:     p50 {statistics.median(latencies):.2f} ms, "
          f"p99 {percentile(latencies, 0.99):.2f} ms, max {max(latencies):.2f} ms")
    print(f"    of which HCL parsing (python-hcl2):   p50 {statistics.median(parsing):.2f} ms, "
          f"p99 {percentile(parsing, 0.99):.2f} ms, max {max(parsing):.2f} ms")
    print(f"    the rest (the conversion itself):     p50 {statistics.median(engine):.2f} ms, "
          f"p99 {percentile(engine, 0.99):.2f} ms, max {max(engine):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
