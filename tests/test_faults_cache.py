"""A generator over the parse cache's and the stage caches' database, derived from its declared schema
(`parse_cache._SCHEMA_SQL`, read back through SQLite: every table, column, index and trigger), so that a new
table or column is covered without a new test. Each column of each table damaged (NULL where the schema allows
it, another type, garbage bytes, an impossible value), a row missing, a table, index or trigger missing, and an
entry whose value passes its digest but does not decode: the next convert gives the shards of a convert without
a cache (what is damaged is computed again, never used) or refuses in one line, and `synprep cache verify`
reports it (a missing entry is a plain miss: nothing to report); never a traceback.

One warm cache (a sample convert: parses of both sides, and the filter, BPE and features stages) is copied per
case; the damage is applied to one row of every producer (each parser and each stage) or of the table."""

from __future__ import annotations

import shutil
import sqlite3
import zlib
from pathlib import Path

import pytest

from synprep.convert.parse_cache import _SCHEMA_SQL, entry_digest
from tests.conftest import cli_in_process

from .test_incremental import _outputs
from .test_parse_cache import pipeline


def _schema() -> tuple[dict[str, list[tuple[str, str, bool]]], list[tuple[str, str]]]:
    """{table: [(column, declared type, NOT NULL)]} and [(kind, name)] of the indexes and triggers, as SQLite
    reads the declared schema."""
    db = sqlite3.connect(":memory:")
    db.executescript(_SCHEMA_SQL)
    objects = db.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()
    tables = {name: [(row[1], row[2].upper(), bool(row[3] or row[5])) for row in
                     db.execute(f"PRAGMA table_info({name})")] for kind, name in objects if kind == "table"}
    db.close()
    return tables, [(kind, name) for kind, name in objects if kind != "table"]


TABLES, OTHERS = _schema()
GARBAGE = bytes(range(251, 256)) + b"\x00\x01garbage\xff"


def _values(kind: str, not_null: bool) -> list[tuple[str, object]]:
    """The damages of a column of this declared type."""
    values: list[tuple[str, object]] = [] if not_null else [("null", None)]
    values.append(("garbage bytes", GARBAGE))
    if kind == "INTEGER":
        values += [("another type", "x"), ("negative", -1), ("huge", 2**62)]
    elif kind == "TEXT":
        values += [("another type", 7.5), ("empty", ""), ("wrong length", "abc")]
    else:  # BLOB
        values += [("another type", "text"), ("empty", b"")]
    return values


def _cases() -> list:
    cases = []
    for table, columns in TABLES.items():
        for column, kind, not_null in columns:
            cases += [(table, column, how, value) for how, value in _values(kind, not_null)]
        cases.append((table, "", "row missing", None))
        cases.append((table, "", "table missing", None))
    cases += [(name, "", f"{kind} missing", None) for kind, name in OTHERS]
    cases.append(("entries", "value", "undecodable with a matching digest", GARBAGE))
    return [pytest.param(*case, id=f"{case[0]}.{case[1]}-{case[2]}".replace(".-", "-")) for case in cases]


def _rows(db: sqlite3.Connection, table: str) -> list[dict[str, object]]:
    """The rows a case damages: one entry of each producer, else the table's first row (their primary keys)."""
    if table == "entries":
        return [{"parser": parser, "key": key} for parser, key in
                db.execute("SELECT parser, min(key) FROM entries GROUP BY parser")]
    keys = [column for column, _, _ in TABLES[table]][:1]
    return [dict(zip(keys, db.execute(f"SELECT {keys[0]} FROM {table} ORDER BY 1 LIMIT 1").fetchone()))]


def _damage(path: Path, table: str, column: str, how: str, value: object) -> int:
    """Apply a case to the database; returns how many rows it changed."""
    db = sqlite3.connect(path)
    changed = 0
    try:
        if how.endswith(" missing") and how != "row missing":
            db.execute(f"DROP {how.split()[0].upper()} {table}")
            return 1
        for row in _rows(db, table):
            where = " AND ".join(f"{k} = ?" for k in row)
            if how == "row missing":
                changed += db.execute(f"DELETE FROM {table} WHERE {where}", tuple(row.values())).rowcount
                continue
            if how.startswith("undecodable"):  # a stage's value inflates, a parse's kind and flags are read
                stage = "stage" in str(db.execute("SELECT description FROM parsers WHERE id = ?", (row["parser"],))
                                       .fetchone())
                value = zlib.compress(GARBAGE) if stage else b"\x00\x00" + GARBAGE
                db.execute("UPDATE entries SET value = ?, digest = ? WHERE parser = ? AND key = ?",
                           (value, entry_digest(row["parser"], row["key"], value), row["parser"], row["key"]))
                changed += 1
                continue
            try:
                changed += db.execute(f"UPDATE {table} SET {column} = ? WHERE {where}",
                                      (value, *row.values())).rowcount
            except sqlite3.IntegrityError:  # the schema itself keeps it out (a CHECK, a unique key)
                pass
        return changed
    finally:
        db.commit()
        db.close()


@pytest.fixture(scope="module")
def warm(tmp_path_factory, tiny_udpipe) -> tuple[Path, Path, tuple]:
    """A cache warm for the sample pipeline, and the outputs of a convert of it without a cache."""
    root = tmp_path_factory.mktemp("cache_gen")
    code, err = cli_in_process("synprep", ["convert", pipeline(root / "plain", tiny_udpipe), "--workers", "1"])
    assert code == 0, err
    code, err = cli_in_process("synprep", ["convert", pipeline(root / "warm", tiny_udpipe, cache=str(root / "cache")),
                                           "--workers", "1"])
    assert code == 0, err
    return root / "cache", root / "warm" / "pipeline.toml", _outputs(root / "plain" / "out")


@pytest.mark.parametrize("table, column, how, value", _cases())
def test_every_cache_table_and_column_damaged(warm, tmp_path, table, column, how, value):
    source, pipeline_file, reference = warm
    cache = tmp_path / "cache"
    shutil.copytree(source, cache)
    if not _damage(cache / "parses.sqlite", table, column, how, value):
        pytest.skip("the schema keeps this value out")
    code, err = cli_in_process("synprep", ["cache", "verify", cache])
    assert "Traceback" not in err and (code == 0) == (how == "row missing" and table == "entries"), (code, err)
    if code == 2:
        assert err.count("\n") == 1 and "parses.sqlite" in err, err
    out = tmp_path / "out"
    code, err = cli_in_process("synprep", ["convert", pipeline_file, "--output", out, "--parse-cache", cache,
                                           "--workers", "1"])
    assert "Traceback" not in err, err
    if code == 0:
        assert _outputs(out) == reference
    else:
        assert code == 2 and err.count("\n") == 1 and "parses.sqlite" in err and not out.exists(), err
