"""Benchmark: a second `synprep convert` of the same corpus with other BPE settings, through the parse cache.

    python benchmarks/bench_parse_cache.py [--shared ../shared] [--pairs 2000] [--workers 2]

Corpus: the first --pairs pairs of the shared Multi30k En-De training set (its pipeline's filter), both sides
parsed with the shared UDPipe models (en_ewt, de_gsd). Four converts in one temporary folder:
  1. no cache, 8000 BPE merges (the reference shards, and the parse time of a convert without a cache);
  2. an empty cache, 8000 merges (the first convert through the cache: parses everything and stores it);
  3. the warm cache, 16000 merges (other BPE settings: nothing left to parse);
  4. the warm cache, 8000 merges (its shards must be run 1's, byte for byte).
"parse time" is the workers' parse seconds plus the driver's seconds in the cache (run.json, all splits). Prints
each run's wall time and parse time, the ratio run 3 / run 2 (target <= 0.05) and the cold cache's overhead (run 2
/ run 1), the cache's size per sentence, and whether the shards are byte-identical.
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


def make_pipeline(tmp: Path, corpus: Path, pairs: int, models: Path, symbols: int) -> Path:
    for lang in ("en", "de"):
        target = tmp / f"train.{lang}"
        if not target.exists():
            with open(corpus / f"train.{lang}", encoding="utf-8") as handle:
                target.write_text("".join(line for _, line in zip(range(pairs), handle)))
    path = tmp / f"pipeline-{symbols}.toml"
    path.write_text(f"""
[pipeline]
src_lang = "en"
tgt_lang = "de"
shard_size = 100000
[splits.train]
src = "{tmp / 'train.en'}"
tgt = "{tmp / 'train.de'}"
[splits.valid]
src = "{corpus / 'val.en'}"
tgt = "{corpus / 'val.de'}"
[filter]
langid = "py3langid"
langid_languages = ["en", "de", "fr", "cs"]
min_len = 1
max_len = 80
max_ratio = 3.0
[parser.src]
backend = "udpipe"
model = "{models / 'en_ewt.udpipe'}"
[parser.tgt]
backend = "udpipe"
model = "{models / 'de_gsd.udpipe'}"
[bpe]
symbols = {symbols}
[features]
src = ["parents", "distances", "labels"]
tgt = ["parents", "transitions", "labels"]
non_projective = "lift"
""")
    return path


def convert(pipeline: Path, out: Path, workers: int, cache: Path | None) -> dict[str, float]:
    start = time.perf_counter()
    subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(out), "--workers", str(workers),
                    *(["--parse-cache", str(cache)] if cache else [])], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    seconds = json.loads((out / "run.json").read_text())["seconds"]
    parse = sum(split.get("parse", 0.0) for split in seconds.values())
    lookups = sum(split.get("parse_cache", 0.0) for split in seconds.values())
    return {"wall": wall, "parse": parse + lookups, "workers_parse": parse, "cache": lookups}


def shards(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("*/part-*.arrow"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    corpus, models = args.shared / "data" / "parallel" / "multi30k", args.shared / "models"
    if not (corpus / "train.en").exists() or not (models / "en_ewt.udpipe").exists():
        sys.exit(f"{corpus} or {models}/en_ewt.udpipe not found: pass --shared")
    tmp = Path(tempfile.mkdtemp(prefix="bench_parse_cache_"))
    try:
        first, other = (make_pipeline(tmp, corpus, args.pairs, models, symbols) for symbols in (8000, 16000))
        cache = tmp / "cache"
        runs = {"1 no cache": convert(first, tmp / "plain", args.workers, None),
                "2 empty cache": convert(first, tmp / "cold", args.workers, cache),
                "3 warm, other BPE": convert(other, tmp / "warm-other", args.workers, cache),
                "4 warm, same BPE": convert(first, tmp / "warm", args.workers, cache)}
        identical = shards(tmp / "plain") == shards(tmp / "warm") == shards(tmp / "cold") and shards(tmp / "plain")
        manifest = json.loads((tmp / "warm" / "train" / "manifest.json").read_text())
        size = sum(f.stat().st_size for f in cache.iterdir())
        entries = int(subprocess.run([str(BIN / "synprep"), "cache", "info", str(cache)], capture_output=True,
                                     text=True, check=True).stdout.split(": ", 1)[1].split(" entries")[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Multi30k train, first {args.pairs} pairs ({manifest['rows']} rows) + valid; en_ewt / de_gsd UDPipe; "
          f"{args.workers} workers; load {os.getloadavg()[0]:.1f}")
    print(f"{'run':20}{'wall s':>9}{'parse s':>9}{'(workers':>10}{'+ cache)':>9}")
    for name, run in runs.items():
        print(f"{name:20}{run['wall']:9.1f}{run['parse']:9.2f}{run['workers_parse']:10.2f}{run['cache']:9.2f}")
    ratio = runs["3 warm, other BPE"]["parse"] / runs["2 empty cache"]["parse"]
    print(f"second convert (other BPE) / first, parse time: {ratio:.4f} (target <= 0.05: "
          f"{'met' if ratio <= 0.05 else 'MISSED'}); wall: "
          f"{runs['3 warm, other BPE']['wall'] / runs['2 empty cache']['wall']:.2f}")
    print(f"empty cache / no cache: parse {runs['2 empty cache']['parse'] / runs['1 no cache']['parse']:.3f}, wall "
          f"{runs['2 empty cache']['wall'] / runs['1 no cache']['wall']:.3f}")
    print(f"cache: {entries} entries, {size / 1e6:.2f} MB on disk ({size / max(entries, 1):.0f} B per sentence); "
          f"shards byte-identical with and without the cache: {'yes' if identical else 'NO'}")


if __name__ == "__main__":
    main()
