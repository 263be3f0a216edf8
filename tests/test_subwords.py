"""Sub-word schemes beside subword-nmt (synprep.subwords): sentencepiece and hf-tokenizer pieces equal the
libraries' own output token by token, spell their tokens, and the features made on them equal an independent
computation (the released rules of tests/test_fidelity.py, fed the libraries' own pieces) on the shared treebanks.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

spm = pytest.importorskip("sentencepiece")
tokenizers = pytest.importorskip("tokenizers")

from synprep import export  # noqa: E402
from synprep.conllu import read_conllu, to_tree  # noqa: E402
from synprep.convert.converter import Converter, ConvertOptions  # noqa: E402
from synprep.convert.pipeline import load_pipeline  # noqa: E402
from synprep.errors import InputError  # noqa: E402
from synprep.featurize import FeatureConfig, featurize  # noqa: E402
from synprep.subwords import pieces_to_tokens, spells  # noqa: E402
from synprep.subwords.hf_tokenizer import TokenizerCutter, compare_cuts, raw_cut  # noqa: E402
from synprep.subwords.load import load_cutter  # noqa: E402
from synprep.subwords.sentencepiece_scheme import MARKER, SentencePieceCutter, learn  # noqa: E402
from synprep.trees import Tree  # noqa: E402
from synprep.validate import validate_directory  # noqa: E402

from .conftest import REPO, SAMPLE_DATA, SHARED, cli_in_process  # noqa: E402
from .test_fidelity import released_dbsa, released_pascal  # noqa: E402

SHARED = Path(os.environ.get("SYNPREP_SHARED") or SHARED)
TREEBANKS = sorted((SHARED / "data" / "ud").glob("*/*-test.conllu"))
SAMPLE_TOKENS = [to_tree(s, "en").tokens for s in read_conllu(str(SAMPLE_DATA / "en.conllu"))]


def _counts(sentences) -> Counter:
    return Counter(token for tokens in sentences for token in tokens)


@pytest.fixture(scope="module")
def sp_models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spm")
    counts = _counts(SAMPLE_TOKENS)
    models = {}
    for name, kind, fallback in (("unigram", "unigram", False), ("bpe", "bpe", True)):
        models[name] = str(folder / f"{name}.model")
        learn([counts], models[name], 400, kind, 0.99 if fallback else 1.0, fallback)
    return models


def build_tokenizer(path: Path, model: str = "unigram") -> str:
    """A small tokenizer.json trained here (the worked example in docs/synprep.md builds one the same way)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = [" ".join(tokens) for tokens in SAMPLE_TOKENS]
    if model == "bytelevel":  # GPT-2 / RoBERTa / BART style: pieces in the byte alphabet, 'Ġ' starts a token
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        texts = texts + ["Grüße aus Köln"]
    elif model == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        trainer = trainers.WordPieceTrainer(vocab_size=150, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    else:
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=150, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                          unk_token="<unk>")
    tok.train_from_iterator(texts, trainer)
    tok.save(str(path))
    return str(path)


# ------------------------------------------------------------------ pieces = the libraries' own, token by token


@pytest.mark.parametrize("name", ["unigram", "bpe"])
def test_sentencepiece_pieces_are_the_library_cut_of_each_token(sp_models, name):
    cutter = SentencePieceCutter(sp_models[name])
    reference = spm.SentencePieceProcessor(model_file=sp_models[name])
    tokens = [token for tokens in SAMPLE_TOKENS for token in tokens]
    split = 0
    for token in tokens:
        pieces = cutter.segment_word(token).split(" ")
        assert pieces == reference.encode(token, out_type=str)
        assert spells(pieces, token, MARKER, "start")
        split += len(pieces) > 1
    assert split > len(tokens) // 10  # the small model splits words


def test_sentencepiece_edge_cases(sp_models):
    unigram, fallback = SentencePieceCutter(sp_models["unigram"]), SentencePieceCutter(sp_models["bpe"])
    trees = [to_tree(s, "x") for s in read_conllu(str(SAMPLE_DATA / "en.conllu"))][:1]
    tree = trees[0]
    # a token with a space inside, an empty token, characters the model never saw (unknown; byte fallback)
    tokens = ["10 000", "", "日本", tree.tokens[0]]
    odd = Tree(tokens, [4, 4, 4, 0], ["nummod", "dep", "obj", "root"], "1", "odd")
    for cutter in (unigram, fallback):
        columns = featurize([odd], FeatureConfig(("parents", "labels")), cutter.segment_word)
        record = columns.record(0)
        owner = list(record["subword_token"])
        assert sorted(set(owner)) == [0, 1, 2, 3] and owner == sorted(owner)  # every token has its own pieces
        forms = ["10\u2581000", "\u2581", "日本", tokens[3]]
        for index, form in enumerate(forms):
            pieces = [p for p, o in zip(record["subwords"], owner) if o == index]
            assert spells(pieces, form, MARKER, "start"), (form, pieces)
    assert unigram.segment_word("日本").split(" ")[-1] == "日本"  # unknown: the surface, the unknown id
    assert unigram.processor.piece_to_id("日本") == unigram.processor.unk_id()
    assert "<0xE6>" in fallback.segment_word("日本").split(" ")  # byte fallback: UTF-8 bytes as pieces
    assert pieces_to_tokens(fallback.segment_word("日本").split(" ") + ["▁a"], MARKER, "start") == ["日本", "a"]


@pytest.mark.parametrize("kind", ["unigram", "wordpiece", "bytelevel"])
def test_tokenizer_pieces_are_the_library_cut_of_each_token(tmp_path, kind):
    from tokenizers import Tokenizer

    path = build_tokenizer(tmp_path / "tokenizer.json", kind)
    cutter = TokenizerCutter(path)
    reference = Tokenizer.from_file(path)
    assert (cutter.marker, cutter.marker_kind) == {"unigram": ("\u2581", "start"), "wordpiece": ("##", "continue"),
                                                   "bytelevel": ("\u0120", "start")}[kind]
    for tokens in SAMPLE_TOKENS + [["Grüße", "10\u2581000", "aus"]]:  # a token's form: inner space as '▁'
        for token in tokens:
            pieces = cutter.segment_word(token).split(" ")
            assert pieces == reference.encode([token], is_pretokenized=True, add_special_tokens=False).tokens
            assert spells(pieces, cutter.normalize(token), cutter.marker, cutter.marker_kind, cutter.unknown_piece)
    assert cutter.segment_word("\u2581").split(" ") != [""]  # the form of an empty token: never no piece


def test_raw_cut_gives_each_piece_to_the_token_of_its_first_character(tmp_path):
    cutter = TokenizerCutter(build_tokenizer(tmp_path / "tokenizer.json"))
    sentences = [(" ".join(tokens), tokens) for tokens in SAMPLE_TOKENS]
    for text, tokens in sentences:
        raw = raw_cut(cutter, text, tokens)
        assert raw is not None and "".join("".join(p) for p in raw).replace("\u2581", "") == text.replace(" ", "")
    counts = compare_cuts(cutter, sentences)
    assert counts["sentences"] == len(sentences) and counts["unaligned"] == 0
    # a contraction cut by the parser: the raw cut gives "don't"'s pieces otherwise than token by token
    assert compare_cuts(cutter, [("don't", ["do", "n't"])])["differ"] == 1


# ------------------------------------------------------------------ convert, validate, errors


def _pipeline(tmp_path: Path, bpe: str, features: str = 'src = ["parents", "dbsa", "labels"]\ntgt = ["parents"]'
              ) -> Path:
    text = (REPO / "pipelines" / "sample-sentencepiece.toml").read_text(encoding="utf-8")
    head, _, _ = text.partition("[bpe]")
    head = head.replace('data_root = "../sample_data"', f'data_root = "{SAMPLE_DATA}"')
    head = head.replace('output = "../demo_out/sample-sentencepiece"', f'output = "{tmp_path / "out"}"')
    path = tmp_path / "pipeline.toml"
    path.write_text(f"{head}[bpe]\n{bpe}\n[features]\n{features}\n", encoding="utf-8")
    return path


def _convert_with_parsers(path: Path, tiny_udpipe: Callable[[str], Path]) -> None:
    """Convert the pipeline `path` (made by `_pipeline`) with tiny UDPipe models in place of its treebank-trained
    parsers (the `tiny_udpipe` fixture)."""
    text = path.read_text(encoding="utf-8").replace('train_conllu = "en.conllu"', f'model = "{tiny_udpipe("en")}"')
    path.write_text(text.replace('train_conllu = "de.conllu"', f'model = "{tiny_udpipe("de")}"'), encoding="utf-8")
    Converter(load_pipeline(str(path)), ConvertOptions(workers=1)).run()


@pytest.mark.slow
@pytest.mark.parametrize("cut", ["token", "raw"])
def test_convert_with_a_tokenizer_stores_the_model_and_validates(tmp_path, tiny_udpipe, cut):
    tokenizer = build_tokenizer(tmp_path / "tokenizer.json")
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(tokenizer, folder / "tokenizer.json")
    path = _pipeline(tmp_path, f'scheme = "hf-tokenizer"\nmodel = "{folder}"\ncut = "{cut}"')
    _convert_with_parsers(path, tiny_udpipe)
    out = tmp_path / "out"
    assert (out / "tokenizer.json").read_bytes() == Path(tokenizer).read_bytes()
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["configuration"]["bpe"]["scheme"] == "hf-tokenizer"
    assert manifest["signature"]["subword_scheme"] == "hf-tokenizer"
    assert manifest["configuration"]["bpe"].get("cut", "token") == cut
    assert ("unaligned_pieces" in manifest["rejected_reasons"]) == (cut == "raw")
    report, _ = validate_directory(str(out / "train"))
    assert report.ok, report.failures[:3]
    if cut == "raw":  # the stored pieces are the raw-text cut: each piece with the token of its first character
        from synprep.shards import open_split

        row = open_split(str(out / "train")).table().slice(0, 1).to_pylist()[0]
        owner = row["src_subword_token"]
        expected = raw_cut(TokenizerCutter(tokenizer), row["src_text"], row["src_tokens"])
        assert [[p for p, o in zip(row["src_subwords"], owner) if o == i] for i in range(len(expected))] == expected
    # a stored piece changed: validate names it
    (out / "tokenizer.json").write_bytes((out / "tokenizer.json").read_bytes().replace(b'"<unk>"', b'"<unk2>"', 1))
    report, _ = validate_directory(str(out / "train"))
    assert not report.ok and any(f.field == "subword_model" for f in report.failures)


def test_pipeline_errors(tmp_path):
    with pytest.raises(InputError, match="needs model"):
        load_pipeline(str(_pipeline(tmp_path, 'scheme = "hf-tokenizer"')))
    # transitions under sentencepiece: read by '▁' (tests/test_transition_schemes.py)
    assert "transitions" in load_pipeline(str(_pipeline(tmp_path, 'scheme = "sentencepiece"',
                                                        'tgt = ["transitions"]'))).features.tgt
    with pytest.raises(InputError, match="for scheme = \"subword-nmt\""):
        load_pipeline(str(_pipeline(tmp_path, 'scheme = "sentencepiece"\nsymbols = 100')))
    with pytest.raises(InputError, match="not both"):
        load_pipeline(str(_pipeline(tmp_path, f'scheme = "sentencepiece"\nmodel = "{tmp_path}/x.model"\n'
                                              'vocab_size = 100')))
    (tmp_path / "bad.model").write_bytes(b"not a model")
    with pytest.raises(InputError, match="not a SentencePiece model"):
        load_pipeline(str(_pipeline(tmp_path, f'scheme = "sentencepiece"\nmodel = "{tmp_path}/bad.model"')))
    config = load_pipeline(str(_pipeline(tmp_path, 'scheme = "sentencepiece"\nvocab_size = 500')))
    assert config.bpe.scheme_settings() == {"enabled": True, "scheme": "sentencepiece", "model": None,
                                            "vocab_size": 500, "model_type": "unigram", "character_coverage": 1.0,
                                            "byte_fallback": False}
    plain = load_pipeline(str(REPO / "pipelines" / "sample.toml"))
    assert "scheme" not in plain.to_dict()["bpe"]  # subword-nmt: the manifest as before


def test_load_cutter_refuses_an_unknown_scheme(tmp_path):
    with pytest.raises(InputError, match="unknown sub-word scheme"):
        load_cutter("wordpiece", str(tmp_path / "x"))


# ------------------------------------------------------------------ features on pieces = independent reference


def _marked(pieces_per_token: list[list[str]]) -> list[str]:
    """The pieces as the released scripts read them: '@@' on every piece but a token's last."""
    return [piece + ("@@" if i + 1 < len(pieces) else "") for pieces in pieces_per_token
            for i, piece in enumerate(pieces)]


@pytest.mark.slow
@pytest.mark.skipif(not TREEBANKS, reason="../shared/data/ud not present")
@pytest.mark.parametrize("path", TREEBANKS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("scheme", ["sentencepiece", "hf-tokenizer"])
def test_features_on_pieces_equal_the_reference_on_every_sentence(path, scheme, tmp_path):
    trees = [to_tree(sentence, str(path)) for sentence in read_conllu(str(path))]
    trees = [t for t in trees if "@@" not in "".join(t.tokens)]  # '@@' inside a token would fool the marking
    counts = _counts(t.tokens for t in trees)
    model = str(tmp_path / "m.model")
    learn([counts], model, 4000, "unigram", 0.98, False)  # small: tokens split often; rare characters unknown
    if scheme == "sentencepiece":
        processor = spm.SentencePieceProcessor(model_file=model)
        own = {token: processor.encode(token, out_type=str) or [token] for token in counts}
        cutter = load_cutter(scheme, model)
    else:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        processor = spm.SentencePieceProcessor(model_file=model)
        vocab = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
        tok = Tokenizer(models.Unigram(vocab, unk_id=processor.unk_id()))
        tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
        tok.save(str(tmp_path / "tokenizer.json"))
        tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))  # the library reading the file synprep reads
        own = {token: tok.encode([token], is_pretokenized=True, add_special_tokens=False).tokens or [token]
               for token in counts}
        cutter = load_cutter(scheme, str(tmp_path / "tokenizer.json"))
    columns = featurize(trees, FeatureConfig(("parents", "dbsa"), root="keep", non_projective="keep"),
                        cutter.segment_word)
    equal, split = 0, 0
    for i, tree in enumerate(trees):
        record = columns.record(i)
        forms = [token.replace(" ", "\u2581") or "\u2581" for token in tree.tokens]
        marked = _marked([own.get(form) or own.get(token) or [form] for form, token in zip(forms, tree.tokens)])
        assert [p.removesuffix("@@") for p in marked] == list(record["subwords"])
        split += len(marked) > len(tree)
        equal += ([int(h) + 1 for h in record["dbsa_head"]] == released_dbsa(tree.heads, marked)
                  and export.pascal_line(tree.heads, record["subword_token"])
                  == released_pascal(tree.heads, marked, mean=True)
                  and " ".join(repr(float(p)) for p in record["parent_first"])
                  == released_pascal(tree.heads, marked, mean=False))
    print(f"\n{path.parent.name} {scheme}: {equal}/{len(trees)} sentences equal, {split} with a split token")
    assert equal == len(trees) and split > len(trees) // 4


@pytest.mark.slow
def test_sample_sentencepiece_pipeline_converts_validates_trains_and_translates_raw_text(tmp_path):
    """pipelines/sample-sentencepiece.toml end to end: the model in the dataset folder, every token's pieces the
    model's cut of it, 5 training steps on the model's own vocabulary, raw text cut with the dataset's model."""
    out = tmp_path / "data"
    code, err = cli_in_process("synprep", ["convert", REPO / "pipelines" / "sample-sentencepiece.toml",
                                           "--output", out, "--workers", "1"])
    assert code == 0, err
    assert (out / "subwords.model").is_file()
    for split in ("train", "valid", "test"):
        report, _ = validate_directory(str(out / split))
        assert report.ok, report.failures[:3]
    (out / "subwords.model").rename(tmp_path / "away.model")  # the model missing: one failure, not one per row
    report, _ = validate_directory(str(out / "train"))
    assert report.failure_count == 1 and report.failures[0].field == "subword_model"
    (tmp_path / "away.model").rename(out / "subwords.model")
    recipe = (REPO / "pipelines" / "train" / "sample-sentencepiece.toml").read_text(encoding="utf-8")
    recipe = recipe.replace("../../demo_out/sample-sentencepiece", str(out)).replace(
        "../../demo_out/run-sentencepiece", str(tmp_path / "run"))
    (tmp_path / "train.toml").write_text(recipe, encoding="utf-8")
    code, err = cli_in_process("syntrain", ["run", tmp_path / "train.toml"])
    assert code == 0, err
    pieces = SentencePieceCutter(str(out / "subwords.model")).vocabulary()
    assert f"vocabulary {len(pieces) - 3 + 4}," in err  # the model's pieces, its 3 specials mapped onto the 4 ours
    assert (tmp_path / "run" / "source" / "subwords.model").read_bytes() == (out / "subwords.model").read_bytes()
    (tmp_path / "raw.en").write_text("The dog sleeps in the house .\n", encoding="utf-8")
    code, err = cli_in_process("syntrain", ["translate", "--checkpoint", tmp_path / "run" / "best.pt",
                                            "-i", tmp_path / "raw.en", "-o", tmp_path / "raw.hyp"])
    assert code == 0, err
    hypothesis = (tmp_path / "raw.hyp").read_text(encoding="utf-8")
    assert hypothesis.strip() and MARKER not in hypothesis  # pieces joined back into words


def test_a_multiword_token_is_cut_as_its_surface_token(sp_models, tmp_path):
    """A multiword token (French `du` = `de` + `le`) is one surface token of the tree (CONTRACT.md "Tokens and
    trees"): its pieces spell `du`, under every scheme and under the raw-text cut."""
    conllu = tmp_path / "mwt.conllu"
    conllu.write_text("# text = Il parle du chat\n1\tIl\til\tPRON\t_\t_\t2\tnsubj\t_\t_\n"
                      "2\tparle\tparler\tVERB\t_\t_\t0\troot\t_\t_\n3-4\tdu\t_\t_\t_\t_\t_\t_\t_\t_\n"
                      "3\tde\tde\tADP\t_\t_\t5\tcase\t_\t_\n4\tle\tle\tDET\t_\t_\t5\tdet\t_\t_\n"
                      "5\tchat\tchat\tNOUN\t_\t_\t2\tobl\t_\t_\n\n", encoding="utf-8")
    tree = to_tree(next(iter(read_conllu(str(conllu)))), str(conllu))
    assert tree.tokens == ["Il", "parle", "du", "chat"]
    cutter = SentencePieceCutter(sp_models["unigram"])
    record = featurize([tree], FeatureConfig(("parents",)), cutter.segment_word).record(0)
    owner = list(record["subword_token"])
    for index, token in enumerate(tree.tokens):
        pieces = [p for p, o in zip(record["subwords"], owner) if o == index]
        assert pieces == cutter.segment_word(token).split(" ") and spells(pieces, token, MARKER, "start")
    tokenizer = TokenizerCutter(build_tokenizer(tmp_path / "tokenizer.json"))
    raw = raw_cut(tokenizer, tree.text, tree.tokens)
    assert raw is not None and "".join(raw[2]).replace(MARKER, "") == "du"
    assert raw_cut(tokenizer, tree.text, ["Il", "parle", "de", "le", "chat"]) is None  # words the text lacks


def test_hypothesis_pieces_join_by_the_scheme_marker(tmp_path):
    """syntrain joins decoded pieces into tokens by the dataset's scheme (before detokenizing and scoring)."""
    from syntrain.vocab import pieces_joiner

    sentencepiece = pieces_joiner({"bpe": {"scheme": "sentencepiece"}})
    assert sentencepiece(["▁the", "▁hou", "se", "▁", "."]) == ["the", "house", "."]
    wordpiece = pieces_joiner({"bpe": {"scheme": "hf-tokenizer",
                                       "model": build_tokenizer(tmp_path / "wp.json", "wordpiece")}})
    assert wordpiece(["the", "hou", "##se", "."]) == ["the", "house", "."]
    assert pieces_joiner({"bpe": {"symbols": 300}})(["hou@@", "se", "."]) == ["house", "."]


def test_a_missing_library_is_a_one_line_error(monkeypatch, tmp_path):
    """The libraries are the optional extra `subwords`: without one, the scheme says what to install."""
    import sys

    from synprep.subwords.load import scheme_module

    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "synprep.subwords.sentencepiece_scheme", raising=False)
    with pytest.raises(InputError, match=r"pip install 'synprep\[subwords\]'"):
        scheme_module("sentencepiece")
    with pytest.raises(InputError, match="needs the sentencepiece package"):
        load_cutter("sentencepiece", str(tmp_path / "m.model"))


def test_command_line_learn_apply_align_per_scheme(tmp_path):
    """`synprep bpe learn/apply --scheme` and `synprep align --scheme --model`: the model convert would learn,
    each token cut by the library, the features on those pieces."""
    tokens = tmp_path / "tokens.en"
    tokens.write_text("".join(" ".join(t) + "\n" for t in SAMPLE_TOKENS), encoding="utf-8")
    model = tmp_path / "m.model"
    code, err = cli_in_process("synprep", ["bpe", "learn", "--scheme", "sentencepiece", "-i", tokens, "-o", model,
                                           "--vocab-size", 400])
    assert code == 0, err
    same = tmp_path / "same.model"
    learn([_counts(SAMPLE_TOKENS)], str(same), 400)
    assert model.read_bytes() == same.read_bytes()  # the model convert learns from the same tokens
    processor = spm.SentencePieceProcessor(model_file=str(model))
    code, err = cli_in_process("synprep", ["bpe", "apply", "--scheme", "sentencepiece", "--model", model,
                                           "-i", tokens, "-o", tmp_path / "pieces"])
    assert code == 0, err
    lines = (tmp_path / "pieces").read_text(encoding="utf-8").splitlines()
    assert lines == [" ".join(p for token in t for p in processor.encode(token, out_type=str)) for t in SAMPLE_TOKENS]
    code, err = cli_in_process("synprep", ["align", "--conllu", SAMPLE_DATA / "en.conllu", "--scheme",
                                           "sentencepiece", "--model", model, "--format", "text", "-o",
                                           tmp_path / "aligned", "--workers", 2])
    assert code == 0, err
    assert (tmp_path / "aligned").read_text(encoding="utf-8").splitlines() == lines
    code, err = cli_in_process("synprep", ["bpe", "apply", "--scheme", "hf-tokenizer", "-i", tokens])
    assert code == 2 and "takes --model" in err


def test_hypothesis_pieces_are_joined_by_the_marker_the_manifest_records():
    """A WordPiece dataset's outputs: joined by the recorded '##' (continue) rule, also where no tokenizer.json is
    at hand (raw-text translation from a checkpoint); without the record, the fallback ('▁') cannot join them."""
    from syntrain.vocab import pieces_joiner

    configuration = {"bpe": {"scheme": "hf-tokenizer", "model": "/nonexistent/tokenizer.json"}}
    signature = {"subword_marker": {"src": ["##", "continue"], "tgt": ["##", "continue"]}}
    pieces = ["the", "un", "##believ", "##able", "dog", "."]
    assert pieces_joiner(configuration, None, signature)(pieces) == ["the", "unbelievable", "dog", "."]
    assert pieces_joiner(configuration, None, None)(pieces) != ["the", "unbelievable", "dog", "."]


@pytest.mark.slow
def test_sentencepiece_with_a_parse_cache_stores_the_binary_model_and_reuses_it(tmp_path, tiny_udpipe):
    """The stage cache keeps a learned SentencePiece .model (binary) as bytes: a second convert with the same
    cache writes the same model without learning it again."""
    path = _pipeline(tmp_path, f'scheme = "sentencepiece"\nvocab_size = 300\n[parse]\ncache = "{tmp_path / "cache"}"')
    text = path.read_text(encoding="utf-8").replace('train_conllu = "en.conllu"', f'model = "{tiny_udpipe("en")}"')
    path.write_text(text.replace('train_conllu = "de.conllu"', f'model = "{tiny_udpipe("de")}"'), encoding="utf-8")
    first = tmp_path / "first"
    code, err = cli_in_process("synprep", ["convert", path, "--output", first, "--workers", "1"])
    assert code == 0, err
    second = tmp_path / "second"
    code, err = cli_in_process("synprep", ["convert", path, "--output", second, "--workers", "1",
                                           "--parse-cache", tmp_path / "cache"])
    assert code == 0, err
    assert "learn a SentencePiece" not in err
    assert (second / "subwords.model").read_bytes() == (first / "subwords.model").read_bytes()
    card = (second / "README.md").read_text(encoding="utf-8")
    assert "trees aligned with SentencePiece pieces" in card and "BPE sub-words" not in card
    report, _ = validate_directory(str(second / "train"))
    assert report.ok, report.failures[:3]
