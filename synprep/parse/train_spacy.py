"""`synprep parser train --backend spacy`: a spaCy pipeline (tok2vec, morphologizer, parser) from a UD treebank.

Offline: the CoNLL-U is converted with spaCy's own converter (what `spacy convert` runs) into `.spacy` files,
the configuration is spaCy's CPU "efficiency" template (`spacy init config --optimize efficiency`: hash
embeddings + a 4-layer CNN, width 96; no word vectors, nothing downloaded), and `spacy train` trains it. The
morphologizer is trained on UPOS only (FEATS are dropped), so the pipeline predicts `pos_` (UPOS) and the
UD heads and labels: what synprep's features use. Each treebank sentence is one training doc, as each
line is one sentence when synprep parses, so the parser never learns to split inside a line. The result is
a pipeline folder that `--backend spacy --model FOLDER` loads.

Presets: `tiny` (a few dozen steps: tests), `default` (spaCy's schedule, stopped after 1,600 steps without
improvement on the held-out set). `--set KEY=VALUE` overrides any configuration value (spaCy's dotted names,
e.g. `training.max_steps=3000`, `components.tok2vec.model.encode.width=64`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

from ..conllu import FEATS, read_conllu, to_tree
from ..errors import InputError
from ..progress import ProgressLines, clock, progress
from ..tables import did_you_mean
from .quality import interim_line

SPACY_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"training.max_steps": 30, "training.eval_frequency": 10, "training.patience": 0,
             "components.tok2vec.model.encode.width": 32, "components.tok2vec.model.encode.depth": 1,
             "components.parser.model.hidden_width": 16},
    "default": {},
}


def guess_lang(path: str) -> str:
    """`en` from `en_ewt-ud-train.conllu` (UD's file naming), else `xx` (spaCy's multi-language tokenizer)."""
    match = re.match(r"([a-z]{2,3})_", os.path.basename(path))
    return match.group(1) if match else "xx"


def _write_docbin(conllu_path: str, output_path: str) -> int:
    """The treebank as a spaCy DocBin (FEATS dropped: the morphologizer then learns UPOS); returns sentences."""
    from spacy.tokens import DocBin
    from spacy.training.converters import conllu_to_docs

    lines = []
    sentences = 0
    for sentence in read_conllu(conllu_path):  # our reader: a bad line is a one-line error with file and line
        to_tree(sentence, conllu_path)  # and a bad tree (a cycle, two roots), as UDPipe's trainer refuses it
        sentences += 1
        for cols in sentence.words:
            cols = list(cols)
            cols[FEATS] = "_"
            lines.append("\t".join(cols))
        lines.append("")
    if not sentences:
        raise InputError("no sentences in this treebank", conllu_path)
    # one sentence per doc: synprep parses one line as one sentence, so the parser never has to find boundaries
    docs = conllu_to_docs("\n".join(lines) + "\n", n_sents=1, no_print=True)
    DocBin(docs=docs, store_user_data=False).to_disk(output_path)
    return sentences


class _Deadline(Exception):
    """Raised between two updates once the time budget is spent; spaCy saves the models on its way out."""


_COUNTERS: list[Any] = []  # the progress of the training running in this process (spaCy builds its callback by name)
_ESTIMATES: list[Callable[[], float | None]] = []  # its ETA (within --max-minutes)


def _before_update_callback(seconds: float) -> Any:  # noqa: ANN401 (a spaCy `before_update` callable)
    """Before each update: the step counted in the progress, and with a time budget (`seconds` > 0) the stop
    once it is spent."""
    end = time.monotonic() + seconds if seconds else None

    def before_update(nlp: Any, args: dict[str, Any]) -> None:  # noqa: ANN401
        step = int(args.get("step") or 0)
        for counter in _COUNTERS:
            counter.update(step - counter.n)
            if seconds and not isinstance(counter, ProgressLines) and step % 10 == 0:  # a bar: its ETA is one rate
                counter.set_postfix_str(f"ETA {clock(_ESTIMATES[-1]() or 0.0)} (--max-minutes)", refresh=False)
        if end is not None and time.monotonic() > end:
            raise _Deadline(f"time budget reached at step {step}")

    return before_update


def parse_overrides(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`KEY=VALUE` strings as spaCy overrides (values read as JSON where they parse: numbers, booleans)."""
    import json

    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.strip()] = value
    return overrides


def train_spacy(conllu_path: str, output_dir: str, preset: str = "default", heldout_path: str | None = None,
                lang: str | None = None, overrides: dict[str, Any] | None = None, quiet: bool = False,
                max_minutes: float | None = None, progress_shown: bool | None = None) -> float:
    """Train a spaCy tagger+parser on `conllu_path` into the folder `output_dir` (the best model on the
    held-out set, or on the training set itself without one); returns the seconds it took. `max_minutes`
    stops training after the first update past that budget (the best model so far is kept)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="synprep_spacy_") as work:
        prepare_spacy(conllu_path, work, preset, heldout_path, lang, overrides)
        fit_spacy(work, output_dir, quiet=quiet, max_minutes=max_minutes, progress_shown=progress_shown,
                  heldout=heldout_path is not None)
    return time.perf_counter() - start


def prepare_spacy(conllu_path: str, work: str, preset: str = "default", heldout_path: str | None = None,
                  lang: str | None = None, overrides: dict[str, Any] | None = None) -> None:
    """Write `work/{train,dev}.spacy` and `work/config.cfg` (the preset and overrides merged in)."""
    try:
        import spacy  # noqa: F401
    except ImportError:
        raise InputError("spaCy is not installed: pip install 'synprep[spacy]'") from None
    from spacy.cli.init_config import init_config
    from spacy.util import load_config

    if preset not in SPACY_PRESETS:
        raise InputError(f"unknown spaCy preset {preset!r} (choose from {', '.join(SPACY_PRESETS)})")
    lang = lang or guess_lang(conllu_path)
    os.makedirs(work, exist_ok=True)
    _write_docbin(conllu_path, os.path.join(work, "train.spacy"))
    _write_docbin(heldout_path or conllu_path, os.path.join(work, "dev.spacy"))
    try:
        config = init_config(lang=lang, pipeline=["morphologizer", "parser"], optimize="efficiency")
    except Exception as err:  # noqa: BLE001 - spaCy raises several types for an unknown language code
        raise InputError(f"spaCy has no language {lang!r} (use --lang xx for its multi-language tokenizer): "
                         f"{str(err).splitlines()[0][:200]}") from None
    config_path = os.path.join(work, "config.cfg")
    config.to_disk(config_path)
    settings = {"training.patience": 1600, **SPACY_PRESETS[preset], **(overrides or {})}
    unknown_settings(config, overrides or {})
    try:
        merged = load_config(config_path, overrides=settings, interpolate=False)
        check_config(merged)
    except Exception as err:  # noqa: BLE001 - confection and spaCy raise several types for a bad key or value
        raise InputError(f"--set {config_problem(err, overrides or {})}") from None
    merged.to_disk(config_path)


def check_config(config: Any) -> None:  # noqa: ANN401 (a spaCy Config)
    """Build the pipeline and resolve [training] as `spacy train` will, so that a bad key or value is found
    before any training (spaCy's own message would come after the data are converted, on stdout)."""
    from spacy.schemas import ConfigSchemaTraining
    from spacy.util import load_model_from_config, registry

    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    registry.resolve(nlp.config.interpolate()["training"], schema=ConfigSchemaTraining, validate=True)


def unknown_settings(template: Any, overrides: dict[str, Any]) -> None:  # noqa: ANN401 (a spaCy Config)
    """Refuse a --set key that spaCy's configuration (the template with every default filled in) does not have:
    spaCy would ignore it where its schema allows extra keys (`training.bogus`)."""
    from spacy.util import load_model_from_config

    filled = load_model_from_config(template, auto_fill=True, validate=False).config
    for key in overrides:
        node, parts = filled, key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                known = [".".join([*parts[:depth], name]) for name in node] if isinstance(node, dict) else []
                raise InputError(f"--set {key}: spaCy's configuration has no such setting"
                                 + (did_you_mean(key, known) if depth == len(parts) - 1 else
                                    f" (no {'.'.join(parts[:depth + 1])})"))
            node = node[part]


def config_problem(err: Exception, overrides: dict[str, Any]) -> str:
    """What is wrong, naming the `--set KEY=VALUE` it comes from where one matches the error's location."""
    problems = getattr(err, "errors", None) or []
    for problem in problems:
        loc = [str(part) for part in problem.get("loc", ())]
        key = next((k for k in overrides if loc and k.split(".")[-len(loc[-1:]):] == loc[-1:]
                    and (len(loc) == 1 or loc[-2].split(".")[-1] in k.split("."))), None)
        where = f"{key}={overrides[key]!r}" if key else ".".join(loc)
        return f"{where}: {problem.get('msg', 'not accepted')}"
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"


def _estimate(steps: int | None, max_minutes: float | None) -> Callable[[], float | None]:
    """The ETA of the progress lines: the steps left at the rate so far, but never past the time budget."""
    began = time.monotonic()
    end = began + 60 * max_minutes if max_minutes else None

    def estimate() -> float | None:
        now, done = time.monotonic(), _COUNTERS[-1].n if _COUNTERS else 0
        left = (now - began) / done * max(steps - done, 0) if steps and done else None
        if end is not None:
            left = min(max(end - now, 0.0), left if left is not None else float("inf"))
        return left

    return estimate


def _scores_logger(console: Any, heldout: bool = True) -> Any:  # noqa: ANN401 (spaCy loggers)
    """The configuration's own logger `console` (spaCy's table on stdout), and a line on stderr with the held-out
    UAS and LAS each time spaCy scores its dev set (every `training.eval_frequency` steps)."""

    def setup(nlp: Any, stdout: IO[str] = sys.stdout, stderr: IO[str] = sys.stderr) -> Any:  # noqa: ANN401
        log_step, finalize = console(nlp, stdout, stderr)

        def step(info: dict[str, Any] | None) -> None:
            log_step(info)
            scores = (info or {}).get("other_scores") or {}
            if "dep_las" in scores and "dep_uas" in scores:
                tqdm.write(interim_line(f"spacy step {info['step']}", 100 * float(scores["dep_las"] or 0),
                                        100 * float(scores["dep_uas"] or 0), heldout), file=sys.stderr)

        return step, finalize

    return setup


def fit_spacy(work: str, output_dir: str, quiet: bool = False, max_minutes: float | None = None,
              progress_shown: bool | None = None, heldout: bool = True) -> None:
    """Train from a folder made by `prepare_spacy`; copy the best model to `output_dir`. Progress (steps, up to
    `max_steps`; the ETA never past `max_minutes`) on stderr as `synprep.progress` shows it (`progress_shown`:
    None, a bar on a terminal, else lines at the interval; False: none), and the dev set's UAS and LAS each
    time spaCy scores it (`heldout` False: the dev set is the training treebank, said so)."""
    from spacy import registry
    from spacy.cli.train import train
    from spacy.util import load_config

    registry.callbacks.register("synprep_before_update.v1", func=_before_update_callback)
    registry.loggers.register("synprep_scores_logger.v1", func=_scores_logger)
    config_path = os.path.join(work, "config.cfg")
    config = load_config(config_path, interpolate=False)
    config["training"]["before_update"] = {"@callbacks": "synprep_before_update.v1",
                                           "seconds": 60 * max_minutes if max_minutes else 0}
    config["training"]["logger"] = {"@loggers": "synprep_scores_logger.v1", "heldout": heldout,
                                    "console": config["training"]["logger"]}  # the template's, resolved by spaCy
    config.to_disk(config_path)
    steps = int(config["training"].get("max_steps") or 0) or None  # an upper bound: patience may stop it sooner
    paths = {"paths.train": os.path.join(work, "train.spacy"), "paths.dev": os.path.join(work, "dev.spacy")}
    _ESTIMATES.append(_estimate(steps, max_minutes))
    _COUNTERS.append(progress("parser train: spacy", steps, "steps", shown=progress_shown,
                              estimate=_ESTIMATES[-1]))
    printed = io.StringIO()  # spaCy's messages (stdout): shown when it fails, or as they come with quiet=False
    with contextlib.redirect_stdout(printed) if quiet else contextlib.nullcontext():
        try:
            train(config_path, work, use_gpu=-1, overrides=paths)
        except _Deadline:
            pass
        except SystemExit:  # spaCy's CLI helpers exit on a bad configuration, after printing why
            said = [line.strip() for line in printed.getvalue().splitlines() if line.strip()]
            raise InputError("spaCy training failed" + (f": {' '.join(said[-3:])[:300]}" if said else
                                                        " (see its messages above)")) from None
        finally:
            _COUNTERS.pop().close()
            _ESTIMATES.pop()
    best = os.path.join(work, "model-best")
    if not os.path.isdir(best):
        best = os.path.join(work, "model-last")
    if os.path.exists(output_dir):
        shutil.rmtree(output_dir)
    shutil.copytree(best, output_dir)
