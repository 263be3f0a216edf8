"""Sub-word read-back (synprep.subwords.read_back): with the token-by-token cut, convert and `synprep align` keep
only sentences whose pieces read back to their tokens under the scheme's recorded rule, the others rejected under
a counted reason and listed in rejected.tsv; `synprep validate` checks rows with the same function; a tokenizer
whose pieces cannot be read back at all is refused in one line. Real tokenizers, trained here on the sample
sentences."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")

from synprep.convert.pipeline import load_pipeline  # noqa: E402
from synprep.errors import InputError  # noqa: E402
from synprep.featurize import FeatureConfig, featurize, read_back_of  # noqa: E402
from synprep.subwords import SPECIAL_PIECES, UNREAD_PIECES, read_back  # noqa: E402
from synprep.subwords.hf_tokenizer import TokenizerCutter, tokenizer_marker  # noqa: E402
from synprep.trees import Tree  # noqa: E402
from synprep.validate import validate_directory  # noqa: E402

from .conftest import SAMPLE_DATA, cli_in_process  # noqa: E402
from .test_subwords import SAMPLE_TOKENS, _convert_with_parsers, _pipeline, build_tokenizer  # noqa: E402


def _bytelevel(path: Path, prefix_space: bool) -> str:
    """A GPT-2 / RoBERTa style tokenizer: ByteLevel pre-tokenizer (with or without a prefix space), BPE model,
    a ByteLevel decoder that adds one (what the marker must not be read from)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix_space)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True)
    tok.train_from_iterator([" ".join(tokens) for tokens in SAMPLE_TOKENS],
                            trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(path))
    return str(path)


def _wordpiece(path: Path) -> str:
    """A BERT-style tokenizer (WordPiece behind a Whitespace pre-tokenizer, which splits at punctuation) that
    knows the apostrophe."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    texts = [" ".join(tokens) for tokens in SAMPLE_TOKENS] + ["The train arrives at eight o'clock ."]
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=150, special_tokens=["[PAD]", "[UNK]",
                                                                                              "[CLS]", "[SEP]"]))
    tok.save(str(path))
    return str(path)


def _tree(tokens: list[str]) -> Tree:
    heads = [0] + [1] * (len(tokens) - 1)
    return Tree(tokens, heads, ["root"] + ["dep"] * (len(tokens) - 1), " ".join(tokens), "1")


def test_the_marker_is_read_from_the_pre_tokenizer_not_the_decoder(tmp_path):
    with_space = _bytelevel(tmp_path / "with.json", True)
    without = _bytelevel(tmp_path / "without.json", False)
    assert tokenizer_marker(with_space) == ("\u0120", "start")
    assert tokenizer_marker(without) == ("", "none")  # no piece carries 'Ġ': recorded as no marker
    assert not any(piece.startswith("\u0120") for pieces in TokenizerCutter(without).pieces_of(["Hund", "Garten"])
                   for piece in pieces)
    path = _pipeline(tmp_path, f'scheme = "hf-tokenizer"\nmodel = "{without}"', 'src = ["parents"]\ntgt = ["parents"]')
    with pytest.raises(InputError, match="cannot be read back") as err:
        load_pipeline(str(path))
    assert "\n" not in str(err.value)
    code, message = cli_in_process("synprep", ["align", "--conllu", SAMPLE_DATA / "en.conllu", "--scheme",
                                               "hf-tokenizer", "--model", without, "--features", "parents"])
    assert code == 2 and len(message.strip().splitlines()) == 1 and "cannot be read back" in message


def test_a_word_cut_into_a_special_piece_is_rejected_and_named(tmp_path):
    cutter = TokenizerCutter(build_tokenizer(tmp_path / "tokenizer.json"))
    assert cutter.pieces_of(["<pad>"]) == [("<pad>",)]  # the word would become the padding id
    trees = [_tree(["The", "dog", "."]), _tree(["The", "<pad>", "."]), _tree(["A", "</s>", "cat"])]
    columns = featurize(trees, FeatureConfig(("parents",)), cutter.segment_word, read_back=read_back_of(cutter))
    assert columns.kept == [0] and columns.dropped == {1: SPECIAL_PIECES, 2: SPECIAL_PIECES}
    assert "'<pad>'" in columns.notes[1] and "'</s>'" in columns.notes[2]
    conllu = tmp_path / "special.conllu"
    conllu.write_text("# text = The <pad> .\n1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n"
                      "2\t<pad>\t_\tNOUN\t_\t_\t0\troot\t_\t_\n3\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_\n\n",
                      encoding="utf-8")
    code, message = cli_in_process("synprep", ["align", "--conllu", conllu, "--scheme", "hf-tokenizer", "--model",
                                               tmp_path / "tokenizer.json", "--features", "parents",
                                               "-o", tmp_path / "out.jsonl", "--workers", 1])
    assert code == 0 and "1 dropped (special_pieces 1)" in message, message
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == ""


def test_wordpiece_pieces_that_do_not_spell_their_token_are_rejected(tmp_path):
    cutter = TokenizerCutter(_wordpiece(tmp_path / "tokenizer.json"))
    assert cutter.pieces_of(["o'clock"])[0][1:2] == ("'",)  # cut at the apostrophe, no '##': the token is lost
    failed = read_back(cutter, ["at", "o'clock"], cutter.pieces_of(["at", "o'clock"]))
    assert failed is not None and failed[0] == UNREAD_PIECES and "o'clock" in failed[1]
    assert read_back(cutter, ["the", "dog"], cutter.pieces_of(["the", "dog"])) is None


@pytest.mark.slow
def test_convert_keeps_rows_that_read_back_lists_every_rejection_and_validates(tmp_path, tiny_udpipe):
    """The sample data's `o'clock` under a WordPiece tokenizer: the pair is rejected (counted and listed), every
    kept row reads back, and validate (the same function) passes."""
    tokenizer = _wordpiece(tmp_path / "tokenizer.json")
    path = _pipeline(tmp_path, f'scheme = "hf-tokenizer"\nmodel = "{tokenizer}"',
                     'src = ["parents"]\ntgt = ["parents"]')
    _convert_with_parsers(path, tiny_udpipe)
    out = tmp_path / "out"
    cutter = TokenizerCutter(tokenizer)
    for split in ("train", "valid", "test"):
        manifest = json.loads((out / split / "manifest.json").read_text())
        listed = Counter(line.split("\t")[1] for line in
                         (out / split / "rejected.tsv").read_text(encoding="utf-8").splitlines())
        assert listed == Counter({k: v for k, v in manifest["rejected"].items() if v}), split
        assert {UNREAD_PIECES, SPECIAL_PIECES, "unmarked_pieces"} <= set(manifest["rejected_reasons"])
        report, _ = validate_directory(str(out / split))
        assert report.ok, report.failures[:3]
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["rejected"].get(UNREAD_PIECES), manifest["rejected"]
    lines = (out / "train" / "rejected.tsv").read_text(encoding="utf-8").splitlines()
    assert any(UNREAD_PIECES in line and "o'clock" in line for line in lines)
    from synprep.shards import open_split

    for row in open_split(str(out / "train")).table().to_pylist():
        for side in ("src", "tgt"):
            owner = row[f"{side}_subword_token"]
            pieces = [[p for p, o in zip(row[f"{side}_subwords"], owner) if o == i]
                      for i in range(len(row[f"{side}_tokens"]))]
            assert read_back(cutter, row[f"{side}_tokens"], pieces) is None
