"""The papers' language pairs end to end on real data (skipped when ../shared, or $SYNPREP_SHARED, is absent):
for ja, zh, ro, ru and tr a tiny UDPipe parser trained on 120 sentences of the shared treebank, a few hundred real
pairs converted raw (En->X, the default filter), validated, a few DBSA training steps, raw-text translation,
eval and compare with the target language's BLEU tokenizer. Small on purpose: ~2 minutes for all five."""

import os
import re
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("SYNPREP_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "data"
PARALLEL = SHARED / "parallel"
TATOEBA = "tatoeba-test-v2021-08-07"
# per language: treebank (dev file), train / valid / test (folder, file stem, first line, lines)
SETUPS = {
    "ja": ("UD_Japanese-GSD/ja_gsd-ud-dev.conllu", [("tatoeba/en-ja", TATOEBA, 0, 300),
                                                    ("tatoeba/en-ja", TATOEBA, 300, 20),
                                                    ("tatoeba/en-ja", TATOEBA, 320, 20)]),
    "zh": ("UD_Chinese-GSD/zh_gsd-ud-dev.conllu", [("tatoeba/en-zh", TATOEBA, 0, 300),
                                                   ("tatoeba/en-zh", TATOEBA, 300, 20),
                                                   ("tatoeba/en-zh", TATOEBA, 320, 20)]),
    "ro": ("UD_Romanian-RRT/ro_rrt-ud-dev.conllu", [("europarl10k-enro", "train", 5000, 300),
                                                    ("wmt-news-ro", "newsdev2016", 0, 20),
                                                    ("wmt-news-ro", "newstest2016", 0, 20)]),
    "ru": ("UD_Russian-GSD/ru_gsd-ud-dev.conllu", [("tatoeba/en-ru", TATOEBA, 0, 300),
                                                   ("tatoeba/en-ru", TATOEBA, 300, 20),
                                                   ("tatoeba/en-ru", TATOEBA, 320, 20)]),
    "tr": ("UD_Turkish-IMST/tr_imst-ud-dev.conllu", [("tatoeba/en-tr", TATOEBA, 0, 300),
                                                     ("tatoeba/en-tr", TATOEBA, 300, 20),
                                                     ("tatoeba/en-tr", TATOEBA, 320, 20)]),
}
TOKENIZER = {"ja": "ja-mecab", "zh": "zh", "ro": "13a", "ru": "13a", "tr": "13a"}
CEDILLA = re.compile("[\u015e\u015f\u0162\u0163]")
pytestmark = pytest.mark.skipif(not (SHARED / "ud").is_dir() or not PARALLEL.is_dir(),
                                reason="../shared/data (or $SYNPREP_SHARED/data) not present")


@pytest.fixture(scope="session")
def shared_parser(tmp_path_factory):
    """A function lang -> a tiny UDPipe model trained on the first 120 sentences of the shared dev treebank."""
    from synprep.parse.train import train_udpipe

    models: dict[str, str] = {}

    def get(lang: str) -> str:
        if lang not in models:
            folder = tmp_path_factory.mktemp(f"parser-{lang}")
            blocks = (SHARED / "ud" / SETUPS[lang][0]).read_text(encoding="utf-8").split("\n\n")
            (folder / "train.conllu").write_text("\n\n".join(blocks[:120]) + "\n\n", encoding="utf-8")
            train_udpipe(str(folder / "train.conllu"), str(folder / f"{lang}.udpipe"), "tiny")
            models[lang] = str(folder / f"{lang}.udpipe")
        return models[lang]

    return get


def _lines(folder: str, stem: str, lang: str, first: int, count: int) -> list[str]:
    with open(PARALLEL / folder / f"{stem}.{lang}", encoding="utf-8") as handle:
        return handle.read().split("\n")[first:first + count]


def _pipeline(tmp: Path, lang: str, en_model: str, model: str) -> Path:
    """The pipeline file of a tiny En->lang corpus cut from the shared files (Romanian: normalise-romanian)."""
    tables = []
    for split, (folder, stem, first, count) in zip(("train", "valid", "test"), SETUPS[lang][1]):
        for side in ("en", lang):
            (tmp / f"{split}.{side}").write_text("\n".join(_lines(folder, stem, side, first, count)) + "\n",
                                                 encoding="utf-8")
        tables.append(f'[splits.{split}]\nsrc = "{split}.en"\ntgt = "{split}.{lang}"\n')
    normalize = '[normalize]\ntgt = ["romanian"]\n' if lang == "ro" else ""
    text = (f'[pipeline]\nname = "en-{lang}"\nsrc_lang = "en"\ntgt_lang = "{lang}"\noutput = "out"\n'
            + "".join(tables) + normalize
            + f'[parser.src]\nmodel = "{en_model}"\n[parser.tgt]\nmodel = "{model}"\n'
            + ('[bpe]\njoint = false\n' if lang == "ja" else '[bpe]\n')  # En-Ja: separate BPE per side
            + 'symbols = 400\n[features]\nsrc = ["parents", "labels"]\ntgt = ["parents", "labels"]\n'
            'non_projective = "keep"\n')
    (tmp / "pipeline.toml").write_text(text, encoding="utf-8")
    return tmp / "pipeline.toml"


@pytest.mark.parametrize("lang", list(SETUPS))
def test_language_pair_end_to_end(lang, tmp_path, tiny_udpipe, shared_parser):
    from click.testing import CliRunner

    from synprep.convert.converter import Converter, ConvertOptions
    from synprep.convert.pipeline import load_pipeline
    from synprep.shards import open_split
    from synprep.validate import validate_directory
    from syntrain.cli import cli
    from syntrain.train import TrainConfig, train
    from syntrain.translate import Translator

    Converter(load_pipeline(str(_pipeline(tmp_path, lang, tiny_udpipe("en"), shared_parser(lang)))),
              ConvertOptions(workers=1)).run()
    out = tmp_path / "out"
    for split in ("train", "valid", "test"):
        report, manifest = validate_directory(str(out / split))
        assert report.ok, report.summary(manifest)
    manifest = validate_directory(str(out / "train"))[1]
    assert manifest.rows >= 0.8 * 300, manifest.rejected  # the default filter keeps most real pairs
    assert manifest.configuration["tgt_lang"] == lang
    assert manifest.configuration["bpe"].get("joint", True) is (lang != "ja")
    train_text = open_split(str(out / "train")).table(["tgt_text"]).column("tgt_text").to_pylist()
    if lang == "ro":  # the Europarl side is written with cedillas; normalise-romanian leaves none
        assert CEDILLA.search((tmp_path / "train.ro").read_text(encoding="utf-8"))
        assert not any(CEDILLA.search(text) for text in train_text)
        assert manifest.signature["normalize"] == {"src": [], "tgt": ["romanian"]}

    model = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dbsa_encoder=True, dbsa_decoder=True)
    train(TrainConfig(data=str(out / "train"), valid=str(out / "valid"), test=str(out / "test"),
                      out=str(tmp_path / "run"), model=model, max_tokens=800, max_steps=3, warmup=2,
                      eval_interval=3, eval_sentences=5, test_beam=1, log_interval=1, threads=1))
    if lang == "ja":  # its own source vocabulary (no source/target embedding shared)
        assert (tmp_path / "run" / "vocab.src.json").is_file()
    log = (tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8")
    assert f"tok:{TOKENIZER[lang]}" in log.replace("ja-mecab-0.996-IPA", "ja-mecab")  # test BLEU signature stored

    sources = _lines(*SETUPS[lang][1][2][:2], "en", 0, 3)
    ranked = Translator(str(tmp_path / "run" / "best.pt"), "cpu", beam=1, progress=False).translate_raw(sources)
    outputs = [hyps[0][1] for hyps in ranked if hyps]
    assert len(outputs) == 3
    if lang in ("ja", "zh"):  # no space between two words of the script
        assert not any(re.search("[\u3040-\u30ff\u4e00-\u9fff] [\u3040-\u30ff\u4e00-\u9fff]", o) for o in outputs)

    done = CliRunner().invoke(cli, ["eval", "--checkpoint", str(tmp_path / "run" / "best.pt"),
                                    "--data", str(out / "test"), "--beam", "1"])
    assert done.exit_code == 0, done.output
    assert f"tok:{TOKENIZER[lang]}" in done.output, done.output
    # the printed signature lines name the references' normalization (the split's, by convert)
    by_convert = "references normalized: romanian (by convert)"
    assert (by_convert in done.output) is (lang == "ro"), done.output
    if lang == "ro":  # references normalized as the training target was; another tokenizer named
        done = CliRunner().invoke(cli, ["eval", "--checkpoint", str(tmp_path / "run" / "best.pt"), "--data",
                                        str(out / "test"), "--beam", "1", "--normalize-refs", "romanian",
                                        "--normalize-refs", "remove-diacritics", "--bleu-tokenize", "char"])
        assert done.exit_code == 0 and "tok:char" in done.output, done.output
        assert done.output.count(f"{by_convert}; romanian, remove-diacritics (--normalize-refs)") == 2, done.output
    done = CliRunner().invoke(cli, ["compare", str(tmp_path / "run"), "--data", str(out / "test"), "--beam", "1"])
    assert done.exit_code == 0, done.output
    assert f"tok:{TOKENIZER[lang]}" in done.output, done.output  # the results table's BLEU signature
