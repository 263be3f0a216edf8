"""docs/switches-api.md quotes what benchmarks/trace_batch.py measures of one training batch (files entered, returns
into a file entered already), and a batch enters at most twelve files and returns at most twenty times. The script
runs in a process of its own, as a reader runs it: what earlier tests cached in this one would shorten its set-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from .conftest import REPO


def test_the_guide_quotes_the_traced_figures():
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "trace_batch.py"), "--steps", "3", "--json"],
                         capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])  # the training run's log lines come before
    page = (REPO / "docs" / "switches-api.md").read_text(encoding="utf-8")
    quoted = dict(re.findall(r"<!-- trace: ([\w ]+) -->(\d+ files, \d+ returns)<!-- end -->", page))
    measured = {name: f"{result[key]['files']} files, {result[key]['returns']} returns"
                for name, key in (("per batch", "batch"), ("in all", "all"))}
    assert quoted == measured, "run python benchmarks/trace_batch.py and quote its figures"
    assert result["batch"]["files"] <= 12, result["batch"]["entered"]
    assert result["batch"]["returns"] <= 20, result["batch"]["by_file"]
    assert "syntrain/switches/base.py" not in result["batch"]["entered"]  # no call-backs through the defaults
