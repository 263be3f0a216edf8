"""convert as an incremental build: what is cached costs nothing (no parse pool, no parser model loaded when every
sentence is in the parse cache) and the splits share one pool of workers."""

from __future__ import annotations

import os
from pathlib import Path

from synprep.parse import ParserSpec
from synprep.parse import udpipe as udpipe_backend

from .conftest import cli_in_process
from .test_convert import shard_bytes
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
