"""Benchmark: language-ID backends' speed and accuracy on the same real sentences, in one run.

    python benchmarks/bench_langid.py [--per-treebank 1500]

Labelled mixed set: random sentences of UD English-EWT (en) and German-GSD (de) from ../shared, plus non-en/de
lines: the hand-labelled lines of opennmt-toy-ende (tests/data/opennmt_toy_other_languages.tsv) and our own
fixture sentences (tests/data/langid_sentences.tsv). Speed = sentences/s over the whole set, one process.
Accuracy as the filter needs it: en vs de vs other (a non-en/de sentence counts as right if called neither en
nor de); "exact" = the exact language code. Target (issue 4): fast backend >= 10x langdetect, accuracy >= it.
Candidates that are not synprep backends (pycld2, lingua, langid) are measured when installed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
TESTS_DATA = ROOT / "tests" / "data"

from synprep.langid import get_identifier  # noqa: E402


def treebank(folder: str, n: int) -> list[str]:
    texts = [line[9:].strip() for path in sorted((SHARED / "ud" / folder).glob("*.conllu"))
             for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# text = ")]
    random.Random(0).shuffle(texts)
    return texts[:n]


def other_languages() -> list[tuple[str, str]]:
    rows = []
    toy = SHARED / "parallel" / "opennmt-toy-ende"
    if (toy / "src-train.txt").is_file():
        sides = {s: (toy / f"{s}-train.txt").read_text(encoding="utf-8").split("\n") for s in ("src", "tgt")}
        for line in (TESTS_DATA / "opennmt_toy_other_languages.tsv").read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                side, number, lang = line.split("\t")
                rows.append((sides[side][int(number)], lang))
    for line in (TESTS_DATA / "langid_sentences.tsv").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            lang, text = line.split("\t")
            if lang not in ("en", "de"):
                rows.append((text, lang))
    return rows


def candidates(languages: list[str]) -> dict[str, Callable[[str], str]]:
    """Other PyPI language identifiers, measured for the record when installed (not synprep backends)."""
    found: dict[str, Callable[[str], str]] = {}
    try:
        import pycld2

        def cld2(text: str) -> str:
            try:
                return pycld2.detect(text)[2][0][1]
            except pycld2.error:
                return "und"

        found["pycld2 (candidate)"] = cld2
    except ImportError:
        pass
    try:
        from lingua import IsoCode639_1, LanguageDetectorBuilder

        codes = [getattr(IsoCode639_1, c.upper()) for c in languages if hasattr(IsoCode639_1, c.upper())]
        detector = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).with_low_accuracy_mode().build()

        def lingua(text: str) -> str:
            found_lang = detector.detect_language_of(text)
            return found_lang.iso_code_639_1.name.lower() if found_lang else "und"

        found["lingua, low-accuracy mode (cand.)"] = lingua
    except ImportError:
        pass
    try:
        import langid

        found["langid.py (candidate)"] = lambda text: langid.classify(text)[0]
    except ImportError:
        pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-treebank", type=int, default=1500, help="sentences from each of EWT and GSD")
    args = parser.parse_args()
    if not (SHARED / "ud" / "UD_English-EWT").is_dir():
        sys.exit("needs ../shared/data/ud (UD English-EWT, German-GSD)")
    data = [(t, "en") for t in treebank("UD_English-EWT", args.per_treebank)]
    data += [(t, "de") for t in treebank("UD_German-GSD", args.per_treebank)] + other_languages()
    n_other = sum(g not in ("en", "de") for _, g in data)
    print(f"{len(data)} sentences: {args.per_treebank} en (EWT), {args.per_treebank} de (GSD), {n_other} other "
          f"({len({g for _, g in data}) - 2} languages)\n")

    fast = get_identifier("py3langid")
    systems: dict[str, Callable[[str], str]] = {
        "langdetect (default backend)": get_identifier("langdetect").detect,
        "py3langid (fast backend)": fast.detect,
        "py3langid, candidates en,de,fr,es,it": get_identifier("py3langid", ["en", "de", "fr", "es", "it"]).detect,
    }
    systems.update(candidates(list(fast.candidates())))

    def coarse(code: str) -> str:
        return code if code in ("en", "de") else "other"

    print(f"{'backend':36s} {'sent/s':>9s} {'x langdetect':>12s} {'en/de/other':>11s} {'en':>6s} {'de':>6s} "
          f"{'other':>6s} {'exact':>6s}")
    base_rate, results, tradeoffs = None, {}, []
    letters = [sum(char.isalpha() for char in text) for text, _ in data]
    for name, detect in systems.items():
        detect(data[0][0])  # warm-up (lazy model loading)
        start = time.perf_counter()
        predicted = [detect(text) for text, _ in data]
        rate = len(data) / (time.perf_counter() - start)
        base_rate = base_rate or rate
        hits = [coarse(p) == coarse(g) for p, (_, g) in zip(predicted, data)]
        by = {lang: [h for h, (_, g) in zip(hits, data) if coarse(g) == lang] for lang in ("en", "de", "other")}
        exact = sum(p == g for p, (_, g) in zip(predicted, data)) / len(data)
        accuracy = sum(hits) / len(hits)
        results[name] = (rate, accuracy)
        for min_letters in (0, 10, 20, 30):  # the filter's langid_min_letters: short sides skip the check
            checked = [n >= min_letters for n in letters]
            genuine = [(c, p == g) for c, p, (_, g) in zip(checked, predicted, data) if g in ("en", "de")]
            other = [(c, p in ("en", "de")) for c, p, (_, g) in zip(checked, predicted, data) if g not in ("en", "de")]
            false_reject = sum(c and not right for c, right in genuine) / len(genuine)
            kept_other = sum(not c or called_en_de for c, called_en_de in other) / len(other)
            tradeoffs.append(f"{name:36s} {min_letters:>11d} {false_reject:14.3f} {kept_other:18.3f}")
        print(f"{name:36s} {rate:9.0f} {rate / base_rate:11.1f}x {accuracy:11.4f} "
              + " ".join(f"{sum(v) / len(v):6.3f}" for v in by.values()) + f" {exact:6.3f}")
    print(f"\nlangid_min_letters trade-off (en/de lines wrongly rejected; non-en/de lines kept, i.e. not caught; "
          f"the shortest non-en/de line has {min(n for n, (_, g) in zip(letters, data) if g not in ('en', 'de'))} "
          f"letters, so short off-language lines are not represented)")
    print(f"{'backend':36s} {'min_letters':>11s} {'en/de rejected':>14s} {'non-en/de kept':>18s}")
    print("\n".join(tradeoffs))
    slow_rate, slow_acc = results["langdetect (default backend)"]
    fast_rate, fast_acc = results["py3langid (fast backend)"]
    verdict = "met" if fast_rate >= 10 * slow_rate and fast_acc >= slow_acc else "NOT met"
    print(f"\ntarget (py3langid >= 10x langdetect, accuracy >= langdetect's): {verdict} "
          f"({fast_rate / slow_rate:.1f}x, {fast_acc:.4f} vs {slow_acc:.4f})")


if __name__ == "__main__":
    main()
