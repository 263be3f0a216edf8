"""Fault injection: bad bytes, truncation, corruption, disk full, long lines, bad values, leftovers.

Every case runs a real command on damaged input and is classified as
  clean       the expected outcome: a one-line `synprep: error:` / `syntrain: error:` naming the file (exit 2)
              and no partial output left, or success with nothing lost
  traceback   a Python traceback on stderr
  crash       killed by a signal or aborted (segfault, abort)
  hang        no answer within the time limit
  silent      exit 0 on bad input, or a result that lost or changed something
  unclear     an error, but not one line, or not naming what it should
Each case is a test here (`make test`); `python -m tests.test_faults [pytest args]` runs every tests/test_faults*.py
file and prints one line per case and the totals per class of fault (cases, passed, failed, skipped).
Cases of other classes live beside the code they exercise: concurrent writers, damaged shards and manifests,
named pipes (tests/test_shards.py), kill -9 + --resume (tests/test_convert.py).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import shutil
import stat
import subprocess
import sys
import typing
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
    if "Traceback" in err:  # the whole traceback, from its first line: where it came from (a thread, a worker)
        return "traceback", err[err.index("Traceback") - 200 if err.index("Traceback") > 200 else 0:][-4000:]
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


# ---------------------------------------------------------------------------------- input checks


def _bpe_apply(codes, *extra: str) -> list[str]:
    return [SYNPREP, "bpe", "apply", "--codes", str(codes), "-i", "in.txt", "-o", "out.bpe", *extra]


def _text(tmp: Path) -> None:
    _write(tmp / "in.txt", "the dog barks at the cat\n" * 3)


def vocabulary_superscript_count(data, tmp):
    _text(tmp)
    _write(tmp / "vocab.txt", "the 5\ndo@@ \u00b2\n")  # '²'.isdigit() is True, int('²') fails
    return _bpe_apply(data["codes"], "--vocabulary", "vocab.txt", "--vocabulary-threshold", "2"), None


def vocabulary_cut_off(data, tmp):
    _text(tmp)
    _write(tmp / "vocab.txt", "the 512\ndog 4")  # cut from 'dog 40\n': a valid-looking line without its end
    return _bpe_apply(data["codes"], "--vocabulary", "vocab.txt"), None


def glossary_not_a_regex(data, tmp):
    _text(tmp)
    return _bpe_apply(data["codes"], "--glossaries", "("), None


def separator(value: str):
    def prepare(data, tmp):
        _text(tmp)
        return _bpe_apply(data["codes"], "--separator", value), None
    return prepare


def learn_min_frequency(value: str):
    def prepare(data, tmp):
        _text(tmp)
        return [SYNPREP, "bpe", "learn", "-i", "in.txt", "-o", "codes.bpe", "--min-frequency", value], None
    return prepare


def codes_header_only(data, tmp):
    _text(tmp)
    _write(tmp / "codes.bpe", "#version: 0.2\n")
    return _bpe_apply("codes.bpe"), None


def _cut_codes(data, tmp) -> Path:
    """The dataset's codes cut in the middle of a merge line (no line end after it)."""
    text = Path(data["codes"]).read_text(encoding="utf-8")
    cut = text.index("\n", len(text) // 2) - 1
    return _write(tmp / "codes.bpe", text[:cut])


def codes_cut_mid_line(data, tmp):
    _text(tmp)
    _cut_codes(data, tmp)
    return _bpe_apply("codes.bpe"), None


def codes_cut_align(data, tmp):
    _cut_codes(data, tmp)
    return [SYNPREP, "align", "--conllu", str(data["synth"] / "test.src.conllu"), "--bpe-codes", "codes.bpe",
            "-o", "out.jsonl"], None


def codes_damaged_symbol(data, tmp):
    _text(tmp)
    lines = Path(data["codes"]).read_text(encoding="utf-8").split("\n")
    lines.insert(5, "zzq@ x")  # neither a character nor made by an earlier merge
    _write(tmp / "codes.bpe", "\n".join(lines))
    return _bpe_apply("codes.bpe"), None


def pipeline_edit(replace: dict[str, str]):
    def prepare(data, tmp):
        return [SYNPREP, "convert", str(_pipeline(data, tmp, replace)), "--output", "out"], None
    return prepare


def pipeline_codes(text: str | None):
    """[bpe] codes = "given.bpe": missing (None) or holding `text`."""
    def prepare(data, tmp):
        pipeline = _pipeline(data, tmp, {"symbols = 300": 'codes = "given.bpe"'})
        if text is not None:
            _write(tmp / "synth" / "given.bpe", text)
        return [SYNPREP, "convert", str(pipeline), "--output", "out"], None
    return prepare


def conllu_edit(old: str, new: str, fmt: str = "jsonl"):
    def prepare(data, tmp):
        assert old in CONLLU
        _write(tmp / "in.conllu", CONLLU + CONLLU.replace(old, new))
        return [SYNPREP, "align", "--conllu", "in.conllu", "--format", fmt, "-o", "out.txt"], None
    return prepare


def wide_text(encoding: str, command: str):
    """One command reading UTF-16/UTF-32 text (with or without a byte order mark)."""
    def prepare(data, tmp):
        if command == "filter":
            _write(tmp / "in.en", "The dog barks .\nA cat .\n".encode(encoding))
            _write(tmp / "in.de", "Der Hund bellt .\nEine Katze .\n".encode(encoding))
            return [SYNPREP, "filter", "--src", "in.en", "--tgt", "in.de", "--src-lang", "en", "--tgt-lang", "de",
                    "--langid", "none", "-o", "clean"], None
        if command == "align":
            _write(tmp / "in.conllu", CONLLU.encode(encoding))
            return [SYNPREP, "align", "--conllu", "in.conllu", "-o", "out.txt"], None
        if command == "bpe apply (stdin)":
            return [SYNPREP, "bpe", "apply", "--codes", str(data["codes"]), "-o", "out.bpe"], \
                "the dog barks\n".encode(encoding)
        if command == "parse":
            _write(tmp / "in.txt", "The dog barks .\n".encode(encoding))
            return [SYNPREP, "parse", "--backend", "udpipe", "--model", data["udpipe"], "-i", "in.txt", "-o",
                    "out.txt", "--workers", "1"], None
        pipeline = _pipeline(data, tmp)  # convert: one input of the last split
        path = tmp / "synth" / "test.tgt.conllu"
        path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))
        return [SYNPREP, "convert", str(pipeline), "--output", "out"], None
    return prepare


def bom_filter(data, tmp):
    _write(tmp / "in.en", "\ufeffThe dog barks .\nA cat sleeps .\n")
    _write(tmp / "in.de", "The dog barks .\nEine Katze schläft .\n")  # the first pair is an untranslated copy
    return [SYNPREP, "filter", "--src", "in.en", "--tgt", "in.de", "--src-lang", "en", "--tgt-lang", "de",
            "--langid", "none", "-o", "clean"], None


def _copy_rejected_as_identical(tmp, result):
    rows = (tmp / "clean" / "rejected.tsv").read_text(encoding="utf-8").splitlines()
    kept = (tmp / "clean" / "in.en").read_bytes()
    return [row.split("\t")[:2] for row in rows] == [["0", "identical"]] and kept == b"A cat sleeps .\n"


INPUT_CASES = [
    Case("bpe apply: vocabulary count '\u00b2'", "bad values", vocabulary_superscript_count, names="vocab.txt:2",
         absent=("out.bpe",)),
    Case("bpe apply: vocabulary cut off (last line without its end)", "truncation", vocabulary_cut_off,
         names="vocab.txt:2", absent=("out.bpe",)),
    Case("bpe apply --glossaries '('", "bad values", glossary_not_a_regex, names="--glossaries", absent=("out.bpe",)),
    Case("bpe apply --separator ''", "bad values", separator(""), names="--separator", absent=("out.bpe",)),
    Case("bpe apply --separator ' '", "bad values", separator(" "), names="--separator", absent=("out.bpe",)),
    Case("bpe learn --min-frequency 0", "bad values", learn_min_frequency("0"), names="--min-frequency",
         absent=("codes.bpe",)),
    Case("bpe learn --min-frequency -1", "bad values", learn_min_frequency("-1"), names="--min-frequency",
         absent=("codes.bpe",)),
    Case("bpe apply: codes with only the version line", "corruption", codes_header_only, names="codes.bpe: no merges",
         absent=("out.bpe",)),
    Case("bpe apply: codes cut in the middle of a line", "truncation", codes_cut_mid_line, names="codes.bpe:",
         absent=("out.bpe",)),
    Case("align --bpe-codes: codes cut in the middle of a line", "truncation", codes_cut_align, names="codes.bpe:",
         absent=("out.jsonl",)),
    Case("bpe apply: a merge of symbols no earlier merge made", "corruption", codes_damaged_symbol,
         names="codes.bpe:6", absent=("out.bpe",)),
    Case("convert: max_ratio = nan", "bad values", pipeline_edit({"max_ratio = 3.0": "max_ratio = nan"}),
         names="[filter] max_ratio", absent=("out",)),
    Case("convert: [bpe] symbols = 0", "bad values", pipeline_edit({"symbols = 300": "symbols = 0"}),
         names="[bpe] symbols must be >= 1", absent=("out",)),
    Case("convert: [bpe] symbols = -1", "bad values", pipeline_edit({"symbols = 300": "symbols = -1"}),
         names="pipeline.toml: [bpe] symbols", absent=("out",)),
    Case("convert: split filter = \"yes\"", "bad values",
         pipeline_edit({'tgt = "test.tgt.conllu"': 'tgt = "test.tgt.conllu"\nfilter = "yes"'}),
         names="[splits.test] filter must be true or false", absent=("out",)),
    Case("convert: split filter = \"false\"", "bad values",
         pipeline_edit({'tgt = "train.tgt.conllu"': 'tgt = "train.tgt.conllu"\nfilter = "false"'}),
         names="[splits.train] filter must be true or false", absent=("out",)),
    Case("convert: langid_languages = \"en\" (a string)", "bad values",
         pipeline_edit({"max_ratio = 3.0": 'max_ratio = 3.0\nlangid_languages = "en"'}),
         names="[filter] langid_languages must be a list", absent=("out",)),
    Case("convert: a language the identifier cannot return (found before any work)", "bad values",
         pipeline_edit({'langid = "none"': 'langid = "langdetect"\nlangid_languages = ["xs"]'}),
         names="pipeline.toml: [filter]: language(s) xs not supported", absent=("out",)),
    Case("convert: [bpe] codes file missing (found before any work)", "bad values", pipeline_codes(None),
         names="given.bpe: [bpe] codes: no such file", absent=("out",)),
    Case("convert: [bpe] codes with only the version line", "corruption", pipeline_codes("#version: 0.2\n"),
         names="given.bpe: [bpe] codes: no merges", absent=("out",)),
    Case("align: empty node ID 1.x", "corruption",
         conllu_edit("\n2\tdog", "\n1.x\tgone\t_\t_\t_\t_\t_\t_\t_\t_\n2\tdog"), names="in.conllu:9",
         absent=("out.txt",)),
    Case("align: a sentence of comments only", "corruption", conllu_edit(CONLLU, "# text = nothing\n\n"),
         names="in.conllu:7", absent=("out.txt",)),
    Case("align --format transitions: DEPREL with a space", "corruption",
         conllu_edit("\tdet\t", "\tdet x\t", "transitions"), names="in.conllu:8", absent=("out.txt",)),
    Case("align --format jsonl: DEPREL with a space", "corruption", conllu_edit("\tnsubj\t", "\tn subj\t"),
         names="in.conllu:9", absent=("out.txt",)),
    Case("filter: UTF-16 input on both sides", "bad bytes", wide_text("utf-16", "filter"), names="in.en: is UTF-16",
         absent=("clean",)),
    Case("filter: UTF-16-LE input without a byte order mark", "bad bytes", wide_text("utf-16-le", "filter"),
         names="in.en: is UTF-16-LE", absent=("clean",)),
    Case("align: UTF-16 CoNLL-U", "bad bytes", wide_text("utf-16", "align"), names="in.conllu: is UTF-16",
         absent=("out.txt",)),
    Case("bpe apply: UTF-32 on stdin", "bad bytes", wide_text("utf-32", "bpe apply (stdin)"),
         names="<stdin>: is UTF-32", absent=("out.bpe",)),
    Case("parse: UTF-16-BE input", "bad bytes", wide_text("utf-16-be", "parse"), names="in.txt: is UTF-16-BE",
         absent=("out.txt",)),
    Case("convert: UTF-16 input in the last split (found before any work)", "bad bytes", wide_text("utf-16", "convert"),
         names="test.tgt.conllu: is UTF-16", absent=("out",)),
    Case("filter: UTF-8 byte order mark on the source's first line", "bad bytes", bom_filter, expect="ok",
         check=_copy_rejected_as_identical),
]
CASES += INPUT_CASES


# ------------------------------------------------- numeric bounds, options that do nothing, closed streams


def _translate(*extra: str, shell: str = "") -> Callable[[dict, Path], tuple[list[str], bytes | None]]:
    def prepare(data, tmp):
        _write(tmp / "in.txt", "the dog barks .\n")
        argv = [*SYNTRAIN, "translate", "--checkpoint", str(data["checkpoint"]), *extra]
        if shell:  # a closed standard stream: `<&-`, `>&-`
            return ["sh", "-c", " ".join(f"'{a}'" for a in argv) + " " + shell], None
        return [*argv, "-i", "in.txt", "-o", "out.txt"], None
    return prepare


def convert_option(*extra: str, edit: dict[str, str] | None = None
                   ) -> Callable[[dict, Path], tuple[list[str], bytes | None]]:
    def prepare(data, tmp):
        return [SYNPREP, "convert", str(_pipeline(data, tmp, edit)), "--output", "out", *extra], None
    return prepare


def empty_valid_split(data, tmp):
    pipeline = _pipeline(data, tmp)
    for side in ("src", "tgt"):
        _write(pipeline.parent / f"valid.{side}.conllu", "")
    return [SYNPREP, "convert", str(pipeline), "--output", "out"], None


BOUND_CASES = [
    Case("translate --beam 20000 (over the documented cap)", "bad values", _translate("--beam", "20000"),
         names="'--beam': 20000 is not in the range 1<=x<=256", absent=("out.txt",)),
    Case("translate with standard input closed", "bad values", _translate(shell="<&-"),
         names="<stdin>: standard input is closed"),
    Case("translate with standard output closed", "bad values", _translate("-i", "in.txt", shell=">&-"),
         names="<stdout>: standard output is closed"),
    Case("convert --parse-cache '' (an unset variable)", "bad values", convert_option("--parse-cache", ""),
         names="--parse-cache must name a folder", absent=("out",)),
    Case("convert --ray-address without --engine ray", "bad values",
         convert_option("--ray-address", "127.0.0.1:1"), names="--ray-address is for --engine ray", absent=("out",)),
    Case("convert: empty valid files (a split of 0 pairs)", "bad values", empty_valid_split,
         names="split 'valid': its input holds no pairs", absent=("out",)),
]
CASES += BOUND_CASES


def make_data(root: Path) -> dict:
    """The shared inputs: a synthetic corpus, its converted shards and BPE codes, a UDPipe model, a checkpoint."""
    from synprep.parse.train import train_udpipe

    synth = root / "synth"
    subprocess.run([SYNPREP, "synth", "--pairs", "300", "--seed", "1", "-o", str(synth)], check=True,
                   capture_output=True)
    shards = root / "shards"
    subprocess.run([SYNPREP, "convert", str(synth / "pipeline.toml"), "--output", str(shards)],
                   check=True, capture_output=True)
    model = str(SHARED_MODEL) if SHARED_MODEL.exists() else str(root / "en.udpipe")
    if not SHARED_MODEL.exists():
        train_udpipe(str(REPO / "sample_data" / "en.conllu"), model, "tiny")
    sample, run = root / "sample", root / "run"  # raw text needs a dataset made by a parser: the sample pipeline
    subprocess.run([SYNPREP, "convert", str(REPO / "pipelines" / "sample.toml"), "--output",
                    str(sample)], check=True, capture_output=True)
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


# ------------------------------------------------------------- random values for every pipeline key

_PIPELINE_BASE = {  # a valid pipeline (pre-parsed input; load_pipeline does not open the inputs)
    "pipeline": {"name": "x", "src_lang": "en", "tgt_lang": "de", "shard_size": 100},
    "splits": {"train": {"src": "train.src.conllu", "tgt": "train.tgt.conllu"}},
    "filter": {"langid": "none"}, "parser": {"src": {"backend": "udpipe", "model": "en.udpipe"}},
    "bpe": {"symbols": 100}, "features": {"src": ["parents"], "tgt": ["transitions"]}, "normalize": {}, "parse": {},
}
_DECLARED = {"split": "SplitConfig", "parser": "ParserConfig", "bpe": "BpeConfig", "features": "FeaturesConfig",
             "normalize": "NormalizeConfig", "parse": "ParseConfig"}
_TABLES = {"pipeline": ("pipeline",), "split": ("splits", "train"), "filter": ("filter",),
           "parser": ("parser", "src"), "bpe": ("bpe",), "features": ("features",), "normalize": ("normalize",),
           "parse": ("parse",)}


class _Inline(dict):
    """A value that is a TOML inline table (`key = {a = 1}`), not a [table] of the pipeline."""


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML escapes DEL too
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return "[" + ", ".join(map(_toml_value, value)) + "]"


def _toml(tables: dict, prefix: str = "") -> str:
    plain = {k: v for k, v in tables.items() if not isinstance(v, dict) or isinstance(v, _Inline)}
    lines = [f"[{prefix}]"] if prefix and plain else []
    lines += [f"{key} = {_toml_value(value)}" for key, value in plain.items()]
    for key, value in tables.items():
        if key not in plain:
            lines.append(_toml(value, f"{prefix}.{key}" if prefix else key))
    return "\n".join(lines)


def _any_value():
    from hypothesis import strategies as st

    scalar = st.one_of(st.booleans(), st.integers(-10**6, 10**6), st.floats(), st.text(
        st.characters(blacklist_categories=("Cs",)), max_size=8), st.sampled_from(["", "-1", "nan", "yes", "false"]))
    return st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.sampled_from(["a", "b"]), scalar,
                                                                           max_size=2))


def _pipeline_keys() -> list[tuple[str, str]]:
    from synprep.convert.pipeline import _KEYS

    return [(table, key) for table, keys in _KEYS.items() if table for key in sorted(keys)]


@pytest.mark.parametrize("table, key", _pipeline_keys(), ids=lambda v: v)
def test_random_values_of_every_pipeline_key(table, key, tmp_path_factory):
    """Any value of any pipeline key loads or is one InputError line naming the file and the key (never another
    exception: no traceback)."""
    from hypothesis import HealthCheck, given, settings

    from synprep.convert import pipeline
    from synprep.convert.pipeline import load_pipeline
    from synprep.errors import InputError

    folder = tmp_path_factory.mktemp("random_values")
    declared = {name: getattr(pipeline, cls) for name, cls in _DECLARED.items()} | {"filter": pipeline.FilterSettings}

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(_any_value())
    def check(value):
        tables = json.loads(json.dumps(_PIPELINE_BASE))
        target = tables
        for part in _TABLES[table]:
            target = target[part]
        target[key] = _Inline(value) if isinstance(value, dict) else value
        path = folder / "pipeline.toml"
        path.write_text(_toml(tables), encoding="utf-8")
        try:
            load_pipeline(str(path))
        except InputError as err:
            message = str(err)
            assert "\n" not in message.strip() and key in message, message
            assert message.startswith(str(path)) or f"[{table.replace('split', 'splits.train')}" in message \
                or "codes" in message, message
        else:  # loaded: the value was used as given, never coerced
            assert hint is not bool or isinstance(value, bool), f"{key} = {value!r} taken as a boolean"
            assert not isinstance(value, float) or math.isfinite(value), f"{key} = {value!r} accepted"

    hint = typing.get_type_hints(declared[table]).get(key) if table in declared else None
    check()


class _Tally:
    """A pytest plugin that records every case of the fault suite: its file, class of fault, name and outcome."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str, str]] = []  # (file, kind, name, passed|failed|skipped, detail)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):  # noqa: ANN001, ANN201 (pytest's hook signature)
        report = (yield).get_result()
        if report.when == "call" or (report.when == "setup" and not report.passed):
            params = getattr(getattr(item, "callspec", None), "params", {})
            case = next((value for value in params.values() if hasattr(value, "kind")), None)
            kind = case.kind if case is not None else "random values" if "random" in item.name else \
                Path(str(item.fspath)).stem.removeprefix("test_faults_")
            detail = ""
            if report.failed:
                message = str(getattr(report.longrepr, "reprcrash", None) and report.longrepr.reprcrash.message
                              or report.longrepr)
                detail = message.removeprefix("AssertionError: ").splitlines()[0] if message else ""
            elif report.skipped and isinstance(report.longrepr, tuple):
                detail = str(report.longrepr[2]).removeprefix("Skipped: ")
            name = case.name if case is not None else item.name
            self.rows.append((Path(str(item.fspath)).name, kind, name, report.outcome, detail))


def main(argv: list[str] | None = None) -> int:
    """Run the fault suite (every tests/test_faults*.py file) and print one line per case, then the totals per
    class of fault (cases, passed, failed, skipped). Arguments are handed to pytest (`-k bpe`)."""
    files = sorted(str(path) for path in Path(__file__).parent.glob("test_faults*.py"))
    tally = _Tally()
    code = pytest.main([*files, "-q", "--tb=no", "-p", "no:cacheprovider", *(argv or [])], plugins=[tally])
    print()
    for file, kind, name, outcome, detail in tally.rows:
        print(f"{outcome:8s} {kind:12s} {name[:64]:64s} {file:24s} {detail[:100]}")
    per_kind: dict[str, Counter] = {}
    for _, kind, _, outcome, _ in tally.rows:
        per_kind.setdefault(kind, Counter())[outcome] += 1
    def totals(label: str, counts: Counter) -> str:
        return (f"{label:16s} {sum(counts.values()):6d} {counts['passed']:7d} {counts['failed']:7d} "
                f"{counts['skipped']:8d}")

    print(f"\n{'class of fault':16s} {'cases':>6s} {'passed':>7s} {'failed':>7s} {'skipped':>8s}")
    total: Counter = Counter()
    for kind, counts in sorted(per_kind.items()):
        total.update(counts)
        print(totals(kind, counts))
    print(totals("all", total) + f"   ({len(files)} files: {', '.join(Path(f).name for f in files)})")
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))



def test_a_beam_over_the_target_vocabulary_is_refused_before_decoding(data):
    """Before: a beam was never bounded (`--beam 20000` on one line: no output in 5 minutes, 1.1 GB and growing);
    under the cap, a beam is at most the target vocabulary (the API's check, which `translate`, `eval` and
    `compare` share)."""
    from syntrain.config.train import MAX_BEAM
    from syntrain.search import check_beam
    from syntrain.translate import Translator

    size = Translator(str(data["checkpoint"]), "cpu", beam=1).model.cfg.sizes.vocab_size
    beam = min(size, MAX_BEAM)  # the largest beam both bounds let through
    assert Translator(str(data["checkpoint"]), "cpu", beam=beam).settings.beam == beam
    bound = "larger than the model's target vocabulary" if size < MAX_BEAM else \
        f"'--beam': {beam + 1} is not in the range 1<=x<={MAX_BEAM}"
    with pytest.raises(ValueError, match=bound):
        Translator(str(data["checkpoint"]), "cpu", beam=beam + 1)
    with pytest.raises(ValueError, match=r"--beam 11 is larger than the model's target vocabulary \(10 pieces\)"):
        check_beam(11, 10)  # under the cap, the vocabulary bounds a beam
    check_beam(size, size)
