"""docs/pretrained.md runs: its pipeline, its command block and its Python block, in a folder holding a tiny random
Marian model with its own SentencePiece model (built here, as `opus-mt-en-de`), the repository's sample_data, and
tiny UDPipe parsers in place of the page's treebank-trained ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

from .conftest import REPO, SAMPLE_DATA  # noqa: E402
from .hf_models import load_hf, marian_with_sentencepiece  # noqa: E402
from .test_docs_commands import fenced_blocks  # noqa: E402

PAGE = REPO / "docs" / "pretrained.md"
# the page's Python block is a `py` block (tests/test_readme.py runs `python` blocks in the repository, where
# there is no model folder): this test runs it
PYTHON_MARK = ("<!-- pretrained-python (run by tests/test_pretrained_docs.py in a folder holding the model; not by "
               "tests/test_readme.py) -->")


def run_block(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_page_runs_on_a_tiny_model(tmp_path, tiny_udpipe):
    text = PAGE.read_text(encoding="utf-8")
    (tmp_path / "sample_data").symlink_to(SAMPLE_DATA)
    marian_with_sentencepiece(tmp_path / "opus-mt-en-de", [SAMPLE_DATA / "parallel" / "train.en",
                                                           SAMPLE_DATA / "parallel" / "train.de"])
    [(_, pipeline)] = fenced_blocks(text, {"toml"})
    pipeline = pipeline.replace('train_conllu = "en.conllu"', f'model = "{tiny_udpipe("en")}"')
    (tmp_path / "en-de-opus.toml").write_text(pipeline.replace('train_conllu = "de.conllu"',
                                                               f'model = "{tiny_udpipe("de")}"'), encoding="utf-8")
    [(_, commands)] = fenced_blocks(text, {"bash"}, after="<!-- pretrained-run -->")
    done = run_block(["bash", "-e", "-c", commands], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "baseline.json").is_file() and (tmp_path / "test.de").read_text(encoding="utf-8")
    load_hf(tmp_path / "opus-mt-en-de-finetuned")  # the export loads in transformers
    [(_, python)] = fenced_blocks(text, {"py"}, after=PYTHON_MARK)
    done = run_block([sys.executable, "-c", python], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "opus-mt-en-de-finetuned-py" / "model.safetensors").is_file()
