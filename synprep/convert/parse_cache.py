"""A persistent cache of parsed sentences, shared by every `synprep convert` that names it: each distinct sentence
is parsed once across converts (a BPE sweep, another filter setting, a corpus that shares data with another).

The cache is a folder holding one SQLite database (`parses.sqlite`, WAL mode, stdlib sqlite3; beside it
`parses.sqlite.lock`, taken while a process sets the database up): many converts may read and write it at once
(readers never wait; writers take turns, one short transaction per piece), and only the driver of a convert opens
it (the workers parse what it misses), so it works with any engine.

Key: the parser (`parser_identity`: backend, the model's content hash, the options that change its output, the
library's version and FORMAT) and the exact text given to the parser (`treestore.text_key` of the line after
[normalize]). Value: what a phase-1 worker produces for the sentence (filter_parse: its CoNLL-U block
without sent_id and its JOINED flag, or the parser's error message, flagged ERROR), stored compactly: tokens,
heads and labels, from which the block is rebuilt with the text byte for byte (a block that would not be
rebuilt exactly is stored whole), deflated. Each entry carries an 8-byte digest of its parser, key and stored
bytes: an entry that does not match it or does not decode is damaged; it is never served (the convert parses the
sentence again and replaces it). A database SQLite cannot read is one error naming the file.

Size: a convert keeps the entries within `max_gb`, deleting the least recently used (an entry's `used` time,
refreshed at most hourly when a convert hits it) down to 90% of the limit; freed pages are reused, so the file
stops growing. `synprep cache` shows, checks and prunes a cache (`cache_info`, `verify_cache`, `prune_cache`).

The same database holds the stage caches of convert (synprep.convert.stage_cache): their producers are stages
instead of parsers (`producer`), their values deflated bytes (`get`, `put`), with the same digests and limit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..conllu import format_sentence, tree_to_sentence
from ..errors import InputError
from ..parse import ParserSpec
from ..shards import WriterLock
from ..textio import file_sha256, path_sha256
from ..trees import Tree
from .treestore import ERROR, JOINED

FORMAT = 1  # of an entry's value; part of every parser's identity (bump when what a worker produces changes)
SCHEMA = 1  # of the database's tables
FILE = "parses.sqlite"
SETUP_LOCK = FILE + ".lock"  # taken while a process sets the database up (a cache may share a dataset's folder)
DEFAULT_MAX_GB = 20.0
TOUCH_SECONDS = 3600  # a hit refreshes an entry's `used` time when it is older than this (fewer writes)
BUSY_MS = 120_000  # how long a writer waits for another convert's transaction
BATCH = 500  # keys per SELECT
TREE, BLOCK, MESSAGE = 0, 1, 2  # what a value holds: tokens/heads/labels, a whole block, a parser error
# A preset dictionary for deflate: the words every entry repeats (UD relations), so that short entries compress.
_ZDICT = (" ".join(f"{n}" for n in range(40, 0, -1)) + "\t" + "\t".join(
    "dislocated reparandum goeswith vocative discourse orphan list clf dep csubj:pass flat:foreign expl:pv "
    "obl:npmod nmod:tmod obl:tmod det:predet cc:preconj compound:prt iobj csubj nummod appos fixed parataxis "
    "xcomp ccomp expl acl acl:relcl advcl aux:pass nsubj:pass nmod:poss det:poss flat:name flat compound cop "
    "mark aux conj cc amod advmod obl obj nmod nsubj case det root punct".split())).encode()
_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS parsers(id INTEGER PRIMARY KEY, digest TEXT UNIQUE NOT NULL, description TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries(parser INTEGER NOT NULL, key BLOB NOT NULL, value BLOB NOT NULL,
    digest INTEGER NOT NULL, used INTEGER NOT NULL, PRIMARY KEY (parser, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_used ON entries(used);
CREATE TABLE IF NOT EXISTS totals(id INTEGER PRIMARY KEY CHECK (id = 0), entries INTEGER NOT NULL,
    value_bytes INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS entry_added AFTER INSERT ON entries BEGIN
    UPDATE totals SET entries = entries + 1, value_bytes = value_bytes + length(NEW.value) WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entry_deleted AFTER DELETE ON entries BEGIN
    UPDATE totals SET entries = entries - 1, value_bytes = value_bytes - length(OLD.value) WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entry_replaced AFTER UPDATE OF value ON entries BEGIN
    UPDATE totals SET value_bytes = value_bytes - length(OLD.value) + length(NEW.value) WHERE id = 0; END;
"""
# the tables, indexes and triggers the schema declares
OBJECTS = frozenset(re.findall(r"CREATE (TABLE|INDEX|TRIGGER) IF NOT EXISTS (\w+)", _SCHEMA_SQL))
FUTURE_SECONDS = 86_400  # an entry's `used` time may be this far ahead of the clock (another machine's clock)
ENTRY_BYTES = 64  # what an entry takes besides its value (key, digest, time, the index on time, B-tree cells)

Result = tuple[str, int]  # a worker's result for one sentence: (block without sent_id or error message, flags)


def _library_version(backend: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    names = {"udpipe": ["ufal.udpipe"], "spacy-udpipe": ["spacy-udpipe", "ufal.udpipe"], "stanza": ["stanza"],
             "spacy": ["spacy"]}[backend]
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} ?")
    return ", ".join(found)


def parser_identity(spec: ParserSpec) -> dict[str, Any]:
    """Everything that decides a parser's output for a line: the backend, its library's version, the model's
    content hash (stanza: the language's folder; an installed spaCy package: its name and version) and the
    options the backend uses. Two converts share entries exactly when these are equal."""
    if spec.backend == "stanza":
        assert spec.model_dir and spec.lang
        folder = os.path.join(spec.model_dir, spec.lang)
        model = {"name": os.path.basename(os.path.normpath(spec.model_dir)),
                 "sha256": path_sha256(folder if os.path.isdir(folder) else spec.model_dir)}
        resources = os.path.join(spec.model_dir, "resources.json")
        if os.path.isfile(resources):
            model["resources_sha256"] = file_sha256(resources)
    elif spec.model and os.path.exists(spec.model):
        model = {"name": os.path.basename(os.path.normpath(spec.model)), "sha256": path_sha256(spec.model)}
    else:  # an installed spaCy package
        from importlib.metadata import PackageNotFoundError, version

        try:
            model = {"name": spec.model or "", "package": version(spec.model or "")}
        except (PackageNotFoundError, ValueError):
            model = {"name": spec.model or "", "package": "?"}
    options: dict[str, Any] = {"pretokenized": spec.pretokenized}
    if spec.backend in ("stanza", "spacy-udpipe"):
        options["lang"] = spec.lang
    if spec.backend == "stanza":
        options["gpu"] = spec.gpu
    return {"format": FORMAT, "backend": spec.backend, "library": _library_version(spec.backend), "model": model,
            "options": options}


def _deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=_ZDICT)
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes) -> bytes:
    unpacker = zlib.decompressobj(-15, zdict=_ZDICT)
    out = unpacker.decompress(data) + unpacker.flush()
    if not unpacker.eof or unpacker.unused_data:
        raise ValueError("truncated or trailing data")
    return out


def _tree_block(text: str, tokens: list[str], heads: list[int], labels: list[str]) -> str:
    """The block a worker writes for a parsed line (filter_parse: `_parsed_trees`, then `_block`)."""
    return format_sentence(tree_to_sentence(Tree(tokens, heads, labels, None, text.strip())))


def _tree_payload(text: str, block: str) -> bytes | None:
    """A block as tokens, heads and labels, when it is rebuilt from them and the text byte for byte."""
    rows = block.split("\n")[1:-2]
    try:
        columns = [row.split("\t") for row in rows]
        tokens, heads, labels = [c[1] for c in columns], [int(c[6]) for c in columns], [c[7] for c in columns]
    except (IndexError, ValueError):
        return None
    if _tree_block(text, tokens, heads, labels) != block:
        return None
    return "\n".join(("\t".join(tokens), " ".join(map(str, heads)), "\t".join(labels))).encode("utf-8")


def encode_result(text: str, result: Result) -> bytes:
    """A worker's result for the line `text` as a cache value: kind, flags, deflated payload."""
    block, flags = result
    if flags & ERROR:
        kind, payload = MESSAGE, block.encode("utf-8")
    else:
        tree = _tree_payload(text, block)
        kind, payload = (TREE, tree) if tree is not None else (BLOCK, block.encode("utf-8"))
    return bytes((kind, flags)) + _deflate(payload)


def decode_result(text: str, value: bytes) -> Result:
    """The worker's result that `encode_result` stored for the line `text`; ValueError when it does not decode."""
    if len(value) < 2 or value[0] not in (TREE, BLOCK, MESSAGE) or value[1] & ~(ERROR | JOINED):
        raise ValueError("unknown kind or flags")
    kind, flags = value[0], value[1]
    try:
        payload = _inflate(value[2:]).decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as err:
        raise ValueError(str(err)) from None
    if (kind == MESSAGE) != bool(flags & ERROR):
        raise ValueError("kind and flags disagree")
    if kind != TREE:
        return payload, flags
    parts = payload.split("\n")
    if len(parts) != 3:
        raise ValueError("not tokens, heads and labels")
    tokens, heads, labels = parts[0].split("\t"), [int(h) for h in parts[1].split(" ")], parts[2].split("\t")
    if not len(tokens) == len(heads) == len(labels):
        raise ValueError("tokens, heads and labels differ in number")
    return _tree_block(text, tokens, heads, labels), flags


def entry_digest(parser: int, key: bytes, value: bytes) -> int:
    """The 8-byte check of an entry (as a signed SQLite integer)."""
    raw = hashlib.blake2b(parser.to_bytes(8, "little", signed=True) + key + value, digest_size=8).digest()
    return int.from_bytes(raw, "little", signed=True)


def entry_ok(parser: Any, key: Any, value: Any, digest: Any) -> bool:
    """Whether an entry's columns have their types and its digest matches (a damaged entry is never served)."""
    return (type(parser) is int and isinstance(key, bytes) and isinstance(value, bytes) and type(digest) is int
            and entry_digest(parser, key, value) == digest)


def used_ok(used: Any, now: int) -> bool:
    """Whether an entry's `used` time is a time at all (not before 1970, not a day ahead of the clock)."""
    return type(used) is int and 0 <= used <= now + FUTURE_SECONDS


def missing_objects(db: sqlite3.Connection) -> set[tuple[str, str]]:
    """The declared tables, indexes and triggers that the database lacks."""
    found = {(kind.upper(), name) for kind, name in db.execute("SELECT type, name FROM sqlite_master")}
    return set(OBJECTS) - found


def cache_file(folder: str) -> str:
    return os.path.join(folder, FILE)


@dataclass
class Lookup:
    """What the cache holds for some keys of one parser: the results, and the keys of damaged entries."""

    found: dict[bytes, Result] = field(default_factory=dict)
    damaged: set[bytes] = field(default_factory=set)


class ParseCache:
    """One open parse cache: its SQLite database (created: tables, WAL mode; a connection of this process, its
    methods callable from any thread), its totals, lookups and records, and its closing."""

    def __init__(self, folder: str, max_gb: float | None = DEFAULT_MAX_GB, create: bool = True,
                 read_only: bool = False) -> None:
        """`create`: make the folder and the database when missing; `read_only`: open the database for reading
        only (a cache on a read-only folder or mount is fine; in such a folder no process can write it, so it is
        read as immutable: SQLite then needs no -shm file beside it)."""
        self.folder = folder
        self.path = cache_file(folder)
        self.read_only = read_only
        self._lock = threading.Lock()
        self.max_bytes = None if max_gb is None else int(max_gb * 1e9)
        self._parsers: dict[ParserSpec, int] = {}
        if not create and not os.path.isfile(self.path):
            raise InputError("no parse cache here (made by `synprep convert --parse-cache DIR`)", folder)
        if create:
            if os.path.exists(folder) and not os.path.isdir(folder):
                raise InputError("the parse cache must be a folder, and this is a file", folder)
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as err:
                raise InputError(f"cannot make the parse cache folder: {err.strerror or err}", folder) from None
        # the workers are forked while this connection is open; they never use it (only this process does)
        if read_only:
            immutable = "&immutable=1" if not os.access(folder, os.W_OK) else ""
            target = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro{immutable}"
            with self._guard():
                self.db = sqlite3.connect(target, timeout=BUSY_MS / 1000, isolation_level=None,
                                          check_same_thread=False, uri=True)
                self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                missing = {name for kind, name in missing_objects(self.db) if kind == "TABLE"}
                if missing:
                    raise InputError(f"the parse cache is damaged: its table {', '.join(sorted(missing))} is missing "
                                     "(`synprep cache verify --repair` or a convert makes it again)", self.path)
                self._check_schema(write=False)
            return
        # Setting a new database up (WAL mode, the tables) is done by one process at a time: before WAL mode, two
        # converts that both write can deadlock, and SQLite then fails one at once ("database is locked") without
        # waiting for busy_timeout. Once set up, writers wait for each other (busy_timeout).
        setup = WriterLock(folder, "another synprep convert is setting up this parse cache", SETUP_LOCK)
        try:
            setup.acquire(wait=BUSY_MS / 1000)
        except OSError as err:
            raise InputError(f"the parse cache failed ({err.strerror or err}): is the folder writable and the disk "
                             "not full?", self.path) from None
        try:
            with self._guard():
                self.db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None,
                                          check_same_thread=False)
                self.db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
                if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self.db.execute("PRAGMA journal_mode = WAL")  # persistent: set once, by the first writer
                # WAL: never corrupt; a power cut may lose the last pieces
                self.db.execute("PRAGMA synchronous = NORMAL")
                missing = missing_objects(self.db)
                self.db.executescript(_SCHEMA_SQL)  # makes what is missing (a new database: everything)
                self._check_schema()
                if missing & {("TABLE", "entries"), ("TABLE", "totals")} or any(k == "TRIGGER" for k, _ in missing):
                    self.recount()  # the size limit's totals no longer follow the entries
        finally:
            setup.release()

    def _guard(self) -> _Guard:
        return _Guard(self)

    def _check_schema(self, write: bool = True) -> None:
        if write:
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        row = self.db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        schema = row[0] if row else None
        if schema is None:
            raise InputError("the parse cache is damaged: its schema record is missing (`synprep cache verify "
                             "--repair` or a convert writes it again)", self.path)
        if schema != str(SCHEMA):
            raise InputError(f"a parse cache of schema {schema}, this synprep reads schema {SCHEMA}: use another "
                             "folder", self.path)

    def size(self) -> tuple[int, int]:
        """(entries, their bytes: values and ENTRY_BYTES each), what the size limit counts (the file is larger:
        B-tree pages are partly filled, and deleted entries leave room that new ones reuse)."""
        row = self.db.execute("SELECT entries, value_bytes FROM totals WHERE id = 0").fetchone()
        if row is None or not all(type(n) is int and n >= 0 for n in row):  # missing or damaged: counted again
            row = self.recount()
        entries, value_bytes = row
        return entries, value_bytes + ENTRY_BYTES * entries

    def recount(self) -> tuple[int, int]:
        """(entries, value bytes) counted from the entries, and recorded as the totals unless read-only."""
        entries, value_bytes = self.db.execute("SELECT count(*), coalesce(sum(length(value)), 0) FROM "
                                               "entries").fetchone()
        if not self.read_only:
            self.db.execute("INSERT OR REPLACE INTO totals VALUES (0, ?, ?)", (entries, value_bytes))
        return entries, value_bytes

    def close(self) -> None:
        with self._lock:
            self.db.close()

    def parser(self, spec: ParserSpec) -> int:
        """The cache's id of a parser (its identity recorded the first time; the model hashed once per process)."""
        if spec not in self._parsers:
            self._parsers[spec] = self.producer(parser_identity(spec))
        return self._parsers[spec]

    def producer(self, identity: dict[str, Any]) -> int:
        """The cache's id of what makes a set of entries (a parser, or a stage of convert: `stage_cache`), from
        its identity (recorded the first time)."""
        description = json.dumps(identity, sort_keys=True)
        digest = hashlib.sha256(description.encode()).hexdigest()
        with self._guard(), self._lock:
            row = self.db.execute("SELECT id, description FROM parsers WHERE digest = ?", (digest,)).fetchone()
            if row is not None and row[1] == description and type(row[0]) is int:
                return row[0]
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute("SELECT id FROM parsers WHERE digest = ?", (digest,)).fetchone()
                if row is not None:  # its description damaged: written again
                    self.db.execute("UPDATE parsers SET description = ? WHERE id = ?", (description, row[0]))
                    producer = row[0]
                else:  # new; entries left under its id by a lost record of another producer are not its own
                    producer = self.db.execute("INSERT INTO parsers(digest, description) VALUES (?, ?)",
                                               (digest, description)).lastrowid
                    self.db.execute("DELETE FROM entries WHERE parser = ?", (producer,))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            return producer

    def get(self, producer: int, key: bytes) -> bytes | None:
        """A stage's value stored under `key` (inflated), None when missing or damaged (its digest does not match,
        it does not inflate: the stage is computed again and the entry replaced); a hit refreshes its use time."""
        with self._guard(), self._lock:
            row = self.db.execute("SELECT value, digest, used FROM entries WHERE parser = ? AND key = ?",
                                  (producer, key)).fetchone()
            if row is None:
                return None
            value, digest, used = row
            if not entry_ok(producer, key, value, digest):
                return None
            try:
                data = zlib.decompress(value)
            except zlib.error:
                return None
            now = int(time.time())
            if not used_ok(used, now) or used < now - TOUCH_SECONDS:
                self.db.execute("UPDATE entries SET used = ? WHERE parser = ? AND key = ?", (now, producer, key))
        return data

    def put(self, producer: int, key: bytes, data: bytes) -> None:
        """Store a stage's value (deflated) under `key`, replacing what was there; then keep the size limit."""
        value = zlib.compress(data, 1)
        with self._guard(), self._lock:
            self.db.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?) ON CONFLICT (parser, key) DO UPDATE SET "
                            "value = excluded.value, digest = excluded.digest, used = excluded.used",
                            (producer, key, value, entry_digest(producer, key, value), int(time.time())))
            if self.max_bytes is not None and self.size()[1] > self.max_bytes:
                self._evict(int(0.9 * self.max_bytes))

    def lookup(self, parser: int, texts: dict[bytes, str]) -> Lookup:
        """The stored results of these keys (key -> the line given to the parser) that decode and match their
        digest; the others are missing or damaged."""
        out = Lookup()
        keys = list(texts)
        with self._guard(), self._lock:
            for start in range(0, len(keys), BATCH):
                part = keys[start:start + BATCH]
                rows = self.db.execute(f"SELECT key, value, digest FROM entries WHERE parser = ? AND key IN "
                                       f"({','.join('?' * len(part))})", (parser, *part)).fetchall()
                for key, value, digest in rows:
                    try:
                        if key not in texts or not entry_ok(parser, key, value, digest):
                            raise ValueError("digest")
                        out.found[key] = decode_result(texts[key], value)
                    except ValueError:
                        out.damaged.add(key)
        return out

    def record(self, parser: int, parsed: Iterable[tuple[bytes, str, Result]], hits: Iterable[bytes]) -> None:
        """Store newly parsed results (key, the line, result; replacing a damaged entry of the key) and refresh
        the `used` time of hits; then keep the entries within the size limit."""
        now = int(time.time())
        rows = []
        for key, text, result in parsed:
            value = encode_result(text, result)
            rows.append((parser, key, value, entry_digest(parser, key, value), now))
        stale = [(now, parser, key, now - TOUCH_SECONDS, now + FUTURE_SECONDS) for key in hits]
        if not rows and not stale:
            return
        with self._guard(), self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?) ON CONFLICT (parser, key) DO UPDATE "
                                    "SET value = excluded.value, digest = excluded.digest, used = excluded.used", rows)
                self.db.executemany("UPDATE entries SET used = ? WHERE parser = ? AND key = ? AND NOT (typeof(used) = "
                                    "'integer' AND used BETWEEN ? AND ?)", stale)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            if self.max_bytes is not None and self.size()[1] > self.max_bytes:
                self._evict(int(0.9 * self.max_bytes))

    def _evict(self, target: int) -> int:
        """Delete the least recently used entries until their bytes are within `target` (or none is left);
        returns how many were deleted."""
        deleted = 0
        entries, size = self.size()
        while size > target and entries:
            count = max(1, int((size - target) / (size / entries)))
            removed = self.db.execute("DELETE FROM entries WHERE (parser, key) IN (SELECT parser, key FROM entries "
                                      "ORDER BY used LIMIT ?)", (count,)).rowcount
            if not removed:  # the totals counted entries that are not there
                self.recount()
            deleted += removed
            entries, size = self.size()
        return deleted


class _Guard:
    """SQLite failing on the cache's file (not a database, damaged, unwritable, disk full): one error naming it."""

    def __init__(self, cache: ParseCache) -> None:
        self.cache = cache

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, err: BaseException | None, trace: Any) -> None:
        if isinstance(err, sqlite3.Error):
            hint = ("damaged, or not a parse cache: move it away (a convert then starts an empty one), or see "
                    "`synprep cache verify`"
                    if isinstance(err, sqlite3.DatabaseError) and not isinstance(err, sqlite3.OperationalError)
                    else "is the folder writable and the disk not full?")
            raise InputError(f"the parse cache failed ({err}): {hint}", self.cache.path) from None


def _open_existing(folder: str, read_only: bool = False) -> ParseCache:
    return ParseCache(folder, None, create=False, read_only=read_only)


def _description(digest: Any, description: Any) -> dict[str, Any] | None:
    """A producer's recorded identity, None when its record is damaged (the digest is not that of the text, the
    text is not an identity)."""
    if not (isinstance(digest, str) and isinstance(description, str)
            and hashlib.sha256(description.encode("utf-8", "replace")).hexdigest() == digest):
        return None
    try:
        identity = json.loads(description)
    except ValueError:
        return None
    return identity if isinstance(identity, dict) else None


def _parser_digests(cache: ParseCache, damaged: list[int] | None = None) -> dict[int, tuple[str, dict[str, Any]]]:
    """The producers whose record is sound (id -> digest, identity); the ids of the others into `damaged`."""
    sound = {}
    for pid, digest, description in cache.db.execute("SELECT id, digest, description FROM parsers ORDER BY id"):
        identity = _description(digest, description)
        if identity is None:
            if damaged is not None:
                damaged.append(pid)
        else:
            sound[pid] = (digest, identity)
    return sound


def cache_info(folder: str) -> dict[str, Any]:
    """A cache's size and, per parser, its entries, stored bytes and last use."""
    cache = _open_existing(folder, read_only=True)
    try:
        with cache._guard():
            damaged: list[int] = []
            parsers = _parser_digests(cache, damaged)
            rows = cache.db.execute("SELECT parser, count(*), sum(length(value)), max(used) FROM entries "
                                    "GROUP BY parser").fetchall()
            used = cache.size()[1]
    finally:
        cache.close()
    counts = {pid: (n, size, last) for pid, n, size, last in rows}
    files = [cache.path + suffix for suffix in ("", "-wal", "-shm")]
    return {"path": cache.path, "file_bytes": sum(os.path.getsize(f) for f in files if os.path.isfile(f)),
            "data_bytes": used, "entries": sum(n for n, _, _ in counts.values()),
            "parsers": [{"id": pid, "digest": digest, **description, "entries": counts.get(pid, (0,))[0],
                         "value_bytes": counts.get(pid, (0, 0))[1] or 0, "last_used": counts.get(pid, (0, 0, None))[2]}
                        for pid, (digest, description) in parsers.items()]
            + [{"id": pid, "damaged": True, "entries": counts.get(pid, (0,))[0]} for pid in damaged]}


def verify_cache(folder: str, repair: bool = False) -> dict[str, Any]:
    """SQLite's integrity_check, then every entry: its digest matches and its value decodes. `repair` deletes
    the damaged entries (a convert would parse those sentences again anyway); without it, the database is only
    read."""
    from .stage_values import decode_value

    cache = _open_existing(folder, read_only=not repair)
    damaged: list[tuple[Any, Any]] = []
    producers: list[int] = []  # damaged producer records
    checked = value_bytes = 0
    now = int(time.time())
    try:
        with cache._guard():
            problems = [row[0] for row in cache.db.execute("PRAGMA integrity_check")]
            problems = [] if problems == ["ok"] else problems
            problems += [f"the {kind.lower()} {name} is missing" for kind, name in sorted(missing_objects(cache.db))]
            sound = _parser_digests(cache, producers)
            for parser, key, value, digest, used, size in cache.db.execute(
                    "SELECT parser, key, value, digest, used, length(value) FROM entries"):
                checked += 1
                value_bytes += size or 0
                try:  # an entry of no sound producer, of another type, not matching its digest, not decoding
                    if parser not in sound or not entry_ok(parser, key, value, digest) or not used_ok(used, now):
                        raise ValueError("damaged")
                    stage = sound[parser][1].get("stage")
                    if stage is not None:
                        decode_value(stage, zlib.decompress(value))
                    else:
                        decode_result("", value)
                except (ValueError, zlib.error):
                    damaged.append((parser, key))
            totals = cache.db.execute("SELECT entries, value_bytes FROM totals WHERE id = 0").fetchone()
            if repair:
                cache.db.executemany("DELETE FROM entries WHERE parser = ? AND key = ?", damaged)
                cache.db.executemany("DELETE FROM parsers WHERE id = ?", [(pid,) for pid in producers])
                cache.recount()
    finally:
        cache.close()
    # the size limit's totals (kept by triggers) against what they count
    wrong = None if totals == (checked, value_bytes) else "are missing" if totals is None else \
        f"said {totals[0]!r} entries of {totals[1]!r} bytes"
    return {"path": cache.path, "integrity": problems, "entries": checked, "damaged": len(damaged),
            "deleted": len(damaged) if repair else 0, "producers": len(producers), "repair": repair,
            "totals": None if wrong is None else f"the size limit's totals {wrong}" + (", recounted" if repair else "")}


def prune_cache(folder: str, max_gb: float | None = None, parser: str | None = None) -> dict[str, Any]:
    """Delete every entry of a parser or stage (`parser`: its id or a prefix of its digest, as `cache_info` shows,
    or a stage's name: every entry of that stage) and/or the least recently used entries down to `max_gb`; then
    VACUUM, so that the file shrinks."""
    if max_gb is not None and not (math.isfinite(max_gb) and max_gb >= 0):
        raise InputError(f"--max-gb must be a finite number of GB, at least 0, got {max_gb}")
    cache = _open_existing(folder)
    deleted = 0
    try:
        with cache._guard():
            if parser is not None:
                found = _parser_digests(cache).items()
                matches = [pid for pid, (_, description) in found if description.get("stage") == parser] or \
                    [pid for pid, (digest, _) in found if parser == str(pid) or digest.startswith(parser)]
                if len(matches) != 1 and not any(description.get("stage") == parser for _, (_, description) in found):
                    raise InputError(f"--parser {parser!r} matches {len(matches)} parsers of the cache (give its id "
                                     "or more of its digest, or a stage's name: see `synprep cache info`)",
                                     cache.path)
                for match in matches:
                    deleted += cache.db.execute("DELETE FROM entries WHERE parser = ?", (match,)).rowcount
            if max_gb is not None:
                deleted += cache._evict(int(max_gb * 1e9))
            before = os.path.getsize(cache.path)
            if deleted:
                cache.db.execute("VACUUM")
                cache.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        cache.close()
    return {"path": cache.path, "deleted": deleted, "file_bytes_before": before,
            "file_bytes": os.path.getsize(cache.path)}


def _size(count: int) -> str:
    return f"{count / 1e9:.2f} GB" if count >= 1e9 else f"{count / 1e6:.1f} MB" if count >= 1e6 else \
        f"{count / 1e3:.1f} kB"


def format_info(info: dict[str, Any]) -> str:
    """`synprep cache info`'s text."""
    lines = [f"{info['path']}: {info['entries']} entries, {_size(info['data_bytes'])} in use, "
             f"{_size(info['file_bytes'])} on disk"]
    for parser in info["parsers"]:
        last = time.strftime("%Y-%m-%d %H:%M", time.gmtime(parser["last_used"])) if parser["last_used"] else "-"
        if parser.get("damaged"):
            lines.append(f"  record {parser['id']}: damaged ({parser['entries']} entries; `synprep cache verify "
                         "--repair` deletes them)")
            continue
        if "stage" in parser:  # a stage of convert (stage_cache)
            lines.append(f"  stage {parser['id']} ({parser['digest'][:12]}): {parser['stage']} "
                         f"[synprep {parser['synprep']}]: {parser['entries']} entries, "
                         f"{_size(parser['value_bytes'])} of values, last used {last} UTC")
            continue
        model = parser["model"]
        lines.append(f"  parser {parser['id']} ({parser['digest'][:12]}): {parser['backend']} "
                     f"{model.get('name', '')} sha256 {str(model.get('sha256', model.get('package')))[:12]} "
                     f"{json.dumps(parser['options'], sort_keys=True)} [{parser['library']}]: {parser['entries']} "
                     f"entries, {_size(parser['value_bytes'])} of values, last used {last} UTC")
    return "\n".join(lines)


def format_verify(report: dict[str, Any]) -> str:
    """`synprep cache verify`'s text."""
    integrity = "integrity ok" if not report["integrity"] else "integrity_check: " + "; ".join(report["integrity"][:5])
    repaired = f", {report['deleted']} deleted" if report["deleted"] else ""
    totals = f"; {report['totals']}" if report["totals"] else ""
    if report.get("producers"):
        totals += (f"; {report['producers']} damaged parser or stage records"
                   + (", deleted" if report["repair"] else ""))
    return (f"{report['path']}: {integrity}; {report['entries']} entries checked, {report['damaged']} damaged"
            f"{repaired}{totals}")


def format_prune(report: dict[str, Any]) -> str:
    """`synprep cache prune`'s text."""
    return (f"{report['path']}: {report['deleted']} entries deleted, {_size(report['file_bytes_before'])} -> "
            f"{_size(report['file_bytes'])}")
