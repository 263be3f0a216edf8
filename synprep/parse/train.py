"""`synprep parser train`: train a UDPipe 1 model (tokenizer, tagger, parser) from a CoNLL-U treebank.

Presets: `tiny` trains in seconds on a few dozen sentences (tests, demos; a poor parser), `default` uses
UDPipe's own defaults (minutes to hours; what a language without a released model needs).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import IO

from ..conllu import read_trees
from ..errors import InputError
from ..textio import read_lines

PRESETS: dict[str, dict[str, str]] = {
    "tiny": {
        "tokenizer": "epochs=3;dimension=16;segment_size=20;batch_size=50;early_stopping=0",
        "tagger": "models=1;iterations=2;guesser_suffix_rules=4;guesser_enrich_dictionary=2;early_stopping=0",
        "parser": "iterations=2;hidden_layer=50;embedding_form=16;embedding_upostag=8;embedding_feats=0;"
                  "embedding_xpostag=0;embedding_lemma=0;embedding_deprel=8;batch_size=10;early_stopping=0",
    },
    "default": {"tokenizer": "default", "tagger": "default", "parser": "default"},
}


@contextlib.contextmanager
def _captured_stderr() -> Iterator[IO[bytes]]:
    """UDPipe's trainer logs from C++ straight to file descriptor 2: point it at a temporary file meanwhile
    (yielded, to show on failure)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        try:
            os.dup2(log.fileno(), 2)
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def train_udpipe(conllu_path: str, output_path: str, preset: str = "default",
                 heldout_path: str | None = None, quiet: bool = True) -> float:
    """Train a UDPipe model from `conllu_path` and write it to `output_path`; returns the seconds it took.
    `quiet` (default) shows UDPipe's training log only when training fails."""
    from ufal.udpipe import InputFormat, Model, ProcessingError, Sentence, Sentences, Trainer

    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r} (choose from {', '.join(PRESETS)})")
    options = {k: Trainer.DEFAULT if v == "default" else v for k, v in PRESETS[preset].items()}
    start = time.perf_counter()

    def load(path: str) -> Sentences:
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

    train = load(conllu_path)
    heldout = load(heldout_path) if heldout_path else Sentences()
    error = ProcessingError()
    with _captured_stderr() if quiet else contextlib.nullcontext() as log:
        model = Trainer.train("morphodita_parsito", train, heldout, options["tokenizer"], options["tagger"],
                              options["parser"], error)
        if error.occurred() and log is not None:  # the log explains the failure: show it
            log.seek(0)
            failure_log = log.read()
    if error.occurred():
        if quiet:
            sys.stderr.buffer.write(failure_log)
            sys.stderr.flush()
        raise InputError(f"UDPipe training failed: {error.message}", conllu_path)
    parent = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(parent, exist_ok=True)
    with open(output_path, "wb") as stream:
        stream.write(model)
    if Model.load(output_path) is None:  # Model.load returns None instead of raising
        raise InputError("the trained model cannot be loaded back", output_path)
    return time.perf_counter() - start
