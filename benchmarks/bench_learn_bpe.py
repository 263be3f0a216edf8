"""Benchmark: joint BPE learning from word counts (`learn_joint_from_counts`) at WMT-like vocabulary sizes.

    python benchmarks/bench_learn_bpe.py [--sizes 50000,200000] [--merges 2000,8000] [--pairs 50000:32000]
                                         [--quick] [--no-subword-nmt] [--no-fast] [--no-anchor]

`synprep convert` counts words in its workers, then learns BPE serially in one process: that step must stay
within 10% of a 16-worker WMT16 convert (~2 h, so ~12 minutes). No WMT16 data is needed: a word-count
dictionary of a given number of distinct words is made from a character 4-gram model (with backoff) learnt
from the real text under ../shared/data (UD EWT/GSD word forms, Multi30k, the IWSLT and WMT samples;
`SYNPREP_SHARED` overrides the folder; sample_data/ without it). The real words keep the top ranks in order
of their real counts, sampled words fill the rest, and every rank r gets the Zipf count C / r (exponent 1)
with C set so the counts add up to a token total from Heaps' law anchored at WMT16 (1.25M distinct words in
225M tokens, beta 0.6). Baseline: subword-nmt's `learn_bpe` called as `learn_joint_from_counts` calls it;
the fast learner (`synprep.bpe_learn.learn_bpe_codes`) is timed in the same run on the same counts and its
codes compared byte for byte. A reality anchor runs both on Multi30k train (both sides, split at spaces)
with 10,000 merges. Target: the WMT16 extrapolation (32,000 merges, 1.25M distinct words) <= 12 minutes.
"""

from __future__ import annotations

import argparse
import bisect
import io
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("SYNPREP_SHARED", ROOT.parent / "shared"))
WMT16_WORDS = 1_250_000
WMT16_TOKENS = 225_000_000
WMT16_MERGES = 32_000
HEAPS_BETA = 0.6
BOS, EOS = "\x02", "\x03"


def real_text_files(shared: Path = SHARED) -> list[Path]:
    """The real text the character model learns from: ../shared/data if present, else sample_data/."""
    data = shared / "data"
    files = sorted((data / "ud").glob("*/*-ud-*.conllu")) if data.is_dir() else []
    for name in ("multi30k/train.en", "multi30k/train.de", "iwslt14-toy-deen/train.en", "iwslt14-toy-deen/train.de",
                 "opennmt-toy-ende/src-train.txt", "opennmt-toy-ende/tgt-train.txt"):
        if (data / "parallel" / name).is_file():
            files.append(data / "parallel" / name)
    return files or sample_text_files()


def sample_text_files() -> list[Path]:
    """The repository's own sample text (sample_data/)."""
    return sorted((ROOT / "sample_data").glob("*.conllu")) + sorted((ROOT / "sample_data" / "parallel").glob("*"))


def words_of(path: Path) -> Iterable[str]:
    """The words of a file: the FORM column of a CoNLL-U file (no multiword ranges, no empty nodes), else
    the text split at spaces."""
    with open(path, encoding="utf-8") as handle:
        if path.suffix == ".conllu":
            for line in handle:
                cols = line.split("\t")
                if len(cols) == 10 and cols[0].isdigit() and " " not in cols[1]:
                    yield cols[1]
        else:
            for line in handle:
                yield from (word for word in line.strip("\r\n ").split(" ") if word)


def real_word_counts(files: Iterable[Path]) -> Counter[str]:
    """Word counts of the real text."""
    counts: Counter[str] = Counter()
    for path in files:
        counts.update(words_of(path))
    return counts


class CharModel:
    """Character 4-gram model of word types with backoff: each step uses the 3-character context with
    probability 0.8, else a shorter one (0.15: 2 characters, 0.05: 1), always the longest seen suffix."""

    ORDER_PROBS = ((3, 0.80), (2, 0.95), (1, 1.0))

    def __init__(self, words: Iterable[str], max_len: int = 30) -> None:
        table: dict[str, Counter[str]] = {}
        for word in words:
            padded = BOS * 3 + word + EOS
            for i in range(3, len(padded)):
                for k in range(4):
                    table.setdefault(padded[i - k:i], Counter())[padded[i]] += 1
        self.max_len = max_len
        self.table: dict[str, tuple[list[str], list[int]]] = {}
        for ctx, counts in table.items():
            chars = list(counts)
            cum, total = [], 0
            for char in chars:
                total += counts[char]
                cum.append(total)
            self.table[ctx] = (chars, cum)

    def sample(self, rng: random.Random) -> str:
        state, out = BOS * 3, []
        table, rand = self.table, rng.random
        while len(out) < self.max_len:
            pick = rand()
            order = next(k for k, p in self.ORDER_PROBS if pick < p)
            for k in range(order, -1, -1):
                entry = table.get(state[-k:] if k else "")
                if entry is not None:
                    break
            chars, cum = entry
            char = chars[bisect.bisect_right(cum, rand() * cum[-1])]
            if char == EOS:
                break
            out.append(char)
            state = state[1:] + char
        return "".join(out)


def heaps_tokens(words: int) -> int:
    """Token count of a corpus with `words` distinct words (Heaps' law, anchored at WMT16)."""
    return int(WMT16_TOKENS * (words / WMT16_WORDS) ** (1 / HEAPS_BETA))


def synthetic_counts(words: int, seed: int = 0, tokens: int | None = None, exponent: float = 1.0,
                     real: Counter[str] | None = None, model: CharModel | None = None,
                     shuffle: bool = True) -> dict[str, int]:
    """A WMT-like word-count dictionary of `words` distinct words, in a seeded random first-seen order.
    The real words (the most frequent first, at most `words`) take the top ranks, sampled words the rest; rank
    r counts max(1, round(C / r**exponent)), C so that the counts add up to `tokens` (Heaps' law by default)."""
    if real is None:
        real = real_word_counts(real_text_files())
    if model is None:
        model = CharModel(real)
    rng = random.Random(seed)
    ranked = [word for word, _ in sorted(real.items(), key=lambda item: (-item[1], item[0]))][:words]
    seen = set(ranked)
    misses = 0
    while len(ranked) < words:
        word = model.sample(rng)
        if word and word not in seen:
            seen.add(word)
            ranked.append(word)
        else:
            misses += 1
            if misses > 50 * words + 1000:
                raise RuntimeError(f"the character model gives only {len(ranked)} distinct words")
    tokens = heaps_tokens(words) if tokens is None else tokens
    norm = sum(r ** -exponent for r in range(1, words + 1))
    scale = tokens / norm
    counts = [max(1, round(scale * (rank + 1) ** -exponent)) for rank in range(words)]
    order = list(range(words))
    if shuffle:
        rng.shuffle(order)
    return {ranked[i]: counts[i] for i in order}


def multi30k_counts(shared: Path = SHARED) -> dict[str, int] | None:
    """Joint word counts of Multi30k train (both sides, split at spaces as subword-nmt splits), or None."""
    from synprep.bpe_learn import count_words, merge_counts

    paths = [shared / "data" / "parallel" / "multi30k" / f"train.{lang}" for lang in ("en", "de")]
    if not all(path.is_file() for path in paths):
        return None
    return dict(merge_counts(count_words(path.read_text(encoding="utf-8"), str(path)) for path in paths))


def subword_nmt_codes(counts: dict[str, int], merges: int, min_frequency: int = 2) -> str:
    """subword-nmt's learn_bpe on the counts, called as `learn_joint_from_counts` calls it: the codes."""
    import contextlib

    from subword_nmt import learn_bpe

    out = io.StringIO()
    with contextlib.redirect_stderr(io.StringIO()):
        learn_bpe.learn_bpe([f"{word} {freq}" for word, freq in counts.items()], out, merges, min_frequency,
                            False, is_dict=True, total_symbols=False)
    return out.getvalue()


def fast_codes(counts: dict[str, int], merges: int, min_frequency: int = 2) -> str:
    """synprep's learner on the counts: the codes."""
    from synprep.bpe_learn import learn_bpe_codes

    out = io.StringIO()
    learn_bpe_codes([f"{word} {freq}" for word, freq in counts.items()], out, merges, min_frequency)
    return out.getvalue()


def timed(fn: Callable[[], str]) -> tuple[float, str]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="50000,200000,500000", help="distinct words, comma-separated")
    parser.add_argument("--merges", default="2000,8000", help="merges, comma-separated")
    parser.add_argument("--pairs", default="", help="extra words:merges runs, comma-separated (e.g. 50000:32000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-subword-nmt", action="store_true", help="time only the fast learner")
    parser.add_argument("--no-fast", action="store_true", help="time only subword-nmt")
    parser.add_argument("--no-anchor", action="store_true", help="skip the Multi30k reality anchor")
    parser.add_argument("--quick", action="store_true", help="10k and 30k words, 500 and 1500 merges")
    args = parser.parse_args()
    sizes = [10_000, 30_000] if args.quick else [int(x) for x in args.sizes.split(",")]
    merges_list = [500, 1500] if args.quick else [int(x) for x in args.merges.split(",")]
    learners: list[tuple[str, Callable[[dict[str, int], int], str]]] = []
    if not args.no_subword_nmt:
        learners.append(("subword-nmt", subword_nmt_codes))
    if not args.no_fast:
        learners.append(("fast", fast_codes))

    files = real_text_files()
    real = real_word_counts(files)
    model = CharModel(real)
    print(f"real text: {len(files)} files under {files[0].parents[2] if files else '-'}, "
          f"{len(real):,} distinct words, {sum(real.values()):,} tokens")
    print(f"{'words':>9} {'tokens':>12} {'merges':>7} " + " ".join(f"{name + ' s':>14}" for name, _ in learners)
          + f" {'ratio':>6} {'same':>5}  loadavg")
    rows: dict[str, list[tuple[int, int, float]]] = {name: [] for name, _ in learners}

    def run(label: str, counts: dict[str, int], merges: int) -> None:
        seconds, codes = [], []
        for name, learner in learners:
            took, out = timed(lambda learner=learner: learner(counts, merges))
            seconds.append(took)
            codes.append(out)
            rows[name].append((len(counts), merges, took))
        ratio = f"{seconds[1] / seconds[0]:6.3f}" if len(seconds) == 2 else f"{'-':>6}"
        same = str(codes[0] == codes[1]) if len(codes) == 2 else "-"
        print(f"{label:>9} {sum(counts.values()):>12,} {merges:>7} " + " ".join(f"{s:>14.2f}" for s in seconds)
              + f" {ratio} {same:>5}  {loadavg()}", flush=True)

    if not args.no_anchor:
        anchor = multi30k_counts()
        if anchor is None:
            print("Multi30k anchor: ../shared absent, skipped")
        else:
            run("multi30k", anchor, 10_000)
            for name in rows:
                rows[name].clear()
    plan = {size: list(merges_list) for size in sizes}
    for extra in filter(None, args.pairs.split(",")):
        size, merges = (int(x) for x in extra.split(":"))
        plan.setdefault(size, []).append(merges)
    for size, merges_of_size in plan.items():
        start = time.perf_counter()
        counts = synthetic_counts(size, args.seed, real=real, model=model)
        print(f"  (made {size:,} words in {time.perf_counter() - start:.1f} s)", flush=True)
        for merges in merges_of_size:
            run(f"{size:,}", counts, merges)
    extrapolate(rows)


def extrapolate(rows: dict[str, list[tuple[int, int, float]]]) -> None:
    """Fit log seconds = log a + b log words + c log merges (least squares over every timed size and merge
    count) and print the WMT16 estimate (1.25M distinct words, 32,000 merges)."""
    import numpy as np

    for name, points in rows.items():
        if len({w for w, _, _ in points}) < 2 or len({m for _, m, _ in points}) < 2:
            print(f"{name}: no extrapolation (needs two sizes and two merge counts)")
            continue
        design = np.array([[1.0, math.log(w), math.log(m)] for w, m, _ in points])
        target = np.array([math.log(s) for _, _, s in points])
        (log_a, b, c), *_ = np.linalg.lstsq(design, target, rcond=None)
        worst = max(abs(x) for x in design @ np.array([log_a, b, c]) - target)
        estimate = math.exp(log_a + b * math.log(WMT16_WORDS) + c * math.log(WMT16_MERGES))
        print(f"{name}: seconds ~ {math.exp(log_a):.3g} * words^{b:.2f} * merges^{c:.2f} (fit over {len(points)} "
              f"runs, worst residual x{math.exp(worst):.2f}) -> WMT16 ({WMT16_WORDS:,} words, {WMT16_MERGES:,} "
              f"merges): {estimate:,.0f} s = {estimate / 60:.1f} min (target <= 12 min)")


if __name__ == "__main__":
    main()
