"""Benchmark: language-ID backends' speed and accuracy on the same real sentences, in one run.

    python benchmarks/bench_langid.py [--per-treebank 1500]

Labelled mixed set: random sentences of UD English-EWT (en) and German-GSD (de) from ../shared, plus non-en/de
lines: the hand-labelled lines of opennmt-toy-ende (tests/data/opennmt_toy_other_languages.tsv) and our own
fixture sentences (tests/data/langid_sentences.tsv). Speed = sentences/s over the whole set, one process.
Accuracy as the filter needs it: en vs de vs other (a non-en/de sentence counts as right if called neither en
nor de); "exact" = the exact language code. Target: fast backend >= 10x langdetect, accuracy >= it.
Candidates that are not synprep backends (pycld2, lingua, langid) are measured when installed.

Held-out sets, as `synprep filter` uses the identifier (its defaults: all of a backend's languages,
langid_min_letters 0), per backend: every sentence of the UD test treebanks (EWT test = en, GSD test = de:
accuracy, time) and every pair of the held-out parallel sets in ../shared/data/parallel (Multi30k val and
test 2016, iwslt14-toy dev and test, opennmt-toy val; all genuine en-de pairs): pairs the language checks reject
(src_lang or tgt_lang, through synprep.filter.check_pair) and the time for both sides. `--held-out-only` skips
the mixed set.
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

from synprep.filter import FilterSettings, check_pair  # noqa: E402
from synprep.langid import get_identifier  # noqa: E402

BACKENDS = ("langdetect", "py3langid")
PARALLEL_HELD_OUT = (  # (name, en file, de file) under ../shared/data/parallel
    ("Multi30k val", "multi30k/val.en", "multi30k/val.de"),
    ("Multi30k test 2016", "multi30k/test_2016_flickr.en", "multi30k/test_2016_flickr.de"),
    ("iwslt14-toy dev", "iwslt14-toy-deen/dev.en", "iwslt14-toy-deen/dev.de"),
    ("iwslt14-toy test", "iwslt14-toy-deen/test._en", "iwslt14-toy-deen/test.de"),
    ("opennmt-toy val", "opennmt-toy-ende/src-val.txt", "opennmt-toy-ende/tgt-val.txt"),
)
UD_HELD_OUT = (("EWT test", "UD_English-EWT/en_ewt-ud-test.conllu", "en"),
               ("GSD test", "UD_German-GSD/de_gsd-ud-test.conllu", "de"))


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


def ud_texts(relative: str) -> list[str]:
    """Every `# text` of a UD file, in file order."""
    lines = (SHARED / "ud" / relative).read_text(encoding="utf-8").splitlines()
    return [line[9:].strip() for line in lines if line.startswith("# text = ")]


def held_out() -> None:
    """Both backends as the filter uses them by default, on the held-out UD test sets and parallel sets."""
    print(f"{'held-out set':20s} {'size':>6s} " + " ".join(f"{b + ' ' + what:>22s}" for b in BACKENDS
                                                      for what in ("acc/rejected", "seconds")))
    identifiers = {name: get_identifier(name) for name in BACKENDS}
    for identifier in identifiers.values():
        identifier.detect("warm up")
    totals = {name: [0, 0.0] for name in BACKENDS}  # wrong (sentences) or rejected (pairs); seconds
    for name, relative, lang in UD_HELD_OUT:
        texts = ud_texts(relative)
        cells = []
        for backend, identifier in identifiers.items():
            start = time.perf_counter()
            wrong = sum(identifier.detect(text) != lang for text in texts)
            seconds = time.perf_counter() - start
            totals[backend][0] += wrong
            totals[backend][1] += seconds
            cells += [f"{1 - wrong / len(texts):.4f} ({wrong} wrong)", f"{seconds:.2f}"]
        print(f"{name:20s} {len(texts):6d} " + " ".join(f"{c:>22s}" for c in cells))
    sentences = sum(len(ud_texts(relative)) for _, relative, _ in UD_HELD_OUT)
    print(f"{'UD test, both':20s} {sentences:6d} " + " ".join(
        f"{c:>22s}" for b in BACKENDS
        for c in (f"{1 - totals[b][0] / sentences:.4f} ({totals[b][0]} wrong)", f"{totals[b][1]:.2f}")))
    totals = {name: [0, 0.0] for name in BACKENDS}
    pairs_total = 0
    for name, src, tgt in PARALLEL_HELD_OUT:
        pairs = list(zip((SHARED / "parallel" / src).read_text(encoding="utf-8").splitlines(),
                         (SHARED / "parallel" / tgt).read_text(encoding="utf-8").splitlines(), strict=True))
        pairs_total += len(pairs)
        cells = []
        for backend, identifier in identifiers.items():
            # only the language checks: no length limits, the filter's other defaults
            settings = FilterSettings("en", "de", min_len=0, max_len=10**6, max_ratio=10**6, langid=backend)
            start = time.perf_counter()
            reasons = [check_pair(s, t, settings, identifier) for s, t in pairs]
            seconds = time.perf_counter() - start
            rejected = sum(reason in ("src_lang", "tgt_lang") for reason in reasons)
            totals[backend][0] += rejected
            totals[backend][1] += seconds
            cells += [f"{rejected} rejected", f"{seconds:.2f}"]
        print(f"{name:20s} {len(pairs):6d} " + " ".join(f"{c:>22s}" for c in cells))
    print(f"{'parallel, all':20s} {pairs_total:6d} " + " ".join(
        f"{c:>22s}" for b in BACKENDS for c in (f"{totals[b][0]} rejected", f"{totals[b][1]:.2f}")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-treebank", type=int, default=1500, help="sentences from each of EWT and GSD")
    parser.add_argument("--held-out-only", action="store_true", help="only the held-out sets")
    args = parser.parse_args()
    if not (SHARED / "ud" / "UD_English-EWT").is_dir():
        sys.exit("needs ../shared/data/ud (UD English-EWT, German-GSD)")
    held_out()
    if args.held_out_only:
        return
    print()
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
