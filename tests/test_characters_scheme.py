"""The `characters` sub-word scheme (synprep/subwords/characters.py): each character a piece, '@@' ending every
piece but a token's last; no model file, nothing learned. A convert with it validates, and syntrain counts its
vocabulary from the shards and joins decoded pieces back into tokens."""

from __future__ import annotations

import json

import pytest

from synprep.errors import InputError
from synprep.subwords import pieces_to_tokens, registry, spells
from synprep.subwords.load import load_cutter
from synprep.validate import validate_directory

from .test_subwords import _convert_with_parsers, _pipeline


def test_each_character_is_a_piece_marked_as_subword_nmt_marks_them():
    cutter = load_cutter("characters", None)
    assert cutter.segment_word("Hund") == "H@@ u@@ n@@ d"
    assert cutter.segment_line("Der Hund .\n") == "D@@ e@@ r H@@ u@@ n@@ d .\n"
    pieces = cutter.segment_line("a@@ Köln").split()
    assert pieces_to_tokens(pieces, cutter.marker, cutter.marker_kind) == ["a@@", "Köln"]
    assert spells(["K@@", "ö@@", "l@@", "n"], "Köln", "@@", "end")
    scheme = registry.get("characters")
    assert scheme.files == () and not scheme.learns and scheme.model_file() is None


def test_pipeline_keys_of_other_schemes_are_refused(tmp_path):
    with pytest.raises(InputError, match=r'\[bpe\] model: for scheme = "sentencepiece" or "hf-tokenizer"'):
        from synprep.convert.pipeline import load_pipeline

        load_pipeline(str(_pipeline(tmp_path, f'scheme = "characters"\nmodel = "{tmp_path}/x.model"')))


@pytest.mark.slow
def test_convert_validate_and_vocabulary(tmp_path, tiny_udpipe):
    from syntrain.dataset import read_split
    from syntrain.vocab import Vocab, pieces_joiner, scheme_vocab

    path = _pipeline(tmp_path, 'scheme = "characters"', 'src = ["parents", "labels"]\ntgt = ["transitions"]')
    _convert_with_parsers(path, tiny_udpipe)
    out = tmp_path / "out"
    assert not [p.name for p in out.iterdir() if p.suffix in (".bpe", ".model", ".json") and p.name not in
                ("run.json", "paths.json")]  # no model file
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["configuration"]["bpe"] == {"enabled": True, "scheme": "characters"}
    assert manifest["signature"]["subword_scheme"] == "characters"
    assert manifest["signature"]["subword_marker"] == {"src": ["@@", "end"], "tgt": ["@@", "end"]}
    assert "character pieces" in (out / "README.md").read_text(encoding="utf-8")
    for split in ("train", "valid", "test"):
        report, _ = validate_directory(str(out / split))
        assert report.ok, report.failures[:3]
    table, split_info = read_split(str(out / "train"))
    row = table.slice(0, 1).to_pylist()[0]
    assert row["src_subwords"] == [p for token in row["src_tokens"]
                                   for p in load_cutter("characters", None).segment_word(token).split(" ")]
    assert scheme_vocab(split_info.configuration, str(out / "train")) is None  # counted from the shards
    vocab = Vocab.build([table])
    assert {"e@@", "e"} <= set(vocab.itos) and len(vocab) < 300
    joiner = pieces_joiner(split_info.configuration, str(out / "train"), split_info.signature)
    assert joiner(row["src_subwords"]) == row["src_tokens"]


@pytest.mark.slow
def test_the_guide_example_scheme_converts_and_validates(tmp_path, tiny_udpipe):
    """docs/subwords-api.md's worked example, registered from its code block, converts the sample data."""
    import re
    import types

    from .conftest import REPO

    text = (REPO / "docs" / "subwords-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]
    module = types.ModuleType("halves_example")
    exec(compile(code, "docs/subwords-api.md", "exec"), module.__dict__)  # noqa: S102 (the guide's own code)
    try:
        assert "halves" in registry.names()
        assert load_cutter("halves", None).segment_line("Hund a\n") == "Hu@@ nd a\n"
        path = _pipeline(tmp_path, 'scheme = "halves"', 'src = ["parents"]\ntgt = ["transitions"]')
        _convert_with_parsers(path, tiny_udpipe)
        manifest = json.loads((tmp_path / "out" / "train" / "manifest.json").read_text())
        assert manifest["configuration"]["bpe"] == {"enabled": True, "scheme": "halves"}
        assert manifest["rows"] > 0
        report, _ = validate_directory(str(tmp_path / "out" / "train"))
        assert report.ok, report.failures[:3]
    finally:
        registry.unregister("halves")
