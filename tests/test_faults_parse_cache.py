"""Faults of the parse cache: damaged entries are parsed again (never served: the shards stay the same), a file
that is not a cache is one error line, many processes writing one cache at once (with evictions) leave it whole,
and many setting up one new cache at once all succeed."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from synprep.convert import parse_cache
from synprep.convert.parse_cache import SETUP_LOCK, ParseCache, verify_cache
from synprep.convert.treestore import text_key
from synprep.errors import InputError
from synprep.shards import WriterLock

from .test_convert import BIN, convert, shard_bytes
from .test_parse_cache import pipeline


def synprep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "synprep"), *map(str, args)], capture_output=True, text=True)


def test_damaged_entries_parsed_again_same_shards(parse_cache_runs, tmp_path, tiny_udpipe):
    cache = tmp_path / "cache"
    shutil.copytree(parse_cache_runs / "cache", cache)
    db = sqlite3.connect(cache / "parses.sqlite")
    rows = db.execute("SELECT parser, key, value FROM entries WHERE parser IN (SELECT id FROM parsers WHERE "
                      "description NOT LIKE '%\"stage\"%') ORDER BY key LIMIT 3").fetchall()  # parses, not stages
    flipped = bytes([rows[0][2][0], rows[0][2][1]]) + bytes(b ^ 1 for b in rows[0][2][2:])
    db.execute("UPDATE entries SET value = ? WHERE parser = ? AND key = ?", (flipped, rows[0][0], rows[0][1]))
    db.execute("UPDATE entries SET value = ? WHERE parser = ? AND key = ?", (rows[2][2], rows[1][0], rows[1][1]))
    db.commit()
    db.close()
    checked = synprep("cache", "verify", cache)
    assert checked.returncode == 1 and ", 2 damaged" in checked.stdout, checked.stdout + checked.stderr
    again = pipeline(tmp_path / "again", tiny_udpipe)
    result = convert(again, "--workers", "2", "--parse-cache", cache)
    assert shard_bytes(tmp_path / "again" / "out") == shard_bytes(parse_cache_runs / "plain" / "out")
    assert "(2 damaged entries parsed again)" in result.stdout and ", 2 parsed and stored" in result.stdout
    checked = synprep("cache", "verify", cache)  # replaced by the new parses
    assert checked.returncode == 0 and "integrity ok" in checked.stdout and ", 0 damaged" in checked.stdout


def test_not_a_cache_is_one_line(tmp_path, tiny_udpipe):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "parses.sqlite").write_bytes(b"not sqlite at all\n" * 200)
    path = pipeline(tmp_path / "p", tiny_udpipe, cache=str(folder))
    for result in (convert(path, "--workers", "1", check=False), synprep("cache", "info", folder),
                   synprep("cache", "verify", folder)):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and "parses.sqlite: the parse cache failed" in result.stderr
    assert not (tmp_path / "p" / "out").exists()  # refused before any work
    result = synprep("cache", "info", tmp_path / "nothing")
    assert result.returncode == 2 and "no parse cache here" in result.stderr


PRODUCER = {"backend": "test"}  # the parser of the entries these tests write (recorded: verify checks it)


def _writer(folder: str, worker: int) -> None:
    """Record overlapping entries in small batches, look them up, under a size limit that evicts."""
    cache = ParseCache(folder, max_gb=20_000 * 1e-9)
    parser = cache.producer(PRODUCER)
    block = "# text = {}\n1\t{}\t_\t_\t_\t_\t0\troot\t_\t_\n\n"
    for start in range(0, 600, 20):
        texts = {text_key(f"s{i}"): f"s{i}" for i in range(start + 7 * worker, start + 7 * worker + 40)}
        found = cache.lookup(parser, texts)
        assert not found.damaged and all(result[0] == block.format(texts[k], texts[k]) for k, result in
                                         found.found.items())
        cache.record(parser, [(k, t, (block.format(t, t), 0)) for k, t in texts.items() if k not in found.found],
                     found.found)
    cache.close()


def test_concurrent_writers_with_evictions(tmp_path):
    folder = str(tmp_path / "cache")
    ParseCache(folder).close()
    context = multiprocessing.get_context("fork")  # no connection is open here
    processes = [context.Process(target=_writer, args=(folder, worker)) for worker in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * 4
    report = verify_cache(folder)
    assert report["integrity"] == [] and report["damaged"] == 0 and 0 < report["entries"] < 300
    cache = ParseCache(folder)
    assert cache.size()[1] <= 20_000
    cache.close()
    assert Path(folder, "parses.sqlite").stat().st_size < 400_000


def _fresh_writer(folder: str, start: multiprocessing.synchronize.Barrier, failures: multiprocessing.Queue) -> None:
    """Open a cache that may not exist yet at the same moment as others, then record entries."""
    start.wait()
    try:
        cache = ParseCache(folder)
        _writer_entries(cache, 0, 20)
        cache.close()
    except Exception as err:  # reported to the test, which names it
        failures.put(f"{type(err).__name__}: {err}")


def test_converts_that_set_up_one_new_cache_at_once_all_succeed(tmp_path):
    """Several converts naming one new cache folder at once: before WAL mode is set, SQLite fails one of two writers
    at once ("database is locked", no busy wait) when their locks would deadlock; setting the database up under a
    folder lock leaves every one of them working (without it, about one round in five failed with four processes)."""
    context = multiprocessing.get_context("fork")
    failures = context.Queue()
    for round_ in range(25):
        folder = str(tmp_path / f"cache{round_}")
        start = context.Barrier(5)
        processes = [context.Process(target=_fresh_writer, args=(folder, start, failures)) for _ in range(5)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
        assert [p.exitcode for p in processes] == [0] * 5
        assert failures.empty(), f"round {round_}: {failures.get()}"
        assert verify_cache(folder)["entries"] == 20


def _hold_lock(folder: str, held: multiprocessing.synchronize.Event, done: multiprocessing.synchronize.Event) -> None:
    WriterLock(folder, "a test", SETUP_LOCK).acquire()
    held.set()
    done.wait(60)


def test_a_setup_lock_that_is_never_given_back_ends_in_one_error(tmp_path, monkeypatch):
    """A convert waits only so long (BUSY_MS) for another to set the cache up: a stopped holder would otherwise
    hang it."""
    context = multiprocessing.get_context("fork")
    held, done = context.Event(), context.Event()
    holder = context.Process(target=_hold_lock, args=(str(tmp_path), held, done))
    holder.start()
    try:
        assert held.wait(30)
        monkeypatch.setattr(parse_cache, "BUSY_MS", 300)
        with pytest.raises(InputError, match=r"setting up this parse cache \(pid \d+ .*\) for 0.3 s: wait for it"):
            ParseCache(str(tmp_path))
    finally:
        done.set()
        holder.join(30)


def _killed_mid_transaction(folder: str) -> None:
    """Store entries, then die by SIGKILL inside the next write transaction (after its inserts, before COMMIT)."""
    import os
    import signal

    cache = ParseCache(folder)
    _writer_entries(cache, 0, 30)
    cache.db.execute("BEGIN IMMEDIATE")
    cache.db.executemany("INSERT INTO entries VALUES (1, ?, x'00', 0, 0)", [(text_key(f"k{i}"),) for i in range(50)])
    os.kill(os.getpid(), signal.SIGKILL)


def _writer_entries(cache: ParseCache, first: int, count: int) -> None:
    block = "# text = {}\n1\t{}\t_\t_\t_\t_\t0\troot\t_\t_\n\n"
    cache.record(cache.producer(PRODUCER), [(text_key(f"s{i}"), f"s{i}", (block.format(f"s{i}", f"s{i}"), 0))
                     for i in range(first, first + count)], [])


def test_kill_inside_a_write_leaves_the_cache_whole(tmp_path):
    folder = str(tmp_path / "cache")
    process = multiprocessing.get_context("fork").Process(target=_killed_mid_transaction, args=(folder,))
    process.start()
    process.join(60)
    assert process.exitcode == -9
    report = verify_cache(folder)  # the killed transaction rolled back: 30 entries, totals consistent
    assert report["integrity"] == [] and report["damaged"] == 0 and report["entries"] == 30
    cache = ParseCache(folder)
    _writer_entries(cache, 30, 10)  # and the cache takes writes again
    assert cache.size()[0] == 40
    cache.close()


def test_info_and_verify_read_a_cache_on_a_read_only_mount(parse_cache_runs, tmp_path):
    """Before: both refused it ("is the folder writable"): the read-only commands opened the database as a
    writer. A read-only bind mount of a copy (root only: mount)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a read-only folder")
    cache = tmp_path / "cache"
    shutil.copytree(parse_cache_runs / "cache", cache)
    subprocess.run(["mount", "--bind", "-o", "ro", str(cache), str(cache)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(cache)], check=True)
        assert not os.access(cache, os.W_OK) or _write_refused(cache)
        info = synprep("cache", "info", cache)
        assert info.returncode == 0 and " entries, " in info.stdout, info.stderr
        checked = synprep("cache", "verify", cache)
        assert checked.returncode == 0 and "integrity ok" in checked.stdout, checked.stderr
        repaired = synprep("cache", "verify", "--repair", cache)  # a writer: one line naming the cache
        assert repaired.returncode == 2 and repaired.stderr.count("\n") == 1, repaired.stderr
        assert str(cache / "parses.sqlite") in repaired.stderr and "Traceback" not in repaired.stderr
    finally:
        subprocess.run(["umount", str(cache)], check=True)


def _write_refused(folder: Path) -> bool:
    try:
        (folder / "probe").write_text("x")
    except OSError:
        return True
    return False


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_prune_max_gb_must_be_finite(parse_cache_runs, tmp_path, value):
    """Before: nan and inf were a ValueError / OverflowError traceback."""
    cache = tmp_path / "cache"
    shutil.copytree(parse_cache_runs / "cache", cache)
    result = synprep("cache", "prune", cache, "--max-gb", value)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "--max-gb" in result.stderr, result.stderr
