"""One reader of shard files: synprep/shards.py opens every Arrow stream of a shard (validate counts a shard's
record batches through `count_batches`); no other module of synprep or syntrain opens one."""

from __future__ import annotations

import ast

import pyarrow as pa
import pytest

from synprep.errors import InputError
from synprep.shards import count_batches

from .conftest import REPO

OPENERS = {"open_stream", "open_file", "memory_map", "RecordBatchStreamReader", "RecordBatchFileReader"}
# modules that open an Arrow stream that is no shard file, and why
ALLOWED = {"syntrain/arrow.py": "in_memory copies a table through an in-memory buffer"}


def openers(source: str) -> list[str]:
    """The Arrow stream openers a module calls (read from its syntax tree)."""
    return sorted({node.func.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
                   and isinstance(node.func, ast.Attribute) and node.func.attr in OPENERS})


def test_only_the_shard_module_opens_arrow_streams():
    found = {str(path.relative_to(REPO)): openers(path.read_text(encoding="utf-8"))
             for package in ("synprep", "syntrain") for path in sorted((REPO / package).rglob("*.py"))}
    opening = {path: calls for path, calls in found.items() if calls}
    assert set(opening) == {"synprep/shards.py", *ALLOWED}, opening
    assert openers("import pyarrow as pa\nn = sum(1 for _ in pa.ipc.open_stream(pa.memory_map(p)))\n") == [
        "memory_map", "open_stream"]


def test_count_batches_counts_and_refuses_in_one_line(tmp_path):
    table = pa.table({"id": list(range(10))})
    path = tmp_path / "part-00000.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=4)
    assert count_batches(str(path)) == 3
    broken = tmp_path / "broken.arrow"
    broken.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(InputError, match="unreadable shard") as refused:
        count_batches(str(broken))
    assert str(broken) in str(refused.value) and "\n" not in str(refused.value)
