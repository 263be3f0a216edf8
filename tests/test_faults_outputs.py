"""Fault injection, where commands write: one rule for every writing command's output paths (synprep.outputs):
an output onto an input, into a dataset, split or run folder, or escaping its folder (`export --name ../x`) is
one line before any write; and an export is whole or absent (a full disk in its last file leaves no folder).
Real commands on a real converted corpus; the full disk is ENOSPC at the real fsync (tests/enospc.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .test_faults_resume import one_line, run

BIN = Path(sys.executable).parent
SYNPREP = str(BIN / "synprep")
ENOSPC = str(Path(__file__).with_name("enospc.py"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """A converted synthetic corpus (pre-parsed), with a folder beside it that holds a training run's files."""
    root = tmp_path_factory.mktemp("outputs")
    assert run(SYNPREP, "synth", "--pairs", "200", "-o", "syn", cwd=root).returncode == 0
    done = run(SYNPREP, "convert", "syn/pipeline.toml", "--output", "data", cwd=root)
    assert done.returncode == 0, done.stderr
    (root / "run").mkdir()
    (root / "run" / "metrics.jsonl").write_text("{}\n")
    (root / "run" / "best.pt").write_bytes(b"a checkpoint")
    (root / "a.txt").write_text("the dog barks .\n")
    return root


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


CASES = {  # name: (argv, what the line names)
    "parse -o = -i": (["parse", "--backend", "udpipe", "--model", "MODEL", "-i", "a.txt", "-o", "a.txt"],
                      "a.txt: -o would overwrite the input"),
    "bpe apply -o = --codes": (["bpe", "apply", "-c", "data/codes.bpe", "-i", "a.txt", "-o", "data/codes.bpe"],
                               "would overwrite the BPE codes"),
    "bpe apply -o into a split": (["bpe", "apply", "-c", "data/codes.bpe", "-i", "a.txt", "-o", "data/train/a.bpe"],
                                  "lies inside the synprep split folder"),
    "bpe apply -o into a run folder": (["bpe", "apply", "-c", "data/codes.bpe", "-i", "a.txt", "-o", "run/a.bpe"],
                                       "lies in the training run folder"),
    "bpe learn -o into a dataset": (["bpe", "learn", "-i", "a.txt", "-o", "data/new.bpe", "-s", "10"],
                                    "lies inside the synprep dataset folder"),
    "align -o into a split": (["align", "--conllu", "syn/test.src.conllu", "-o", "data/test/x.jsonl"],
                              "lies inside the synprep split folder"),
    "export -o inside its split": (["export", "data/train", "-o", "data/train/exp"],
                                   "lies inside the synprep split folder"),
    "export -o the dataset": (["export", "data/train", "-o", "data"], "(-o) holds the split"),
    "export --name ../x": (["export", "data/train", "-o", "exp", "--name", "../x"], "--name '../x'"),
    "export --name with a newline": (["export", "data/train", "-o", "exp", "--name", "a\nb"], "--name 'a\\nb'"),
    "export --name -x": (["export", "data/train", "-o", "exp", "--name=-x"], "--name '-x'"),
    "filter -o holding its inputs": (["filter", "--src", "syn/train.src", "--tgt", "syn/train.tgt", "--src-lang", "en",
                                      "--tgt-lang", "de", "--langid", "none", "-o", "syn", "--overwrite"],
                                     "(-o) holds the source"),
    "convert --output inside another dataset": (["convert", "syn/pipeline.toml", "--output", "data/train/x"],
                                                "lies inside the synprep split folder"),
    "challenge -o into a split": (["challenge", "data/test", "-o", "data/test/ch"],
                                  "lies inside the synprep split folder"),
    "synth -o into a dataset": (["synth", "--pairs", "10", "-o", "data/more"], "lies inside the synprep dataset"),
    "parser train -o = --conllu": (["parser", "train", "--backend", "udpipe", "--conllu", "syn/test.src.conllu", "-o",
                                    "syn/test.src.conllu", "--preset", "tiny"], "would overwrite the treebank"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_an_output_onto_an_input_or_into_a_dataset_or_run_is_one_line_before_any_write(dataset, name, tiny_udpipe):
    """Before: `parse -i a.txt -o a.txt` replaced the text with CoNLL-U (exit 0); `export SPLIT -o SPLIT/exp`
    wrote inside the dataset; `export --name ../x` left x.ref.<tgt> outside the export folder."""
    argv, named = CASES[name]
    argv = [tiny_udpipe("en") if arg == "MODEL" else arg for arg in argv]
    before = {p: p.stat().st_mtime_ns for p in dataset.rglob("*") if p.is_file()}
    one_line(run(SYNPREP, *argv, cwd=dataset), named)
    after = {p: p.stat().st_mtime_ns for p in dataset.rglob("*") if p.is_file()}
    assert after == before, sorted(set(map(str, after)) ^ set(map(str, before)))  # nothing written or replaced


def test_an_export_is_whole_or_absent(dataset, tmp_path):
    """A full disk at the last file of the last format: before, the formats written first stayed complete (a
    reader could not tell a half export from a whole one); now no export folder is left."""
    out = tmp_path / "exp"
    result = run(sys.executable, ENOSPC, "*/nematus/README.md*", "export", dataset / "data" / "train", "-o", out,
                 "--format", "pascal,nematus", cwd=dataset)
    one_line(result, "No space left on device", "README.md")
    assert not out.exists() and not list(tmp_path.iterdir()), _files(tmp_path)
    done = run(SYNPREP, "export", dataset / "data" / "train", "-o", out, "--format", "pascal,nematus", cwd=dataset)
    assert done.returncode == 0, done.stderr
    assert {"pascal/README.md", "nematus/README.md", "pascal/train.en"} <= _files(out)
    assert list(tmp_path.iterdir()) == [out]  # no temporary folder left beside it
    again = run(SYNPREP, "export", dataset / "data" / "test", "-o", out, "--format", "pascal", cwd=dataset)
    assert again.returncode == 0, again.stderr  # another split into the same folder: beside the first
    assert {"pascal/train.en", "pascal/test.en", "nematus/train.en"} <= _files(out)


FOLDER_WRITERS = {  # a command that writes a folder -> its arguments but the folder (-o OUT)
    "filter": ["filter", "--src", "syn/train.src", "--tgt", "syn/train.tgt", "--src-lang", "en", "--tgt-lang", "de",
               "--langid", "none"],
    "export": ["export", "data/train", "--format", "pascal,nematus"],
}


@pytest.mark.parametrize("command", list(FOLDER_WRITERS))
def test_a_folder_writer_killed_when_its_folder_appears_leaves_it_whole(dataset, tmp_path, command):
    """A command that writes a folder, killed (SIGKILL) the moment that folder appears: it holds every file a
    whole run writes, or it is absent (filter made it and then moved its files in one by one)."""
    import os
    import signal
    import subprocess
    import time

    argv = [SYNPREP, *FOLDER_WRITERS[command]]
    done = run(*argv, "-o", tmp_path / "whole", cwd=dataset)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "out"
    process = subprocess.Popen([*argv, "-o", str(target)], cwd=dataset, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not target.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.0002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not target.exists() or _files(target) == _files(tmp_path / "whole"), sorted(os.listdir(target))


class _CtrlC:
    """A value whose pickling is interrupted (Ctrl-C while torch.save writes it)."""

    def __reduce__(self) -> tuple:
        raise KeyboardInterrupt


def _interrupted_copy(target: Path) -> None:
    """atomic_copy of a large sparse file, interrupted by a real signal (SIGALRM raising KeyboardInterrupt, as
    Ctrl-C would) while the copy runs."""
    import signal

    from synprep.textio import atomic_copy

    source = target.parent.parent / "large"
    with open(source, "wb") as handle:
        handle.truncate(8 << 30)

    def ctrl_c(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, ctrl_c)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        atomic_copy(str(source), str(target))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        source.unlink()


def _interrupted_checkpoint(target: Path) -> None:
    from syntrain.runfolder.checkpoints import save_checkpoint

    save_checkpoint({"model": {}, "step": 1, "later": _CtrlC()}, str(target))


def _interrupted_output(target: Path) -> None:
    from synprep.textio import atomic_output

    with atomic_output(str(target)) as out:
        out.write("a line\n" * 1000)
        raise KeyboardInterrupt


def _interrupted_folder(target: Path) -> None:
    from synprep.textio import atomic_folder

    with atomic_folder(str(target)) as staging:
        Path(staging, "config.json").write_text("{}")
        raise KeyboardInterrupt


WRITERS = {"save_checkpoint": _interrupted_checkpoint, "atomic_copy": _interrupted_copy,
           "atomic_output": _interrupted_output, "atomic_folder": _interrupted_folder}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_interrupted_leaves_nothing(tmp_path, writer):
    """Each whole-or-nothing writer (checkpoints, copies, text outputs, output folders), stopped by Ctrl-C or a
    signal while it writes: the interruption goes on (not turned into a write error), and neither the output nor
    its temporary file is left (save_checkpoint and atomic_copy removed theirs on a write error only)."""
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(KeyboardInterrupt):
        WRITERS[writer](folder / "target")
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["out"]
