"""Benchmark: `synprep convert` on Multi30k train (29k pairs, shared UDPipe models), 1 vs 2 workers.

    python benchmarks/bench_convert.py [--pairs 29000] [--small 3000]

Prints pairs/s, peak RSS and PSS of the whole process tree (and the driver's RSS), and the share of worker
time per stage. Targets:
2 workers >= 1.7x one; post-parse stages (BPE learning + features + write) <= 10% of the total;
peak memory at 29k pairs within 1.3x of the peak at 3k pairs. Needs ../shared (data and models).
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

import psutil

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BIN = Path(sys.executable).parent
MULTI30K = SHARED / "data" / "parallel" / "multi30k"


def make_pipeline(tmp: Path, pairs: int) -> Path:
    tmp = tmp / f"data{pairs}"
    tmp.mkdir()
    for lang in ("en", "de"):
        with open(MULTI30K / f"train.{lang}", encoding="utf-8") as handle:
            (tmp / f"train.{lang}").write_text("".join(line for _, line in zip(range(pairs), handle)))
    text = f"""
[pipeline]
src_lang = "en"
tgt_lang = "de"
shard_size = 10000
[splits.train]
src = "{tmp / 'train.en'}"
tgt = "{tmp / 'train.de'}"
[filter]
langid = "py3langid"
langid_languages = ["en", "de", "fr", "cs"]
[parser.src]
backend = "udpipe"
model = "{SHARED / 'models' / 'en_ewt.udpipe'}"
[parser.tgt]
backend = "udpipe"
model = "{SHARED / 'models' / 'de_gsd.udpipe'}"
[bpe]
symbols = 10000
[features]
src = ["parents", "distances", "labels"]
tgt = ["parents", "transitions", "labels"]
non_projective = "lift"
"""
    path = tmp / f"p{pairs}.toml"
    path.write_text(text)
    return path


def run(pipeline: Path, out: Path, workers: int) -> tuple[float, int, int, int]:
    """Wall seconds, peak RSS and peak PSS (bytes, summed over the process tree, sampled every 50 ms; PSS shares
    the pages forked workers have in common with the driver among them, RSS counts them once per process), and
    the driver's own peak RSS."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    process = subprocess.Popen([str(BIN / "synprep"), "convert", str(pipeline), "--output", str(out),
                                "--workers", str(workers)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(process.pid)
    peak = peak_pss = driver = 0
    while process.poll() is None:
        try:
            procs = [p for p in [root] + root.children(recursive=True) if p.is_running()]
            peak = max(peak, sum(p.memory_info().rss for p in procs))
            peak_pss = max(peak_pss, sum(p.memory_full_info().pss for p in procs))
            driver = max(driver, root.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    if process.returncode:
        sys.exit(f"convert failed with exit code {process.returncode}")
    return time.perf_counter() - start, peak, peak_pss, driver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=29000)
    parser.add_argument("--small", type=int, default=3000)
    args = parser.parse_args()
    if not (MULTI30K / "train.en").exists() or not (SHARED / "models" / "en_ewt.udpipe").exists():
        sys.exit("needs ../shared/data/parallel/multi30k and ../shared/models")
    tmp = Path(tempfile.mkdtemp(prefix="bench_convert_"))
    big, small = make_pipeline(tmp, args.pairs), make_pipeline(tmp, args.small)
    results = {}
    for label, pipeline, workers in (("small, 2 workers", small, 2), ("full, 1 worker", big, 1),
                                     ("full, 2 workers", big, 2)):
        seconds, peak, pss, driver = run(pipeline, tmp / "out", workers)
        stages = json.loads((tmp / "out" / "run.json").read_text())["seconds"]["train"]
        manifest = json.loads((tmp / "out" / "train" / "manifest.json").read_text())
        results[label] = (seconds, peak, stages, manifest["input_lines"], pss, driver)
        work = {k: v for k, v in stages.items() if not k.endswith("_wall")}
        total = sum(work.values())
        post = work.get("bpe+features", 0) + work.get("write", 0) + work.get("learn_bpe", 0)
        pairs = manifest["input_lines"]
        shares = ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in work.items())
        print(f"{label:17s} {pairs:6d} pairs {seconds:7.1f} s {pairs / seconds:7.1f} pairs/s  "
              f"peak RSS {peak / 2**20:6.0f} MiB (PSS {pss / 2**20:4.0f}, driver {driver / 2**20:4.0f})  stages: "
              f"{shares}  (post-parse {100 * post / total:.1f}%)")
    one, two = results["full, 1 worker"][0], results["full, 2 workers"][0]
    ratio = results["full, 2 workers"][1] / results["small, 2 workers"][1]
    ratio_pss = results["full, 2 workers"][4] / results["small, 2 workers"][4]
    print(f"speed-up 2 workers / 1: {one / two:.2f}x (target >= 1.7); "
          f"peak RSS {args.pairs} / {args.small} pairs: {ratio:.2f}x, PSS {ratio_pss:.2f}x (target <= 1.3)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
