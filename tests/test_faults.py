"""Fault injection: bad bytes, truncation, corruption, disk full, long lines, bad values, leftovers.

Every case runs a real command on damaged input and is classified as
  clean       the expected outcome: a one-line `synprep: error:` / `syntrain: error:` naming the file (exit 2)
              and no partial output left, or success with nothing lost
  traceback   a Python traceback on stderr
  crash       killed by a signal or aborted (segfault, abort)
  hang        no answer within the time limit
  silent      exit 0 on bad input, or a result that lost or changed something
  unclear     an error, but not one line, or not naming what it should
Each case is a test here (`make test`); `python -m tests.test_faults` prints the table and the totals.
Cases of other classes live beside the code they exercise: concurrent writers, damaged shards and manifests,
named pipes (tests/test_shards.py), kill -9 + --resume (tests/test_convert.py).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SYNPREP = str(BIN / "synprep")
SYNTRAIN = [sys.executable, "-m", "syntrain"]
TIMEOUT = 180
REPO = Path(__file__).resolve().parents[1]
SHARED_MODEL = REPO.parent / "shared" / "models" / "en_ewt.udpipe"


@dataclass
class Case:
    """One fault: `prepare(data, tmp)` returns (argv, stdin bytes); `expect` is "error" (with `names`: text
    the one-line error must contain, `absent`: paths that must not exist after) or "ok" (with `check`)."""

    name: str
    kind: str
    prepare: Callable[[dict, Path], tuple[list[str], bytes | None]]
    expect: str = "error"
    names: str = ""
    absent: tuple[str, ...] = ()
    check: Callable[[Path, subprocess.CompletedProcess], bool] | None = None
    root_only: bool = False
    tags: list[str] = field(default_factory=list)


def classify(case: Case, data: dict, tmp: Path) -> tuple[str, str]:
    """(outcome, what happened) of one case."""
    argv, stdin = case.prepare(data, tmp)
    try:
        result = subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT, cwd=tmp)
    except subprocess.TimeoutExpired:
        return "hang", f"no answer in {TIMEOUT} s"
    err = result.stderr.decode("utf-8", "replace")
    if result.returncode < 0 or result.returncode in (134, 139):
        return "crash", f"exit {result.returncode}"
    if "Traceback" in err:
        return "traceback", err.strip().splitlines()[-1]
    leftovers = [p for p in case.absent if (tmp / p).exists()]
    if case.expect == "ok":
        if result.returncode != 0:
            return "unclear", f"exit {result.returncode}: {err.strip()[-200:]}"
        ok = case.check(tmp, result) if case.check else True
        return ("clean", "ok") if ok and not leftovers else ("silent", f"result check failed {leftovers}")
    if result.returncode == 0:
        return "silent", "exit 0 on bad input"
    lines = [line for line in err.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    if result.returncode != 2 or last.split(": error: ")[0] not in ("synprep", "syntrain", "syntrain.compare") \
            or case.names not in last:
        return "unclear", f"exit {result.returncode}: {last[:300]}"
    if leftovers:
        return "silent", f"left behind: {', '.join(leftovers)}"
    return "clean", last[:160]


# ------------------------------------------------------------------------------------------ inputs


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


CONLLU = ("# text = The dog barks .\n1\tThe\t_\t_\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\t_\t_\t_\t3\tnsubj\t_\t_\n"
          "3\tbarks\t_\t_\t_\t_\t0\troot\t_\t_\n4\t.\t_\t_\t_\t_\t3\tpunct\t_\t_\n\n")


def _tmpfs(tmp: Path, size: str = "256k") -> Path:
    """A tiny file system that fills up (root only)."""
    mount = tmp / "full"
    mount.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    return mount


def _pipeline(data: dict, tmp: Path, replace: dict[str, str] | None = None) -> Path:
    """A copy of the synth pipeline (pre-parsed input) with text replacements."""
    text = (data["synth"] / "pipeline.toml").read_text()
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    folder = tmp / "synth"
    if not folder.exists():
        shutil.copytree(data["synth"], folder, ignore=shutil.ignore_patterns("shards"))
    return _write(folder / "pipeline.toml", text)


def bad_bytes_align(data, tmp):
    _write(tmp / "in.conllu", CONLLU.replace("dog", "d\xe9g").encode("latin-1"))
    return [SYNPREP, "align", "--conllu", "in.conllu", "--format", "text", "-o", "out.txt"], None


def bad_bytes_toml(data, tmp):
    pipeline = _pipeline(data, tmp)
    pipeline.write_bytes(pipeline.read_bytes().replace(b"synth-seed1", b"synth-\xff"))
    return [SYNPREP, "convert", str(pipeline), "--output", "out"], None


def bad_bytes_bpe_apply(data, tmp):
    _write(tmp / "in.txt", b"good line\nbad \xff line\n")
    return [SYNPREP, "bpe", "apply", "--codes", str(data["codes"]), "-i", "in.txt", "-o", "out.bpe"], None


def bad_bytes_parse(data, tmp):
    _write(tmp / "in.txt", b"The dog barks .\nbad \xff line\n")
    return [SYNPREP, "parse", "--backend", "udpipe", "--model", data["udpipe"], "-i", "in.txt", "-o", "out.conllu",
            "--workers", "1"], None


def truncated_gz_convert(data, tmp):
    pipeline = _pipeline(data, tmp, {'src = "train.src.conllu"': 'src = "train.src.conllu.gz"'})
    packed = gzip.compress((tmp / "synth" / "train.src.conllu").read_bytes())
    _write(tmp / "synth" / "train.src.conllu.gz", packed[: len(packed) // 2])
    return [SYNPREP, "convert", str(pipeline), "--output", "out"], None


def truncated_gz_bpe(data, tmp):
    packed = gzip.compress(b"the dog barks\n" * 2000)
    _write(tmp / "in.txt.gz", packed[: len(packed) // 2])
    return [SYNPREP, "bpe", "apply", "--codes", str(data["codes"]), "-i", "in.txt.gz", "-o", "out.bpe"], None


def codes_garbage(data, tmp):
    _write(tmp / "codes.bpe", b"#version: 0.2\nthis line has four symbols\n")
    return [SYNPREP, "bpe", "apply", "--codes", "codes.bpe", "-o", "out.bpe"], b"the dog\n"


def codes_version(data, tmp):
    _write(tmp / "codes.bpe", b"#version: 9.9\nt h\n")
    return [SYNPREP, "bpe", "apply", "--codes", "codes.bpe", "-o", "out.bpe"], b"the dog\n"


def codes_empty(data, tmp):
    _write(tmp / "codes.bpe", b"")
    return [SYNPREP, "bpe", "apply", "--codes", "codes.bpe", "-o", "out.bpe"], b"the dog\n"


def udpipe_garbage(data, tmp):
    # these bytes make UDPipe's C++ loader throw std::length_error, which aborts the process that reads them
    _write(tmp / "model.udpipe", bytes.fromhex("b21d8f00932acdf7f795269afabdfa5d") + random.Random(0).randbytes(4984))
    return [SYNPREP, "parse", "--backend", "udpipe", "--model", "model.udpipe", "--workers", "2", "-o", "out"], b"a\n"


def checkpoint_garbage_translate(data, tmp):
    _write(tmp / "best.pt", os.urandom(3000))
    return [*SYNTRAIN, "translate", "--checkpoint", "best.pt", "-i", str(data["shards"] / "test"), "-o", "out"], None


def checkpoint_garbage_resume(data, tmp):
    _write(tmp / "run" / "last.pt", os.urandom(3000))
    return [*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", "run", "--resume",
            "--max-steps", "2"], None


def multiword_past_end_align(data, tmp):
    _write(tmp / "in.conllu", CONLLU.replace("1\tThe", "1-9\tTheDog\t_\t_\t_\t_\t_\t_\t_\t_\n1\tThe"))
    return [SYNPREP, "align", "--conllu", "in.conllu", "-o", "out.jsonl"], None


def multiword_past_end_convert(data, tmp):
    pipeline = _pipeline(data, tmp)
    path = tmp / "synth" / "train.src.conllu"
    lines = path.read_text().split("\n")
    first_word = next(i for i, line in enumerate(lines) if line[:2] == "1\t")
    lines.insert(first_word, "1-99\tx\t_\t_\t_\t_\t_\t_\t_\t_")
    path.write_text("\n".join(lines))
    return [SYNPREP, "convert", str(pipeline), "--output", "out"], None


def _one_invalid_tree(tmp, result):
    manifest = json.loads((tmp / "out" / "train" / "manifest.json").read_text())
    rejected = manifest["rejected"]
    return rejected.get("invalid_tree") == 1 and manifest["rows"] + sum(rejected.values()) == manifest["input_lines"]


def bom_conllu(data, tmp):
    _write(tmp / "in.conllu", "\ufeff" + CONLLU)
    return [SYNPREP, "align", "--conllu", "in.conllu", "--format", "text", "-o", "out.txt"], None


def full_disk_bpe(data, tmp):
    mount = _tmpfs(tmp, "64k")
    _write(tmp / "in.txt", "the dog barks at the cat\n" * 20000)
    return [SYNPREP, "bpe", "apply", "--codes", str(data["codes"]), "-i", "in.txt", "-o", str(mount / "o.bpe")], None


def full_disk_stdout(data, tmp):
    _write(tmp / "in.txt", "the dog barks at the cat\n" * 20000)
    return ["sh", "-c", f"'{SYNPREP}' bpe apply --codes '{data['codes']}' -i in.txt > /dev/full"], None


def full_disk_filter(data, tmp):
    mount = _tmpfs(tmp, "64k")
    _write(tmp / "in.en", "The dog barks at the cat today .\n" * 5000)
    _write(tmp / "in.de", "Der Hund bellt heute die Katze an .\n" * 5000)
    return [SYNPREP, "filter", "--src", "in.en", "--tgt", "in.de", "--src-lang", "en", "--tgt-lang", "de", "--langid",
            "none", "-o", str(mount / "clean")], None


def output_is_a_file(data, tmp):
    _write(tmp / "out", "I am a file, not a folder\n")
    return [SYNPREP, "convert", str(_pipeline(data, tmp)), "--output", "out"], None


def full_disk_convert(data, tmp):
    mount = _tmpfs(tmp, "200k")
    pipeline = _pipeline(data, tmp)
    return [SYNPREP, "convert", str(pipeline), "--output", str(mount / "out")], None


def full_disk_syntrain(data, tmp):
    mount = _tmpfs(tmp, "1m")
    return [*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", str(mount / "run"), "--max-steps",
            "2"], None


def long_line_parse(data, tmp):
    _write(tmp / "in.txt", "The dog barks .\n" + "word " * 40000 + "\nA cat .\n")
    return [SYNPREP, "parse", "--backend", "udpipe", "--model", data["udpipe"], "-i", "in.txt", "-o", "out.conllu",
            "--workers", "1"], None


def _three_sentences_one_skipped(tmp, result):
    text = (tmp / "out.conllu").read_text()
    return text.count("# sent_id") == 3 and text.count("# skipped") == 1


def long_line_convert(data, tmp):
    pipeline = _pipeline(data, tmp)
    path = tmp / "synth" / "test.src.conllu"
    words = "\n".join(f"{i}\tw\t_\t_\t_\t_\t{0 if i == 1 else 1}\t{'root' if i == 1 else 'dep'}\t_\t_"
                      for i in range(1, 20001))
    path.write_text(path.read_text() + f"# text = {'w ' * 20000}\n{words}\n\n")
    target = tmp / "synth" / "test.tgt.conllu"
    target.write_text(target.read_text() + CONLLU)
    return [SYNPREP, "convert", str(pipeline), "--output", "out"], None


def _long_line_counted(tmp, result):
    manifest = json.loads((tmp / "out" / "test" / "manifest.json").read_text())
    return manifest["rejected"].get("line_too_long") == 1 and manifest["input_lines"] == manifest["rows"] + 1


def long_line_translate(data, tmp):
    _write(tmp / "in.txt", "the dog sees the cat .\n" + "the dog " * 2000 + "\nthe cat .\n")
    return [*SYNTRAIN, "translate", "--checkpoint", str(data["checkpoint"]), "-i", "in.txt", "-o", "out.txt"], None


def _three_lines(tmp, result):
    return len((tmp / "out.txt").read_text().split("\n")) == 4  # three lines and the final newline


def shard_size_zero(data, tmp):
    return [SYNPREP, "convert", str(_pipeline(data, tmp)), "--output", "out", "--shard-size", "0"], None


def workers_negative(data, tmp):
    return [SYNPREP, "convert", str(_pipeline(data, tmp)), "--output", "out", "--workers", "-1"], None


def max_tokens_zero(data, tmp):
    return [*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", "run", "--max-tokens", "0",
            "--max-steps", "1"], None


def max_tokens_tiny(data, tmp):
    return [*SYNTRAIN, "run", "--data", str(data["shards"] / "train"), "--out", "run", "--max-tokens", "5",
            "--max-steps", "1"], None


def recipe_wrong_type(data, tmp):
    _write(tmp / "recipe.toml", f'[data]\ntrain = "{data["shards"] / "train"}"\n[train]\nmax_tokens = "many"\n')
    return [*SYNTRAIN, "run", "recipe.toml", "--out", "run", "--max-steps", "1"], None


def pipeline_wrong_type(data, tmp):
    return [SYNPREP, "convert", str(_pipeline(data, tmp, {"symbols = 300": 'symbols = "many"'})), "--output",
            "out"], None


def pipeline_bad_compression(data, tmp):
    return [SYNPREP, "convert", str(_pipeline(data, tmp, {"shard_size = 10000": 'compression = "gzip"'})),
            "--output", "out"], None


def output_to_a_device(data, tmp):
    os.mknod(tmp / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    return [SYNPREP, "align", "--conllu", str(data["synth"] / "test.src.conllu"), "-o", "null"], None


def _still_a_device(tmp, result):
    return stat.S_ISCHR(os.stat(tmp / "null").st_mode)


def align_error_midway(data, tmp):
    _write(tmp / "in.conllu", CONLLU * 300 + "1\tx\t_\t_\t_\t_\t7\tdep\t_\t_\n\n")
    return [SYNPREP, "align", "--conllu", "in.conllu", "--format", "jsonl", "-o", "out.jsonl", "--workers", "1"], None


def rules_not_utf8(data, tmp):
    _write(tmp / "rules.toml", b'[[rule]]\nname = "caf\xe9"\nlabels = ["obj"]\n')
    return [SYNPREP, "challenge", str(data["shards"] / "test"), "-o", "sets", "--rules", "rules.toml"], None


def _hypothesis_run(data, tmp, hyp: bytes, description: bytes | None = None) -> list[str]:
    """A run folder holding only test.hyp (and describe.json), scored by syntrain.compare against itself."""
    from synprep.shards import open_split

    pairs = open_split(str(data["shards"] / "test")).manifest.rows
    good = _write(tmp / "good" / "test.hyp", "a b\n" * pairs)
    _write(tmp / "bad" / "test.hyp", hyp.replace(b"PAIRS", b"a b\n" * (pairs - 2)))
    if description is not None:
        _write(tmp / "bad" / "describe.json", description)
    return [sys.executable, "-m", "syntrain.compare", "--data", str(data["shards"] / "test"), "--samples", "10",
            str(good.parent), "bad"]


def hypotheses_bad_byte(data, tmp):
    return _hypothesis_run(data, tmp, b"a b\nPAIRSca\xe9\n"), None


def description_corrupt(data, tmp):
    return _hypothesis_run(data, tmp, b"a b\nPAIRSc\n", b'{"switches": "pascal", "seed": '), None


def subset_ids_not_ids(data, tmp):
    argv = _hypothesis_run(data, tmp, b"a b\nPAIRSc\n")
    subprocess.run([SYNPREP, "challenge", str(data["shards"] / "test"), "-o", str(tmp / "sets")], check=True,
                   capture_output=True)
    _write(tmp / "sets" / "src.particle.ids", "3\nseven\n")
    return [*argv[:5], "--subsets", "sets", *argv[5:]], None


CASES = [
    Case("align: latin-1 byte in CoNLL-U", "bad bytes", bad_bytes_align, names="in.conllu:1", absent=("out.txt",)),
    Case("convert: pipeline TOML not UTF-8", "bad bytes", bad_bytes_toml, names="pipeline.toml", absent=("out",)),
    Case("bpe apply: bad byte on line 2", "bad bytes", bad_bytes_bpe_apply, names="in.txt:2", absent=("out.bpe",)),
    Case("parse: bad byte on line 2", "bad bytes", bad_bytes_parse, names="in.txt:2", absent=("out.conllu",)),
    Case("convert: truncated .gz input", "truncation", truncated_gz_convert, names="train.src.conllu.gz",
         absent=("out",)),
    Case("bpe apply: truncated .gz input", "truncation", truncated_gz_bpe, names="in.txt.gz", absent=("out.bpe",)),
    Case("bpe apply: garbage codes", "corruption", codes_garbage, names="codes.bpe:2", absent=("out.bpe",)),
    Case("bpe apply: codes version 9.9", "corruption", codes_version, names="codes.bpe:1", absent=("out.bpe",)),
    Case("bpe apply: empty codes", "corruption", codes_empty, names="codes.bpe", absent=("out.bpe",)),
    Case("parse: garbage UDPipe model, 2 workers", "corruption", udpipe_garbage, names="model.udpipe",
         absent=("out",)),
    Case("translate: garbage checkpoint", "corruption", checkpoint_garbage_translate, names="best.pt",
         absent=("out",)),
    Case("run --resume: garbage last.pt", "corruption", checkpoint_garbage_resume, names="last.pt"),
    Case("align: multiword range past the last word", "corruption", multiword_past_end_align, names="in.conllu:2",
         absent=("out.jsonl",)),
    Case("convert: multiword range past the last word (counted)", "corruption", multiword_past_end_convert,
         expect="ok", check=_one_invalid_tree),
    Case("align: byte order mark before CoNLL-U", "bad bytes", bom_conllu, expect="ok"),
    Case("bpe apply: disk full", "disk full", full_disk_bpe, names="o.bpe", root_only=True),
    Case("bpe apply: stdout on a full device", "disk full", full_disk_stdout, names="No space left"),
    Case("convert: disk full", "disk full", full_disk_convert, names="full/out", root_only=True),
    Case("filter: disk full", "disk full", full_disk_filter, names="full/clean", root_only=True),
    Case("convert: the output folder is a file", "bad values", output_is_a_file, names="must be a folder"),
    Case("syntrain run: disk full", "disk full", full_disk_syntrain, names="full/run", root_only=True),
    Case("parse: 200 KB line", "long lines", long_line_parse, expect="ok", check=_three_sentences_one_skipped),
    Case("convert: 40 KB line in the test split (counted)", "long lines", long_line_convert, expect="ok",
         check=_long_line_counted),
    Case("translate: a line far beyond max_len", "long lines", long_line_translate, expect="ok", check=_three_lines),
    Case("convert --shard-size 0", "bad values", shard_size_zero, names="--shard-size", absent=("out",)),
    Case("convert --workers -1", "bad values", workers_negative, names="workers", absent=("out",)),
    Case("run --max-tokens 0", "bad values", max_tokens_zero, names="--max-tokens"),
    Case("run --max-tokens 5 (below the longest sentence)", "bad values", max_tokens_tiny, names="max_tokens"),
    Case("run: recipe value of the wrong type", "bad values", recipe_wrong_type, names="max_tokens"),
    Case("convert: pipeline value of the wrong type", "bad values", pipeline_wrong_type, names="pipeline.toml",
         absent=("out",)),
    Case("convert: unknown compression", "bad values", pipeline_bad_compression, names="pipeline.toml",
         absent=("out",)),
    Case("align -o a device (/dev/null): written, not replaced", "leftovers", output_to_a_device, expect="ok",
         check=_still_a_device, root_only=True),
    Case("align: error after 300 sentences leaves no partial output", "leftovers", align_error_midway,
         names="in.conllu:1801", absent=("out.jsonl",)),
    Case("challenge: rules TOML not UTF-8", "bad bytes", rules_not_utf8, names="rules.toml", absent=("sets",)),
    Case("compare: bad byte in a run's test.hyp", "bad bytes", hypotheses_bad_byte, names="test.hyp:"),
    Case("compare: truncated describe.json", "truncation", description_corrupt, names="describe.json"),
    Case("compare: a subset id list with a non-id", "corruption", subset_ids_not_ids, names="src.particle.ids:2"),
]


def make_data(root: Path) -> dict:
    """The shared inputs: a synthetic corpus, its converted shards and BPE codes, a UDPipe model, a checkpoint."""
    from synprep.parse.train import train_udpipe

    synth = root / "synth"
    subprocess.run([SYNPREP, "synth", "--pairs", "300", "--seed", "1", "-o", str(synth)], check=True,
                   capture_output=True)
    shards = root / "shards"
    subprocess.run([SYNPREP, "convert", str(synth / "pipeline.toml"), "--output", str(shards)], check=True,
                   capture_output=True)
    model = str(SHARED_MODEL) if SHARED_MODEL.exists() else str(root / "en.udpipe")
    if not SHARED_MODEL.exists():
        train_udpipe(str(REPO / "sample_data" / "en.conllu"), model, "tiny")
    sample, run = root / "sample", root / "run"  # raw text needs a dataset made by a parser: the sample pipeline
    subprocess.run([SYNPREP, "convert", str(REPO / "pipelines" / "sample.toml"), "--output", str(sample)],
                   check=True, capture_output=True)
    subprocess.run([*SYNTRAIN, "run", "--data", str(sample / "train"), "--out", str(run), "--max-steps", "3",
                    "--preset", "tiny"], check=True, capture_output=True)
    return {"synth": synth, "shards": shards, "codes": shards / "codes.bpe", "udpipe": model,
            "checkpoint": run / "last.pt"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("faults"))


def _run_case(case: Case, data: dict, tmp: Path) -> tuple[str, str]:
    try:
        return classify(case, data, tmp)
    finally:
        if (tmp / "full").is_dir():
            subprocess.run(["umount", str(tmp / "full")], capture_output=True)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault_is_handled_cleanly(case, data, tmp_path):
    if case.root_only and os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    outcome, detail = _run_case(case, data, tmp_path)
    assert outcome == "clean", f"{outcome}: {detail}"


def main() -> None:
    """Run every case and print the table and the totals per outcome."""
    with tempfile.TemporaryDirectory(prefix="faults_") as root:
        data = make_data(Path(root))
        totals: Counter = Counter()
        kinds: Counter = Counter()
        for k, case in enumerate(CASES):
            if case.root_only and os.geteuid() != 0:
                outcome, detail = "skipped", "needs root"
            else:
                tmp = Path(root) / f"case{k}"
                tmp.mkdir()
                outcome, detail = _run_case(case, data, tmp)
            totals[outcome] += 1
            kinds[case.kind] += 1
            print(f"{outcome:9s} {case.kind:11s} {case.name:55s} {detail[:90]}")
        print(f"\n{len(CASES)} cases ({', '.join(f'{k} {v}' for k, v in kinds.items())}): "
              + ", ".join(f"{name} {totals.get(name, 0)}" for name in
                          ("clean", "traceback", "crash", "hang", "silent", "unclear", "skipped")))


if __name__ == "__main__":
    main()
