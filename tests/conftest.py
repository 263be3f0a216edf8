"""Session-wide fixtures: tiny parser models trained from sample_data/ (real libraries, no mocks)."""

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED = REPO.parent / "shared"

# A suite started as a background job of a non-interactive shell (`make test &` in a script, some CI runners)
# inherits SIGINT ignored, and an ignored signal stays ignored in every child process: the tests that press
# Ctrl-C on a synprep/syntrain child would see it ignored. The default handler here gives children the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Progress lines off a terminal come at a steady interval (synprep.progress, default 30 s): on a loaded machine a
# command under test could pass it and print one, and the tests that count stderr lines would depend on the
# machine's speed. An hour here (inherited by every child process); the progress tests set a short interval.
os.environ["SYNPREP_PROGRESS_SECONDS"] = "3600"


@pytest.fixture(scope="session")
def tiny_udpipe(tmp_path_factory):
    """A function lang -> path of a UDPipe model trained (tiny preset) on sample_data/<lang>.conllu."""
    from synprep.parse.train import train_udpipe

    models = {}

    def get(lang="en"):
        if lang not in models:
            path = tmp_path_factory.mktemp("udpipe") / f"{lang}.udpipe"
            train_udpipe(str(SAMPLE_DATA / f"{lang}.conllu"), str(path), "tiny")
            models[lang] = str(path)
        return models[lang]

    return get


@pytest.fixture(scope="session")
def tiny_spacy(tmp_path_factory):
    """Path of a spaCy pipeline (tok2vec, morphologizer, parser; tiny preset) trained on sample_data/en.conllu,
    with spaCy's rule-based sentencizer first, so that a line of two sentences is parsed as two."""
    pytest.importorskip("spacy")
    import spacy

    from synprep.parse.train_spacy import train_spacy

    trained = tmp_path_factory.mktemp("spacy") / "trained"
    train_spacy(str(SAMPLE_DATA / "en.conllu"), str(trained), "tiny", lang="en", quiet=True)
    nlp = spacy.load(trained)
    nlp.add_pipe("sentencizer", first=True)
    path = trained.parent / "en_tiny"
    nlp.to_disk(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_stanza_trained(tmp_path_factory):
    """`synprep parser train --backend stanza --preset tiny` on sample_data/en.conllu (held out: the same file):
    (the model folder with tokenizer, tagger and parser, the command's stderr)."""
    pytest.importorskip("stanza")
    conllu = str(SAMPLE_DATA / "en.conllu")
    out = tmp_path_factory.mktemp("stanza") / "model"
    # one torch thread: on a loaded machine OpenMP's spinning threads made this training 12x slower (416 s)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SYNPREP_PROGRESS_SECONDS": "0"}  # a line per step
    done = subprocess.run([sys.executable, "-m", "synprep.cli", "parser", "train", "--backend", "stanza",
                           "--conllu", conllu, "--heldout", conllu, "-o", str(out), "--preset", "tiny",
                           "--lang", "en"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return str(out), done.stderr


@pytest.fixture(scope="session")
def tiny_stanza(tiny_stanza_trained, tmp_path_factory):
    """The tiny stanza model folder (<dir>/en/{pos,depparse}/synprep.pt) without its tokenizer: pre-tokenized
    input only."""
    out = tmp_path_factory.mktemp("stanza_pretokenized") / "model"
    shutil.copytree(tiny_stanza_trained[0], out, ignore=shutil.ignore_patterns("tokenize"))
    return str(out)


def convert_synth(root: Path, name: str, src: list[str], tgt: list[str] | None = None, max_depth: int = 1) -> Path:
    """A synthetic corpus (60 pairs, 40 BPE symbols) converted with these `[features]` lists (`tgt` None: the
    synth pipeline's own); returns the train split's folder."""
    from synprep.synth import SynthConfig, write_corpus

    write_corpus(str(root / "corpus"), 60, 5, SynthConfig(max_depth=max_depth), bpe_symbols=40)
    pipeline = (root / "corpus" / "pipeline.toml").read_text()
    pipeline = pipeline.replace('src = ["parents", "distances", "labels"]', f"src = {src!r}".replace("'", '"'))
    if tgt is not None:
        pipeline = pipeline.replace('tgt = ["parents", "transitions", "labels"]', f"tgt = {tgt!r}".replace("'", '"'))
    assert pipeline.count(f'"{src[-1]}"') == 1 + (tgt is not None and src[-1] in tgt)
    (root / "corpus" / f"{name}.toml").write_text(pipeline)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "corpus" / f"{name}.toml"), "--output",
                    str(root / "shards"), "--workers", "1"], check=True, capture_output=True)
    return root / "shards" / "train"


def check_converted(argv: list, code: int, cwd: Path | str | None = None) -> None:
    """After a command: when it is a `synprep convert` that finished (exit 0), its dataset's accounting
    (`assert_accounted`). Every child process of the suite is checked so (`_AccountedPopen`), and every convert
    in the suite's own process (`Converter.run`, below): no test calls it."""
    import contextlib

    argv = [str(arg) for arg in argv]
    if code != 0 or "convert" not in argv:
        return
    at = argv.index("convert")
    if not any("synprep" in arg or "enospc" in arg for arg in argv[:at]) or at + 1 >= len(argv):
        return
    with contextlib.chdir(cwd or "."):
        if "--output" in argv:
            out = argv[argv.index("--output") + 1]
        else:
            from synprep.convert.pipeline import load_pipeline

            out = load_pipeline(argv[at + 1]).output
        if Path(out).is_dir() and any(Path(out).glob("*/manifest.json")):
            assert_accounted(Path(out).resolve())


BASE_TEMP: list[Path] = []  # the session's base temporary folder, where the tests' folders are


@pytest.fixture(scope="session", autouse=True)
def _base_temp(tmp_path_factory):
    BASE_TEMP.append(tmp_path_factory.getbasetemp().resolve())


def finished_datasets(folder: Path | str | None) -> dict[str, tuple[int, int]]:
    """The datasets a finished convert left under `folder` (a test's folder; none elsewhere, such as the
    repository): OUT/run.json, written last, beside a split's manifest -> its inode and mtime."""
    found: dict[str, tuple[int, int]] = {}
    if folder is None or not any(Path(folder).resolve().is_relative_to(base) for base in BASE_TEMP):
        return found
    for root, _, files in os.walk(folder):
        if "run.json" in files and any(Path(root).glob("*/manifest.json")):
            stat = os.stat(os.path.join(root, "run.json"))
            found[root] = (stat.st_ino, stat.st_mtime_ns)
    return found


class _AccountedPopen(subprocess.Popen):
    """subprocess.Popen (so subprocess.run, check_output and every library's children too), whose child, when it
    exits 0, has its converts checked (`assert_accounted`): the one its arguments name (`synprep convert P
    --output O`, `check_converted`), and every dataset it finished in its working folder when that is a test's
    folder (a script, a documentation block, `make demo` that converts). tests/test_convert_accounting.py keeps
    the other ways to start a process out of the suite."""

    def __init__(self, args: object, *rest: object, **kwargs: object) -> None:
        self._launch = (args, kwargs.get("cwd"), finished_datasets(kwargs.get("cwd")))  # before the child runs
        super().__init__(args, *rest, **kwargs)

    @property
    def returncode(self) -> int | None:
        return self.__dict__.get("_returncode")

    @returncode.setter
    def returncode(self, code: int | None) -> None:
        finished = self.__dict__.get("_returncode") is None and code == 0 and hasattr(self, "_launch")
        self.__dict__["_returncode"] = code
        if finished:
            args, cwd, before = self._launch
            if isinstance(args, list | tuple):
                check_converted(list(args), code, cwd)
            for folder, stat in finished_datasets(cwd).items():
                if before.get(folder) != stat:
                    assert_accounted(Path(folder))


def _account_in_process_converts() -> None:
    """Every convert the suite runs in its own process (the API, `cli_in_process`, click's CliRunner, a
    Converter) ends in `Converter.run`: a dataset it finishes is checked (`assert_accounted`) before it returns."""
    import functools

    from synprep.convert.converter import Converter

    run = Converter.run

    @functools.wraps(run)
    def accounted(self: Converter) -> dict:
        stats = run(self)
        assert_accounted(Path(self.out))
        return stats

    Converter.run = accounted


subprocess.Popen = _AccountedPopen  # before the test modules and the libraries import it (`from subprocess ...`)
_account_in_process_converts()


def assert_accounted(out: Path) -> None:
    """The accounting every converted dataset keeps, for whatever reason a pair was rejected at whatever stage:
    each split's input pairs = rows + rejected per reason (its manifest), and rejected.tsv lists each rejected
    pair once, under its reason (so a reason counted but not listed, or listed but not counted, fails)."""
    import json
    from collections import Counter

    splits = sorted(Path(out).glob("*/manifest.json"))
    assert splits, f"{out}: no split folder"
    for path in splits:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        counted = {reason: n for reason, n in manifest["rejected"].items() if n}
        assert manifest["input_lines"] == manifest["rows"] + sum(counted.values()), (path, manifest["rejected"])
        lines = [line.split("\t") for line in (path.parent / "rejected.tsv").read_text(encoding="utf-8").splitlines()]
        assert Counter(fields[1] for fields in lines) == Counter(counted), path
        assert len({fields[0] for fields in lines}) == len(lines), f"{path.parent}: a pair listed twice"


@pytest.fixture(scope="session")
def parse_cache_runs(tmp_path_factory, tiny_udpipe):
    """A convert without a cache (the reference shards), and one with other BPE settings into a new cache (the
    cache is then warm for the reference configuration)."""
    from .test_convert import convert
    from .test_parse_cache import pipeline

    root = tmp_path_factory.mktemp("parse_cache")
    convert(pipeline(root / "plain", tiny_udpipe), "--workers", "2")
    convert(pipeline(root / "cold", tiny_udpipe, symbols=120, cache=str(root / "cache")), "--workers", "2")
    return root


def cli_in_process(program: str, argv: list[str]) -> tuple[int, str]:
    """`synprep ARGV` or `syntrain ARGV` in this process (exit code, stderr): the real entry point, without a new
    interpreter (its libraries imported once), for the cases that cannot hang."""
    import contextlib
    import io

    if program == "synprep":
        from synprep.cli import main
    else:
        from syntrain.cli import main
    err, saved = io.StringIO(), sys.argv
    sys.argv = [program, *map(str, argv)]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = saved
    return code, err.getvalue()



def value_id(val: object) -> str:
    """A test's id from a value: its repr, but a value whose repr names its address (`<object object at 0x...>`)
    by its type's name, so that the ids are the same in every process (pytest-xdist's workers must collect the same
    tests)."""
    text = repr(val)
    return type(val).__name__ if " at 0x" in text else text


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """The default ids, stable across processes (`value_id`) where pytest's own would name an address."""
    return type(val).__name__ if " at 0x" in repr(val) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test function's cases in the order of their ids (the functions stay in file order): every process of
    pytest-xdist must collect the same tests in the same order, and a generator that walks a set or a dict built
    from one would otherwise order its cases by hashes and addresses, which differ between processes."""
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(item.nodeid.split("[", 1)[0], index)
    items.sort(key=lambda item: (first[item.nodeid.split("[", 1)[0]], item.nodeid))
