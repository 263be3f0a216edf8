"""Shard compression: size and read time of none / lz4 / zstd on one split (baseline: none, same run).

    python benchmarks/bench_shards.py                         # a synthetic split (synprep synth, 20k pairs)
    python benchmarks/bench_shards.py --split out/multi30k-en-de/train

Rewrites the split's shards with each compression (synprep.shards.write_shard), then times, best of --rounds:
the checked full read (`open_split(...).table()`: every batch validated), the trainer's columns, and the
trainer's load (`syntrain.dataset.ParallelData`: read + vocabulary encoding). Prints bytes and ratios to none.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synprep.shards import open_split, read_shard, write_shard
from syntrain.columns import TRAIN_COLUMNS
from syntrain.dataset import ParallelData
from syntrain.vocab import Vocab

BIN = Path(sys.executable).parent


def synthetic_split(tmp: Path, pairs: int) -> Path:
    subprocess.run([str(BIN / "synprep"), "synth", "--pairs", str(pairs), "--seed", "1", "-o", str(tmp / "synth")],
                   check=True, capture_output=True)
    subprocess.run([str(BIN / "synprep"), "convert", str(tmp / "synth" / "pipeline.toml"), "--output",
                    str(tmp / "out")], check=True, capture_output=True)
    return tmp / "out" / "train"


def rewrite(split_dir: Path, target: Path, compression: str) -> None:
    """A copy of the split whose shards use `compression` (manifest entries updated)."""
    split = open_split(str(split_dir))
    target.mkdir(parents=True)
    entries = []
    for path, shard in zip(split.shard_paths(), split.manifest.shards):
        batches = read_shard(path, shard["rows"]).to_batches()
        entries.append(write_shard(str(target / shard["file"]), split.schema, batches, compression))
    manifest = json.loads(split.manifest.to_json())
    manifest["shards"], manifest["compression"] = entries, compression
    (target / "manifest.json").write_text(json.dumps(manifest))


def best_of(rounds: int, func) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", help="a split folder written by synprep convert (default: synthetic)")
    parser.add_argument("--pairs", type=int, default=20000, help="synthetic split size")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_shards_"))
    try:
        source = Path(args.split) if args.split else synthetic_split(tmp, args.pairs)
        vocab = Vocab.build([open_split(str(source)).table(["src_subwords", "tgt_subwords"])])
        results = {}
        for compression in ("none", "lz4", "zstd"):
            folder = tmp / compression / "train"
            rewrite(source, folder, compression)
            split = open_split(str(folder))
            size = sum(Path(p).stat().st_size for p in split.shard_paths())
            columns = [c for c in TRAIN_COLUMNS if c in split.columns]
            results[compression] = (
                size,
                best_of(args.rounds, lambda s=split: s.table()),
                best_of(args.rounds, lambda s=split, c=columns: s.table(c)),
                best_of(args.rounds, lambda f=folder: ParallelData(str(f), vocab)),
            )
        rows = open_split(str(source)).manifest.rows
        print(f"split {source} ({rows} rows), best of {args.rounds}")
        base = results["none"]
        for name, (size, full, cols, load) in results.items():
            print(f"  {name:5s} {size / 2**20:7.1f} MiB ({size / base[0]:.2f}x)  full read {full:6.3f} s "
                  f"({full / base[1]:5.1f}x)  trainer columns {cols:6.3f} s ({cols / base[2]:5.1f}x)  "
                  f"ParallelData {load:6.3f} s ({load / base[3]:4.2f}x)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
