"""docs/notebook.ipynb, the whole path through the Python API on the sample data, runs (nbclient, a real kernel)
and shows what it says: each step's values, inspect's report with its trees, compare's table, no error and no
progress-bar warning."""

import json

import pytest

from .conftest import REPO, assert_accounted

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("ipykernel")

NOTEBOOK = REPO / "docs" / "notebook.ipynb"
EXPECTED = [  # (a line the notebook prints, as the saved notebook shows it)
    "True ['gold', 'raw']", "ParserEvalResult: gold tokenization  UPOS", "['test', 'train', 'valid'] train rows 47",
    "valid: True 47 rows", "pairs 47 |", "['test', 'train', 'validation'] 47", "The dog sleeps in the garden.",
    "checkpoint: True", "test pairs 6 | BLEU", "2 translations; the empty line stays empty: True",
    "| run | switches | seed | steps |", "rows: [('run', ", "['pascal']", "ExportResult: exported 47 rows",
]


def outputs(notebook) -> tuple[str, list[dict]]:
    """All text the cells showed (streams, results' text/plain), and every output."""
    every = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    text = "".join(out.get("text", "") + out.get("data", {}).get("text/plain", "") for out in every)
    return text, every


def test_the_saved_notebook_was_run():
    text, every = outputs(nbformat.read(NOTEBOOK, as_version=4))
    assert all(line in text for line in EXPECTED), [line for line in EXPECTED if line not in text]


def test_the_notebook_runs_and_shows_each_step(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the notebook's work folder (tempfile.mkdtemp)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(REPO / "docs")}}).execute()
    [dataset] = tmp_path.glob("synprep-notebook-*/sample")
    assert_accounted(dataset)  # its convert ran in the kernel
    text, every = outputs(notebook)
    assert [line for line in EXPECTED if line not in text] == [] and "| as DataFrame" in text
    assert not [out for out in every if out.output_type == "error"]
    assert "IProgress" not in text and "TqdmWarning" not in text
    html = [out["data"]["text/html"] for out in every if "text/html" in out.get("data", {})]
    assert any("<svg" in page and "synprep inspect" in page for page in html)  # the report, its trees drawn
    assert any(page.startswith("<table>") and "<td>run</td>" in page for page in html)  # compare's table
    assert json.loads(nbformat.writes(notebook))  # still a notebook


@pytest.mark.parametrize(("setup", "expected"), [("", "auto"), ("sys.modules['ipywidgets'] = None", "plain")],
                         ids=["ipywidgets", "no-ipywidgets"])
def test_notebook_bars_only_where_ipywidgets_imports(setup, expected):
    """In a kernel: tqdm.auto's notebook bars where ipywidgets imports; plain tqdm where it does not (tqdm.auto
    would print "IProgress not found" at every bar)."""
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = new_notebook(cells=[new_code_cell(
        f"import sys, tempfile\n{setup}\nimport synprep\nfrom synprep.progress import progress, tqdm_class\n"
        "print({'tqdm.std': 'plain', 'tqdm.auto': 'auto'}[tqdm_class().__module__])\n"
        "bar = progress('x', 3)\nbar.update(3)\nbar.close()\n"
        "try:\n    synprep.load_dataset(tempfile.mkdtemp())  # imports datasets, which imports tqdm.auto\n"
        "except synprep.InputError:\n    pass")])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    text, every = outputs(notebook)
    assert text.splitlines()[0] == expected and "IProgress" not in text
    assert any("application/vnd.jupyter.widget-view+json" in out.get("data", {}) for out in every) == (
        expected == "auto")


def test_every_phase_bar_is_a_notebook_bar(tmp_path, tiny_udpipe):
    """In a kernel with ipywidgets, the bars of filter, align, parse and BPE learning are notebook widgets (they
    are made by `synprep.progress`, as convert's are), one per call."""
    from nbformat.v4 import new_code_cell, new_notebook

    data, out = REPO / "sample_data", tmp_path
    calls = [
        f"synprep.filter({str(data / 'parallel' / 'train.en')!r}, {str(data / 'parallel' / 'train.de')!r}, 'en', "
        f"'de', {str(out / 'filtered')!r}, langid='none')",
        f"synprep.align({str(data / 'en.conllu')!r}, {str(out / 'aligned.jsonl')!r}, workers=1)",
        f"synprep.parse({str(data / 'parallel' / 'train.en')!r}, {str(out / 'en.conllu')!r}, 'udpipe', "
        f"model={str(tiny_udpipe('en'))!r}, workers=1)",
        f"synprep.learn_bpe([{str(data / 'parallel' / 'train.en')!r}], {str(out / 'codes.bpe')!r}, 200, "
        "verbose=True)"]
    notebook = new_notebook(cells=[new_code_cell("import synprep"), *map(new_code_cell, calls)])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    widgets = ["application/vnd.jupyter.widget-view+json" in str(cell.outputs) for cell in notebook.cells[1:]]
    assert widgets == [True] * len(calls), [cell.outputs for cell in notebook.cells[1:]]
