"""A run from a pretrained model (`syntrain run --pretrained FOLDER`, `[model] pretrained`) on shards cut by the
model's own SentencePiece model (`[bpe] scheme = "sentencepiece"`, `model` = its source.spm): the sizes come from
its config, training continues from its weights with a switch, a preset or size option given too is refused, and
the checkpoint records the model it started from."""

from __future__ import annotations

import tomllib

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import torch  # noqa: E402

from .conftest import SAMPLE_DATA, cli_in_process  # noqa: E402
from .hf_models import marian_with_sentencepiece  # noqa: E402


@pytest.fixture(scope="module")
def pretrained_dataset(tmp_path_factory, tiny_udpipe):
    """(the Marian folder, the dataset folder converted with its source.spm)."""
    from .test_subwords import _convert_with_parsers, _pipeline

    root = tmp_path_factory.mktemp("pretrained")
    folder = marian_with_sentencepiece(root / "opus-mt-en-de", [SAMPLE_DATA / "parallel" / "train.en",
                                                                 SAMPLE_DATA / "parallel" / "train.de"])
    path = _pipeline(root, f'scheme = "sentencepiece"\nmodel = "{folder / "source.spm"}"',
                     'src = ["parents", "dbsa", "labels"]\ntgt = ["parents", "dbsa"]\nroot = "drop"\n'
                     'non_projective = "lift"')
    _convert_with_parsers(path, tiny_udpipe)
    return folder, root / "out"


def run_args(folder, out, run, *more):
    return ["run", "--pretrained", folder, "--data", out / "train", "--valid", out / "valid", "--out", run,
            "--max-steps", "2", "--max-tokens", "800", "--warmup", "1", "--eval-interval", "2",
            "--eval-sentences", "4", "--log-interval", "1", *more]


@pytest.fixture(scope="module")
def pascal_run(pretrained_dataset, tmp_path_factory):
    """(a run from the pretrained model with Pascal heads, its stderr)."""
    folder, out = pretrained_dataset
    run = tmp_path_factory.mktemp("runs") / "pascal"
    code, err = cli_in_process("syntrain", run_args(folder, out, run, "--pascal-heads", "1,0"))
    assert code == 0, err
    return run, err


def test_a_run_from_a_pretrained_model_trains_from_its_weights(pretrained_dataset, pascal_run):
    from syntrain.pretrained import PretrainedSource

    folder, out = pretrained_dataset
    run, err = pascal_run
    source = PretrainedSource.read(str(folder))
    assert f"vocabulary: {len(source.order)} pieces from the pretrained model {folder}" in err
    assert "not in the pretrained model's vocabulary" not in err  # the shards were cut by its own model
    ckpt = torch.load(run / "last.pt", weights_only=False)
    assert ckpt["pretrained"]["folder"] == str(folder) and ckpt["vocab"] == list(source.pieces)
    assert ckpt["model_config"]["d_model"] == 16 and ckpt["model_config"]["norm_placement"] == "post"
    with open(run / "config.toml", "rb") as handle:
        model = tomllib.load(handle)["model"]
    assert model["pretrained"] == str(folder) and "preset" not in model and "d_model" not in model
    assert model["pascal_heads"] == [1, 0]


@pytest.mark.parametrize("flag", [["--preset", "cpu"], ["--set", "model.d_model=32"],
                                  ["--set", 'model.norm_placement="pre"']])
def test_a_preset_or_size_option_is_refused_with_a_pretrained_model(pretrained_dataset, tmp_path, flag):
    folder, out = pretrained_dataset
    code, err = cli_in_process("syntrain", run_args(folder, out, tmp_path / "run", *flag))
    assert code == 2 and "takes its sizes and architecture from the model's config.json" in err, err
    assert not (tmp_path / "run").exists()


def test_pieces_the_model_lacks_are_counted_and_named(pretrained_dataset, tmp_path):
    """A model whose vocabulary lacks some pieces of the shards: the run says how many and which."""
    import json
    import shutil

    folder, out = pretrained_dataset
    smaller = tmp_path / "smaller"
    shutil.copytree(folder, smaller)
    ids = json.loads((smaller / "vocab.json").read_text(encoding="utf-8"))
    dropped = next(piece for piece in ids if piece.startswith("\u2581") and len(piece) > 3)
    ids[f"<gone:{dropped}>"] = ids.pop(dropped)
    (smaller / "vocab.json").write_text(json.dumps(ids), encoding="utf-8")
    code, err = cli_in_process("syntrain", run_args(smaller, out, tmp_path / "run"))
    assert code == 0, err
    assert "not in the pretrained model's vocabulary and are read as <unk>" in err and repr(dropped) in err


def hf_loss(folder, split) -> float:
    """transformers' own mean cross-entropy over the split's target tokens (EOS included, no label smoothing)."""
    from syntrain.dataset import ParallelData
    from syntrain.pretrained import PretrainedSource
    from syntrain.vocab import PAD_ID

    from .hf_models import load_hf

    source = PretrainedSource.read(str(folder))
    order = torch.tensor(source.order)
    data = ParallelData(str(split), source.vocab())
    batch = data.collate(data.fitting(data.loss_rows, 64))
    labels = order[batch.tgt_out].masked_fill(batch.tgt_out == PAD_ID, -100)
    with torch.no_grad():
        return float(load_hf(folder)(input_ids=order[batch.src], attention_mask=(batch.src != PAD_ID).long(),
                                     decoder_input_ids=order[batch.tgt_in], labels=labels).loss)


def test_eval_scores_the_pretrained_model_as_it_is_with_its_loss(pretrained_dataset, tmp_path):
    import json

    folder, out = pretrained_dataset
    before = sorted(path.name for path in folder.iterdir())
    code, err = cli_in_process("syntrain", ["eval", "--pretrained", folder, "--data", out / "test", "--beam", "1",
                                            "--json", tmp_path / "scores.json", "-o", tmp_path / "test.hyp"])
    assert code == 0, err
    scores = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert scores["pretrained"] == str(folder) and {"bleu", "chrf", "loss"} <= set(scores)
    assert abs(scores["loss"] - hf_loss(folder, out / "test")) <= 5e-5  # the JSON rounds to 4 decimals
    assert sorted(path.name for path in folder.iterdir()) == before
    code, err = cli_in_process("syntrain", ["eval", "--data", out / "test"])
    assert code == 2 and "--checkpoint CHECKPOINT or --pretrained FOLDER" in err


def test_eval_of_a_checkpoint_reports_its_loss(pretrained_dataset, pascal_run, tmp_path):
    import json

    _, out = pretrained_dataset
    run, _ = pascal_run
    code, err = cli_in_process("syntrain", ["eval", "--checkpoint", run / "best.pt", "--data", out / "test",
                                            "--beam", "1", "--json", tmp_path / "scores.json"])
    assert code == 0, err
    scores = json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))
    assert scores["checkpoint"] == str(run / "best.pt") and scores["loss"] > 0


def test_compare_takes_a_pretrained_folder_as_a_row_and_writes_nothing_into_it(pretrained_dataset, pascal_run):
    folder, out = pretrained_dataset
    run, _ = pascal_run
    before = {path.name: path.stat().st_mtime_ns for path in folder.iterdir()}
    code, err = cli_in_process("syntrain", ["compare", "--data", out / "test", "--beam", "1", "--samples", "10",
                                            folder, run])
    assert code == 0, err
    assert {path.name: path.stat().st_mtime_ns for path in folder.iterdir()} == before


def test_export_hf_of_a_fine_tune(pretrained_dataset, pascal_run, tmp_path):
    """A fine-tune with a training-only switch (LISA's supervised head) exports to a folder transformers loads
    with the checkpoint's logits and the model's tokenizer files; a Pascal fine-tune is refused naming it."""
    from syntrain.pretrained import PretrainedSource
    from syntrain.runfolder.checkpoints import load_checkpoint

    from .hf_models import load_hf
    from .test_pretrained import logit_difference

    folder, out = pretrained_dataset
    code, err = cli_in_process("syntrain", run_args(folder, out, tmp_path / "lisa", "--set", "model.lisa_layer=1"))
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "lisa" / "best.pt", "-o", tmp_path / "hf"])
    assert code == 0, err
    assert {"config.json", "model.safetensors", "vocab.json", "source.spm", "target.spm"} <= {
        path.name for path in (tmp_path / "hf").iterdir()}
    model, _, ckpt = load_checkpoint(str(tmp_path / "lisa" / "best.pt"))
    source = PretrainedSource.from_record(ckpt["pretrained"])
    assert logit_difference(model, load_hf(tmp_path / "hf"), source, relative=True) <= 1e-5
    run, _ = pascal_run
    code, err = cli_in_process("syntrain", ["export-hf", run / "best.pt", "-o", tmp_path / "pascal-hf"])
    assert code == 2 and "pascal (pascal_heads)" in err and "change inference" in err, err
    assert not (tmp_path / "pascal-hf").exists()


def test_export_hf_killed_when_its_folder_appears_leaves_it_whole(pretrained_dataset, tmp_path):
    """`syntrain export-hf` killed (SIGKILL) the moment its output folder appears: the folder holds every file
    of the export or is absent (it was made first and filled file by file: a kill left config.json without the
    weights, or the weights without the tokenizer); so does a Ctrl-C or a full disk."""
    import os
    import signal
    import subprocess
    import sys
    import time

    folder, out = pretrained_dataset
    code, err = cli_in_process("syntrain", run_args(folder, out, tmp_path / "lisa", "--set", "model.lisa_layer=1"))
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "lisa" / "best.pt", "-o", tmp_path / "whole"])
    assert code == 0, err
    whole = sorted(path.name for path in (tmp_path / "whole").iterdir())
    target = tmp_path / "hf"
    process = subprocess.Popen([sys.executable, "-m", "syntrain", "export-hf", str(tmp_path / "lisa" / "best.pt"),
                                "-o", str(target)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not target.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.0002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not target.exists() or sorted(os.listdir(target)) == whole, sorted(os.listdir(target))
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] in ([], [f".hf.tmp-{process.pid}"])


def test_from_scratch_with_the_pretrained_tokenizer_keeps_the_pieces_seen_in_training(pretrained_dataset, tmp_path):
    """[train] vocabulary = "seen": a model trained from scratch on shards cut by the pretrained model's
    tokenizer gets only the pieces of the training split (and the specials), and the run header says so."""
    import sentencepiece as spm

    from syntrain.arrow import count_strings
    from syntrain.columns import SRC_SUBWORDS, TGT_SUBWORDS
    from syntrain.dataset import read_split

    folder, out = pretrained_dataset
    common = ["run", "--data", out / "train", "--preset", "cpu", "--max-steps", "1", "--max-tokens", "800",
              "--warmup", "1", "--eval-interval", "1"]
    code, err = cli_in_process("syntrain", [*common, "--out", tmp_path / "seen", "--set", 'train.vocabulary="seen"'])
    assert code == 0, err
    table = read_split(str(out / "train"))[0]
    seen = {piece for column in (SRC_SUBWORDS, TGT_SUBWORDS) for piece in count_strings(table.column(column))}
    assert f"vocabulary: {len(seen) + 4} pieces from the training split (the pieces it holds)" in err
    code, err = cli_in_process("syntrain", [*common, "--out", tmp_path / "whole"])
    assert code == 0, err
    size = spm.SentencePieceProcessor(model_file=str(folder / "source.spm")).get_piece_size()
    assert f"vocabulary: {size - 3 + 4} pieces from the dataset's sub-word model (every piece)" in err
    assert size - 3 > len(seen)  # the option made the vocabulary smaller


def test_a_run_from_a_pretrained_model_resumes(pretrained_dataset, tmp_path):
    """`--resume --out RUN` continues from the run's own config.toml (which names the folder, no preset and no
    size) and its checkpoint, not from the pretrained weights again."""
    folder, out = pretrained_dataset
    code, err = cli_in_process("syntrain", run_args(folder, out, tmp_path / "run"))
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["run", "--resume", "--out", tmp_path / "run", "--max-steps", "3"])
    assert code == 0, err
    assert "resuming" in err and "resumed from" in err
    assert torch.load(tmp_path / "run" / "last.pt", weights_only=False)["step"] == 3


def test_export_hf_refuses_a_tokenizer_file_of_the_model_changed_since_the_run(pretrained_dataset, tmp_path):
    """export-hf copies the pretrained folder's tokenizer files beside the fine-tuned weights: one replaced since
    the run (same name, size and mtime) was copied as it was, a foreign tokenizer beside the run's weights. The
    run records each file's sha256 (`PretrainedSource.files`); every one, changed in place or gone, is refused in
    one line naming it, before anything is written."""
    import os
    import shutil

    from .test_faults_resume import changed_in_place

    folder, out = pretrained_dataset
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    code, err = cli_in_process("syntrain", run_args(copy, out, tmp_path / "run"))
    assert code == 0, err
    recorded = torch.load(tmp_path / "run" / "best.pt", weights_only=False)["pretrained"]["files"]
    assert {"vocab.json", "source.spm", "target.spm"} <= set(recorded)
    for name in recorded:
        before = changed_in_place(copy / name)
        code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "run" / "best.pt", "-o", tmp_path / "hf"])
        assert code == 2 and "Traceback" not in err and str(copy / name) in err.strip().splitlines()[-1], err
        assert not (tmp_path / "hf").exists()
        os.unlink(copy / name)  # gone
        code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "run" / "best.pt", "-o", tmp_path / "hf"])
        assert code == 2 and str(copy / name) in err.strip().splitlines()[-1] and "gone" in err, err
        (copy / name).write_bytes(before)
    code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "run" / "best.pt", "-o", tmp_path / "hf"])
    assert code == 0, err
