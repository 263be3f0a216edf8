"""The `pretrained` sub-word scheme (`[bpe] scheme = "pretrained"`, `model` = a pretrained model's folder): each side
cut by the model's own SentencePiece model (a Marian folder's source.spm for the source side, target.spm for the
target side), the vocabulary the model's vocab.json in its id order, every file copied into the dataset folder with
its digest (validate checks each), and a run from the model on the shards with every piece found."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from synprep.errors import InputError  # noqa: E402
from synprep.subwords.load import load_cutter  # noqa: E402
from synprep.validate import validate_directory  # noqa: E402

from .conftest import SAMPLE_DATA, cli_in_process  # noqa: E402
from .hf_models import marian_with_sentencepiece  # noqa: E402


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """A tiny Marian folder with a source.spm learned on English and a target.spm learned on German."""
    parallel = SAMPLE_DATA / "parallel"
    return marian_with_sentencepiece(tmp_path_factory.mktemp("models") / "opus-mt-en-de", [parallel / "train.en"],
                                     vocab_size=120, target_texts=[parallel / "train.de"])


@pytest.fixture(scope="module")
def converted(marian, tmp_path_factory, tiny_udpipe):
    from .test_subwords import _convert_with_parsers, _pipeline

    root = tmp_path_factory.mktemp("pretrained-scheme")
    path = _pipeline(root, f'scheme = "pretrained"\nmodel = "{marian}"')
    _convert_with_parsers(path, tiny_udpipe)
    return root / "out"


def test_convert_cuts_each_side_with_its_model_and_stores_every_file(marian, converted):
    from synprep.shards import open_split

    out = converted
    assert (out / "pretrained.src.spm").read_bytes() == (marian / "source.spm").read_bytes()
    assert (out / "pretrained.tgt.spm").read_bytes() == (marian / "target.spm").read_bytes()
    assert (out / "pretrained-vocab.json").read_bytes() == (marian / "vocab.json").read_bytes()
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    assert manifest["configuration"]["bpe"] == {"enabled": True, "scheme": "pretrained", "model": str(marian),
                                                 "joint": False}
    assert set(manifest["signature"]["subword_files_sha256"]) == {"pretrained-vocab.json"}
    row = open_split(str(out / "train")).table().slice(0, 1).to_pylist()[0]
    for side, spm in (("src", "source.spm"), ("tgt", "target.spm")):
        cutter = load_cutter("pretrained", str(marian / spm))
        assert row[f"{side}_subwords"] == [piece for token in row[f"{side}_tokens"]
                                           for piece in cutter.segment_word(token).split(" ")]
    ids = json.loads((marian / "vocab.json").read_text(encoding="utf-8"))
    cutter = load_cutter("pretrained", str(out / "pretrained.src.spm"))
    assert cutter.vocabulary() == sorted(ids, key=ids.__getitem__)
    assert cutter.specials() == {"unk": "<unk>", "eos": "</s>", "pad": "<pad>"}
    for split in ("train", "valid", "test"):
        report, _ = validate_directory(str(out / split))
        assert report.ok, report.failures[:3]


def test_validate_checks_every_stored_file(converted, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(converted, out)
    vocab = out / "pretrained-vocab.json"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace('"<unk>"', '"<unk2>"', 1), encoding="utf-8")
    report, _ = validate_directory(str(out / "train"))
    assert not report.ok
    assert any(f.field == "subword_model" and f.file == "pretrained-vocab.json" for f in report.failures)


def test_the_model_is_named_once(marian, tmp_path):
    from synprep.convert.pipeline import load_pipeline

    from .test_subwords import _pipeline

    for bpe in (f'scheme = "pretrained"\nmodel = "{marian}"\njoint = false',
                f'scheme = "pretrained"\nmodel = {{src = "{marian}", tgt = "{marian}"}}'):
        with pytest.raises(InputError, match="names its model once"):
            load_pipeline(str(_pipeline(tmp_path, bpe)))
    with pytest.raises(InputError, match="needs model"):
        load_pipeline(str(_pipeline(tmp_path, 'scheme = "pretrained"')))


def test_a_run_from_the_model_on_its_own_shards(marian, converted, tmp_path):
    out = converted
    code, err = cli_in_process("syntrain", [
        "run", "--pretrained", marian, "--data", out / "train", "--valid", out / "valid", "--out", tmp_path / "run",
        "--max-steps", "2", "--max-tokens", "800", "--warmup", "1", "--eval-interval", "2", "--eval-sentences", "4",
        "--log-interval", "1"])
    assert code == 0, err
    assert f"pieces from the pretrained model {marian}" in err
    assert "not in the pretrained model's vocabulary" not in err  # both sides cut by the model's own files
    assert (tmp_path / "run" / "source" / "pretrained-vocab.json").is_file()
