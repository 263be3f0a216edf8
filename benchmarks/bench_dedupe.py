"""Benchmark: `synprep convert` with and without parsing each distinct sentence once, on a corpus with repeats.

    python benchmarks/bench_dedupe.py [--shared ../shared] [--pairs 2000] [--workers 2] [--repeat 2]

Default corpus: the first 2,000 pairs of the shared Europarl En-Ro sample (repeated lines: procedural phrases).
Both sides are parsed with the shared English UDPipe model (`--tgt-model` for another): the figure is the time
saved, not Romanian trees. Runs take turns (--no-dedupe, --dedupe, ...); prints wall and CPU seconds (the whole
process tree), the parse seconds the workers report, the ratios dedupe / no-dedupe, the share of sentences
parsed (distinct / all, from the manifest) that the parse ratio should follow, and checks that the shards are
byte-identical. Target: convert time falls in proportion to the repeated share.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def make_pipeline(tmp: Path, corpus: Path, pairs: int, src_model: Path, tgt_model: Path) -> Path:
    for side, lang in (("en", "en"), ("ro", "ro")):
        with open(corpus / f"train.{lang}", encoding="utf-8") as handle:
            (tmp / f"train.{side}").write_text("".join(line for _, line in zip(range(pairs), handle)))
    text = f"""
[pipeline]
src_lang = "en"
tgt_lang = "ro"
shard_size = 100000
[splits.train]
src = "{tmp / 'train.en'}"
tgt = "{tmp / 'train.ro'}"
[filter]
langid = "none"
[parser.src]
backend = "udpipe"
model = "{src_model}"
[parser.tgt]
backend = "udpipe"
model = "{tgt_model}"
[bpe]
symbols = 8000
[features]
src = ["parents", "distances", "labels"]
tgt = ["parents", "transitions", "labels"]
non_projective = "lift"
"""
    path = tmp / "pipeline.toml"
    path.write_text(text)
    return path


def convert(pipeline: Path, out: Path, workers: int, dedupe: bool) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(out), "--workers", str(workers),
                    "--dedupe" if dedupe else "--no-dedupe"], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = json.loads((out / "run.json").read_text())["seconds"]["train"]
    return {"wall": wall, "cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
            "parse": seconds.get("parse", 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--corpus", type=Path, default=None, help="folder with train.en, train.ro")
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--src-model", type=Path, default=None)
    parser.add_argument("--tgt-model", type=Path, default=None)
    args = parser.parse_args()
    corpus = args.corpus or args.shared / "data" / "parallel" / "europarl10k-enro"
    src_model = args.src_model or args.shared / "models" / "en_ewt.udpipe"
    tgt_model = args.tgt_model or src_model
    if not (corpus / "train.en").exists() or not src_model.exists():
        sys.exit(f"{corpus} or {src_model} not found: pass --shared (or --corpus and --src-model)")
    tmp = Path(tempfile.mkdtemp(prefix="bench_dedupe_"))
    try:
        pipeline = make_pipeline(tmp, corpus, args.pairs, src_model, tgt_model)
        runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
        shards = {}
        for _ in range(args.repeat):
            for dedupe in (False, True):
                out = tmp / f"out-{dedupe}"
                runs[dedupe].append(convert(pipeline, out, args.workers, dedupe))
                shards[dedupe] = {p.name: p.read_bytes() for p in sorted((out / "train").glob("part-*.arrow"))}
        manifest = json.loads((tmp / "out-True" / "train" / "manifest.json").read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    counts = manifest["sentences"]
    parsed = sum(c["distinct"] for c in counts.values()) / sum(c["distinct"] + c["repeated"] for c in counts.values())
    best = {dedupe: {key: min(run[key] for run in runs[dedupe]) for key in ("wall", "cpu", "parse")}
            for dedupe in runs}
    print(f"{corpus.name}: first {args.pairs} pairs, {manifest['rows']} rows; models {src_model.name} / "
          f"{tgt_model.name}; {args.workers} workers; best of {args.repeat} runs taking turns; load "
          f"{os.getloadavg()[0]:.1f}")
    for side, c in counts.items():
        print(f"  {side}: {c['distinct']} distinct, {c['repeated']} repeated "
              f"({100 * c['repeated'] / (c['distinct'] + c['repeated']):.0f}%)")
    print(f"{'':12}{'no-dedupe':>11}{'dedupe':>9}{'ratio':>8}")
    for key in ("wall", "cpu", "parse"):
        print(f"{key + ' s':12}{best[False][key]:11.1f}{best[True][key]:9.1f}{best[True][key] / best[False][key]:8.2f}")
    print(f"sentences parsed with dedupe: {parsed:.2f} of all (the parse ratio's target); shards byte-identical: "
          f"{'yes' if shards[True] == shards[False] else 'NO'}")


if __name__ == "__main__":
    main()
