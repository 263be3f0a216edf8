"""Benchmark: synprep's langdetect backend against the langdetect library itself, on every line of the shared
parallel corpora: the same answer and probability on every line (the count of differences must be 0), and
the time of each, measured in the same run.

    python benchmarks/bench_langdetect.py [--max-lines N] [--chunk 1000]

Reference: `langdetect`'s own `DetectorFactory` + `Detector.get_probabilities()` with seed 0, one line at a
time (what `langdetect.detect_langs` does with a seed). synprep: `get_identifier("langdetect")` with
`detect_scored_many` over chunks of `--chunk` lines, as convert's filter calls it. Times are CPU seconds of
this process (time.process_time), so load from other processes does not skew the ratio much.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
PARALLEL = ROOT.parent / "shared" / "data" / "parallel"

from test_langid import langdetect_reference  # noqa: E402

from synprep.langid import get_identifier  # noqa: E402

SKIP = {"LICENSE", "SOURCE", "README"}


def corpus_files() -> list[Path]:
    return [p for p in sorted(PARALLEL.rglob("*")) if p.is_file() and not any(p.name.startswith(s) for s in SKIP)
            and not p.name.endswith(".labels")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-lines", type=int, default=None, help="lines per file (default: every line)")
    parser.add_argument("--chunk", type=int, default=1000, help="lines per detect_scored_many call")
    args = parser.parse_args()
    if not PARALLEL.is_dir():
        sys.exit(f"no shared corpora at {PARALLEL}")
    identifier = get_identifier("langdetect")
    total = differ = 0
    reference_s = synprep_s = 0.0
    print(f"{'file':<42} {'lines':>7} {'differ':>6} {'langdetect ms':>13} {'synprep ms':>10} {'ratio':>6}")
    for path in corpus_files():
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")[:args.max_lines]
        started = time.process_time()
        expected = langdetect_reference(lines)
        reference = time.process_time() - started
        started = time.process_time()
        got = [answer for i in range(0, len(lines), args.chunk)
               for answer in identifier.detect_scored_many(lines[i:i + args.chunk])]
        ours = time.process_time() - started
        wrong = sum(a != b for a, b in zip(expected, got))
        total, differ = total + len(lines), differ + wrong
        reference_s, synprep_s = reference_s + reference, synprep_s + ours
        print(f"{str(path.relative_to(PARALLEL)):<42} {len(lines):>7} {wrong:>6} {1e3 * reference / len(lines):>13.3f} "
              f"{1e3 * ours / len(lines):>10.3f} {reference / ours:>6.1f}", flush=True)
    print(f"all: {total} lines, {differ} differ; langdetect {reference_s:.1f} s, synprep {synprep_s:.1f} s: "
          f"{reference_s / synprep_s:.1f}x faster")


if __name__ == "__main__":
    main()
