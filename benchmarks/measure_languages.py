"""The figures of docs/languages.md: per language (ja, zh, ro, ru, tr) a UDPipe model trained with `synprep parser
train`'s code on the shared dev treebank, its UAS/LAS on the shared test file (gold tokenization: UDPipe re-tags
and re-parses the gold words), and a raw En->X convert of a real sample with the default filter: pairs kept,
rejections per reason, tokens and sub-words per sentence.

    SYNPREP_SHARED=../shared python benchmarks/measure_languages.py [--pairs 3000] [--preset tiny] [--langs ja,zh]

Needs ../shared (or $SYNPREP_SHARED): data/ud, data/parallel, models/en_ewt.udpipe. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("SYNPREP_SHARED", REPO.parent / "shared"))
TATOEBA = ("tatoeba/en-{lang}", "tatoeba-test-v2021-08-07", 0)
SETUPS = {  # treebank folder, file prefix; parallel sample (folder, stem, first line)
    "ja": ("UD_Japanese-GSD", "ja_gsd-ud", TATOEBA),
    "zh": ("UD_Chinese-GSD", "zh_gsd-ud", TATOEBA),
    "ro": ("UD_Romanian-RRT", "ro_rrt-ud", ("europarl10k-enro", "train", 0)),
    "ru": ("UD_Russian-GSD", "ru_gsd-ud", TATOEBA),
    "tr": ("UD_Turkish-IMST", "tr_imst-ud", TATOEBA),
}


def attachment_scores(model_path: str, gold_path: str) -> tuple[float, float, int]:
    """UAS and LAS (%) of a UDPipe model on a gold CoNLL-U file with gold tokenization, and the word count."""
    from ufal.udpipe import Model, Pipeline, ProcessingError

    from synprep.conllu import read_conllu, to_tree

    gold_text = Path(gold_path).read_text(encoding="utf-8")
    model = Model.load(model_path)
    error = ProcessingError()
    predicted = Pipeline(model, "conllu", Pipeline.DEFAULT, Pipeline.DEFAULT, "conllu").process(gold_text, error)
    if error.occurred():
        raise RuntimeError(error.message)
    with tempfile.NamedTemporaryFile("w", suffix=".conllu", encoding="utf-8", delete=False) as handle:
        handle.write(predicted)
    words = heads = labels = 0
    for gold, pred in zip(read_conllu(gold_path), read_conllu(handle.name), strict=True):
        g, p = to_tree(gold), to_tree(pred)
        for gh, gl, ph, pl in zip(g.heads, g.labels, p.heads, p.labels, strict=True):
            words += 1
            heads += gh == ph
            labels += gh == ph and gl.split(":")[0] == pl.split(":")[0]
    os.unlink(handle.name)
    return 100 * heads / words, 100 * labels / words, words


def convert_sample(lang: str, model: str, pairs: int, work: Path) -> dict:
    """A raw En->lang convert of `pairs` real pairs (default filter, 8k joint merges): the train manifest's
    counts and the mean tokens / sub-words per sentence per side."""
    from synprep.convert.converter import Converter, ConvertOptions
    from synprep.convert.pipeline import load_pipeline
    from synprep.shards import load_manifest, open_split

    folder, stem, first = SETUPS[lang][2]
    folder = folder.format(lang=lang)
    for side in ("en", lang):
        lines = (SHARED / "data" / "parallel" / folder / f"{stem}.{side}").read_text(encoding="utf-8").split("\n")
        (work / f"train.{side}").write_text("\n".join(lines[first:first + pairs]) + "\n", encoding="utf-8")
    normalize = '[normalize]\ntgt = ["romanian"]\n' if lang == "ro" else ""
    (work / "p.toml").write_text(
        f'[pipeline]\nsrc_lang = "en"\ntgt_lang = "{lang}"\noutput = "out"\n[splits.train]\nsrc = "train.en"\n'
        f'tgt = "train.{lang}"\n{normalize}[parser.src]\nmodel = "{SHARED / "models" / "en_ewt.udpipe"}"\n'
        f'[parser.tgt]\nmodel = "{model}"\n[bpe]\nsymbols = 8000\n[features]\nsrc = ["parents"]\n'
        'tgt = ["parents"]\nnon_projective = "keep"\n', encoding="utf-8")
    Converter(load_pipeline(str(work / "p.toml")), ConvertOptions(workers=1)).run()
    manifest = load_manifest(str(work / "out" / "train"))
    table = open_split(str(work / "out" / "train")).table(
        ["src_tokens", "tgt_tokens", "src_subwords", "tgt_subwords"]).to_pydict()
    mean = {key: sum(map(len, values)) / max(len(values), 1) for key, values in table.items()}
    texts = open_split(str(work / "out" / "train")).table(["tgt_text"]).column("tgt_text").to_pylist()
    cedillas = sum(len(re.findall("[\u015e\u015f\u0162\u0163]", text)) for text in texts)
    return {"input": manifest.input_lines, "rows": manifest.rows, "cedillas": cedillas,
            "rejected": {k: v for k, v in manifest.rejected.items() if v}, **mean}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3000)
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--langs", default=",".join(SETUPS))
    args = parser.parse_args()
    from synprep.parse.train import train_udpipe

    print("| lang | parser (train: dev) | UAS | LAS | test words | pairs | kept | rejected | tokens en / X "
          "| sub-words en / X |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lang in args.langs.split(","):
        treebank, prefix, _ = SETUPS[lang]
        ud = SHARED / "data" / "ud" / treebank
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            started = time.perf_counter()
            train_udpipe(str(ud / f"{prefix}-dev.conllu"), str(work / "x.udpipe"), args.preset)
            seconds = time.perf_counter() - started
            uas, las, words = attachment_scores(str(work / "x.udpipe"), str(ud / f"{prefix}-test.conllu"))
            sample = convert_sample(lang, str(work / "x.udpipe"), args.pairs, work)
        rejected = ", ".join(f"{k} {v}" for k, v in sample["rejected"].items()) or "-"
        print(f"| {lang} | {treebank} dev, {args.preset}, {seconds:.0f} s | {uas:.1f} | {las:.1f} | {words} | "
              f"{sample['input']} | {100 * sample['rows'] / sample['input']:.1f}% | {rejected} | "
              f"{sample['src_tokens']:.1f} / {sample['tgt_tokens']:.1f} | "
              f"{sample['src_subwords']:.1f} / {sample['tgt_subwords']:.1f} |", flush=True)
        if lang == "ro":
            print(f"ro: s/t with cedilla in the converted target text: {sample['cedillas']}", file=sys.stderr)


if __name__ == "__main__":
    main()
