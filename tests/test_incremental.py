"""convert as an incremental build: what is cached costs nothing (no parse pool, no parser model loaded when every
sentence is in the parse cache) and the splits share one pool of workers."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

from synprep.parse import ParserSpec
from synprep.parse import udpipe as udpipe_backend

from .conftest import cli_in_process
from .test_convert import BIN, shard_bytes, write_pipeline
from .test_parse_cache import pipeline


def _count_loads(monkeypatch, path: Path) -> None:
    """Every parser load (driver or worker, forked workers inherit the patch) appends `PID MODEL` to `path`."""
    original = ParserSpec.load

    def counted(self: ParserSpec):  # noqa: ANN202
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()} {self.model}\n")
        return original(self)

    monkeypatch.setattr(ParserSpec, "load", counted)


def test_cached_convert_loads_no_parser_and_splits_share_workers(tiny_udpipe, tmp_path, monkeypatch):
    loads = tmp_path / "loads"
    _count_loads(monkeypatch, loads)
    cache = str(tmp_path / "cache")
    monkeypatch.setattr(udpipe_backend, "_PROBED", set())
    code, err = cli_in_process("synprep", ["convert", pipeline(tmp_path / "cold", tiny_udpipe, cache=cache),
                                           "--workers", "2"])
    assert code == 0, err
    lines = loads.read_text().splitlines()
    # train and test through one pool: each of the 2 workers loads each side's model once, the driver none
    assert len({line.split()[0] for line in lines}) == 2 and len(lines) == 4
    assert str(os.getpid()) not in {line.split()[0] for line in lines}
    loads.unlink()
    monkeypatch.setattr(udpipe_backend, "_PROBED", set())  # the driver's probe of a model (a forked load)
    code, err = cli_in_process("synprep", ["convert", pipeline(tmp_path / "warm", tiny_udpipe, cache=cache),
                                           "--workers", "2"])
    assert code == 0, err
    assert not loads.exists() and not udpipe_backend._PROBED  # every sentence cached: no model loaded, not probed
    cold, warm = shard_bytes(tmp_path / "cold" / "out"), shard_bytes(tmp_path / "warm" / "out")
    assert warm == cold and len(cold) >= 4


FILTERS = ('langid = "py3langid"\nlangid_languages = ["en", "de", "fr"]',
           'langid = "py3langid"\nlangid_languages = ["en", "de", "fr"]\nmax_len = 7')
FEATURES = ('src = ["parents", "distances", "labels"]\ntgt = ["transitions", "labels"]',
            'src = ["parents", "distances"]\ntgt = ["transitions", "labels"]')  # src labels dropped
SYMBOLS = (200, 150)
STAGES = ("filter", "bpe", "features")


def _pipeline(folder: Path, models, changed: frozenset[str], cache: Path | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_pipeline(folder, models, filter_table=FILTERS["filter" in changed],
                          features=FEATURES["features" in changed],
                          extra=f'[parse]\ncache = "{cache}"' if cache else "")
    path.write_text(path.read_text().replace("symbols = 200", f"symbols = {SYMBOLS['bpe' in changed]}"))
    return path


def _outputs(out: Path) -> tuple[dict, dict, dict]:
    """Shards; codes, vocabularies and rejected.tsv files; manifests without the run statistics of caches."""
    files = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("*")) + sorted(out.glob("*/rejected.tsv"))
             if p.name.startswith(("codes", "vocab", "rejected"))}
    manifests = {}
    for path in sorted(out.glob("*/manifest.json")):
        manifests[path.parent.name] = json.loads(path.read_text())  # whole: the caches' counts are in run.json
    return shard_bytes(out), files, manifests


def _convert(pipeline_file: Path, *args: str) -> Path:
    code, err = cli_in_process("synprep", ["convert", pipeline_file, *args])
    assert code == 0, err
    return pipeline_file.parent / "out"


def test_every_combination_of_changed_stages_gives_the_uncached_bytes(tiny_udpipe, tmp_path):
    """A warm cache of one configuration, then each combination of changed stages (filter, BPE, features) from a
    copy of it: shards, codes, vocabularies and manifests equal a convert without any cache, and run.json says
    which stages were reused (a changed filter changes the train words, so the codes and every piece's features)."""
    warm = tmp_path / "warm-cache"
    base = _convert(_pipeline(tmp_path / "base", tiny_udpipe, frozenset(), warm), "--workers", "2")
    assert _outputs(base) == _outputs(_convert(_pipeline(tmp_path / "plain", tiny_udpipe, frozenset(), None),
                                               "--workers", "1"))
    for size in range(len(STAGES) + 1):
        for changed in map(frozenset, itertools.combinations(STAGES, size)):
            name = "-".join(sorted(changed)) or "none"
            cache = tmp_path / f"cache-{name}"
            shutil.copytree(warm, cache)
            out = _convert(_pipeline(tmp_path / f"cached-{name}", tiny_udpipe, changed, cache), "--workers", "2")
            reference = _convert(_pipeline(tmp_path / f"ref-{name}", tiny_udpipe, changed, None), "--workers", "1")
            shards, files, manifests = _outputs(out)
            assert (shards, files, manifests) == _outputs(reference), name
            assert len(shards) >= 4 and "codes.bpe" in files and "vocab.src" in files
            reused = json.loads((out / "run.json").read_text())["reused"]["train"]
            pieces = reused["features"]["reused"] + reused["features"]["computed"]
            assert reused["filter"] == ({"reused": 0, "computed": pieces} if "filter" in changed
                                        else {"reused": pieces, "computed": 0}), name
            assert reused["bpe"] == ("computed" if changed & {"filter", "bpe"} else "reused"), name
            assert reused["features"]["reused"] == (pieces if not changed else 0), name
            assert "reused" not in json.loads((reference / "run.json").read_text())


def test_no_cache_and_stage_entries_in_cache_commands(tiny_udpipe, tmp_path):
    """--no-cache leaves the cache alone; `synprep cache` shows, checks and prunes each stage; a damaged stage
    entry is computed again (same shards)."""
    cache = tmp_path / "cache"
    first = _convert(_pipeline(tmp_path / "first", tiny_udpipe, frozenset(), cache), "--workers", "1")
    info = subprocess.run([str(BIN / "synprep"), "cache", "info", str(cache)], capture_output=True, text=True,
                          check=True).stdout
    for stage in STAGES:
        assert re.search(rf"stage \d+ \(\w+\): {stage} \[synprep [^]]+\]: [1-9]\d* entries", info), info
    before = (cache / "parses.sqlite").stat().st_mtime_ns
    none = _convert(_pipeline(tmp_path / "none", tiny_udpipe, frozenset(), cache), "--workers", "1", "--no-cache")
    assert "reused" not in json.loads((none / "run.json").read_text())
    assert (cache / "parses.sqlite").stat().st_mtime_ns == before
    with sqlite3.connect(cache / "parses.sqlite") as db:  # damage one features entry (a flipped byte)
        stage = db.execute("SELECT id FROM parsers WHERE description LIKE '%\"stage\": \"features\"%'").fetchone()[0]
        key, value = db.execute("SELECT key, value FROM entries WHERE parser = ? LIMIT 1", (stage,)).fetchone()
        db.execute("UPDATE entries SET value = ? WHERE parser = ? AND key = ?",
                   (bytes([value[0] ^ 1]) + value[1:], stage, key))
    verify = subprocess.run([str(BIN / "synprep"), "cache", "verify", str(cache)], capture_output=True, text=True)
    assert verify.returncode == 1 and ", 1 damaged" in verify.stdout
    again = _convert(_pipeline(tmp_path / "again", tiny_udpipe, frozenset(), cache), "--workers", "1")
    reused = json.loads((again / "run.json").read_text())["reused"]["train"]
    assert reused["features"]["computed"] == 1 and _outputs(again) == _outputs(first)
    assert "0 damaged" in subprocess.run([str(BIN / "synprep"), "cache", "verify", str(cache)], capture_output=True,
                                         text=True, check=True).stdout  # replaced
    prune = subprocess.run([str(BIN / "synprep"), "cache", "prune", str(cache), "--parser", "features"],
                           capture_output=True, text=True, check=True).stdout
    assert re.search(r": [1-9]\d* entries deleted", prune)
    pruned = _convert(_pipeline(tmp_path / "pruned", tiny_udpipe, frozenset(), cache), "--workers", "1")
    reused = json.loads((pruned / "run.json").read_text())["reused"]["train"]
    assert reused["features"]["reused"] == 0 and reused["bpe"] == "reused" and _outputs(pruned) == _outputs(first)


def test_two_converts_at_once_share_the_stage_caches(tiny_udpipe, tmp_path):
    """Two cold converts on one cache at once (both store every stage), then a third that reuses everything: the
    same outputs, a cache that verifies."""
    cache = tmp_path / "cache"
    paths = [_pipeline(tmp_path / f"at-once-{i}", tiny_udpipe, frozenset(), cache) for i in range(2)]
    running = [subprocess.Popen([str(BIN / "synprep"), "convert", str(path), "--workers", "1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for path in paths]
    for process in running:
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
    first, second = (_outputs(path.parent / "out") for path in paths)
    assert first == second
    third = _convert(_pipeline(tmp_path / "third", tiny_udpipe, frozenset(), cache), "--workers", "2")
    reused = json.loads((third / "train" / "manifest.json").read_text())["reused"]
    assert reused["bpe"] == "reused" and reused["features"]["computed"] == 0 and _outputs(third) == first
    verify = subprocess.run([str(BIN / "synprep"), "cache", "verify", str(cache)], capture_output=True, text=True)
    assert verify.returncode == 0 and "integrity ok" in verify.stdout and ", 0 damaged" in verify.stdout
