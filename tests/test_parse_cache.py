"""The parse cache shared by converts: a warm cache gives the shards of a run without it, byte for byte, while the
workers parse nothing; entries are compact, bounded in size (least recently used go first), inspected and pruned
by `synprep cache`. Damaged caches: tests/test_faults_parse_cache.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from synprep.convert.parse_cache import (
    BLOCK,
    MESSAGE,
    TREE,
    ParseCache,
    decode_result,
    encode_result,
    prune_cache,
)
from synprep.convert.treestore import ERROR, JOINED, text_key

from .test_convert import BIN, convert, shard_bytes, write_pipeline


def pipeline(folder: Path, models, symbols: int = 200, cache: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_pipeline(folder, models, extra=f'[parse]\ncache = "{cache}"' if cache else "")
    path.write_text(path.read_text().replace("symbols = 200", f"symbols = {symbols}"))
    return path


def sentences(out: Path) -> dict:
    return {split: json.loads((out / split / "manifest.json").read_text())["sentences"] for split in ("train", "test")}


def test_warm_cache_same_shards_nothing_parsed(parse_cache_runs, tiny_udpipe, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(parse_cache_runs / "cache", cache)
    warm = pipeline(tmp_path / "warm", tiny_udpipe)  # the reference configuration, the cache given by the flag
    result = convert(warm, "--workers", "1", "--parse-cache", cache)
    reference = parse_cache_runs / "plain" / "out"
    assert shard_bytes(tmp_path / "warm" / "out") == shard_bytes(reference) and len(shard_bytes(reference)) >= 4
    convert(pipeline(tmp_path / "cold", tiny_udpipe, cache=str(tmp_path / "new-cache")), "--workers", "1")
    outs = (tmp_path / "cold" / "out", tmp_path / "warm" / "out", reference)
    for split in ("train", "test"):  # same input and configuration: the same manifest, cache or not
        manifests = [(out / split / "manifest.json").read_bytes() for out in outs]
        assert manifests[0] == manifests[1] == manifests[2], split
    plain = sentences(reference)
    cold, hot = (json.loads((out / "run.json").read_text())["parse_cache"] for out in outs[:2])
    assert "parse_cache" not in json.loads((reference / "run.json").read_text())
    for split in plain:
        for side, counts in plain[split].items():
            assert set(counts) == {"distinct", "repeated"}
            assert cold[split][side] == {"cache_hits": 0, "cache_misses": counts["distinct"], "cache_damaged": 0}
            assert hot[split][side] == {"cache_hits": counts["distinct"], "cache_misses": 0, "cache_damaged": 0}
    assert "parse cache: " in result.stdout and " 0 parsed and stored" in result.stdout
    resumed = convert(warm, "--workers", "1", "--parse-cache", cache, "--resume")  # a finished run: its summary
    assert " 0 parsed and stored" in resumed.stdout, resumed.stdout
    run = json.loads((tmp_path / "warm" / "out" / "run.json").read_text())
    assert run["seconds"]["train"].get("parse", 0) < 0.05  # no worker parsed a line (the parse stage's overhead)
    # one entry per distinct sentence of each side over the splits, under one parser per side
    info = subprocess.run([str(BIN / "synprep"), "cache", "info", str(cache)], capture_output=True, text=True,
                          check=True).stdout
    for side in ("src", "tgt"):
        distinct = sum(plain[split][side]["distinct"] for split in plain)
        assert f": {distinct} entries" in info.split(" parser ")[1 if side == "src" else 2]


def test_codec_round_trip_and_compact(tiny_udpipe):
    """Every parsed line comes back as the worker's block; values are several times smaller than blocks."""
    from synprep.convert.filter_parse import parse_lines
    from synprep.parse import ParserSpec

    from .conftest import SAMPLE_DATA

    lines = (SAMPLE_DATA / "parallel" / "train.en").read_text().splitlines()[:30] + ["  padded  line ", ""]
    results = parse_lines((ParserSpec("udpipe", tiny_udpipe("en")).load(), None), (lines, []))["sides"][0]
    values = [encode_result(line, result) for line, result in zip(lines, results)]
    assert [decode_result(line, value) for line, value in zip(lines, values)] == results
    assert [v[0] for v in values[:-1]] == [TREE] * (len(lines) - 1) and values[-1][0] == MESSAGE  # "" fails to parse
    assert 3 * sum(map(len, values)) < sum(len(block.encode()) for block, _ in results)
    # a block that tokens, heads and labels would not rebuild (a head written "01") is stored whole
    block = "# text = a b\n1\ta\t_\t_\t_\t_\t0\troot\t_\t_\n2\tb\t_\t_\t_\t_\t01\tdep\t_\t_\n\n"
    assert encode_result("a b", (block, JOINED))[0] == BLOCK
    assert decode_result("a b", encode_result("a b", (block, JOINED))) == (block, JOINED)
    assert decode_result("x", encode_result("x", ("empty sentence", ERROR))) == ("empty sentence", ERROR)


def _fill(cache: ParseCache, parser: int, first: int, count: int) -> list[bytes]:
    keys = [text_key(f"line {i}") for i in range(first, first + count)]
    block = "# text = {}\n" + "".join(f"{k}\tw{k}\t_\t_\t_\t_\t{k - 1}\tdep\t_\t_\n" for k in range(1, 40)) + "\n"
    cache.record(parser, [(key, f"line {first + i}", (block.format(f"line {first + i}"), 0))
                          for i, key in enumerate(keys)], [])
    return keys


def test_size_limit_evicts_least_recently_used_and_prune(tmp_path, tiny_udpipe):
    from synprep.parse import ParserSpec

    cache = ParseCache(str(tmp_path / "c"), max_gb=None)
    en, de = (cache.parser(ParserSpec("udpipe", tiny_udpipe(lang))) for lang in ("en", "de"))
    old = _fill(cache, en, 0, 2000)
    cache.db.execute("UPDATE entries SET used = used - 86400")  # written two days ago
    new = _fill(cache, en, 2000, 2000)
    _fill(cache, de, 0, 100)
    cache.db.execute("UPDATE entries SET used = used - 86400")  # and a day ago
    full = cache.size()[1]
    cache.record(en, [], old[:100])  # a hit refreshes an old entry's `used` time
    cache.max_bytes = full // 2
    cache.record(en, [], new[:1])  # over the limit: the least recently used go, down to 90% of it
    assert cache.size()[1] <= 0.9 * full // 2
    kept = {name: len(cache.lookup(en, {key: f"line {first + i}" for i, key in enumerate(keys)}).found)
            for name, first, keys in (("refreshed", 0, old[:100]), ("old", 100, old[100:]), ("new", 2000, new))}
    assert kept["refreshed"] == 100 and kept["old"] == 0 and 1000 < kept["new"] < 2000
    cache.close()
    report = prune_cache(str(tmp_path / "c"), parser="2")  # by the parser's id
    assert report["deleted"] == 100 and report["file_bytes"] <= report["file_bytes_before"]
    report = prune_cache(str(tmp_path / "c"), max_gb=0)
    assert report["file_bytes"] < 64 * 1024
