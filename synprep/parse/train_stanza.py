"""`synprep parser train --backend stanza`: stanza tokenizer, POS tagger and dependency parser from a UD treebank.

Offline and without word vectors: the tagger and the parser are trained with stanza's `--no_pretrain` (their
own word and character embeddings only; nothing is downloaded), the tokenizer from the treebank's text and
character labels made by stanza's own utilities (`conllu_to_text`, `prepare_tokenizer_data`). Multiword tokens
are not expanded (no MWT model): the tokenizer learns them as one word, so raw text of a language with
multiword tokens (de `zum`, ...) gives the surface token where the treebank has its words; pre-tokenized input
(`--pretokenized`) is not affected. The output folder is what the stanza backend reads
(`synprep.parse.stanza`): `DIR/resources.json` (`{}`) and `DIR/<lang>/{tokenize,pos,depparse}/synprep.pt` (a
second language trained into the same folder is added beside the first; the same language is replaced), so
`synprep parse --backend stanza --model-dir DIR --lang LANG` and a pipeline's `[parser.x] backend = "stanza"`,
`model_dir = "DIR"` load it.

Presets: `tiny` (a few dozen steps with small layers: tests and demos, a poor parser), `small` (a few thousand
steps, medium layers: tens of minutes on a UD dev set on one core), `default` (stanza's own settings: 50,000
steps per component with early stopping; hours on CPU). `--set PROCESSOR.OPTION=VALUE` replaces any of
stanza's training options (`tokenize.steps=500`, `pos.hidden_dim=100`, `depparse.max_steps=3000`);
`tokenize=none` trains no tokenizer (a model for pre-tokenized input only).

Progress: stanza's log lines (`Finished STEP 20/60`, `Step 20/60`) are read from its logger and shown as a bar
(terminal) or as plain lines (`synprep.progress`: one per `SYNPREP_PROGRESS_SECONDS`, default 30) with the
steps done over all three components, the rate, elapsed time and ETA.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO, Any

from tqdm import tqdm

from ..conllu import read_trees
from ..errors import InputError
from ..progress import progress
from ..textio import read_lines
from .quality import interim_line

PROCESSORS = ("tokenize", "pos", "depparse")
STEPS_OPTION = {"tokenize": "steps", "pos": "max_steps", "depparse": "max_steps"}
_TINY_TAGGER = {"max_steps": 30, "eval_interval": 30, "log_step": 10, "batch_size": 100, "hidden_dim": 32,
                "char_hidden_dim": 32, "word_emb_dim": 16, "char_emb_dim": 16}
_SMALL_TAGGER = {"max_steps": 3000, "eval_interval": 300, "hidden_dim": 100, "char_hidden_dim": 100,
                 "word_emb_dim": 75, "char_emb_dim": 50}
STANZA_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "tokenize": {"steps": 20, "eval_steps": 20, "report_steps": 10, "emb_dim": 8, "hidden_dim": 8},
        "pos": _TINY_TAGGER,
        "depparse": {**_TINY_TAGGER, "batch_size": 500, "tag_emb_dim": 8, "deep_biaff_hidden_dim": 32,
                     "transformed_dim": 16},
    },
    "small": {
        "tokenize": {"steps": 3000, "eval_steps": 300},
        "pos": _SMALL_TAGGER,
        "depparse": {**_SMALL_TAGGER, "hidden_dim": 200, "deep_biaff_hidden_dim": 200, "transformed_dim": 75},
    },
    "default": {"tokenize": {}, "pos": {}, "depparse": {}},
}
STANZA_DEFAULT_STEPS = {"tokenize": 50000, "pos": 50000, "depparse": 50000}
STEP_LINE = re.compile(r"(?:Finished STEP|^Step)\s+(\d+)/\s*(\d+)")
DEV_LINE = re.compile(r"^step (\d+): train_loss = [-\d.e+]+, dev_score = ([\d.]+)")  # depparse: LAS, 0-1


def _stanza_module(processor: str) -> Any:  # noqa: ANN401 (a stanza training module)
    from stanza.models import parser, tagger, tokenizer

    return {"tokenize": tokenizer, "pos": tagger, "depparse": parser}[processor]


def stanza_settings(preset: str, overrides: dict[str, Any] | None = None) -> dict[str, dict[str, Any] | None]:
    """The training options per processor (None: not trained): the preset's, replaced by `overrides`
    (`{"pos.hidden_dim": 100, "tokenize": "none"}`); every option is checked against stanza's own."""
    try:
        import stanza  # noqa: F401
    except ImportError:
        raise InputError("stanza is not installed: pip install 'synprep[stanza]'") from None
    if preset not in STANZA_PRESETS:
        raise InputError(f"--preset {preset} has no stanza settings (choose from {', '.join(STANZA_PRESETS)})")
    chosen: dict[str, dict[str, Any] | None] = {p: dict(STANZA_PRESETS[preset][p]) for p in PROCESSORS}
    for key, value in (overrides or {}).items():
        processor, _, option = key.partition(".")
        if processor not in PROCESSORS:
            raise InputError(f"--set {key}: stanza settings are PROCESSOR.OPTION with PROCESSOR one of "
                             f"{', '.join(PROCESSORS)}")
        if not option:
            if processor != "tokenize" or value != "none":
                raise InputError(f"--set {key}={value}: only tokenize=none (no tokenizer) names a processor alone")
            chosen["tokenize"] = None
            continue
        known = _stanza_module(processor).build_argparse()._option_string_actions  # noqa: SLF001
        if f"--{option}" not in known:
            raise InputError(f"--set {key}: stanza's {processor} trainer has no option --{option}")
        settings = chosen[processor]
        if settings is not None:
            settings[option] = value
    return chosen


def planned_steps(chosen: dict[str, dict[str, Any] | None]) -> dict[str, int]:
    """Training steps per processor to be trained (an upper bound with early stopping)."""
    steps = {}
    for processor, settings in chosen.items():
        if settings is not None:
            value = settings.get(STEPS_OPTION[processor], STANZA_DEFAULT_STEPS[processor])
            steps[processor] = int(value) if str(value).isdigit() else STANZA_DEFAULT_STEPS[processor]
    return steps


class StanzaProgress:
    """Progress over the three components from stanza's step lines, through `synprep.progress` (a bar on a
    terminal, else a plain line at the progress interval); `verbose` also copies every log line."""

    def __init__(self, steps: dict[str, int], stream: IO[str], verbose: bool = False, bar: bool | None = None,
                 heldout: bool = True) -> None:
        self.steps, self.stream, self.verbose, self.use_bar = steps, stream, verbose, bar
        self.heldout = heldout  # False: stanza scores the training treebank (no --heldout)
        self.total = max(sum(steps.values()), 1)
        self.offset, self.done, self.phase = 0, 0, next(iter(steps), PROCESSORS[0])
        self.counter: Any = None

    def begin(self) -> None:
        self.counter = progress(f"parser train: stanza {self.phase}", self.total, "steps", shown=self.use_bar,
                                stream=self.stream, leave=False)

    def start_phase(self, phase: str) -> None:
        """Steps of the components before this one count as done (early stopping ends one before its plan)."""
        self.offset = sum(self.steps[p] for p in PROCESSORS[:PROCESSORS.index(phase)] if p in self.steps)
        self.phase = phase
        if self.counter is not None:
            self.counter.set_description(f"parser train: stanza {phase}")
            self._advance(self.offset)

    def _advance(self, done: int) -> None:
        done = min(done, self.total)
        if done > self.done and self.counter is not None:
            self.counter.update(done - self.done)
            self.done = done

    def line(self, text: str) -> None:
        if self.verbose:
            self.stream.write(text + "\n")
        match = STEP_LINE.search(text)
        if match:
            self._advance(self.offset + int(match.group(1)))
        scored = DEV_LINE.search(text) if self.phase == "depparse" else None
        if scored:
            where = f"depparse step {scored.group(1)}/{self.steps.get('depparse', 0)}"
            tqdm.write(interim_line(where, 100 * float(scored.group(2)), heldout=self.heldout), file=self.stream)

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()


class _ToProgress(logging.Handler):
    def __init__(self, progress: StanzaProgress | None, log: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.progress, self.log = progress, log

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.log.append(text)
        if self.progress is not None:
            self.progress.line(text)


@contextlib.contextmanager
def _stanza_log(progress: StanzaProgress | None, verbose: bool) -> Iterator[list[str]]:
    """stanza's log into `progress` (and a list, shown when training fails); its own stderr handlers are
    silenced unless `verbose`."""
    logger = logging.getLogger("stanza")
    handlers, level = list(logger.handlers), logger.level
    log: list[str] = []
    handler = _ToProgress(progress, log)
    if not verbose:
        for old in handlers:
            logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield log
    finally:
        logger.removeHandler(handler)
        for old in handlers:
            if old not in logger.handlers:
                logger.addHandler(old)
        # importing stanza's trainers sets its logger to DEBUG: back to stanza's own INFO, or it prints a line
        # per batch when the held-out set is parsed afterwards
        logger.setLevel(logging.INFO if level <= logging.DEBUG else level)


def _plain_copy(path: str, target: str) -> str:
    """The treebank checked (one-line errors with file and line) and copied as plain UTF-8 (.gz/.xz read)."""
    count = sum(1 for _ in read_trees(path))
    if not count:
        raise InputError("no sentences in this treebank", path)
    with open(target, "w", encoding="utf-8") as out:
        out.write("\n".join(read_lines(path)).strip("\n") + "\n\n")
    return target


def _tokenizer_files(conllu: str, work: str, name: str) -> tuple[str, str, str]:
    """stanza's tokenizer inputs from a treebank: its text, one label per character, the MWT list; labels of
    multiword tokens (3, 4) become plain token ends (1, 2): no MWT model is trained."""
    from stanza.utils.datasets import conllu_to_text, prepare_tokenizer_data

    text, labels, mwt = (os.path.join(work, f"{name}.{ext}") for ext in ("txt", "labels", "mwt.json"))
    conllu_to_text.convert_text(conllu, text)
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        prepare_tokenizer_data.main([text, conllu, "-o", labels, "-m", mwt])
    with open(labels, encoding="utf-8") as stream:
        content = stream.read().translate(str.maketrans("34", "12"))
    with open(labels, "w", encoding="utf-8") as stream:
        stream.write(content)
    return text, labels, mwt


def _arguments(processor: str, settings: dict[str, Any], lang: str, train: str, heldout: str, work: str,
               save_dir: str) -> list[str]:
    common = ["--mode", "train", "--lang", lang, "--shorthand", f"{lang}_synprep", "--save_dir", save_dir,
              "--save_name", "synprep.pt"]
    if processor == "tokenize":
        text, labels, mwt = _tokenizer_files(train, work, "train")
        dev_text, dev_labels, _ = _tokenizer_files(heldout, work, "dev")
        files = ["--txt_file", text, "--label_file", labels, "--mwt_json_file", mwt, "--dev_txt_file", dev_text,
                 "--dev_label_file", dev_labels, "--dev_conll_gold", heldout, "--no_use_mwt",
                 "--conll_file", os.path.join(work, "tokenize_pred.conllu")]
    else:
        files = ["--train_file", train, "--eval_file", heldout, "--no_pretrain",
                 "--output_file", os.path.join(work, f"{processor}_pred.conllu")]
        if processor == "depparse":
            files += ["--no_checkpoint", "--no_bert_model"]
    options = []
    for key, value in settings.items():
        if value is True:
            options.append(f"--{key}")
        elif value is not False:
            options += [f"--{key}", str(value)]
    return common + files + options


def train_stanza(conllu_path: str, output_dir: str, preset: str = "default", heldout_path: str | None = None,
                 lang: str = "xx", overrides: dict[str, Any] | None = None, quiet: bool = True,
                 progress: IO[str] | None = None) -> float:
    """Train stanza's tokenizer, tagger and parser on `conllu_path` into the folder `output_dir` (the best
    steps on `heldout_path`, or on the training file itself without one); returns the seconds it took."""
    chosen = stanza_settings(preset, overrides)
    os.makedirs(os.path.join(output_dir, lang), exist_ok=True)  # an output that cannot be written fails now
    start = time.perf_counter()
    tracker = (StanzaProgress(planned_steps(chosen), progress, heldout=heldout_path is not None)
               if progress is not None else None)
    # the work folder is the system's temporary one: a killed run leaves nothing beside the output
    with tempfile.TemporaryDirectory(prefix="synprep_stanza_") as work:
        train = _plain_copy(conllu_path, os.path.join(work, "train.conllu"))
        heldout = _plain_copy(heldout_path, os.path.join(work, "heldout.conllu")) if heldout_path else train
        model = os.path.join(work, "model")
        if tracker is not None:
            tracker.begin()
        try:
            with _stanza_log(tracker, verbose=not quiet) as log:
                for processor in PROCESSORS:
                    settings = chosen[processor]
                    if settings is None:
                        continue
                    if tracker is not None:
                        tracker.start_phase(processor)
                    save_dir = os.path.join(model, lang, processor)
                    os.makedirs(save_dir, exist_ok=True)
                    arguments = _arguments(processor, settings, lang, train, heldout, work, save_dir)
                    _run(processor, arguments, conllu_path, log, quiet)
        finally:
            if tracker is not None:
                tracker.close()
        _install(model, output_dir, lang)
    return time.perf_counter() - start


def _install(model: str, output_dir: str, lang: str) -> None:
    """The trained processors into `output_dir/<lang>/`, replacing that language's earlier ones only: one
    folder can hold several languages, as stanza's own model folders do."""
    target = os.path.join(output_dir, lang)
    os.makedirs(target, exist_ok=True)
    for processor in PROCESSORS:
        shutil.rmtree(os.path.join(target, processor), ignore_errors=True)
        trained = os.path.join(model, lang, processor)
        if os.path.isdir(trained):
            shutil.move(trained, os.path.join(target, processor))
    resources = os.path.join(output_dir, "resources.json")
    if not os.path.exists(resources):
        with open(resources, "w", encoding="utf-8") as stream:
            stream.write("{}\n")  # stanza's Pipeline needs the file; empty: the models are named by path


def _run(processor: str, arguments: list[str], conllu_path: str, log: list[str], quiet: bool) -> None:
    """One stanza trainer in this process; any failure is one line (stanza's log shown when quiet)."""
    try:
        _stanza_module(processor).main(args=arguments)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - stanza raises many types on bad data or options
        if quiet:
            sys.stderr.write("\n".join(log[-30:]) + "\n")
        raise InputError(f"stanza {processor} training failed ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:200] if str(err) else ''})", conllu_path) from None
    if not os.path.isfile(os.path.join(arguments[arguments.index("--save_dir") + 1], "synprep.pt")):
        raise InputError(f"stanza {processor} training wrote no model (too few steps to evaluate once?)",
                         conllu_path)
