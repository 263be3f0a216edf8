"""Languages written without spaces (length rule, detokenization), Romanian normalization and the BLEU tokenizer
of a target language; on the shared treebanks and corpora where they are present (skipped otherwise)."""

import os
from pathlib import Path

import pytest

from synprep.errors import InputError
from synprep.filter import FilterSettings, check_pair, filter_files
from synprep.languages import UNSPACED, bleu_tokenize, count_tokens, detokenize
from synprep.normalize import normalizer

SHARED = Path(os.environ.get("SYNPREP_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "data"
UD = SHARED / "ud"
TATOEBA = SHARED / "parallel" / "tatoeba"


def test_count_tokens_rule_for_unspaced_languages():
    assert count_tokens("私は学生です。", "ja") == 4  # 6 script characters / 1.7 -> 4; the full stop counts 0
    assert count_tokens("iPhone 5を買った。", "ja") == 1 + 1 + 3  # Latin run, digit run, 4 kana/kanji -> 3
    assert count_tokens("３０分待ってて。", "ja") == 1 + 3  # full-width digits are one run; 5 / 1.7 -> 3
    assert count_tokens("我是学生。", "zh") == 3  # 4 / 1.6 -> 3
    assert count_tokens("「トム！」「え？」", "ja") == 2 + 1  # brackets and marks count nothing
    assert count_tokens("私は 学生です", "ja", "whitespace") == 2
    assert count_tokens("Hello , world !", "en") == 4  # spaced languages: whitespace tokens, as before
    assert set(UNSPACED) >= {"ja", "zh", "th", "lo", "km", "my"}


def test_filter_counts_japanese_by_the_rule():
    settings = FilterSettings("en", "ja", max_len=5, langid=None)
    assert check_pair("I am a student.", "私は学生です。", settings) is None  # 4 vs 4 (whitespace: 4 vs 1)
    assert check_pair("Yes.", "私は学生です。私は学生です。", settings) == "too_long"  # 8 tokens > 5
    whitespace = FilterSettings("en", "ja", max_len=5, langid=None, segmentation="whitespace")
    assert check_pair("I am a student here.", "私は学生です。", whitespace) == "ratio"  # 5 vs 1
    with pytest.raises(ValueError, match="segmentation"):
        FilterSettings("en", "ja", segmentation="chars")


def test_filter_command_segmentation_flag(tmp_path):
    from click.testing import CliRunner

    from synprep.cli import cli

    (tmp_path / "a.en").write_text("I am a student here today.\nYes.\n", encoding="utf-8")
    (tmp_path / "a.ja").write_text("私は今日ここで学生です。\nはい。\n", encoding="utf-8")
    args = ["filter", "--src", str(tmp_path / "a.en"), "--tgt", str(tmp_path / "a.ja"), "--src-lang", "en",
            "--tgt-lang", "ja", "--langid", "none", "--workers", "1"]
    auto = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "auto")])
    assert auto.exit_code == 0 and "2 pairs: 2 kept" in auto.output, auto.output
    whitespace = CliRunner().invoke(cli, [*args, "-o", str(tmp_path / "ws"), "--segmentation", "whitespace"])
    assert whitespace.exit_code == 0 and "2 pairs: 1 kept" in whitespace.output, whitespace.output  # ratio 6


def _sentences(path: Path):
    """(text, surface tokens, SpaceAfter per token) of every sentence of a CoNLL-U file."""
    text, tokens, space, end = None, [], [], 0
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line:
            if tokens:
                yield text, tokens, space
            text, tokens, space, end = None, [], [], 0
        elif line.startswith("# text ="):
            text = line.split("=", 1)[1].strip()
        elif not line.startswith("#"):
            cols = line.split("\t")
            if "." in cols[0] or ("-" not in cols[0] and int(cols[0]) <= end):
                continue
            if "-" in cols[0]:
                end = int(cols[0].split("-")[1])
            tokens.append(cols[1])
            space.append("SpaceAfter=No" not in cols[9])


@pytest.mark.parametrize("lang, folder, rule_share", [("ja", "UD_Japanese-GSD", 0.99), ("zh", "UD_Chinese-GSD", 1.0)])
def test_detokenize_gold_tokens_gives_the_text(lang, folder, rule_share):
    """With the tokens' SpaceAfter (what a parser gives): every sentence of dev+test; with the language rule
    alone (model output has no SpaceAfter): the measured share (ja 1040 of 1050, zh 1000 of 1000)."""
    files = sorted((UD / folder).glob("*-ud-*.conllu"))
    if len(files) < 2:
        pytest.skip(f"../shared/data/ud/{folder} not present")
    sentences = [s for path in files for s in _sentences(path)]
    assert len(sentences) >= 1000
    assert [text for text, _, _ in sentences] == [detokenize(tokens, lang, space) for _, tokens, space in sentences]
    by_rule = sum(detokenize(tokens, lang) == text for text, tokens, _ in sentences)
    assert by_rule >= rule_share * len(sentences), f"{by_rule} of {len(sentences)}"


def test_detokenize_rule_and_syntrain_detokenizer():
    from syntrain.postprocess import detokenizer

    assert detokenize(["彼", "の", "？"], "ja") == "彼の？"
    assert detokenize(["君", "は", "5", "歳", "だ", "。"], "ja") == "君は5歳だ。"
    assert detokenize(["New", "York", "に", "行く"], "ja") == "New Yorkに行く"
    assert detokenize(["9:00", "AM", "开始"], "zh") == "9:00 AM开始"
    assert detokenizer("ja")(["私", "は", "学生", "です", "。"]) == "私は学生です。"
    assert detokenizer("en")(["Hello", ",", "world", "!"]) == "Hello, world!"  # sacremoses, as before


def test_romanian_normalization():
    text = "Ştiinţa şi ţara"
    assert normalizer(["romanian"])(text) == "Știința și țara"
    assert normalizer(["romanian", "remove-diacritics"])("Şi în ţară, mâine") == "Si in tara, maine"
    assert normalizer([])(text) == text
    with pytest.raises(ValueError, match="unknown normalization 'greek'"):
        normalizer(["greek"])


def test_normalize_table_in_a_pipeline(tmp_path):
    from synprep.convert.pipeline import load_pipeline

    body = ('[pipeline]\nsrc_lang = "en"\ntgt_lang = "ro"\n[splits.train]\nsrc = "a.conllu"\ntgt = "b.conllu"\n'
            '[filter]\nlangid = "none"\n[normalize]\n')
    (tmp_path / "p.toml").write_text(body + 'tgt = ["romanian", "remove-diacritics"]\n', encoding="utf-8")
    config = load_pipeline(str(tmp_path / "p.toml"))
    assert config.normalize.tgt == ("romanian", "remove-diacritics") and config.normalize.src == ()
    assert config.to_dict()["normalize"] == {"src": [], "tgt": ["romanian", "remove-diacritics"]}
    (tmp_path / "p.toml").write_text(body + 'tgt = ["cyrillic"]\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"\[normalize\] tgt: unknown normalization 'cyrillic'"):
        load_pipeline(str(tmp_path / "p.toml"))


def test_bleu_tokenizer_follows_the_target_language():
    from syntrain.scoring import score

    assert [bleu_tokenize(lang) for lang in ("ja", "zh", "de", "")] == ["ja-mecab", "zh", "13a", "13a"]
    hyp, ref = ["私は学生です。"], ["私は学生でした。"]
    japanese, plain = score(hyp, ref, "ja"), score(hyp, ref, "ja", "13a")
    assert "tok:ja-mecab" in japanese["bleu_signature"] and japanese["bleu"] > 20
    assert "tok:13a" in plain["bleu_signature"] and plain["bleu"] == 0.0  # one "word" each: no match
    assert "tok:zh" in score(["我是学生。"], ["我是学生。"], "zh")["bleu_signature"]


def test_tatoeba_ja_keeps_most_pairs_with_the_default_filter(tmp_path):
    """The default filter on the raw Tatoeba En-Ja test set: >= 90% kept (whitespace counting keeps ~4%)."""
    files = sorted((TATOEBA / "en-ja").glob("*.en")) + sorted((TATOEBA / "en-ja").glob("*.ja"))
    if len(files) < 2:
        pytest.skip("../shared/data/parallel/tatoeba/en-ja not present")
    summary = filter_files(str(files[0]), str(files[1]), str(tmp_path / "f"), FilterSettings("en", "ja"), workers=1)
    assert summary.total > 10000 and summary.kept >= 0.9 * summary.total, summary.format()
    whitespace = filter_files(str(files[0]), str(files[1]), str(tmp_path / "w"),
                              FilterSettings("en", "ja", langid=None, segmentation="whitespace"), workers=1,
                              warn=lambda _: None)
    assert whitespace.kept < 0.1 * whitespace.total
