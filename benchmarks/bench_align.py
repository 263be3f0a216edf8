"""Benchmark: `synprep bpe apply` and `synprep align` against `subword-nmt apply-bpe`, in one run.

    python benchmarks/bench_align.py [--treebank PATH.conllu] [--symbols 8000] [--repeat 3] [--workers 2]

Default treebank: UD English-EWT train from ../shared (12.5k sentences). Codes are learned on its tokens.
Targets: bpe apply <= 0.7x subword-nmt; align with all features (JSON Lines, 2 workers) <= 2x subword-nmt alone.
CPU seconds are printed too (steadier on a loaded machine); `--before DIR` times another source tree alike.
Also times the `conllu` library against synprep's reader (why the reader is hand-written).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEFAULT = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu"


def run_time(cmd: list[str], stdin_path: Path | None = None, tree: Path | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, the command and its worker processes); `tree`: the synprep
    source tree to run (PYTHONPATH), else the current one."""
    env = {**os.environ, "PYTHONPATH": str(tree or ROOT)}
    with open(stdin_path or "/dev/null", "rb") as stdin:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def best_times(commands: list[tuple[list[str], Path | None, Path | None]], repeat: int) -> list[tuple[float, float]]:
    """Best wall time and best CPU time of each command; the commands take turns (round-robin), so that a load
    that comes and goes on the machine hits the baseline and the others alike. On a loaded machine the CPU
    times are the steadier figure (the workers' CPU is summed: a stricter measure than wall time)."""
    times: list[list[tuple[float, float]]] = [[] for _ in commands]
    for _ in range(repeat):
        for i, (cmd, stdin_path, tree) in enumerate(commands):
            times[i].append(run_time(cmd, stdin_path, tree))
    return [(min(w for w, _ in t), min(c for _, c in t)) for t in times]


def best_call(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--treebank", type=Path, default=DEFAULT)
    parser.add_argument("--symbols", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="synprep align --workers (the target is for 2)")
    parser.add_argument("--before", type=Path, default=None,
                        help="another synprep source tree (e.g. `git archive REV synprep | tar -x -C DIR`): its bpe "
                             "apply and align rows run in the same turns, for a before/after in one run")
    args = parser.parse_args()
    if not args.treebank.exists():
        sys.exit(f"treebank {args.treebank} not found: pass --treebank (any UD CoNLL-U file)")

    import conllu

    from synprep.bpe_learn import learn_joint
    from synprep.conllu import read_conllu, to_tree

    tmp = Path(tempfile.mkdtemp(prefix="bench_align_"))
    tokens = tmp / "tokens.txt"
    trees = [to_tree(s) for s in read_conllu(str(args.treebank))]
    tokens.write_text("\n".join(" ".join(t.tokens) for t in trees) + "\n", encoding="utf-8")
    codes = tmp / "codes.bpe"
    learn_joint([str(tokens)], str(codes), args.symbols)
    n_tokens = sum(len(t) for t in trees)
    print(f"{args.treebank.name}: {len(trees)} sentences, {n_tokens} tokens, {args.symbols} merges; "
          f"best of {args.repeat} wall-clock runs (process start included), commands taking turns")

    synprep = [sys.executable, "-m", "synprep.cli"]
    align = [*synprep, "align", "--conllu", str(args.treebank), "--bpe-codes", str(codes),
             "--features", "parents,distances,transitions,labels", "-o", "/dev/null", "--workers", str(args.workers)]
    align_default = [a for a in align if a not in ("--features", "parents,distances,transitions,labels")]
    rows = [("subword-nmt apply-bpe (baseline)", [str(BIN / "subword-nmt"), "apply-bpe", "-c", str(codes)], tokens),
            ("synprep bpe apply", [*synprep, "bpe", "apply", "-c", str(codes)], tokens),
            (f"synprep align, all features, arrow, {args.workers} workers", align + ["--format", "arrow"], None),
            (f"synprep align, all features, jsonl, {args.workers} workers", align + ["--format", "jsonl"], None),
            (f"synprep align, default features, arrow, {args.workers} workers", align_default + ["--format", "arrow"],
             None)]
    commands = [(cmd, stdin, None) for _, cmd, stdin in rows]
    if args.before:
        rows += [(f"before: {name}", cmd, stdin) for name, cmd, stdin in rows[1:4]]
        commands += [(cmd, stdin, args.before) for _, cmd, stdin in rows[5:]]
    seconds = best_times(commands, args.repeat)
    rows = [(name, t) for (name, _, _), t in zip(rows, seconds, strict=True)]
    (subword_nmt, subword_nmt_cpu), (ours, _) = seconds[0], seconds[1]

    def read_with_library() -> None:
        with open(args.treebank, encoding="utf-8") as handle:
            for _ in conllu.parse_incr(handle):
                pass

    library = best_call(read_with_library, 1)
    reader = best_call(lambda: sum(1 for _ in read_conllu(str(args.treebank))), args.repeat)

    width = max(len(name) for name, _ in rows)
    print(f"load average {os.getloadavg()[0]:.1f} (1 min)")
    print(f"{'command'.ljust(width)}  seconds  sent/s    x baseline   CPU s  x baseline CPU")
    for name, (wall, cpu) in rows:
        print(f"{name.ljust(width)}  {wall:7.3f}  {len(trees) / wall:8.0f}  {wall / subword_nmt:5.2f}"
              f"        {cpu:6.3f}  {cpu / subword_nmt_cpu:5.2f}")
    print(f"CoNLL-U reading (in process): conllu library {library:.2f} s, synprep reader {reader:.2f} s "
          f"({library / reader:.1f}x faster)")
    bpe_ratio, ratio = ours / subword_nmt, rows[3][1][0] / subword_nmt
    print(f"target bpe apply <= 0.70x: {bpe_ratio:.2f}x, {'met' if bpe_ratio <= 0.7 else 'MISSED'}; "
          f"target align (all features, jsonl, {args.workers} workers) <= 2.00x: {ratio:.2f}x, "
          f"{'met' if ratio <= 2 else 'MISSED'} (wall)")


if __name__ == "__main__":
    main()
