"""Benchmark: `synprep convert` as an incremental build, through the parse cache and the stage caches beside it.

    python benchmarks/bench_incremental.py [--shared ../shared] [--pairs 2000] [--workers 2]

Corpus and pipeline: benchmarks/bench_parse_cache.py's (the first --pairs pairs of Multi30k En-De train and its
valid split, 1,014 pairs: 3,014 real pairs by default; both sides parsed with the shared UDPipe models en_ewt and
de_gsd; 8000 BPE merges learned on train). Three converts, each into a new folder, in one run:
  1. cold: an empty cache (filters, parses, learns BPE, featurizes; stores every stage);
  2. unchanged: the same pipeline (target: wall <= 10% of run 1);
  3. features: only [features] changed (source `dbsa` added: target wall <= 15% of run 1; only the features
     stage runs).
Prints each run's wall time, the manifests' reuse counts per stage, the ratios, and whether run 2's shards, codes
and vocabularies are run 1's byte for byte. Figures depend on the machine and its load: name both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
BASE_FEATURES = 'src = ["parents", "distances", "labels"]'  # bench_parse_cache's pipeline
MORE_FEATURES = 'src = ["parents", "dbsa", "distances", "labels"]'
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse_cache import make_pipeline as parse_cache_pipeline  # noqa: E402 - the same corpus and pipeline


def make_pipeline(tmp: Path, corpus: Path, pairs: int, models: Path, cache: Path, features: str, name: str) -> Path:
    """bench_parse_cache's pipeline (train: the first `pairs` pairs, and the valid split; 8000 merges) with
    these source features and the cache."""
    text = parse_cache_pipeline(tmp, corpus, pairs, models, 8000).read_text()
    assert BASE_FEATURES in text
    path = tmp / f"{name}.toml"
    path.write_text(text.replace(BASE_FEATURES, features) + f'[parse]\ncache = "{cache}"\n')
    return path


def convert(pipeline: Path, out: Path, workers: int) -> dict:
    start = time.perf_counter()
    subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(out), "--workers", str(workers)],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    run = json.loads((out / "run.json").read_text())
    return {"wall": wall, "reused": run.get("reused", {})}


def outputs(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("*/part-*.arrow"))
            + sorted(out.glob("codes*")) + sorted(out.glob("vocab.*"))}


def _reuse(reused: dict) -> str:
    train = reused.get("train", {})
    parts = [f"{stage} {train[stage]['reused']}/{train[stage]['reused'] + train[stage]['computed']}"
             for stage in ("filter", "features") if stage in train]
    return f"train pieces reused: {', '.join(parts)}; bpe {train.get('bpe', '-')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--pairs", type=int, default=2000, help="train pairs (the valid split is added)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    corpus, models = args.shared / "data" / "parallel" / "multi30k", args.shared / "models"
    if not (corpus / "train.en").exists() or not (models / "en_ewt.udpipe").exists():
        sys.exit(f"{corpus} or {models}/en_ewt.udpipe not found: pass --shared")
    tmp = Path(tempfile.mkdtemp(prefix="bench_incremental_"))
    try:
        cache = tmp / "cache"
        base = make_pipeline(tmp, corpus, args.pairs, models, cache, BASE_FEATURES, "base")
        more = make_pipeline(tmp, corpus, args.pairs, models, cache, MORE_FEATURES, "features")
        load = os.getloadavg()[0]
        runs = {"1 cold (empty cache)": convert(base, tmp / "cold", args.workers),
                "2 unchanged": convert(base, tmp / "unchanged", args.workers),
                "3 [features] changed": convert(more, tmp / "features", args.workers)}
        identical = outputs(tmp / "cold") == outputs(tmp / "unchanged") and len(outputs(tmp / "cold")) > 3
        rows = json.loads((tmp / "cold" / "train" / "manifest.json").read_text())["rows"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Multi30k En-De, the first {args.pairs} train pairs + valid ({rows} train rows); en_ewt / de_gsd UDPipe; "
          f"{args.workers} workers; load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    cold = runs["1 cold (empty cache)"]["wall"]
    for name, run in runs.items():
        print(f"{name:24}{run['wall']:8.1f} s  {run['wall'] / cold:6.3f} of cold  {_reuse(run['reused'])}")
    for name, target in (("2 unchanged", 0.10), ("3 [features] changed", 0.15)):
        ratio = runs[name]["wall"] / cold
        print(f"{name}: wall {ratio:.3f} of the cold convert (target <= {target:.2f}: "
              f"{'met' if ratio <= target else 'MISSED'})")
    print(f"unchanged re-convert: shards, codes and vocabularies byte-identical to the cold one: "
          f"{'yes' if identical else 'NO'}")


if __name__ == "__main__":
    main()
