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


# ------------------------------------------------------------------------------------------ neighbours
# Tokenizers of every marker rule the hf-tokenizer and sentencepiece schemes read, built here; every word below is
# either kept with pieces that read back to the word itself (`pieces_to_tokens`, the de-segmentation) or rejected.
_SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
_WORDS = ["dog", "Köln", "o'clock", "Café", "ﬁne", "Ǆx", "\u2581dog", "dog\u2581", "\u0120dog", "##ing", "dog@@",
          "3\u2581000", "日本", "eng_Latn", "__en__", "[CLS]", "[UNK]", "<w>", "dog</w>", "x\u0301"]


def _hf(path: Path, kind: str) -> str:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    unigram = trainers.UnigramTrainer(vocab_size=120, special_tokens=_SPECIALS, unk_token="<unk>")
    made = {
        "metaspace-always": (models.Unigram(), pre_tokenizers.Metaspace(prepend_scheme="always"), None, unigram),
        "metaspace-first": (models.Unigram(), pre_tokenizers.Metaspace(prepend_scheme="first"), None, unigram),
        "lowercase": (models.Unigram(), pre_tokenizers.Metaspace(), normalizers.Sequence(
            [normalizers.NFKC(), normalizers.Lowercase()]), unigram),
        "strip-accents": (models.Unigram(), pre_tokenizers.Metaspace(), normalizers.Sequence(
            [normalizers.NFD(), normalizers.StripAccents()]), unigram),
        "bytelevel-nfkc": (models.BPE(), pre_tokenizers.ByteLevel(add_prefix_space=True), normalizers.NFKC(),
                           trainers.BpeTrainer(vocab_size=400, special_tokens=_SPECIALS,
                                               initial_alphabet=pre_tokenizers.ByteLevel.alphabet())),
        "wordpiece-prefix": (models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="@@"),
                             pre_tokenizers.WhitespaceSplit(), None, trainers.WordPieceTrainer(
                                 vocab_size=150, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                 continuing_subword_prefix="@@")),
        "bert-uncased": (models.WordPiece(unk_token="[UNK]"), pre_tokenizers.BertPreTokenizer(),
                         normalizers.BertNormalizer(lowercase=True), trainers.WordPieceTrainer(
                             vocab_size=150, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])),
        "prepend": (models.BPE(unk_token="<unk>"), None, normalizers.Sequence(  # Llama / Mistral style
            [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]),
                    trainers.BpeTrainer(vocab_size=150, special_tokens=_SPECIALS)),
        "bpe-prefix": (models.BPE(unk_token="<unk>", continuing_subword_prefix="##"), pre_tokenizers.Whitespace(),
                       None, trainers.BpeTrainer(vocab_size=150, special_tokens=_SPECIALS,
                                                 continuing_subword_prefix="##")),
    }
    model, pre, normalizer, trainer = made[kind]
    tok = Tokenizer(model)
    if pre is not None:
        tok.pre_tokenizer = pre
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.train_from_iterator([" ".join(tokens) for tokens in SAMPLE_TOKENS] + ["Café in Köln um o'clock 日本"], trainer)
    tok.save(str(path))
    return str(path)


_KINDS = ["metaspace-always", "metaspace-first", "lowercase", "strip-accents", "bytelevel-nfkc", "wordpiece-prefix",
          "bert-uncased", "bpe-prefix", "prepend"]


def _written(cutter: object, word: str) -> list[str]:
    """The word as the model's normalizer writes it, in plain text (its pieces' alphabet and marker read back)."""
    from synprep.subwords import pieces_to_tokens

    return pieces_to_tokens([cutter.normalize(word)], cutter.marker, cutter.marker_kind)


@pytest.mark.parametrize("kind", _KINDS)
def test_kept_pieces_give_back_the_token_and_every_special_token_as_a_word_is_named(tmp_path, kind):
    from synprep.subwords import pieces_to_tokens

    cutter = TokenizerCutter(_hf(tmp_path / "tokenizer.json", kind))
    assert cutter.unreadable() is None and cutter.marker_kind != "none"
    specials = [token.content for token in cutter.tokenizer.get_added_tokens_decoder().values() if token.special]
    assert specials
    words = _WORDS + [cutter.marker + "dog", "dog" + cutter.marker]
    for word, pieces in zip(words, cutter.pieces_of(words)):
        if read_back(cutter, [word], [pieces]) is None and (cutter.unknown_piece not in pieces):
            assert pieces_to_tokens(pieces, cutter.marker, cutter.marker_kind) in ([word], _written(cutter, word)), \
                (word, pieces)
    for word, pieces in zip(specials, cutter.pieces_of(specials)):  # each the model's special token: never kept
        failed = read_back(cutter, ["dog", word], [cutter.pieces_of(["dog"])[0], pieces])
        assert failed is not None and failed[0] == SPECIAL_PIECES and repr(word) in failed[1], (word, pieces)


@pytest.mark.parametrize("kind", ["lowercase", "strip-accents", "bytelevel-nfkc"])
def test_a_token_the_normalizer_changes_reads_back_as_the_normalizer_writes_it(tmp_path, kind):
    """An uncased model keeps `Köln` (as `köln`, what it translates): its pieces spell the normalized form."""
    from synprep.subwords import pieces_to_tokens

    cutter = TokenizerCutter(_hf(tmp_path / "tokenizer.json", kind))
    word = {"lowercase": "Köln", "strip-accents": "Köln", "bytelevel-nfkc": "ﬁne"}[kind]
    written = _written(cutter, word)
    assert written != [word]
    [pieces] = cutter.pieces_of([word])
    assert read_back(cutter, [word], [pieces]) is None
    assert pieces_to_tokens(pieces, cutter.marker, cutter.marker_kind) == written


def test_a_token_holding_the_marker_is_not_read_back_without_it(tmp_path):
    cutter = TokenizerCutter(_hf(tmp_path / "tokenizer.json", "metaspace-always"))
    pieces = cutter.pieces_of(["\u2581dog"])[0]
    assert "".join(pieces) == "\u2581dog"  # the tokenizer takes the token's own '▁' for its marker: 'dog'
    assert read_back(cutter, ["\u2581dog"], [pieces])[0] == UNREAD_PIECES
    assert read_back(cutter, ["\u2581"], cutter.pieces_of(["\u2581"])) is None  # an empty token's form


def test_a_bpe_continuing_prefix_is_the_marker_and_an_end_of_word_suffix_is_refused(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    assert tokenizer_marker(_hf(tmp_path / "prefix.json", "bpe-prefix")) == ("##", "continue")
    assert tokenizer_marker(_hf(tmp_path / "prepend.json", "prepend")) == ("\u2581", "start")  # by the normalizer
    for pre in (pre_tokenizers.Whitespace(), pre_tokenizers.Metaspace()):
        tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
        tok.pre_tokenizer = pre
        trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=_SPECIALS, end_of_word_suffix="</w>")
        tok.train_from_iterator([" ".join(tokens) for tokens in SAMPLE_TOKENS], trainer)
        tok.save(str(tmp_path / "suffix.json"))
        why = TokenizerCutter(str(tmp_path / "suffix.json")).unreadable()
        assert why is not None and "'</w>'" in why and "\n" not in why


def test_sentencepiece_models_read_back_or_are_refused(tmp_path):
    """Byte fallback and user-defined symbols read back; a model adding no '▁' before a token is refused."""
    import sentencepiece as spm

    from synprep.subwords import pieces_to_tokens
    from synprep.subwords.sentencepiece_scheme import SentencePieceCutter

    texts = [" ".join(tokens) for tokens in SAMPLE_TOKENS]
    for name, options in (("bytes", {"byte_fallback": True}), ("users", {"user_defined_symbols": ["eng_Latn", "@@"]}),
                          ("nfkc", {"normalization_rule_name": "nmt_nfkc"}), ("bare", {"add_dummy_prefix": False})):
        options = {"normalization_rule_name": "identity", **options}
        spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=str(tmp_path / name),
                                       vocab_size=400, hard_vocab_limit=False, minloglevel=2, num_threads=1, **options)
        cutter = SentencePieceCutter(str(tmp_path / f"{name}.model"))
        if name == "bare":
            assert "add_dummy_prefix" in (cutter.unreadable() or "")
            continue
        assert cutter.unreadable() is None
        words = _WORDS + _SPECIALS
        for word, pieces in zip(words, cutter.pieces_of(words)):
            if read_back(cutter, [word], [pieces]) is None:
                tokens = pieces_to_tokens(pieces, cutter.marker, cutter.marker_kind)
                assert tokens in ([word], _written(cutter, word)), (name, word, pieces)
        if name == "bytes":
            assert any(piece.startswith("<0x") for piece in cutter.pieces_of(["日本"])[0])
            assert read_back(cutter, ["日本"], cutter.pieces_of(["日本"])) is None


# ------------------------------------------------------------------------------------------ BPE codes, no sub-words
def _conllu(sentences: list[list[str]]) -> str:
    """Pre-parsed CoNLL-U: each sentence's first token the root, the others its dependents."""
    return "".join(f"# sent_id = {n}\n# text = {' '.join(tokens)}\n" + "".join(
        f"{i}\t{token}\t_\tX\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_\n"
        for i, token in enumerate(tokens, 1)) + "\n" for n, tokens in enumerate(sentences, 1))


@pytest.mark.parametrize("bpe", ["symbols = 30", "enabled = false", 'scheme = "characters"'])
def test_a_token_holding_the_bpe_separator_is_rejected_where_it_would_not_read_back(tmp_path, bpe):
    """`dog@@` under BPE codes (or no sub-words) would be a last piece ending in '@@', joined to the next token:
    convert rejects the pair (counted, listed, its reason in rejected_reasons) and validate passes; the characters
    scheme cuts it into pieces that read back ('@@@', '@') and keeps it. align agrees."""
    from synprep.shards import open_split
    from synprep.subwords import pieces_to_tokens

    sentences = [["The", "dog@@", "sleeps", "."], ["A", "dog", "sleeps", "."], ["x@@y", "dog", "."]] * 4
    (tmp_path / "pairs.conllu").write_text(_conllu(sentences), encoding="utf-8")
    (tmp_path / "pipeline.toml").write_text(
        '[pipeline]\nname = "t"\nsrc_lang = "en"\ntgt_lang = "de"\noutput = "out"\n'
        '[splits.train]\nsrc = "pairs.conllu"\ntgt = "pairs.conllu"\nfilter = false\n'
        f'[bpe]\n{bpe}\n[features]\nsrc = ["parents", "transitions"]\ntgt = ["parents"]\n', encoding="utf-8")
    code, message = cli_in_process("synprep", ["convert", tmp_path / "pipeline.toml", "--workers", 1])
    assert code == 0, message
    split = tmp_path / "out" / "train"
    manifest = json.loads((split / "manifest.json").read_text())
    listed = (split / "rejected.tsv").read_text(encoding="utf-8").splitlines()
    kept = open_split(str(split)).table().to_pylist()
    if "characters" in bpe:
        assert manifest["rows"] == len(sentences) and not listed
        pieces = [p for p, o in zip(kept[0]["src_subwords"], kept[0]["src_subword_token"]) if o == 1]
        assert pieces_to_tokens(pieces, "@@", "end") == ["dog@@"]
    else:
        assert manifest["rejected"] == {UNREAD_PIECES: 4} and UNREAD_PIECES in manifest["rejected_reasons"]
        assert len(listed) == 4 and all(UNREAD_PIECES in line and "'dog@@'" in line for line in listed)
        assert all("dog@@" not in row["src_tokens"] for row in kept) and len(kept) == 8
    report, _ = validate_directory(str(split))
    assert report.ok, report.failures[:3]
    args = ["align", "--conllu", tmp_path / "pairs.conllu", "--features", "parents", "-o", tmp_path / "a.jsonl"]
    if "symbols" in bpe:
        args += ["--bpe-codes", tmp_path / "out" / "codes.bpe"]
    elif "characters" in bpe:
        args += ["--scheme", "characters"]
    code, message = cli_in_process("synprep", args)
    assert code == 0 and (" 0 dropped" if "characters" in bpe else "4 dropped (unread_pieces 4)") in message, message
