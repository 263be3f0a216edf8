"""Fault injection, what a failed `synprep convert` leaves: `--resume` only on a folder convert made, sweeping only
its own temporary files; a full disk after parsing keeps the parsed pieces and names the `--resume` command;
SIGTERM and SIGHUP end a convert like Ctrl-C; a failure before any work leaves no folder behind. Real commands,
real signals; the full disk is ENOSPC at the real fsync of the shard (tests/enospc.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .test_convert import write_pipeline
from .test_faults_workers import children, finish, gone, start_convert

BIN = Path(sys.executable).parent
SYNPREP = str(BIN / "synprep")
ENOSPC = str(Path(__file__).with_name("enospc.py"))


def run(*argv: object, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=300, cwd=cwd)
    return result


def one_line(result: subprocess.CompletedProcess, *wanted: str, code: int = 2) -> str:
    """The one error line of a command that failed cleanly, holding every `wanted` text."""
    assert result.returncode == code, result.stderr[-1500:]
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-1500:]
    for text in wanted:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def synth(tmp_path: Path) -> Path:
    """A small synthetic corpus with its pipeline (pre-parsed: no parser)."""
    done = run(SYNPREP, "synth", "--pairs", "300", "-o", "syn", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "syn" / "pipeline.toml"


def test_resume_refuses_a_folder_that_convert_did_not_make(tmp_path, synth):
    """Before: `--resume` removed every *.tmp / *.part below the folder and wrote a dataset beside the user's
    files, exit 0."""
    mine = tmp_path / "mine"
    (mine / "notes").mkdir(parents=True)
    (mine / "notes" / "draft.tmp").write_text("a user's file\n")
    (mine / "download.part").write_text("a user's file\n")
    result = run(SYNPREP, "convert", str(synth), "--output", str(mine), "--resume", cwd=tmp_path)
    one_line(result, str(mine), "not made by synprep convert")
    assert (mine / "notes" / "draft.tmp").is_file() and (mine / "download.part").is_file()
    assert not (mine / ".work").exists() and not (mine / "train").exists()


def test_resume_sweeps_only_the_temporary_files_of_its_own_writers(tmp_path, synth):
    """A folder convert made (its work kept): the sweep removes convert's temporary names in convert's folders,
    never a file a user put in a folder of their own below it."""
    out = tmp_path / "out"
    assert run(SYNPREP, "convert", str(synth), "--output", str(out), "--keep-work", cwd=tmp_path).returncode == 0
    (out / "notes").mkdir()
    (out / "notes" / "draft.tmp").write_text("a user's file\n")
    (out / "notes" / "big.part").write_text("a user's file\n")
    leftover = out / "train" / "part-00000.arrow.part"
    leftover.write_bytes(b"half a shard")
    work_leftover = out / ".work" / "train" / "piece-00000-000.json.tmp-123"
    work_leftover.write_bytes(b"{")
    result = run(SYNPREP, "convert", str(synth), "--output", str(out), "--resume", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-1500:]
    assert (out / "notes" / "draft.tmp").is_file() and (out / "notes" / "big.part").is_file()
    assert not leftover.exists() and not work_leftover.exists()


def test_a_full_disk_while_shards_are_written_keeps_the_parsed_pieces(tmp_path, synth):
    """Before: the whole output went, `.work` included (every parse lost); now one line with the `--resume`
    command, and `--resume` finishes the dataset from the kept pieces."""
    out = tmp_path / "out"
    result = run(sys.executable, ENOSPC, "*/train/part-*", "convert", str(synth), "--output", str(out),
                 cwd=tmp_path)
    line = one_line(result, "No space left on device", "part-00000.arrow")
    assert line.endswith(f"continue with synprep convert {synth} --output {out} --resume"), line
    pieces = sorted((out / ".work").glob("*/piece-*.json"))
    assert len(pieces) == 3, pieces  # train, valid, test: each split's piece parsed and kept
    resumed = run(SYNPREP, "convert", str(synth), "--output", str(out), "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-1500:]
    assert run(SYNPREP, "validate", str(out / "train"), cwd=tmp_path).returncode == 0
    assert not (out / ".work").exists()


def readable_shards(out: Path) -> list[Path]:
    """The shards a reader of OUT finds (every `*.arrow` below it but in hidden folders, as datasets' data_dir
    globbing), each checked to lie in a complete split folder whose manifest lists it."""
    found = [path for path in out.rglob("*.arrow") if not any(part.startswith(".")
                                                              for part in path.relative_to(out).parts)]
    for path in found:
        folder = path.resolve().parent
        manifest = json.loads((folder / "manifest.json").read_text())
        assert path.resolve().name in {shard["file"] for shard in manifest["shards"]}, path
    return found


def test_a_convert_stopped_in_the_shard_phase_shows_no_partial_split(tmp_path, synth):
    """A convert stopped while it wrote a split's shards (here the disk full at the train split's second shard)
    left OUT/train with the first shard and no manifest, which `datasets.load_dataset("arrow", data_dir=OUT)`
    read as the whole split: split folders are written under OUT/.work and moved into OUT whole, OUT/data last;
    `--resume` finishes the same dataset."""
    out = tmp_path / "out"
    result = run(sys.executable, ENOSPC, "*/train/part-00001*", "convert", str(synth), "--output", str(out),
                 "--shard-size", "100", cwd=tmp_path)
    one_line(result, "No space left on device", "part-00001.arrow")
    assert list((out / ".work").glob("splits/train/part-00000.arrow"))  # the finished shard, kept for --resume
    assert not (out / "train").exists() and not (out / "data").exists()
    assert readable_shards(out) == []
    resumed = run(SYNPREP, "convert", str(synth), "--output", str(out), "--shard-size", "100", "--resume",
                  cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-1500:]
    assert len({path.resolve() for path in readable_shards(out)}) == 3 + 1 + 1 and not (out / ".work").exists()


def changed_in_place(path: Path) -> bytes:
    """`path`'s last byte changed, its size and times kept (what a size-and-mtime check cannot see); returns the
    old bytes (a folder: its largest file's)."""
    if path.is_dir():
        path = max((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    before, info = path.read_bytes(), path.stat()
    path.write_bytes(before[:-1] + bytes([before[-1] ^ 1]))
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    return before


def test_resume_refuses_every_file_the_pipeline_names_changed_in_place(tmp_path, tiny_udpipe):
    """`convert --resume` after the parser model was replaced finished with exit 0, rows of the old model's trees
    beside the new one's: every file the pipeline names (parser models, treebanks, sub-word models, codes: found
    from the configuration, not listed here) is recorded by content and a change under the same name, size and
    mtime is refused in one line naming it; so is every file convert learned into the output folder (codes,
    vocabularies, sub-word and parser models: `OutputFolder.made_files`), recorded in `.work/made.json`."""
    from synprep.convert.inputs import dependency_digests
    from synprep.convert.output import OutputFolder
    from synprep.convert.pipeline import load_pipeline

    def models(lang: str) -> str:
        copy = tmp_path / f"{lang}.udpipe"
        if not copy.exists():
            copy.write_bytes(Path(tiny_udpipe(lang)).read_bytes())
        return str(copy)

    pipeline = write_pipeline(tmp_path, models)
    done = run(SYNPREP, "convert", str(pipeline), "--workers", "1", "--keep-work", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-1500:]
    named = dependency_digests(load_pipeline(str(pipeline)))
    assert {models("en"), models("de")} <= set(named)
    for path in map(Path, named):
        before = changed_in_place(path)
        result = run(SYNPREP, "convert", str(pipeline), "--resume", cwd=tmp_path)
        one_line(result, "--resume: this file changed since the interrupted run", path.name)
        target = path if path.is_file() else max((p for p in path.rglob("*") if p.is_file()),
                                                 key=lambda p: p.stat().st_size)
        target.write_bytes(before)
    made = OutputFolder(load_pipeline(str(pipeline))).made_files()  # what convert learned into OUT: codes, ...
    assert "codes.bpe" in made, made
    out = Path(load_pipeline(str(pipeline)).output)
    for name in made:
        before = changed_in_place(out / name)
        result = run(SYNPREP, "convert", str(pipeline), "--resume", cwd=tmp_path)
        one_line(result, "--resume: this file convert made changed since the interrupted run", name)
        (out / name).write_bytes(before)
    again = run(SYNPREP, "convert", str(pipeline), "--resume", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-1500:]


def test_a_parse_cache_that_cannot_be_made_is_named_and_leaves_no_output_folder(tmp_path, tiny_udpipe):
    """Before: `synprep: error: /x: Not a directory` without naming the cache, and the half-made output folder
    stayed, so the corrected command was refused ("output folder exists")."""
    pipeline = write_pipeline(tmp_path, tiny_udpipe)
    (tmp_path / "afile").write_text("not a folder\n")
    cache = tmp_path / "afile" / "cache"
    result = run(SYNPREP, "convert", str(pipeline), "--parse-cache", str(cache), cwd=tmp_path)
    one_line(result, str(cache), "parse cache")
    assert not (tmp_path / "out").exists(), list((tmp_path / "out").iterdir())
    fixed = run(SYNPREP, "convert", str(pipeline), "--parse-cache", str(tmp_path / "cache"), cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-1500:]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_during_filter_and_parse_says_how_to_resume(tmp_path, tiny_udpipe, signum):
    """Before: SIGTERM exited 143 with no line (SIGINT printed one and the `--resume` command)."""
    process, workers, pipeline = start_convert(tmp_path, tiny_udpipe, 4)
    os.kill(process.pid, signum)
    stderr = finish(process)
    assert process.returncode == 128 + signum, stderr[-1500:]
    assert "Traceback" not in stderr, stderr[-1500:]
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"synprep: stopped by {signal.Signals(signum).name}; the finished pieces are kept"), last
    assert last.endswith(f"continue with synprep convert {pipeline} --workers 2 --no-dedupe --resume"), last
    assert gone(workers), "workers left running"
    assert (tmp_path / "out" / ".work" / "config.json").is_file()


def test_sigterm_to_parser_train_ends_its_udpipe_trainer(tmp_path):
    """Before: the UDPipe training child kept running as an orphan after its parent was stopped."""
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "en.conllu"
    process = subprocess.Popen([SYNPREP, "parser", "train", "--backend", "udpipe", "--conllu", str(sample),
                                "-o", str(tmp_path / "en.udpipe"), "--preset", "tiny"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    import time

    deadline = time.time() + 60
    while not (trainers := _forked(process.pid)) and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    assert trainers, f"no training child seen: {process.communicate()[1][-800:]}"
    os.kill(process.pid, signal.SIGTERM)
    stderr = finish(process)
    try:
        assert process.returncode == 143, stderr[-1500:]
        assert "Traceback" not in stderr, stderr[-1500:]
        assert gone(trainers), "the UDPipe trainer outlived its parent"
    finally:
        for pid in trainers:
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)


def _forked(pid: int) -> list[int]:
    return children(pid)
