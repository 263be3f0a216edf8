"""Parse throughput: `synprep parse --workers 1/2` against the raw ufal.udpipe Pipeline over the same lines.

usage: python benchmarks/bench_parse.py [--sentences 3000] [--model M.udpipe] [--text LINES.txt] [--repeat 2]
Defaults: ../shared/models/en_ewt.udpipe and the `# text` lines of ../shared/data/ud EWT (dev, then test).
Without them, a tiny model is trained from sample_data/en.conllu and its sentences are repeated.
Every run is a fresh process (interpreter start + model load included, for both sides).
Targets: synprep overhead <= 10% at 1 worker; speed-up >= 1.7x at 2 workers.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
RAW = """
import sys
from ufal.udpipe import Model, Pipeline, ProcessingError
model = Model.load(sys.argv[1])
pipeline = Pipeline(model, "tokenizer=presegmented", Pipeline.DEFAULT, Pipeline.DEFAULT, "conllu")
error = ProcessingError()
with open(sys.argv[2], encoding="utf-8") as src, open(sys.argv[3], "w", encoding="utf-8") as out:
    out.write(pipeline.process(src.read(), error))
assert not error.occurred(), error.message
"""


def text_lines(path):
    return [line[len("# text = "):].rstrip("\n") for line in open(path, encoding="utf-8")
            if line.startswith("# text = ")]


def timed(cmd):
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return seconds


def _busy(n):
    total = 0
    for i in range(n):
        total += i
    return total


def cpu_parallelism(n=15_000_000):
    """How many cores this machine gives us right now (other jobs share them): 2 busy processes vs 1."""
    from multiprocessing import Pool

    def timed_map(jobs):
        start = time.perf_counter()
        pool.map(_busy, [n] * jobs, chunksize=1)
        return time.perf_counter() - start

    with Pool(2) as pool:
        one = min(timed_map(1) for _ in range(2))
        two = min(timed_map(2) for _ in range(2))
    return min(2.0, 2 * one / two)


def count(conllu_path):
    sentences = words = 0
    for line in open(conllu_path, encoding="utf-8"):
        if line[:1].isdigit() and "\t" in line and line.split("\t", 1)[0].isdigit():
            words += 1
        elif line == "\n":
            sentences += 1
    return sentences, words


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=3000)
    ap.add_argument("--model", default=None)
    ap.add_argument("--text", default=None, help="one sentence per line (default: EWT text)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds over the configurations; the fastest run counts")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_parse_"))
    model = args.model or str(SHARED / "models" / "en_ewt.udpipe")
    if not os.path.exists(model):
        model = str(tmp / "tiny.udpipe")
        subprocess.run([sys.executable, "-m", "synprep.cli", "parser", "train", "--conllu",
                        str(REPO / "sample_data" / "en.conllu"), "-o", model, "--preset", "tiny"],
                       check=True, capture_output=True)
    if args.text:
        lines = [line.rstrip("\n") for line in open(args.text, encoding="utf-8")]
    else:
        ud = SHARED / "data" / "ud" / "UD_English-EWT"
        sources = [ud / "en_ewt-ud-dev.conllu", ud / "en_ewt-ud-test.conllu"]
        lines = [line for path in sources if path.exists() for line in text_lines(path)]
        if not lines:
            lines = text_lines(REPO / "sample_data" / "en.conllu")
    lines = [line for line in lines if line.strip()]
    lines = (lines * (args.sentences // len(lines) + 1))[:args.sentences]
    source = tmp / "input.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"model {model}; {len(lines)} lines; {os.cpu_count()} cores")

    runs = {
        "raw ufal.udpipe": [sys.executable, "-c", RAW, model, str(source), str(tmp / "raw.conllu")],
        "synprep --workers 1": [sys.executable, "-m", "synprep.cli", "parse", "--backend", "udpipe", "--model",
                                model, "-i", str(source), "-o", str(tmp / "w1.conllu"), "--workers", "1"],
        "synprep --workers 2": [sys.executable, "-m", "synprep.cli", "parse", "--backend", "udpipe", "--model",
                                model, "-i", str(source), "-o", str(tmp / "w2.conllu"), "--workers", "2"],
    }
    outputs = {"raw ufal.udpipe": "raw.conllu", "synprep --workers 1": "w1.conllu", "synprep --workers 2": "w2.conllu"}
    seconds = {name: float("inf") for name in runs}
    for _ in range(args.repeat):  # interleaved rounds: a burst of load from other jobs hits all configurations
        for name, cmd in runs.items():
            seconds[name] = min(seconds[name], timed(cmd))
    for name, secs in seconds.items():
        sentences, words = count(tmp / outputs[name])
        print(f"{name:22s} {secs:6.2f} s  {sentences / secs:8.1f} sentences/s  {words / secs:9.1f} words/s")
    same = (tmp / "w1.conllu").read_bytes() == (tmp / "w2.conllu").read_bytes()
    overhead = seconds["synprep --workers 1"] / seconds["raw ufal.udpipe"] - 1
    speedup = seconds["raw ufal.udpipe"] / seconds["synprep --workers 2"]
    print(f"overhead at 1 worker: {100 * overhead:+.1f}% (target <= 10%)  "
          f"{'OK' if overhead <= 0.10 else 'MISSED'}")
    print(f"speed-up at 2 workers vs raw: {speedup:.2f}x (target >= 1.7x)  {'OK' if speedup >= 1.7 else 'MISSED'}")
    print(f"--workers 2 output byte-identical to --workers 1: {same}")
    print(f"cores free for this run (2 busy processes vs 1): {cpu_parallelism():.2f} of 2; a lower figure means "
          "other jobs shared the CPU and the 2-worker speed-up cannot reach its target")


if __name__ == "__main__":
    main()
