"""Separate BPE per side (`[bpe] joint = false`): synprep learns and applies each side's own codes, resumes, and
records them; syntrain trains with a source and a target vocabulary, translates raw text with the source codes
and evaluates. A joint configuration (the default, or `joint = true`) gives the same bytes as before."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.bpe import Bpe
from synprep.convert.pipeline import load_pipeline
from synprep.errors import InputError

from .conftest import SHARED
from .test_convert import BIN, convert, one_line_error, read_split, write_pipeline

JOINT_BPE = "[bpe]\nsymbols = 200\n"
SEPARATE_BPE = "[bpe]\njoint = false\nsymbols = 150\ntgt_symbols = 100\n"
OLD_BPE_KEYS = {"symbols", "codes", "min_frequency", "vocabulary_threshold", "enabled"}  # a joint manifest's [bpe]


def _pipeline(folder: Path, models, bpe: str, **kwargs) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_pipeline(folder, models, **kwargs)
    path.write_text(path.read_text().replace(JOINT_BPE, bpe))
    return path


def _files(out: Path) -> dict[str, bytes]:
    """Every file a run leaves (run.json holds timings, paths.json this folder, .lock the writer: left out)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in ("run.json", "paths.json", ".lock")}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, tiny_udpipe):
    """The sample corpus converted three times: joint BPE (no joint key), `joint = true`, separate BPE."""
    root = tmp_path_factory.mktemp("sepbpe")
    made = {}
    for name, bpe in (("joint", JOINT_BPE), ("joint_true", JOINT_BPE + "joint = true\n"), ("separate", SEPARATE_BPE)):
        convert(_pipeline(root / name, tiny_udpipe, bpe), "--workers", "1")
        made[name] = root / name / "out"
    return made


def _column(split: Path, name: str) -> list:
    return read_split(split).column(name).to_pylist()


def test_joint_true_is_the_default_byte_for_byte(datasets):
    joint, explicit = _files(datasets["joint"]), _files(datasets["joint_true"])
    assert joint == explicit and "codes.bpe" in joint and "train/part-00000.arrow" in joint
    manifest = json.loads(joint["train/manifest.json"])
    assert set(manifest["configuration"]["bpe"]) == OLD_BPE_KEYS  # recorded as before separate BPE existed
    assert not any(key.startswith("bpe_codes_sha256_") for key in manifest["signature"])


def test_separate_bpe_learns_and_applies_each_sides_own_codes(datasets, tmp_path):
    out = datasets["separate"]
    assert not (out / "codes.bpe").exists()
    codes = {side: (out / f"codes.{side}.bpe").read_bytes() for side in ("src", "tgt")}
    assert codes["src"] != codes["tgt"] and codes["src"] != (datasets["joint"] / "codes.bpe").read_bytes()
    assert 0 < codes["tgt"].count(b"\n") - 1 <= 100 < codes["src"].count(b"\n") - 1 <= 150  # tgt_symbols, symbols
    for side in ("src", "tgt"):
        # the codes are `synprep bpe learn` on that side's parsed train tokens alone
        tokens = tmp_path / f"train.{side}"
        tokens.write_text("".join(" ".join(row) + "\n" for row in _column(out / "train", f"{side}_tokens")))
        symbols = "150" if side == "src" else "100"
        subprocess.run([str(BIN / "synprep"), "bpe", "learn", "-i", str(tokens), "-s", symbols, "-o",
                        str(tmp_path / f"{side}.bpe"), "--vocab-prefix", str(tmp_path / "vocab")], check=True,
                       capture_output=True)
        assert (tmp_path / f"{side}.bpe").read_bytes() == codes[side], side
        assert (tmp_path / f"vocab.{side}").read_bytes() == (out / f"vocab.{side}").read_bytes(), side
        bpe = Bpe(str(out / f"codes.{side}.bpe"))
        for split in ("train", "test"):
            expected = [bpe.segment_tokens(row)[0] for row in _column(out / split, f"{side}_tokens")]
            assert _column(out / split, f"{side}_subwords") == expected, (side, split)
    pieces = {name: {p for row in _column(datasets[name] / "train", "tgt_subwords") for p in row}
              for name in ("joint", "separate")}
    assert pieces["joint"] != pieces["separate"]
    manifest = json.loads((out / "train" / "manifest.json").read_text())
    bpe_config = manifest["configuration"]["bpe"]
    assert bpe_config["joint"] is False and bpe_config["tgt_symbols"] == 100 and bpe_config["src_symbols"] is None
    signature = manifest["signature"]
    assert signature["bpe_codes_sha256"] is None
    for side in ("src", "tgt"):
        assert signature[f"bpe_codes_sha256_{side}"] == hashlib.sha256(codes[side]).hexdigest()


def test_given_codes_per_side_are_used(datasets, tiny_udpipe, tmp_path):
    given = datasets["separate"]
    bpe = f'[bpe]\njoint = false\ncodes = {{src = "{given / "codes.src.bpe"}", tgt = "{given / "codes.tgt.bpe"}"}}\n'
    convert(_pipeline(tmp_path, tiny_udpipe, bpe), "--workers", "1")
    out = tmp_path / "out"
    assert not list(out.glob("codes*.bpe"))
    for side in ("src", "tgt"):
        assert _column(out / "test", f"{side}_subwords") == _column(given / "test", f"{side}_subwords")
    signature = json.loads((out / "test" / "manifest.json").read_text())["signature"]
    assert signature["bpe_codes_sha256_tgt"] == hashlib.sha256((given / "codes.tgt.bpe").read_bytes()).hexdigest()


def test_resume_learns_the_side_that_was_not_learned(datasets, tiny_udpipe, tmp_path):
    """A run stopped after learning the source codes (the target's, the shards and manifests not written yet)
    resumes to the same bytes."""
    pipeline = _pipeline(tmp_path, tiny_udpipe, SEPARATE_BPE)
    convert(pipeline, "--workers", "1", "--keep-work")
    out = tmp_path / "out"
    for name in ("codes.tgt.bpe", "vocab.tgt", "run.json"):
        (out / name).unlink()
    for split in ("train", "test"):
        for path in (out / split).iterdir():
            path.unlink()
    convert(pipeline, "--resume", "--workers", "1")
    assert _files(out) == _files(datasets["separate"])


@pytest.mark.parametrize(("bpe", "message"), [
    ("joint = true\nsrc_symbols = 100", "[bpe] src_symbols is for joint = false, not true"),
    ('joint = false\ncodes = "c.bpe"', "[bpe] joint = false: codes must be a table {src = \"FILE\", tgt = \"FILE\"}"),
    ('codes = {src = "c.bpe", tgt = "c.bpe"}', "[bpe] codes is a table {src, tgt} only with joint = false"),
    ('joint = false\ncodes = {src = "c.bpe"}', "[bpe] codes must name one file for each side"),
    ('joint = false\ncodes = {src = "c.bpe", tgt = "c.bpe", de = "c.bpe"}', "[bpe] codes must name one file for"),
    ('joint = false\ncodes = {src = "c.bpe", tgt = 3}', "[bpe] codes must name one file for each side"),
    ('joint = false\ntgt_symbols = 10\ncodes = {src = "c.bpe", tgt = "c.bpe"}',
     "[bpe] codes and tgt_symbols exclude each other"),
    ("joint = false\nenabled = false", "[bpe] enabled = false takes no other key, got joint"),
    ('joint = "no"', "[bpe] joint must be true or false"),
    ("joint = false\nsrc_symbols = 0", "[bpe] src_symbols must be >= 1"),
    ('joint = false\ncodes = {src = "missing.bpe", tgt = "c.bpe"}', "[bpe] codes.src: "),
])
def test_bad_bpe_keys_are_one_error(tmp_path, bpe, message):
    (tmp_path / "c.bpe").write_text("#version: 0.2\nt h\n")
    path = tmp_path / "p.toml"
    path.write_text(f'[pipeline]\nsrc_lang = "en"\ntgt_lang = "de"\n[splits.train]\nsrc = "a.conllu"\n'
                    f'tgt = "b.conllu"\n[bpe]\n{bpe}\n')
    with pytest.raises(InputError) as error:
        load_pipeline(str(path))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_bpe_keys_on_the_command_line(tmp_path, tiny_udpipe):
    pipeline = _pipeline(tmp_path, tiny_udpipe, "[bpe]\njoint = false\ncodes = \"x.bpe\"\n")
    one_line_error(convert(pipeline, check=False), "pipeline.toml", "codes must be a table")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------------ syntrain

SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=1, dec_layers=1, dropout=0.1, pascal_heads=[2])


def _syntrain(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "syntrain", *args], capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def trained(datasets, tmp_path_factory):
    from syntrain.train import TrainConfig, train

    run = tmp_path_factory.mktemp("sepbpe-run") / "run"
    train(TrainConfig(data=str(datasets["separate"] / "train"), out=str(run), model=SMALL, max_tokens=300,
                      max_steps=3, lr=3e-3, warmup=2, log_interval=1, threads=1))
    return run


def test_separate_vocabularies_train_and_are_stored(datasets, trained):
    from syntrain.runfolder.checkpoints import load_checkpoint

    model, vocab, ckpt = load_checkpoint(str(trained / "last.pt"))
    train = read_split(datasets["separate"] / "train")
    src_pieces = {p for row in train.column("src_subwords").to_pylist() for p in row}
    tgt_pieces = {p for row in train.column("tgt_subwords").to_pylist() for p in row}
    assert vocab.source is not None and set(vocab.source.itos[4:]) == src_pieces
    assert set(vocab.itos[4:]) == tgt_pieces and len(vocab.source) != len(vocab)
    assert ckpt["src_vocab"] == vocab.source.itos and ckpt["model_config"]["src_vocab_size"] == len(vocab.source)
    assert model.src_embed.num_embeddings == len(vocab.source) and model.tgt_embed.num_embeddings == len(vocab)
    assert model.src_embed.weight is not model.tgt_embed.weight  # no shared source/target matrix
    assert model.output.weight is model.tgt_embed.weight  # share_embeddings: target and output
    from syntrain.dataset import ParallelData
    from syntrain.vocab import UNK_ID

    data = ParallelData(str(datasets["separate"] / "train"), vocab).encoded  # source ids: the source vocabulary
    assert not (data.src_ids == UNK_ID).any() and not (data.tgt_ids == UNK_ID).any()
    assert [[vocab.source.itos[i] for i in data.src_ids[start:end]] for start, end in
            zip(data.src_off[:-1], data.src_off[1:])] == train.column("src_subwords").to_pylist()
    assert json.loads((trained / "vocab.src.json").read_text()) == vocab.source.itos
    assert json.loads((trained / "vocab.json").read_text()) == vocab.itos
    losses = [json.loads(line)["loss"] for line in open(trained / "metrics.jsonl") if '"loss"' in line]
    assert len(losses) == 3 and all(loss == loss and loss > 0 for loss in losses)


def test_translate_raw_text_with_the_source_codes_and_eval(datasets, trained, tmp_path):
    from synprep.shards import open_split, source_preparation

    split = open_split(str(datasets["separate"] / "test"))
    preparation = source_preparation(split.manifest.configuration, split.manifest.signature, split.dataset_root())
    assert os.path.basename(preparation.codes) == "codes.src.bpe"
    lines = _column(datasets["separate"] / "test", "src_text")
    raw = tmp_path / "test.en"
    raw.write_text("".join(line + "\n" for line in lines))
    ckpt = str(trained / "last.pt")
    done = _syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == len(lines)
    scored = _syntrain("eval", "--checkpoint", ckpt, "--data", str(datasets["separate"] / "test"), "--beam", "1")
    assert scored.returncode == 0 and "BLEU" in scored.stdout + scored.stderr, scored.stderr[-2000:]
    # the source codes (the run folder's copy, syntrain.runfolder.source) are checked against the signature: the
    # target's in their place is refused
    codes = trained / "source" / "codes.bpe"
    saved = codes.read_bytes()
    try:
        codes.write_bytes((datasets["separate"] / "codes.tgt.bpe").read_bytes())
        refused = _syntrain("translate", "--checkpoint", ckpt, "-i", str(raw), "--beam", "1")
    finally:
        codes.write_bytes(saved)
    assert refused.returncode != 0 and "codes.bpe" in refused.stderr and "sha256" in refused.stderr


def test_joint_dataset_keeps_one_vocabulary(datasets, tmp_path):
    from syntrain.vocab import Vocab

    table = read_split(datasets["joint"] / "train")
    vocab = Vocab.build([table])
    assert vocab.source is None and vocab.src is vocab and set(vocab.checkpoint_fields()) == {"vocab"}
    pieces = {p for column in ("src_subwords", "tgt_subwords") for row in table.column(column).to_pylist()
              for p in row}
    assert set(vocab.itos[4:]) == pieces


# ------------------------------------------------------------------------------------ real Ja-En (shared data)

TATOEBA = SHARED / "data" / "parallel" / "tatoeba" / "en-ja" / "tatoeba-test-v2021-08-07"
JA_TREEBANK = SHARED / "data" / "ud" / "UD_Japanese-GSD" / "ja_gsd-ud-dev.conllu"
EN_MODEL = SHARED / "models" / "en_ewt.udpipe"


@pytest.mark.slow
@pytest.mark.skipif(not all(p.exists() for p in (TATOEBA.with_suffix(".ja"), JA_TREEBANK, EN_MODEL)),
                    reason="needs ../shared (Tatoeba en-ja, UD Japanese-GSD, en_ewt.udpipe)")
def test_japanese_english_with_separate_bpe(tmp_path):
    """Raw Tatoeba Ja-En: a tiny Japanese UDPipe parser (from the first 200 sentences of the shared treebank),
    separate codes per side (DBSA's setup), a few training steps, raw Japanese translated."""
    from syntrain.runfolder.checkpoints import load_checkpoint
    from syntrain.train import TrainConfig, train

    blocks = JA_TREEBANK.read_text(encoding="utf-8").split("\n\n")
    (tmp_path / "ja.conllu").write_text("\n\n".join(blocks[:200]) + "\n\n", encoding="utf-8")
    for side in ("ja", "en"):
        lines = TATOEBA.with_suffix(f".{side}").read_text(encoding="utf-8").splitlines()
        (tmp_path / f"train.{side}").write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
        (tmp_path / f"raw.{side}").write_text("\n".join(lines[300:305]) + "\n", encoding="utf-8")
    (tmp_path / "p.toml").write_text(f"""[pipeline]
src_lang = "ja"
tgt_lang = "en"
output = "out"
[splits.train]
src = "train.ja"
tgt = "train.en"
[filter]
langid = "none"
max_ratio = 1000.0  # whitespace tokens: one per raw Japanese line
[parser.src]
train_conllu = "ja.conllu"
[parser.tgt]
model = "{EN_MODEL}"
[bpe]
joint = false
symbols = 500
[features]
src = ["parents"]
tgt = ["transitions"]
non_projective = "lift"
""")
    convert(tmp_path / "p.toml", "--workers", "1")
    out = tmp_path / "out"
    pieces = {side: {line.split(" ")[0] for line in (out / f"vocab.{side}").read_text().splitlines()}
              for side in ("src", "tgt")}
    japanese = {side: sum(any("\u3040" <= c <= "\u9fff" for c in p) for p in pieces[side]) for side in pieces}
    assert japanese["src"] > 0.8 * len(pieces["src"]) and japanese["tgt"] < 0.05 * len(pieces["tgt"]), japanese
    assert len(pieces["src"] & pieces["tgt"]) < 0.1 * min(map(len, pieces.values()))
    train(TrainConfig(data=str(out / "train"), out=str(tmp_path / "run"), model=SMALL, max_tokens=600,
                      max_steps=2, lr=3e-3, warmup=2, log_interval=1, threads=1))
    model, vocab, _ = load_checkpoint(str(tmp_path / "run" / "last.pt"))
    assert vocab.source is not None and model.src_embed.num_embeddings == len(vocab.source) != len(vocab)
    done = _syntrain("translate", "--checkpoint", str(tmp_path / "run" / "last.pt"), "-i", str(tmp_path / "raw.ja"),
                     "--beam", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(done.stdout.splitlines()) == 5
