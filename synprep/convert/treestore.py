"""Where the tree of each distinct sentence lies: `synprep convert` parses every distinct parser input once.

A key is a 128-bit BLAKE2b digest of the exact text given to the parser (one store per side: the sides have
their own parsers). A location says which piece of the work folder holds the sentence's CoNLL-U block and where
(byte offset and length), with flags: the parser joined several sentences, the block is in the piece's spare file
(parsed, but its pair was rejected for the other side's tree), or the parse failed (the message is kept apart:
rare). Memory stays bounded at millions of sentences: keys and locations live in sorted numpy arrays (32 bytes
per distinct sentence); new entries wait in a small dict and are merged in batches.
"""

from __future__ import annotations

import hashlib

import numpy as np

LOCATION = np.dtype([("piece", "<i4"), ("offset", "<i8"), ("length", "<i4"), ("flags", "u1")])
KEY_BYTES = 16
JOINED, SPARE, ERROR = 1, 2, 4  # location flags
MERGE_EVERY = 1 << 18  # pending entries merged into the sorted arrays at once


def text_key(text: str) -> bytes:
    """The store key of a parser input."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


class TreeStore:
    """Key -> location (a `LOCATION` record) for one side; the first entry of a key wins."""

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=f"S{KEY_BYTES}")
        self._locations = np.empty(0, dtype=LOCATION)
        self._pending: dict[bytes, tuple[int, int, int, int]] = {}
        self.errors: dict[bytes, str] = {}  # the parser's message for keys flagged ERROR

    def __len__(self) -> int:
        return len(self._keys) + len(self._pending)

    def find(self, key: bytes) -> tuple[int, int, int, int] | None:
        """(piece, offset, length, flags) of a key, or None."""
        found = self._pending.get(key)
        if found is not None or not len(self._keys):
            return found
        index = int(np.searchsorted(self._keys, key))
        if index < len(self._keys) and self._keys[index] == key.rstrip(b"\0"):  # numpy drops trailing NULs
            record = self._locations[index]
            return int(record["piece"]), int(record["offset"]), int(record["length"]), int(record["flags"])
        return None

    def add(self, key: bytes, location: tuple[int, int, int, int], error: str | None = None) -> None:
        """Record a key's location (ignored if the key is known)."""
        if self.find(key) is not None:
            return
        self._pending[key] = location
        if error is not None:
            self.errors[key] = error
        if len(self._pending) >= MERGE_EVERY:
            self._merge()

    def add_array(self, entries: np.ndarray) -> None:
        """Entries as saved by `entries_array` (a resumed run reads the finished pieces' entries)."""
        for record in entries:
            self.add(bytes(record["key"]).ljust(KEY_BYTES, b"\0"),
                     (int(record["piece"]), int(record["offset"]), int(record["length"]), int(record["flags"])))

    def _merge(self) -> None:
        keys = np.array(list(self._pending), dtype=f"S{KEY_BYTES}")
        locations = np.array(list(self._pending.values()), dtype=LOCATION)
        order = np.argsort(keys, kind="stable")
        keys, locations = keys[order], locations[order]
        at = np.searchsorted(self._keys, keys)
        self._keys = np.insert(self._keys, at, keys)
        self._locations = np.insert(self._locations, at, locations)
        self._pending = {}


ENTRY = np.dtype([("key", f"S{KEY_BYTES}"), ("piece", "<i4"), ("offset", "<i8"), ("length", "<i4"),
                  ("flags", "u1")])


def entries_array(entries: list[tuple[bytes, tuple[int, int, int, int]]]) -> np.ndarray:
    """A piece's new store entries as one array (saved next to the piece: resume rebuilds the store)."""
    return np.array([(key, *location) for key, location in entries], dtype=ENTRY)
