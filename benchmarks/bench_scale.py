"""Benchmark: synprep convert and syntrain run as the corpus grows to WMT size (synthetic, WMT-like lengths).

    python benchmarks/bench_scale.py                 # N = 30k and 100k pairs (a few minutes)
    python benchmarks/bench_scale.py --quick         # N = 3k and 10k (CI-sized)
    python benchmarks/bench_scale.py --large         # N = 30k, 300k and 1M
    python benchmarks/bench_scale.py --sizes 30000,4500000 --workers 16   # any sizes (WMT16: 4.5M pairs)
    python benchmarks/bench_scale.py --sizes 100000 --no-train --ray      # + per-stage rates, Ray's overhead

For each N: `synprep synth --lengths wmt --vocabulary zipf` (mean ~25 tokens, tail to 100; Zipfian words whose
distinct count grows as real text's: `--vocabulary lexicon` for the ~100-word lists), then `synprep convert` of
its pipeline.toml (pre-parsed CoNLL-U: no parser; the Multi30k pipeline's feature set, joint BPE, 16000 merges
with the zipf vocabulary, `--merges`): wall time, the worker time of each stage (run.json), peak RSS summed over
the whole process tree, and per phase (filter+parse, learn_bpe, features+shards: told apart by convert's
progress, stderr being a terminal) the peak of the tree, of its largest process and of the driver; shard bytes
per pair and what is left in the output folder; then `syntrain run` (tiny model, CPU, 12 steps of 1024 tokens,
`--no-train` skips it): time from start to the data being ready (the `syntrain:` line) and to the first step,
peak RSS, steps/s, and the arrays the trainer must hold (ids, offsets, parents). UDPipe's parse rate is
measured once on a sample (the shared models when present, else a tiny model trained on sample_data;
`--no-parse-rate` skips it) to extrapolate the parse stage, which the pre-parsed path skips. Last, the distinct
source words in 10k/50k/70k synthetic pairs against pooled real English of the shared data. At the end, the
rate of every stage at the largest N (input pairs per second per core of worker time, the serial stages per
second of wall time) and each phase's peak memory, from which docs/scale.md plans WMT14/WMT17; `--ray` converts
the largest N once more with `--engine ray` (a local Ray, the same workers) and prints its wall time against the
local engine's (Ray's overhead).

Baseline: the smallest N of the same run. Targets: convert time per pair at the largest N within 1.2x of the
smallest; convert peak RSS of the process tree <= 1.5 GiB with 2 workers at 1M pairs and its growth <= 1.2x
from 100k to 1M; trainer first step <= 20 s and its RSS growth <= 1.1x the growth of the arrays it holds. The
trainer's RSS is also a fixed ~0.7 GiB of torch, the model and its training step, so it is read two ways: peak
RSS / arrays, and the growth of peak RSS from the smallest N over the growth of the arrays.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SYNPREP_SHARED", ROOT.parent / "shared"))  # data and UDPipe models, if present
BIN = Path(sys.executable).parent
SAMPLE_DATA = ROOT / "sample_data"
PARSE_SAMPLE = 1000  # sentences parsed to measure UDPipe's rate
MiB = 2**20


def measured(command: list[str], marks: dict[str, str] | None = None,
             phases: tuple[tuple[str, str], ...] = ()) -> dict:
    """Run `command`: wall seconds, peak RSS (bytes, the process tree, sampled every 50 ms), and for each
    name -> prefix of `marks` the seconds until the first stderr line that starts with the prefix. With
    `phases` ((name, text) in order: the phase `name` begins at the first stderr line holding `text`, the
    first phase at the start) stderr is a terminal, so that the command shows its progress, and the peaks
    are also kept per phase: the tree's, the largest process's, and the seconds of each phase."""
    start = time.perf_counter()
    terminal = None
    if phases:
        terminal, stderr = pty.openpty()
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # bars need a width
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        os.close(stderr)
        lines = _terminal_lines(terminal)
    else:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = iter(process.stderr)  # type: ignore[arg-type]
    seen: dict[str, float] = {}
    tail: list[str] = []
    phase = [phases[0][0]] if phases else [""]
    started = {phase[0]: 0.0}

    def watch() -> None:
        for line in lines:
            tail.append(line)
            del tail[:-20]
            for name, prefix in (marks or {}).items():
                if name not in seen and line.startswith(prefix):
                    seen[name] = time.perf_counter() - start
            for name, text in phases:
                if name not in started and text in line:
                    phase[0] = name
                    started[name] = time.perf_counter() - start

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    root = psutil.Process(process.pid)
    command_line = root.cmdline()
    peak = peak_anon = 0
    per_phase: dict[str, dict[str, int]] = {}
    while process.poll() is None:
        try:
            procs = [root] + root.children(recursive=True)
            sizes = [p.memory_info().rss for p in procs if p.is_running()]
            peak = max(peak, sum(sizes))
            peak_anon = max(peak_anon, sum(anonymous_rss(p.pid) for p in procs))
            name = phase[0]
            if name == ALONE and any(p.cmdline() == command_line for p in procs[1:]):
                name = phases[[n for n, _ in phases].index(name) + 1][0]
            now = per_phase.setdefault(name, {"tree": 0, "largest": 0})
            now["tree"] = max(now["tree"], sum(sizes))
            now["largest"] = max(now["largest"], max(sizes, default=0))
            now["driver"] = max(now.get("driver", 0), sizes[0] if sizes else 0)
        except psutil.Error:
            pass
        time.sleep(0.05)
    reader.join()
    if terminal is not None:
        os.close(terminal)
    if process.returncode:
        sys.exit(f"{' '.join(command[:2])} failed with exit code {process.returncode}:\n{''.join(tail)}")
    seconds = time.perf_counter() - start
    ends = [started.get(name) for name, _ in phases[1:]] + [seconds]
    for (name, _), end in zip(phases, ends if phases else [], strict=True):
        if name in per_phase and end is not None:
            per_phase[name]["seconds"] = end - started[name]  # type: ignore[assignment]
    return {"seconds": seconds, "peak": peak, "peak_anon": peak_anon, "phases": per_phase,
            **{name: seen.get(name) for name in marks or {}}}


def _terminal_lines(terminal: int) -> Iterator[str]:
    """The lines written to a pseudo-terminal (bars redraw with carriage returns: each redraw is a line)."""
    pending = b""
    while True:
        try:
            chunk = os.read(terminal, 65536)
        except OSError:  # the other end closed: the command has exited
            chunk = b""
        if not chunk:
            break
        pending += chunk
        *done, pending = re.split(rb"[\r\n]", pending)
        for line in done:
            if line:
                yield line.decode("utf-8", "replace")
    if pending:
        yield pending.decode("utf-8", "replace")


def anonymous_rss(pid: int) -> int:
    """RssAnon of a process (Linux): its resident private memory, without the file-backed pages of the
    memory-mapped shards (which RSS counts but the kernel can drop at any time); 0 where unknown."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# the phases of a convert, told apart by its progress on a terminal (the start of each, in order)
CONVERT_PHASES = (("filter+parse", ""), ("learn_bpe", "learn joint BPE"), ("features+shards", "features+shards"))
ALONE = "learn_bpe"  # no forked worker then: a sample with one is the next phase's (its line was read late)
TYPE_MARKS = (10000, 50000, 70000)  # pairs at which the distinct words of a corpus are counted
# pooled real English of the shared data: the WMT newstest sets, Europarl, a WMT training sample and KFTT
REAL_POOL = ("wmt-news-*/*.en", "europarl10k-enro/train.en", "opennmt-toy-ende/src-*.txt", "kftt30k-enja/train.en")


def distinct_words(lines: Iterable[str], marks: tuple[int, ...] = TYPE_MARKS) -> dict[int, int]:
    """Distinct whitespace-separated words of the first N lines, for each N of `marks` reached."""
    seen: set[str] = set()
    found = {}
    for count, line in enumerate(lines, 1):
        seen.update(line.split())
        if count in marks:
            found[count] = len(seen)
        if count >= max(marks):
            break
    return found


def real_types() -> dict[int, int] | None:
    """Distinct words per N pairs of the pooled real English (lines shuffled with seed 1, tokenized at word
    and punctuation boundaries as the synthetic text is), or None without the shared data."""
    files = sorted(f for pattern in REAL_POOL for f in (SHARED / "data" / "parallel").glob(pattern))
    if not files:
        return None
    lines = [line.strip() for f in files for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    random.Random(1).shuffle(lines)
    tokens = re.compile(r"\w+|[^\w\s]")
    return distinct_words(" ".join(tokens.findall(line)) for line in lines)


def convert(tmp: Path, pairs: int, workers: int, vocabulary: str, merges: int, engine: str = "local") -> dict:
    data = tmp / f"synth{pairs}"
    started = time.perf_counter()
    subprocess.run([str(BIN / "synprep"), "synth", "--pairs", str(pairs), "--seed", "1", "--lengths", "wmt",
                    "--vocabulary", vocabulary, "--bpe-symbols", str(merges), "-o", str(data)],
                   check=True, capture_output=True)
    synth_seconds = time.perf_counter() - started
    with open(data / "train.src", encoding="utf-8") as handle:
        types = distinct_words(handle)
    out = tmp / f"out{pairs}"
    result = measured([str(BIN / "synprep"), "convert", str(data / "pipeline.toml"), "--output", str(out),
                       "--workers", str(workers), "--engine", engine], phases=CONVERT_PHASES)
    stages = json.loads((out / "run.json").read_text())["seconds"]
    worker: dict[str, float] = {}
    for split in stages.values():
        for name, value in split.items():
            if not name.endswith("_wall"):
                worker[name] = worker.get(name, 0.0) + value
    rows = shard_bytes = 0
    for split in ("train", "valid", "test"):
        manifest = json.loads((out / split / "manifest.json").read_text())
        rows += manifest["rows"]
        shard_bytes += sum(shard["bytes"] for shard in manifest["shards"])
    shutil.rmtree(data)  # the corpus is no longer needed: keep the disk use of the run small
    return {**result, "synth_seconds": synth_seconds, "stages": worker, "rows": rows, "shard_bytes": shard_bytes,
            "folder_bytes": folder_bytes(out), "work_left": (out / ".work").exists(), "out": out, "types": types}


def held_arrays(split: Path) -> int:
    """Bytes of what the trainer must hold in RAM for this split: int32 ids of both sides, float32 source
    parents, int64 offsets of both sides (syntrain.dataset.ParallelData)."""
    import pyarrow.compute as pc

    from synprep.shards import open_split

    table = open_split(str(split)).table(["src_subwords", "tgt_subwords"])
    src = int(pc.sum(pc.list_value_length(table.column("src_subwords"))).as_py())
    tgt = int(pc.sum(pc.list_value_length(table.column("tgt_subwords"))).as_py())
    return 4 * src + 4 * tgt + 4 * src + 2 * 8 * (table.num_rows + 1)


def baseline_rss() -> int:
    """RSS of a process that has imported what syntrain run imports (torch, pyarrow, the trainer)."""
    code = "import psutil, syntrain.train, syntrain.dataset; print(psutil.Process().memory_info().rss)"
    return int(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)


def train(tmp: Path, out: Path, steps: int) -> dict:
    run_dir = tmp / f"run-{out.name}"
    result = measured([str(BIN / "syntrain"), "run", "--data", str(out / "train"), "--out", str(run_dir),
                       "--preset", "tiny", "--device", "cpu", "--threads", "1", "--max-steps", str(steps),
                       "--log-interval", "5", "--eval-interval", str(10 * steps), "--max-tokens", "1024",
                       "--max-len", "256", "--seed", "1"],
                      {"ready": "syntrain: ", "first": "step 1 "})
    logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [r for r in logged if "elapsed_s" in r]
    first, last = logged[0], logged[-1]
    steps_per_s = (last["step"] - first["step"]) / max(last["elapsed_s"] - first["elapsed_s"], 1e-9)
    shutil.rmtree(run_dir)
    return {**result, "steps_per_s": steps_per_s, "arrays": held_arrays(out / "train")}


def parse_rate(tmp: Path) -> dict:
    """UDPipe sentences/s and tokens/s on one core, on WMT-like synthetic text and (when present) real text."""
    from synprep.parse import ParserSpec

    model = SHARED / "models" / "en_ewt.udpipe"
    source = "shared en_ewt"
    if not model.exists():
        from synprep.parse.train import train_udpipe

        model = tmp / "en.udpipe"
        train_udpipe(str(SAMPLE_DATA / "en.conllu"), str(model), "tiny", quiet=True)
        source = "tiny model trained on sample_data/en.conllu"
    parser = ParserSpec("udpipe", str(model)).load()
    data = tmp / "parse-sample"
    subprocess.run([str(BIN / "synprep"), "synth", "--pairs", str(PARSE_SAMPLE), "--seed", "2", "--lengths", "wmt",
                    "-o", str(data)], check=True, capture_output=True)
    samples = {"synthetic WMT-like": (data / "train.src").read_text(encoding="utf-8").splitlines()}
    multi30k = SHARED / "data" / "parallel" / "multi30k" / "train.en"
    if multi30k.exists():
        with open(multi30k, encoding="utf-8") as handle:
            samples["Multi30k (real)"] = [line.strip() for _, line in zip(range(PARSE_SAMPLE), handle)]
    rates = {}
    for name, lines in samples.items():
        started = time.perf_counter()
        parser.parse(lines)
        seconds = time.perf_counter() - started
        tokens = sum(len(line.split()) for line in lines)
        rates[name] = {"sentences_per_s": len(lines) / seconds, "tokens_per_s": tokens / seconds,
                       "tokens": tokens / len(lines)}
    shutil.rmtree(data)
    return {"model": source, "rates": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help="comma-separated pair counts (default 30000,100000)")
    parser.add_argument("--quick", action="store_true", help="N = 3000,10000 (CI-sized)")
    parser.add_argument("--large", action="store_true", help="N = 30000,300000,1000000")
    parser.add_argument("--workers", type=int, default=2, help="convert workers (default 2)")
    parser.add_argument("--steps", type=int, default=12, help="training steps per size (default 12)")
    parser.add_argument("--vocabulary", choices=("zipf", "lexicon"), default="zipf",
                        help="synth's words: zipf (real text's growth, default) or lexicon (~100 words per side)")
    parser.add_argument("--merges", type=int, default=None,
                        help="joint BPE merges (default 16000 with the zipf vocabulary, 300 with the lexicon)")
    parser.add_argument("--no-parse-rate", action="store_true", help="skip the UDPipe rate measurement")
    parser.add_argument("--no-train", action="store_true", help="convert only (no syntrain run)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--ray", action="store_true", help="convert the largest N again with --engine ray")
    args = parser.parse_args()
    merges = args.merges or (16000 if args.vocabulary == "zipf" else 300)
    sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes else [3000, 10000] if args.quick
             else [30000, 300000, 1000000] if args.large else [30000, 100000])
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_", dir=os.environ.get("BENCH_TMP")))
    try:
        rates = {"model": "", "rates": {}} if args.no_parse_rate else parse_rate(tmp)
        baseline = baseline_rss()
        results = {}
        for pairs in sizes:
            converted = convert(tmp, pairs, args.workers, args.vocabulary, merges)
            trained = None if args.no_train else train(tmp, converted["out"], args.steps)
            shutil.rmtree(converted.pop("out"))
            results[pairs] = {"convert": converted, "train": trained}
            print_row(pairs, results[pairs], header=len(results) == 1)
        real = real_types()
        summary(results, rates, baseline, args.workers)
        print_phases(results, real)
        ray = None
        if args.ray:
            ray = convert(tmp, max(sizes), args.workers, args.vocabulary, merges, engine="ray")
            shutil.rmtree(ray.pop("out"))
        print_rates(results, rates, ray)
        if args.json:
            Path(args.json).write_text(json.dumps({"sizes": {str(k): v for k, v in results.items()},
                                                   "parse": rates, "baseline_rss": baseline, "real_types": real,
                                                   "vocabulary": args.vocabulary, "merges": merges, "ray": ray,
                                                   "workers": args.workers}, indent=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


HEADER = (f"{'pairs':>8} {'synth s':>8} {'convert s':>9} {'us/pair':>8} {'conv RSS MB':>11} {'B/pair':>7} "
          f"{'.work':>5} {'ready s':>7} {'1st step s':>10} {'train RSS MB':>12} {'anon MB':>7} {'arrays MB':>9} "
          f"{'steps/s':>7}  worker s per stage")


def print_row(pairs: int, result: dict, header: bool) -> None:
    c, t = result["convert"], result["train"]
    if header:
        print(HEADER)
    stages = ", ".join(f"{k} {v:.1f}" for k, v in c["stages"].items() if v)
    if t is None:
        print(f"{pairs:8d} {c['synth_seconds']:8.1f} {c['seconds']:9.1f} {1e6 * c['seconds'] / pairs:8.1f} "
              f"{c['peak'] / MiB:11.0f} {c['shard_bytes'] / c['rows']:7.0f} "
              f"{'kept' if c['work_left'] else 'gone':>5}  (no training)  {stages}", flush=True)
        return
    print(f"{pairs:8d} {c['synth_seconds']:8.1f} {c['seconds']:9.1f} {1e6 * c['seconds'] / pairs:8.1f} "
          f"{c['peak'] / MiB:11.0f} {c['shard_bytes'] / c['rows']:7.0f} {'kept' if c['work_left'] else 'gone':>5} "
          f"{t['ready'] or float('nan'):7.1f} {t['first'] or float('nan'):10.1f} {t['peak'] / MiB:12.0f} "
          f"{t['peak_anon'] / MiB:7.0f} "
          f"{t['arrays'] / MiB:9.0f} "
          f"{t['steps_per_s']:7.2f}  {stages}", flush=True)


def print_phases(results: dict, real: dict[int, int] | None) -> None:
    """Per convert phase and N: peak RSS of the process tree and of its largest process, seconds; then the
    distinct source words per 10k/50k/70k pairs, synthetic against the pooled real English."""
    print(f"{'pairs':>8} {'phase':<16} {'tree MiB':>9} {'largest MiB':>11} {'driver MiB':>10} {'seconds':>8}")
    for pairs, result in results.items():
        for name, _ in CONVERT_PHASES:
            phase = result["convert"]["phases"].get(name)
            if phase:
                print(f"{pairs:8d} {name:<16} {phase['tree'] / MiB:9.0f} {phase['largest'] / MiB:11.0f} "
                      f"{phase['driver'] / MiB:10.0f} "
                      f"{phase.get('seconds', float('nan')):8.1f}")
    small, large = min(results), max(results)
    for name, _ in CONVERT_PHASES:
        p0, p1 = (results[n]["convert"]["phases"].get(name) for n in (small, large))
        if p0 and p1:
            print(f"{name}: peak RSS of the tree {p1['tree'] / p0['tree']:.2f}x from N {small} to N {large}")
    synthetic = {marks: n for result in results.values() for marks, n in result["convert"]["types"].items()}
    for marks in TYPE_MARKS:
        if marks in synthetic:
            print(f"distinct source words in {marks} pairs: synthetic {synthetic[marks]}"
                  + (f", real {real[marks]} ({synthetic[marks] / real[marks]:.2f}x)" if real and marks in real
                     else ""))


def print_rates(results: dict, rates: dict, ray: dict | None) -> None:
    """At the largest N: each stage's rate (pairs per second per core of its worker time; learn_bpe and the
    write of the shards are serial: per second of one process), each phase's peak RSS (tree, driver) and wall
    seconds; UDPipe's rate (sentences per second per core); Ray's wall time against the local engine's."""
    pairs = max(results)
    c = results[pairs]["convert"]
    print(f"stage rates at N {pairs} ({c['rows']} rows kept; pre-parsed input: the filter's time includes "
          "reading the CoNLL-U):")
    for stage, seconds in c["stages"].items():
        if seconds:
            print(f"  {stage:<14} {seconds:9.1f} worker s  {pairs / seconds:10.0f} pairs/s per core")
    for name, _ in CONVERT_PHASES:
        phase = c["phases"].get(name)
        if phase:
            print(f"  phase {name:<16} peak RSS tree {phase['tree'] / MiB:6.0f} MiB, driver "
                  f"{phase['driver'] / MiB:5.0f} MiB, largest process {phase['largest'] / MiB:5.0f} MiB, "
                  f"{phase.get('seconds', float('nan')):7.1f} s wall")
    for name, rate in rates["rates"].items():
        print(f"  UDPipe parse ({name}): {rate['sentences_per_s']:.0f} sentences/s per core "
              f"({rate['tokens']:.1f} tokens/sentence)")
    if ray is not None:
        print(f"  --engine ray (local Ray): wall {ray['seconds']:.1f} s against {c['seconds']:.1f} s local "
              f"({ray['seconds'] / c['seconds']:.2f}x), peak RSS of the tree {ray['peak'] / MiB:.0f} MiB")


def summary(results: dict, rates: dict, baseline: int, workers: int) -> None:
    small, large = min(results), max(results)
    c0, c1 = results[small]["convert"], results[large]["convert"]
    t1 = results[large]["train"]
    per_pair = (c1["seconds"] / large) / (c0["seconds"] / small)
    print(f"baseline = N {small} of this run. At N {large}: convert time per pair {per_pair:.2f}x (target <= 1.2); "
          f"convert peak RSS {c1['peak'] / c0['peak']:.2f}x, {c1['peak'] / MiB:.0f} MiB with {workers} workers "
          f"(target <= 1.5 GiB, growth <= 1.2x); shards {c1['shard_bytes'] / c1['rows']:.0f} B/pair")
    t0 = results[small]["train"]
    if t0 is None or t1 is None:
        return
    growth = (t1["peak"] - t0["peak"]) / max(t1["arrays"] - t0["arrays"], 1)
    growth_anon = (t1["peak_anon"] - t0["peak_anon"]) / max(t1["arrays"] - t0["arrays"], 1)
    print(f"trainer at N {large}: data ready after {t1['ready'] or float('nan'):.1f} s, first step after "
          f"{t1['first'] or float('nan'):.1f} s (target <= 20); peak RSS {t1['peak'] / MiB:.0f} MiB "
          f"(an idle process with the trainer imported: {baseline / MiB:.0f} MiB); arrays held "
          f"{t1['arrays'] / MiB:.0f} MiB (peak RSS / arrays {t1['peak'] / t1['arrays']:.2f}x); growth from N "
          f"{small} / array growth: RSS {growth:.2f}x, anonymous "
          f"(without the memory-mapped shards) {growth_anon:.2f}x (target <= 2); "
          f"steps/s {t1['steps_per_s']:.2f} vs {t0['steps_per_s']:.2f} at N {small}")
    for name, rate in rates["rates"].items():
        print(f"UDPipe ({rates['model']}), {name}: {rate['sentences_per_s']:.0f} sentences/s, "
              f"{rate['tokens_per_s']:.0f} tokens/s per core ({rate['tokens']:.1f} tokens/sentence)")


if __name__ == "__main__":
    main()
