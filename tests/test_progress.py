"""synprep.progress, the one progress implementation of synprep and syntrain: off a terminal, plain lines at a
steady interval with done/total, rate, elapsed and an ETA that counts the later units; nothing before the
interval; a last line on close only where the count moved."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from synprep import progress as progress_module
from synprep.progress import ProgressLines, clock, progress, progress_interval


def test_lines_come_at_the_interval_with_rate_and_eta(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    stream = io.StringIO()
    counter = ProgressLines("convert: filter+parse", 1000, "pairs", stream, interval=30, later_units=500)
    for _ in range(5):  # 10 s, 100 pairs: under the interval, no line
        now[0] += 2
        counter.update(20)
    assert stream.getvalue() == ""
    now[0] += 25  # 35 s, 150 pairs: a line
    counter.update(50)
    assert stream.getvalue() == ("convert: filter+parse 150/1000 pairs (15%), 4.3 pairs/s, 0m35s elapsed, "
                                 f"ETA {clock((850 + 500) * 35 / 150)}\n")
    counter.close()  # the count did not move since the last line: nothing more
    assert stream.getvalue().count("\n") == 1
    counter.update(850)  # under the interval again: the last line comes with close
    counter.close()
    assert stream.getvalue().splitlines()[-1].startswith("convert: filter+parse 1000/1000 pairs (100%)")


def test_interval_from_the_environment_and_the_kinds(monkeypatch):
    monkeypatch.setenv("SYNPREP_PROGRESS_SECONDS", "0.5")
    assert progress_interval() == 0.5
    for bad in ("x", "-3"):
        monkeypatch.setenv("SYNPREP_PROGRESS_SECONDS", bad)
        assert progress_interval() == 30.0
    stream = io.StringIO()  # not a terminal: lines; forced: a tqdm bar; off: a disabled tqdm
    assert isinstance(progress("x", 10, stream=stream), ProgressLines)
    bar = progress("x", 10, stream=stream, shown=True)
    bar.update(10)
    bar.close()
    assert "10/10" in stream.getvalue() and "\r" in stream.getvalue()
    assert progress("x", 10, stream=stream, shown=False).disable


@pytest.mark.parametrize("setup", ["", "import ipykernel, ipywidgets, IPython"])
def test_plain_bars_outside_a_notebook_kernel(setup):
    """tqdm.auto's bars only in a running Jupyter kernel (tests/test_notebook.py runs one): a script, a terminal
    or a program that merely imported the kernel's packages gets plain bars."""
    code = (f"import sys, warnings; {setup}\nwarnings.simplefilter('error')\n"
            "import tqdm, tqdm.auto\nfrom synprep.progress import tqdm_class\n"
            "print({tqdm.tqdm: 'plain', tqdm.auto.tqdm: 'auto'}[tqdm_class()])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "plain", done.stderr
