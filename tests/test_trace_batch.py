"""docs/switches-api.md quotes what benchmarks/trace_batch.py measures of one training batch (files entered,
returns into a file entered already), and a batch enters at most twelve files."""

from __future__ import annotations

import importlib.util
import re

from .conftest import REPO


def load_script():
    spec = importlib.util.spec_from_file_location("trace_batch", REPO / "benchmarks" / "trace_batch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_guide_quotes_the_traced_figures():
    result = load_script().trace(3, {"pascal_heads": [2]})
    page = (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")
    quoted = dict(re.findall(r"<!-- trace: ([\w ]+) -->(\d+ files, \d+ returns)<!-- end -->", page))
    measured = {name: f"{result[key]['files']} files, {result[key]['returns']} returns"
                for name, key in (("per batch", "batch"), ("in all", "all"))}
    assert quoted == measured, "run python benchmarks/trace_batch.py and quote its figures"
    assert result["batch"]["files"] <= 12
    assert "syntrain/switches/base.py" not in result["batch"]["entered"]  # no call-backs through the defaults
