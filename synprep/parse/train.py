"""`synprep parser train`: train a UDPipe 1 model (tokenizer, tagger, parser) from a CoNLL-U treebank.

Presets (per component option strings, UDPipe's syntax): `tiny` trains in seconds on a few dozen sentences
(tests, demos; a poor parser); `small` a few minutes on a UD dev set (~1-2k sentences) on one core;
`medium` the options of the shared English/German development models (en_ewt: 36 min on one core for
12.5k sentences); `default` UDPipe's own defaults (hours on a large treebank). Any component's string can be
replaced (`tokenizer_options`, ...; `none` leaves the component out, e.g. a tagger+parser model for
pre-tokenized input).

Progress: UDPipe logs one line per epoch/iteration from C++ to file descriptor 2; it is read through a
pipe and turned into progress (`synprep.progress`): a bar on a terminal, else a line at the progress interval
with elapsed time and an ETA that weighs each component's rounds by their cost (ROUND_COST).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from typing import IO, Any

from tqdm import tqdm

from ..conllu import MISC, read_conllu, read_trees
from ..errors import InputError
from ..processes import ENDING_SIGNALS, die_with_parent, release_signals, signals_held
from ..progress import ProgressLines, clock, progress
from ..textio import read_lines
from .quality import interim_line

PRESETS: dict[str, dict[str, str]] = {
    "tiny": {
        "tokenizer": "epochs=3;dimension=16;segment_size=20;batch_size=50;early_stopping=0",
        "tagger": "models=1;iterations=2;guesser_suffix_rules=4;guesser_enrich_dictionary=2;early_stopping=0",
        "parser": "iterations=2;hidden_layer=50;embedding_form=16;embedding_upostag=8;embedding_feats=0;"
                  "embedding_xpostag=0;embedding_lemma=0;embedding_deprel=8;batch_size=10;early_stopping=0",
    },
    "small": {
        "tokenizer": "epochs=4;dimension=24;segment_size=50;batch_size=50;early_stopping=0",
        "tagger": "models=1;iterations=4;guesser_suffix_rules=4;guesser_enrich_dictionary=2;early_stopping=0",
        "parser": "iterations=4;hidden_layer=100;embedding_form=32;embedding_upostag=16;embedding_feats=0;"
                  "embedding_xpostag=0;embedding_lemma=0;embedding_deprel=16;batch_size=10;early_stopping=0",
    },
    "medium": {  # the shared en_ewt / de_gsd development models (../shared/models/README.md)
        "tokenizer": "epochs=8;dimension=24;segment_size=50;batch_size=50;early_stopping=0",
        "tagger": "models=1;iterations=8;guesser_suffix_rules=6;guesser_enrich_dictionary=4;early_stopping=0",
        "parser": "iterations=6;hidden_layer=200;embedding_form=50;embedding_upostag=20;embedding_feats=0;"
                  "embedding_xpostag=0;embedding_lemma=0;embedding_deprel=20;batch_size=10;early_stopping=0",
    },
    "default": {"tokenizer": "default", "tagger": "default", "parser": "default"},
}
COMPONENTS = ("tokenizer", "tagger", "parser")
UDPIPE_DEFAULT_ROUNDS = {"tokenizer": 100, "tagger": 20 * 2, "parser": 10}  # epochs, models x iterations
NO_SPACE_SCRIPTS = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x0E00, 0x0EFF),
                    (0x1000, 0x109F), (0x1780, 0x17FF), (0x0F00, 0x0FFF))  # kana, Han, Thai/Lao, Myanmar, ...


def component_options(preset: str, overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """The option string per component: the preset's, replaced by any non-empty override."""
    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
    options = dict(PRESETS[preset])
    for name, value in (overrides or {}).items():
        if name not in COMPONENTS:
            raise InputError(f"unknown UDPipe component {name!r} (choose from {', '.join(COMPONENTS)})")
        if value:
            options[name] = value
    return options


def planned_rounds(options: dict[str, str]) -> int:
    """Epochs + iterations UDPipe will log for these options (an upper bound with early stopping; a value
    that is not a number counts as the default: UDPipe itself reports it)."""
    return max(sum(planned_component_rounds(options).values()), 1)


def written_without_spaces(path: str, sample: int = 2000) -> tuple[bool, bool]:
    """(any token has SpaceAfter=No, most letters are in a script written without spaces) over the first
    `sample` sentences: a treebank for such a language without SpaceAfter=No (UD v1, e.g. Chinese-GSD 1.4)
    trains a tokenizer that does not segment."""
    space_after = False
    letters = unspaced = 0
    for number, sentence in enumerate(read_conllu(path)):
        if number == sample:
            break
        rows = [cols for _, _, cols in sentence.multiword] + sentence.words
        space_after = space_after or any("SpaceAfter=No" in cols[MISC].split("|") for cols in rows)
        for cols in sentence.words:
            for char in cols[1]:
                if char.isalpha():
                    letters += 1
                    code = ord(char)
                    unspaced += any(low <= code <= high for low, high in NO_SPACE_SCRIPTS)
    return space_after, letters > 0 and unspaced > letters / 2


def check_treebank(path: str, allow_no_spaceafter: bool = False) -> str | None:
    """A refusal (InputError) or, with `allow_no_spaceafter`, a warning for a treebank without SpaceAfter=No
    in a language written without spaces; None when the treebank is fine. Every tree is checked first (heads in
    range, one root, no cycle: the checks of every treebank reader), so both trainers refuse the same trees."""
    for _ in read_trees(path):
        pass
    space_after, unspaced = written_without_spaces(path)
    if space_after or not unspaced:
        return None
    message = ("no token has SpaceAfter=No, but the text is written without spaces (Han, kana, Thai, ...): "
               "a tokenizer trained on it does not segment raw text (UD v1 treebanks lack SpaceAfter; "
               "use a UD v2 release)")
    if not allow_no_spaceafter:
        raise InputError(message + "; --allow-no-spaceafter trains anyway", path)
    return f"{path}: warning: {message}"


ROUND = re.compile(r"^(Epoch|Iteration) \d+[:,]")
HELDOUT = re.compile(r"heldout UAS ([\d.]+)%, LAS ([\d.]+)%")  # UDPipe's parser, each iteration with held-out data
PHASES = (("Training tokenizer", "tokenizer"), ("Training tagger", "tagger"), ("Parser ", "parser"))
# Seconds of one round (epoch/iteration) of a component relative to a tokenizer epoch, per preset, measured here:
# `tiny` on sample_data/en.conllu (3 s per tokenizer epoch, 0.3 s per tagger, 1.5 s per parser iteration), `small`
# on en_ewt dev (2,002 sentences, loaded 2-core machine: 19.5 s per tokenizer epoch, 38 s per tagger and 131 s per
# parser iteration; 774 s in all). A component not started yet is estimated at its ratio times the measured
# seconds per unit of ratio so far. One rate over all rounds said 2m36s left after the tokenizer where 11m35s
# were (4.5x short): the cheap tokenizer epochs come first and the parser's iterations, each about seven epochs'
# worth, last. Other presets and options use `small`'s ratios (a bigger parser network: still short until the
# parser's first iteration is measured).
ROUND_COST = {"tiny": {"tokenizer": 1.0, "tagger": 0.1, "parser": 0.5},
              "small": {"tokenizer": 1.0, "tagger": 2.0, "parser": 6.7}}


def planned_component_rounds(options: dict[str, str]) -> dict[str, int]:
    """Epochs/iterations UDPipe will log per component, in training order (0: component left out)."""

    def number(values: dict[str, str], key: str, default: int) -> int:
        text = values.get(key, "")
        return int(text) if text.isdigit() else default

    rounds = {}
    for name in COMPONENTS:
        values = dict(item.split("=", 1) for item in options[name].split(";") if "=" in item)
        if options[name] == "none":
            rounds[name] = 0
        elif name == "tagger":
            rounds[name] = number(values, "models", 2) * number(values, "iterations", 20)
        else:
            rounds[name] = number(values, "epochs" if name == "tokenizer" else "iterations",
                                  UDPIPE_DEFAULT_ROUNDS[name])
    return rounds


class Progress:
    """Turns UDPipe's log lines into progress (`synprep.progress`): a tqdm bar on a terminal (`bar`: None),
    else a line at the progress interval with elapsed time and an ETA that counts every component's remaining
    rounds at that component's own cost (ROUND_COST, `costs`). `verbose` also copies every log line."""

    def __init__(self, rounds: dict[str, int], stream: IO[str], verbose: bool = False, bar: bool | None = None,
                 costs: dict[str, float] | None = None) -> None:
        self.rounds, self.phase = rounds, next((c for c in COMPONENTS if rounds.get(c)), "tokenizer")
        self.costs = costs or ROUND_COST["small"]
        self.stream, self.verbose, self.use_bar = stream, verbose, bar
        self.done: dict[str, int] = dict.fromkeys(COMPONENTS, 0)
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}
        self.counter: Any = None

    @property
    def total(self) -> int:
        return max(sum(self.rounds.values()), 1)

    def begin(self) -> None:
        """Start the clock and the bar or lines."""
        self.started = {self.phase: time.monotonic()}
        self.counter = progress(f"parser train: {self.phase}", self.total, "epochs+iterations",
                                shown=self.use_bar if self.use_bar else None, stream=self.stream,
                                estimate=self.eta, leave=False)

    def eta(self) -> float | None:
        """Seconds left: the current component's remaining rounds at its measured time per round; a component
        not started yet at its cost (`costs`) times the measured seconds per unit of cost over all components so
        far (None before the first round)."""
        now = time.monotonic()
        spent = {name: (now if name == self.phase else self.ended[name]) - self.started[name]
                 for name in COMPONENTS if self.done[name]}
        if not spent:
            return None
        unit = sum(spent.values()) / sum(self.done[name] * self.costs[name] for name in spent)
        return sum(max(self.rounds.get(name, 0) - self.done[name], 0)
                   * (spent[name] / self.done[name] if name in spent else unit * self.costs[name])
                   for name in COMPONENTS)

    def line(self, text: str) -> None:
        if self.verbose:
            self.stream.write(text + "\n")
        for prefix, phase in PHASES:
            if text.startswith(prefix) and phase != self.phase:
                self.ended[self.phase] = time.monotonic()
                self.phase, self.started[phase] = phase, time.monotonic()
                self.counter.set_description(f"parser train: {phase}")
        if ROUND.match(text):
            self.done[self.phase] += 1
            self.counter.update(1)
            scored = HELDOUT.search(text) if self.phase == "parser" else None
            if scored:
                where = f"parser iteration {self.done['parser']}/{self.rounds.get('parser', 0)}"
                tqdm.write(interim_line(where, float(scored.group(2)), float(scored.group(1))), file=self.stream)
            eta = self.eta()
            if not isinstance(self.counter, ProgressLines) and eta is not None:  # a bar's own ETA is one rate
                self.counter.set_postfix_str(f"ETA {clock(eta)} (by component)")

    def close(self) -> None:
        if self.counter is not None:
            self.counter.close()
        self.stream.flush()


def _fd(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _train_in_child(train: object, heldout: object, options: list[object], output_path: str,
                    progress: Progress | None) -> tuple[str | None, bytes]:
    """Run UDPipe's trainer in a forked child whose file descriptor 2 (UDPipe's C++ log) is a pipe; the parent
    reads the log line by line (the trainer holds the GIL, so a thread could not) and feeds `progress`.
    Returns (error message or None, the whole log)."""
    from ufal.udpipe import ProcessingError, Trainer

    sys.stderr.flush()
    read_end, write_end = os.pipe()
    message_file = tempfile.NamedTemporaryFile(delete=False)
    message_file.close()
    parent = os.getpid()
    with signals_held():
        pid = os.fork()
    if pid == 0:  # the child: train, write the model or the error, never return
        code = 4
        try:
            die_with_parent(parent)  # a killed parser train leaves no trainer running
            for signum in (signal.SIGINT, *ENDING_SIGNALS):  # Ctrl-C, SIGTERM, SIGHUP end the C++ training at once
                signal.signal(signum, signal.SIG_DFL)
            release_signals()
            os.close(read_end)
            os.dup2(write_end, 2)
            error = ProcessingError()
            model = Trainer.train("morphodita_parsito", train, heldout, *options, error)
            if error.occurred():
                with open(message_file.name, "w", encoding="utf-8") as out:
                    out.write(error.message)
                code = 3
            else:
                with open(output_path + ".part", "wb") as out:
                    out.write(model)
                os.replace(output_path + ".part", output_path)
                code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    own = None
    if progress is not None:
        if _fd(progress.stream) == 2 or progress.stream is sys.stderr:
            own = progress.stream = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8")
        progress.begin()
    log = bytearray()
    try:
        with os.fdopen(read_end, "rb") as pipe:
            for raw in pipe:
                log += raw
                if progress is not None:
                    progress.line(raw.decode("utf-8", "replace").rstrip("\n"))
    except BaseException:  # Ctrl-C, SIGTERM, an error: the trainer ends with this process
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        _, status = os.waitpid(pid, 0)
        if progress is not None:
            progress.close()
        if own is not None:
            own.close()
    with open(message_file.name, encoding="utf-8") as stream:
        message = stream.read()
    os.unlink(message_file.name)
    code = os.waitstatus_to_exitcode(status)
    if code:
        return message or f"the training process ended with status {code}", bytes(log)
    return None, bytes(log)


def _load_sentences(path: str):  # noqa: ANN202 (a ufal.udpipe.Sentences, imported lazily)
    from ufal.udpipe import InputFormat, ProcessingError, Sentence, Sentences

    for _ in read_trees(path):  # our reader: a bad tree is a one-line error with file and line
        pass
    reader = InputFormat.newConlluInputFormat()
    reader.setText("\n".join(read_lines(path)) + "\n")
    sentences, error, sentence = Sentences(), ProcessingError(), Sentence()
    while reader.nextSentence(sentence, error):
        sentences.push_back(sentence)
        sentence = Sentence()
    if error.occurred():
        raise InputError(f"UDPipe cannot read this CoNLL-U: {error.message}", path)
    return sentences


def train_udpipe(conllu_path: str, output_path: str, preset: str = "default",
                 heldout_path: str | None = None, quiet: bool = True,
                 options: dict[str, str | None] | None = None, progress: IO[str] | None = None) -> float:
    """Train a UDPipe model from `conllu_path` and write it to `output_path`; returns the seconds it took.
    `options` replaces the preset's string of a component; `progress`: a stream for progress (None: none);
    `quiet=False` also shows UDPipe's training log (always shown when training fails)."""
    from ufal.udpipe import Model, Sentences, Trainer

    chosen = component_options(preset, options)
    start = time.perf_counter()
    train = _load_sentences(conllu_path)
    heldout = _load_sentences(heldout_path) if heldout_path else Sentences()
    stream = progress if progress is not None else (None if quiet else sys.stderr)
    tracker = Progress(planned_component_rounds(chosen), stream, verbose=not quiet,
                       costs=ROUND_COST.get(preset)) if stream is not None else None
    parent = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(parent, exist_ok=True)
    failure, log = _train_in_child(train, heldout, [Trainer.DEFAULT if chosen[c] == "default" else chosen[c]
                                                    for c in COMPONENTS], output_path, tracker)
    if failure is not None:
        if quiet:
            sys.stderr.buffer.write(log)
            sys.stderr.flush()
        raise InputError(f"UDPipe training failed: {failure}", conllu_path)
    if Model.load(output_path) is None:  # Model.load returns None instead of raising
        raise InputError("the trained model cannot be loaded back", output_path)
    return time.perf_counter() - start
