"""Translating with a trained checkpoint: split folders, raw text (parsed and BPE'd as in training), read whole or
line by line (--interactive), best translation or n-best lists."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TextIO

import torch

from synprep.shards import SourcePreparation
from synprep.textio import decode_line, open_binary

from .config.recipe import stored_train_config
from .dataset import ParallelData
from .decode import Ranked, decode_split_nbest, run_settings
from .runfolder.checkpoints import load_checkpoint
from .runfolder.source import travelling_preparation
from .search import check_beam

log = logging.getLogger(__name__)

def iter_lines(path: str) -> Iterator[str]:
    """The lines of `path` ('-' = stdin) one at a time as they arrive (no read-ahead), without '\\n'."""
    stream = open_binary(path)
    for lineno, raw in enumerate(iter(stream.readline, b""), 1):
        yield decode_line(raw[:-1] if raw.endswith(b"\n") else raw, path, lineno)


def may_fit(line: str, positions: int, longest: int) -> bool:
    """Whether raw `line` may fit `positions` sub-words, judged before it is parsed: every word is at least one
    sub-word, every sub-word at most `longest` characters (a line over either bound would be parsed and
    featurized, at a cost growing with its length, only to be left empty)."""
    if len(line) <= positions:
        return True
    words = line.split()
    return len(words) <= positions and sum(map(len, words)) <= positions * longest


def default_device() -> str:
    """cuda where torch sees a GPU, else cpu."""
    return "cuda" if torch.cuda.is_available() else "cpu"


class Translator:
    """A checkpoint loaded once, with its decoding settings (nbest = 0: the best translation only)."""

    def __init__(self, checkpoint: str, device: str | None = None, beam: int | None = None,
                 length_penalty: float | None = None, max_tokens: int | None = None, nbest: int = 0,
                 progress: bool = True, parser_model: str | None = None, bpe_codes: str | None = None,
                 threads: int | None = None) -> None:
        """Decoding settings left None are the run's (`decode.run_settings`); `threads` is set at once;
        `device` None: cuda where there is one."""
        from .arguments import check_decoding, syntrain_arguments

        checkpoint = syntrain_arguments("syntrain translate", checkpoint=checkpoint, device=device, nbest=nbest,
                                        progress=progress, parser_model=parser_model,
                                        bpe_codes=bpe_codes)["checkpoint"]
        check_decoding("syntrain translate", beam=beam, length_penalty=length_penalty, max_tokens=max_tokens,
                       threads=threads)
        if device is None:
            device = default_device()
        self.model, self.vocab, self.ckpt = load_checkpoint(checkpoint, device)
        self.checkpoint, self.source_files = checkpoint, (parser_model, bpe_codes)  # raw text: runfolder.source
        self.preparation: SourcePreparation | None = None
        settings = run_settings(stored_train_config(self.ckpt, checkpoint), beam, length_penalty, max_tokens, threads)
        check_beam(settings.beam, self.model.cfg.sizes.vocab_size)  # before any input is read
        if nbest > settings.beam:
            raise ValueError(f"--nbest {nbest} needs --beam >= {nbest} (the run's beam is {settings.beam})")
        settings.apply()
        self.device, self.settings = device, settings
        self.nbest, self.progress = nbest, progress
        # sub-words a source may have (+ EOS, + the source prefix)
        self.positions = self.model.cfg.sizes.max_len - 1 - len(self.model.cfg.architecture.source_prefix)
        self.longest = max((len(piece.removesuffix("@@")) for piece in self.vocab.src.itos), default=1)

    def split(self, path: str) -> ParallelData:
        """A split folder written by synprep convert, with this model's vocabulary."""
        return ParallelData(path, self.vocab, **self.model.switches.decoding_data_arguments())

    def _decode(self, data: ParallelData) -> list[Ranked]:
        return decode_split_nbest(self.model, data, self.vocab, self.settings, self.nbest, device=self.device,
                                  progress=self.progress)

    def translate_split(self, path: str) -> list[Ranked]:
        """Every kept row of a split, in row order."""
        return self._decode(self.split(path))

    def translate(self, lines: list[str]) -> list[str]:
        """Raw sentences -> the best translation of each ("" for a blank line or one too long for the model)."""
        return [ranked[0][1] if ranked else "" for ranked in self.translate_raw(lines)]

    def translate_raw(self, lines: list[str]) -> list[Ranked]:
        """Raw sentences -> one ranked list per line; a blank line or one longer than the model's positions gets
        an empty list (found before parsing, or after it before inputs are made: bounded time and memory)."""
        filled = [i for i, line in enumerate(lines) if line.strip() and may_fit(line, self.positions, self.longest)]
        results: list[Ranked] = [[] for _ in lines]
        if not filled:
            return results
        if self.preparation is None:
            self.preparation = travelling_preparation(self.ckpt, self.checkpoint, *self.source_files)
        from synprep.prepare import prepare_source  # parser and BPE: only for raw text

        table = prepare_source([lines[i] for i in filled], self.preparation, max_words=self.positions)
        if not table.num_rows:
            return results
        # every source feature of the training dataset (distances, labels, ...), made as convert made them
        data = ParallelData("<input>", self.vocab, table=table, configuration=self.ckpt["pipeline"],
                            signature=self.ckpt.get("signature", {}),
                            **self.model.switches.decoding_data_arguments())
        for row, ranked in zip(table.column("id").to_pylist(), self._decode(data)):
            results[filled[row]] = ranked
        return results

    def writer(self, out: TextIO) -> Callable[[int, Ranked], None]:
        """A function (1-based input line, ranked list) -> writes the translation line, or with n-best one
        `LINE<TAB>SCORE<TAB>TRANSLATION` line per hypothesis (none for a blank input line)."""
        def write(lineno: int, ranked: Ranked) -> None:
            if not self.nbest:
                out.write((ranked[0][1] if ranked else "") + "\n")
            for score, text in ranked if self.nbest else []:
                out.write(f"{lineno}\t{score:.4f}\t{text}\n")
        return write

    def translate_lines(self, lines: list[str], out: TextIO) -> tuple[int, int]:
        """Translate all `lines` at once (batched) into `out`; returns the numbers of blank lines and of lines
        too long for the model (both written as empty lines)."""
        write = self.writer(out)
        results = self.translate_raw(lines)
        for lineno, ranked in enumerate(results, 1):
            write(lineno, ranked)
        blank = sum(1 for line in lines if not line.strip())
        return blank, sum(1 for line, ranked in zip(lines, results) if line.strip() and not ranked)

    def interactive(self, lines: Iterable[str], out: TextIO, say: Callable[[str], None] | None = None) -> None:
        """Translate each line as it arrives and flush its output at once (as fairseq-interactive); a line too
        long for the model is left empty and `say` (default: standard error) tells it at once."""
        say = say or log.info
        write, progress = self.writer(out), self.progress
        self.progress = False
        try:
            for lineno, line in enumerate(lines, 1):
                ranked = self.translate_raw([line])[0]
                write(lineno, ranked)
                out.flush()
                if line.strip() and not ranked:
                    say(f"line {lineno}: longer than the model's {self.model.cfg.sizes.max_len} positions: left empty")
        finally:
            self.progress = progress
