"""`synprep parser train`: train a UDPipe 1 model (tokenizer, tagger, parser) from a CoNLL-U treebank.

Presets (per component option strings, UDPipe's syntax): `tiny` trains in seconds on a few dozen sentences
(tests, demos; a poor parser); `small` a few minutes on a UD dev set (~1-2k sentences) on one core;
`medium` the options of the shared English/German development models (en_ewt: 36 min on one core for
12.5k sentences); `default` UDPipe's own defaults (hours on a large treebank). Any component's string can be
replaced (`tokenizer_options`, ...; `none` leaves the component out, e.g. a tagger+parser model for
pre-tokenized input).

Progress: UDPipe logs one line per epoch/iteration from C++ to file descriptor 2; it is read through a
pipe and turned into a progress bar (terminal) or one line per iteration (logs) with elapsed time and ETA.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

from ..conllu import MISC, read_conllu, read_trees
from ..errors import InputError
from ..textio import read_lines

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

    def number(values: dict[str, str], key: str, default: int) -> int:
        text = values.get(key, "")
        return int(text) if text.isdigit() else default

    total = 0
    for name in COMPONENTS:
        text = options[name]
        if text == "none":
            continue
        values = dict(item.split("=", 1) for item in text.split(";") if "=" in item)
        if name == "tokenizer":
            total += number(values, "epochs", UDPIPE_DEFAULT_ROUNDS[name])
        elif name == "tagger":
            total += number(values, "models", 2) * number(values, "iterations", 20)
        else:
            total += number(values, "iterations", UDPIPE_DEFAULT_ROUNDS[name])
    return max(total, 1)


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


BACKEND_OPTIONS = {"udpipe": ("--tokenizer-options", "--tagger-options", "--parser-options"),
                   "spacy": ("--set", "--lang", "--max-minutes")}  # options only one trainer reads


def check_backend_options(backend: str, given: dict[str, object]) -> None:
    """Refuse an option of the other backend's trainer (it would be silently ignored)."""
    for other, names in BACKEND_OPTIONS.items():
        for name in names:
            if other != backend and given.get(name) not in (None, (), []):
                raise InputError(f"{name} applies to --backend {other} only, not {backend}")


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
PHASES = (("Training tokenizer", "tokenizer"), ("Training tagger", "tagger"), ("Parser ", "parser"))


class Progress:
    """Turns UDPipe's log lines into progress: a tqdm bar on a terminal, else one line per epoch/iteration
    (elapsed, ETA), written to `stream`. `verbose` also copies every log line."""

    def __init__(self, total: int, stream: IO[str], verbose: bool = False, bar: bool | None = None) -> None:
        self.total, self.done, self.phase = total, 0, "tokenizer"
        self.stream, self.verbose, self.start, self.use_bar = stream, verbose, time.monotonic(), bar
        self.bar: tqdm | None = None

    def begin(self) -> None:
        """Start the clock (and the bar, on a terminal)."""
        from tqdm import tqdm

        self.start = time.monotonic()
        if self.stream.isatty() if self.use_bar is None else self.use_bar:
            self.bar = tqdm(total=self.total, unit=" it", desc="train", file=self.stream, leave=False)

    def line(self, text: str) -> None:
        if self.verbose:
            self.stream.write(text + "\n")
        for prefix, phase in PHASES:
            if text.startswith(prefix):
                self.phase = phase
        if not ROUND.match(text):
            return
        self.done += 1
        if self.bar is not None:
            self.bar.set_description(f"train {self.phase}")
            self.bar.update(1)
            return
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * max(self.total - self.done, 0)
        self.stream.write(f"parser train: {self.phase} {self.done}/{self.total} epochs+iterations, "
                          f"{_clock(elapsed)} elapsed, ETA {_clock(eta)}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.stream.flush()


def _fd(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


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
    pid = os.fork()
    if pid == 0:  # the child: train, write the model or the error, never return
        code = 4
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the C++ training at once
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
    tracker = Progress(planned_rounds(chosen), stream, verbose=not quiet) if stream is not None else None
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
