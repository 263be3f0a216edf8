"""`synprep convert`: whole parallel corpora -> Arrow shards (CONTRACT.md "Arrow shards").

Orchestration only; every stage is the library code of its own module:
read (corpus) -> filter (filter) -> parse (parse) -> BPE (bpe) -> features (featurize) -> shards (shards).

Work is cut into pieces of PIECE_ROWS input pairs; shard k holds the kept pairs of input pairs
[k * shard_size, (k + 1) * shard_size), one Arrow record batch per piece. Every piece is a pure function of
its input lines and the configuration, so the shards are byte-identical whatever the number of workers or
the engine, and an interrupted run resumes by skipping what is complete. Each input is read once, in step
on both sides; each distinct sentence is parsed (or, pre-parsed, read) and validated once in phase 1, which stores
token-level CoNLL-U; phase 3 reads it with the column-wise reader and featurizes column-wise:
  phase 1  filter each piece (workers), plan in input order which lines it parses (the first occurrence of each
           side text in the convert: see treestore), parse them (workers), write the piece with the trees of
           repeated lines copied from the piece that parsed them
                                          -> OUT/.work/<split>/piece-KKKKK-JJJ.{json,src.conllu,tgt.conllu,
                                             store.npz[,src.spare,tgt.spare]}
                                             (+ each side's word counts in the .json, on train when
                                              BPE is learned, merged once)
  phase 2  learn joint BPE on train        -> OUT/codes.bpe (skipped with given codes); with [bpe] joint =
                                             false, each side's codes on its own words -> OUT/codes.{src,tgt}.bpe
  phase 3  features of each piece -> shard -> OUT/<split>/part-KKKKK.arrow, then OUT/<split>/manifest.json
Every file is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from . import __version__
from .bpe import Bpe, read_vocabulary
from .bpe_learn import count_words, learn_joint_from_counts
from .conllu import chunk_trees, format_sentence, to_tree, tree_to_sentence
from .corpus import BadRow, ConlluBlock, detect_format, read_side
from .errors import InputError
from .featurize import FeatureColumns, FeatureConfig, featurize, pair_batch
from .filter import (
    MAX_LINE_CHARS,
    FilterSettings,
    check_pair_detailed,
    likely_cause,
    make_identifier,
    rejection_warning,
)
from .filter import REASONS as FILTER_REASONS
from .normalize import normalizer
from .options import ENGINES
from .parallel import capped_workers, default_workers, ordered_map
from .parse import ParserSpec
from .pipeline import NormalizeConfig, ParserConfig, PipelineConfig, SplitConfig
from .schema import MADE_FROM_HEADS, pair_schema
from .shards import LOCK, Manifest, WriterLock, load_manifest, shard_name, write_paths, write_shard
from .textio import atomic_write, check_text_file, count_lines, file_sha256, tsv_field
from .trees import Tree
from .treestore import ERROR, JOINED, SPARE, TreeStore, entries_array, text_key

OPEN_PIECES = 32  # piece files kept open while repeated lines are copied from them
PIECE_ROWS = 1000  # input pairs per unit of work and per Arrow record batch (changing it changes the bytes)
CONVERT_REASONS = ("invalid_tree", "non_projective", "bad_row")  # convert's own (bad_row: a TSV row, read)
MIN_TRAIN_PAIRS = 10  # fewer train pairs kept, most rejected: the run stops after the filter (as with none kept)
SIDES = ("src", "tgt")
RUN_INFO = "run.json"  # at OUT: written last (workers, engine, timings, the configuration's fingerprint)
REMOVING = ".removing"  # OUT/.work is renamed to OUT/.work.removing, then removed


@dataclass(frozen=True)
class ParseJob:
    """What a phase-1 worker needs for one split (picklable; workers load the models once from it)."""

    filter: FilterSettings | None  # None: only undecodable, empty and overlong pairs are rejected (valid/test)
    parsers: tuple[ParserSpec | None, ParserSpec | None]  # per side; None = the side is CoNLL-U already
    write_tokens: bool  # also count the words of the tokens (train, when BPE codes are learned)
    max_chars: int  # the [filter] max_chars bound, on every split
    normalize: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # [normalize] per side, before filter and parse


@dataclass(frozen=True)
class FeatureJob:
    """What a phase-3 worker needs for one split."""

    features: tuple[FeatureConfig, FeatureConfig]
    codes: tuple[str | None, str | None]  # per side (the same file twice when joint)
    vocabularies: tuple[frozenset[str] | None, frozenset[str] | None] = (None, None)
    codes_text: tuple[str | None, str | None] = (None, None)  # the codes' text: workers elsewhere need not see OUT


@dataclass
class SplitStats:
    input_pairs: int = 0
    rows: int = 0
    rejected: Counter = field(default_factory=Counter)
    joined_lines: int = 0  # lines the parser split into several sentences (joined into one tree)
    sentences: dict[str, Counter] = field(default_factory=dict)  # per parsed side: distinct, repeated
    seconds: Counter = field(default_factory=Counter)  # per stage


def _piece_prefix(work: str, shard: int, piece: int) -> str:
    return os.path.join(work, f"piece-{shard:05d}-{piece:03d}")


@dataclass
class _Piece:
    """A piece in flight through phase 1 (held by the driver from reading to writing)."""

    prefix: str
    index: int  # in the convert's list of pieces (all splits): store locations name pieces by it
    first_id: int
    items: tuple[list, list]
    filtered: dict[str, Any] = field(default_factory=dict)
    plan: list[list[tuple[bytes, bool, bool]] | None] = field(default_factory=lambda: [None, None])
    # per parsed side, per kept row: (key, first in this convert, parsed by this piece)


def _block_forms(block: str) -> list[str]:
    """The token forms of a CoNLL-U block written from a token-level tree (no multiword ranges)."""
    return [line.split("\t", 2)[1] for line in block.split("\n") if line and line[0] != "#"]


def _save_entries(prefix: str, entries: list[list[tuple[bytes, tuple[int, int, int, int]]]]) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, **{side: entries_array(entries[s]) for s, side in enumerate(SIDES)})
    atomic_write(prefix + ".store.npz", buffer.getvalue())


# ------------------------------------------------------------------------------------ phase 1: parse


def _filter_setup(job: ParseJob) -> tuple[ParseJob, Any]:
    return job, make_identifier(job.filter) if job.filter else None


def _parse_setup(job: ParseJob) -> tuple[Any, Any]:
    return tuple(spec.load() if spec else None for spec in job.parsers)  # type: ignore[return-value]


def _preparsed_trees(blocks: list[ConlluBlock]) -> list[Tree | str]:
    """The token-level tree of every CoNLL-U block, or the error message of a broken one."""
    lines = [line for block in blocks for line in (*block.lines, "")]
    try:
        return list(chunk_trees(lines, blocks[0].path, blocks[0].line)) if blocks else []
    except InputError:  # some sentence is broken: find which, one by one
        out: list[Tree | str] = []
        for block in blocks:
            try:
                out.append(chunk_trees(list(block.lines), block.path, block.line)[0])
            except InputError as err:  # the file and line, not the sentence ordinal (unknown within a block)
                out.append(str(InputError(err.message, err.path, err.line)))
        return out


def _block_text(block: ConlluBlock) -> str:
    """The text of a broken CoNLL-U sentence (for the filter and rejected.tsv): `# text`, else its word forms."""
    for line in block.lines:
        name, sep, value = line[1:].partition("=")
        if line.startswith("#") and sep and name.strip() == "text":
            return value.strip()
    words = [line.split("\t") for line in block.lines if not line.startswith("#")]
    return " ".join(cols[1] for cols in words if len(cols) > 1 and cols[0].isdigit())


def _parsed_trees(parser: Any, texts: list[str]) -> tuple[list[Tree | str], list[bool]]:
    """Parse lines into token-level trees (or the message of a broken parser output), and whether the parser
    split each line into several sentences (joined); a tree's text is its line without outer whitespace."""
    parsed = parser.parse(texts)
    trees: list[Tree | str] = []
    for item, text in zip(parsed, texts):
        try:
            if not item.sentence.words:
                raise InputError("empty sentence")
            trees.append(to_tree(item.sentence, "<parser output>"))
            trees[-1].text = text.strip()
        except InputError as err:
            trees.append(err.message)
    return trees, [p.pieces > 1 for p in parsed]


def _block(tree: Tree | str, flags: int = 0) -> tuple[str, int]:
    """A tree as its CoNLL-U block without `# sent_id` (added per row when the piece is written) and its store
    flags; a parse error as its message, flagged ERROR."""
    if not isinstance(tree, Tree):
        return tree, flags | ERROR
    tree.sent_id = None
    return format_sentence(tree_to_sentence(tree)), flags


def _read_items(side_items: list) -> tuple[list[Any], list[Tree | str] | None]:
    """One side of a piece: what the filter sees per pair (raw bytes, or the text of a pre-parsed sentence) and,
    for pre-parsed input, the trees (or error messages)."""
    if not side_items or not isinstance(side_items[0], ConlluBlock):
        return list(side_items), None
    trees = _preparsed_trees(side_items)
    for tree in trees:
        if isinstance(tree, Tree) and tree.text is None:
            tree.text = " ".join(tree.tokens)
    return [tree.text if isinstance(tree, Tree) else _block_text(block)
            for tree, block in zip(trees, side_items)], trees


def _normalized(texts: list[Any], trees: list[Tree | str] | None, names: tuple[str, ...]
                ) -> tuple[list[Any], list[Tree | str] | None]:
    """One side of a piece with the [normalize] rules applied: to the raw lines (bytes that are not UTF-8 stay as
    they are, for the filter to reject), or to the text and tokens of pre-parsed trees."""
    if not names:
        return texts, trees
    apply = normalizer(names)
    if trees is None:
        out = []
        for raw in texts:
            if isinstance(raw, BadRow):  # a TSV row without this side's column: rejected as it is
                out.append(raw)
                continue
            try:
                out.append(apply(raw.decode("utf-8")).encode("utf-8"))
            except UnicodeDecodeError:
                out.append(raw)
        return out, None
    for tree in trees:
        if isinstance(tree, Tree):
            tree.tokens = [apply(token) for token in tree.tokens]
            tree.text = apply(tree.text) if tree.text is not None else None
    return [apply(text) for text in texts], trees


def _bad_row(src: Any, tgt: Any) -> tuple[str, str] | None:
    """A TSV row without a side's column: ('bad_row', what is wrong), else None."""
    bad = src if isinstance(src, BadRow) else tgt if isinstance(tgt, BadRow) else None
    return ("bad_row", bad.detail) if bad is not None else None


def _filter_piece(state: tuple[ParseJob, Any], task: tuple) -> dict[str, Any]:
    """Phase 1, first step (per piece): the filter, and the trees of pre-parsed sides."""
    job, langid = state
    first_id, items = task  # items: per side, raw bytes (text) or ConlluBlock (pre-parsed)
    started = time.perf_counter()
    (src_texts, src_trees), (tgt_texts, tgt_trees) = (_normalized(*_read_items(side_items), names)
                                                      for side_items, names in zip(items, job.normalize))
    texts = (src_texts, tgt_texts)
    checked = [_bad_row(src, tgt) or check_pair_detailed(src, tgt, job.filter, langid, job.max_chars)
               for src, tgt in zip(*texts)]
    kept = [i for i, (reason, _) in enumerate(checked) if reason is None]
    return {
        "input_pairs": len(checked), "kept": kept,
        "rejected": [[first_id + i, reason, detail, *(tsv_field(side_texts[i]) for side_texts in texts)]
                     for i, (reason, detail) in enumerate(checked) if reason is not None],
        "preparsed": [None if trees is None else [_block(trees[i]) for i in kept] for trees in (src_trees, tgt_trees)],
        "preparsed_texts": [None if trees is None else [tsv_field(side_texts[i]) for i in kept]
                            for side_texts, trees in zip(texts, (src_trees, tgt_trees))],
        "normalized": [[side_texts[i].decode("utf-8") for i in kept] if names and trees is None else None
                       for side_texts, trees, names in zip(texts, (src_trees, tgt_trees), job.normalize)],
        "seconds": {"filter": time.perf_counter() - started}}


def _parse_lines(parsers: tuple[Any, Any], task: tuple[list[str], list[str]]) -> dict[str, Any]:
    """Phase 1, second step (per piece): parse the lines that no earlier piece parses (per side); blocks and flags
    in order (see `_block`)."""
    started = time.perf_counter()
    sides: list[list[tuple[str, int]]] = []
    for parser, lines in zip(parsers, task):
        trees, joined = _parsed_trees(parser, lines) if lines else ([], [])
        sides.append([_block(tree, JOINED if j else 0) for tree, j in zip(trees, joined)])
    return {"sides": sides, "seconds": {"parse": time.perf_counter() - started}}


# --------------------------------------------------------------------------------- phase 3: features


def _features_setup(job: FeatureJob) -> tuple[FeatureJob, Bpe | None, Bpe | None]:
    return job, *(_side_bpe(codes, text, vocabulary)  # type: ignore[return-value]
                  for codes, text, vocabulary in zip(job.codes, job.codes_text, job.vocabularies, strict=True))


def _side_bpe(codes: str | None, text: str | None, vocabulary: frozenset[str] | None) -> Bpe | None:
    """One side's BPE applier (None: no BPE); `text`: the codes' text, read from a private copy (this worker
    may run on a machine without OUT)."""
    if codes is None:
        return None
    path = codes
    if text is not None:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".bpe", delete=False) as copy:
            copy.write(text)
        path = copy.name
    try:
        return Bpe(path, set(vocabulary) if vocabulary else None)
    finally:
        if path != codes:
            os.remove(path)


def _read_piece(prefix: str) -> tuple[str, str, str]:
    """A parsed piece as a phase-3 task: (its path prefix, for messages; source CoNLL-U; target CoNLL-U). The
    text travels with the task, so a worker needs no access to OUT/.work (Ray nodes without shared storage)."""
    texts = []
    for side in SIDES:
        with open(f"{prefix}.{side}.conllu", encoding="utf-8") as handle:
            texts.append(handle.read())
    return prefix, texts[0], texts[1]


def _trees_of(text: str, path: str) -> list[Tree]:
    lines = text.split("\n")
    return chunk_trees(lines, path) if any(lines) else []


def _features_piece(state: tuple[FeatureJob, Bpe | None, Bpe | None], task: tuple[str, str, str]
                    ) -> tuple[pa.RecordBatch | None, dict[str, Any]]:
    """Features of one parsed piece (see `_read_piece`) as a record batch (None if it has no rows), and its
    stats."""
    job, src_bpe, tgt_bpe = state
    pa.default_memory_pool().release_unused()  # the previous piece's batch (sent by now): keep the worker flat
    started = time.perf_counter()
    prefix, *texts = task
    trees = [_trees_of(text, f"{prefix}.{side}.conllu") for side, text in zip(SIDES, texts, strict=True)]
    columns: list[FeatureColumns] = [
        featurize(side_trees, config, bpe.segment_word if bpe else None)
        for side_trees, config, bpe in zip(trees, job.features, (src_bpe, tgt_bpe))]
    dropped = {**columns[1].dropped, **columns[0].dropped}  # the source side's reason first
    if dropped:  # keep the rows that both sides kept
        both = [i for i in range(len(trees[0])) if i not in dropped]
        columns = [c.take([row_of[i] for i in both]) for c in columns
                   for row_of in [{position: row for row, position in enumerate(c.kept)}]]
    kept = columns[0].kept
    schema = pair_schema(job.features[0].features, job.features[1].features)
    batch = pair_batch([int(trees[0][i].sent_id) for i in kept], [trees[0][i].text for i in kept],
                       [trees[1][i].text for i in kept], columns[0], columns[1], schema) if kept else None
    return batch, {"rows": len(kept), "rejected": dict(Counter(dropped.values())),
                   "seconds": {"bpe+features": time.perf_counter() - started}}


# --------------------------------------------------------------------------------------- engines


def _make_mapper(engine: str, workers: int, ray_address: str | None) -> Callable:
    """A function like `parallel.ordered_map(func, tasks, workers, setup, setup_args)` for the engine; `light=True`
    for a stage that runs beside another one and needs little CPU (Ray: its actors reserve no CPU)."""
    if engine == "local":
        return lambda func, tasks, setup, args, light=False: ordered_map(func, tasks, workers, setup, args)
    from .ray_engine import ray_ordered_map

    return lambda func, tasks, setup, args, light=False: ray_ordered_map(
        func, tasks, workers, setup, args, ray_address, cpus=0 if light else 1)


# ------------------------------------------------------------------------------------ the pipeline


@dataclass
class ConvertOptions:
    workers: int = 0  # 0 = all cores
    engine: str = "local"
    resume: bool = False
    overwrite: bool = False
    ray_address: str | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    keep_work: bool = False  # keep OUT/.work (parsed CoNLL-U, tokens) after a finished run
    dedupe: bool = True  # parse each distinct side text once (False: parse every row; same shards, slower)


class Converter:
    """Runs one pipeline configuration into its output folder."""

    def __init__(self, config: PipelineConfig, options: ConvertOptions) -> None:
        if options.engine not in ENGINES:
            raise InputError(f"unknown engine {options.engine!r} (choose from {', '.join(ENGINES)})")
        if options.workers < 0:
            raise InputError(f"--workers must be >= 0 (0 = all cores), got {options.workers}")
        self.config = config
        self.options = options
        self.workers = options.workers or default_workers()
        if options.engine == "local":
            self.workers = capped_workers(self.workers)
        self.out = config.output
        self.work = os.path.join(self.out, ".work")
        self.reused: set[tuple[str, int, int]] = set()  # pieces a --resume found done: their timings are not ours
        self.map = _make_mapper(options.engine, self.workers, options.ray_address)
        self.stats: dict[str, SplitStats] = {}
        self.piece_pairs: dict[tuple[str, int, int], int] = {}  # input pairs per (split, shard, piece)
        self.stores = {side: TreeStore() for side in SIDES}  # parsed text -> where its tree is (all splits)
        self.claimed: dict[str, set[bytes]] = {side: set() for side in SIDES}  # parsed by pieces in flight
        self.piece_prefixes: list[str] = []  # every piece of the convert, in order (store locations index it)
        self.open_pieces: dict[str, BinaryIO] = {}  # files of written pieces that repeats were copied from

    # -- progress (on stderr; by default only when it is a terminal)

    def _progress(self) -> bool:
        return sys.stderr.isatty() if self.options.progress is None else self.options.progress

    def _bar(self, stage: str, total: int | None) -> tqdm:
        return tqdm(total=total, unit=" pairs", desc=stage, file=sys.stderr, disable=not self._progress())

    def _say(self, line: str) -> None:
        """One line for a stage without a bar of its own."""
        if self._progress():
            tqdm.write(line, file=sys.stderr)

    # -- set-up

    def _check_inputs(self) -> None:
        """Every input file exists (the segment counts are checked while reading, in one pass)."""
        for split in self.config.splits:
            for path in split.src + split.tgt:
                if not os.path.exists(path) or os.path.isdir(path):  # a named pipe is fine: read once
                    raise InputError(f"input file of split {split.name!r} not found (the comments at the top of "
                                     "the pipeline file say where to get it)", path)
                if os.path.isfile(path):
                    check_text_file(path)  # UTF-16/UTF-32 text: one error now, before any work

    def _fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.config.fingerprint_dict(), sort_keys=True).encode()).hexdigest()

    def _input_fingerprints(self) -> dict[str, list]:
        """Every regular input file's [size, sha256] (named pipes are read once: they have none), to tell on
        `--resume` whether the inputs are still those the interrupted run read."""
        found: dict[str, list] = {}
        for split in self.config.splits:
            for path in (*split.src, *split.tgt):
                if os.path.isfile(path) and path not in found:
                    found[path] = [os.path.getsize(path), file_sha256(path)]
        return found

    def _check_inputs_unchanged(self, previous: dict) -> None:
        """--resume: refuse inputs that changed since the interrupted run (the splits would mix two corpora)."""
        recorded = previous.get("inputs")
        if not isinstance(recorded, dict):
            return  # written by an older synprep
        for path, value in self._input_fingerprints().items():
            if path in recorded and list(recorded[path]) != value:
                raise InputError("--resume: this input changed since the interrupted run (other size or content): "
                                 "restore it, or start again with --overwrite", path)

    def _contents(self) -> list[str]:
        """What the output folder holds besides the writer lock and the rejections reports of a stopped run."""
        return ([name for name in os.listdir(self.out) if name != LOCK and not _is_stop_report(name)]
                if os.path.isdir(self.out) else [])

    def _stop_reports(self) -> list[str]:
        """The rejections reports a run stopped after the filter left (OUT/rejected-<split>.tsv)."""
        return [os.path.join(self.out, name) for name in os.listdir(self.out) if _is_stop_report(name)]

    def _clear_output(self) -> None:
        for name in self._contents():
            path = os.path.join(self.out, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)

    def _finished(self) -> bool:
        """The output holds a finished run whose work folder is gone (run.json is written last)."""
        return os.path.isfile(os.path.join(self.out, RUN_INFO)) and not os.path.isdir(self.work)

    def _prepare_output(self) -> None:
        marker = os.path.join(self.work, "config.json")
        if not os.path.isfile(marker) and self._finished():  # run.json keeps the fingerprint of a finished run
            marker = os.path.join(self.out, RUN_INFO)
        if self._contents() and not self.options.resume:
            if not self.options.overwrite:
                raise InputError("output folder exists and is not empty: pass --resume to continue an interrupted "
                                 "run or --overwrite to start again", self.out)
            if not os.path.isfile(marker):
                raise InputError("refusing to --overwrite a folder that synprep convert did not create", self.out)
            self._clear_output()
        if self.options.resume and os.path.isfile(marker):
            with open(marker, encoding="utf-8") as handle:
                previous = json.load(handle)
            if previous.get("fingerprint") != self._fingerprint():
                raise InputError("--resume: this output was made with a different configuration "
                                 "(use --overwrite or another --output)", self.out)
            self._check_inputs_unchanged(previous)
        shutil.rmtree(self.work + REMOVING, ignore_errors=True)  # a removal that was interrupted
        for report in self._stop_reports():  # an earlier run's stop: this run writes its own reports
            os.remove(report)
        if self.options.resume and self._finished():  # nothing left to do
            return
        if self.options.resume:  # what an interrupted run was writing: temporary files, never complete
            for folder, _, names in os.walk(self.out):
                for name in names:
                    if ".tmp-" in name or name.endswith((".part", ".tmp")):
                        os.remove(os.path.join(folder, name))
        os.makedirs(self.work, exist_ok=True)
        atomic_write(marker, json.dumps({"fingerprint": self._fingerprint(), "config": self.config.fingerprint_dict(),
                                         "inputs": self._input_fingerprints()}, indent=2, sort_keys=True).encode())
        write_paths(self.out, self.config.data_root, self.config.file or None)

    def _parser_spec(self, parser: ParserConfig | None, side: str) -> ParserSpec | None:
        if parser is None:
            return None
        model = parser.model
        if model is None and parser.train_conllu:  # train a UDPipe model on the fly (sample pipeline)
            from .parse.train import train_udpipe

            model = os.path.join(self.out, "models", f"{side}.udpipe")
            if not os.path.isfile(model):
                tmp = model + ".tmp"
                self._say(f"train the {side} parser: UDPipe, {parser.preset} preset, on {parser.train_conllu}")
                train_udpipe(parser.train_conllu, tmp, parser.preset, quiet=True)
                os.replace(tmp, model)
        spec = ParserSpec(parser.backend, model, parser.model_dir, parser.lang, parser.pretokenized)
        spec.check()
        if spec.backend in ("udpipe", "spacy-udpipe"):  # cheap to load: fail now, in one line, if unusable
            spec.load()
        return spec  # stanza / spaCy load in the workers (no torch state before fork); errors come back

    # -- phases

    def _pieces(self, split: SplitConfig) -> Iterator[tuple[int, int, tuple]]:
        """(shard, piece, task) for every piece of the split, in input order: both sides read once, in step;
        sides of different lengths are an error naming both counts."""
        size = self.config.shard_size
        sides = [read_side(files, split.format, lang, column) for files, lang, column in
                 ((split.src, self.config.src_lang, split.src_column),
                  (split.tgt, self.config.tgt_lang, split.tgt_column))]
        pairs = zip_longest(*sides)
        position = 0
        while True:
            shard, offset = divmod(position, size)
            rows = min(PIECE_ROWS, size - offset)
            src_items, tgt_items = [], []
            for src, tgt in pairs:
                if src is None or tgt is None:
                    rest = 1 + sum(1 for _ in pairs)
                    n_src, n_tgt = (position + len(src_items) + (rest if tgt is None else 0),
                                    position + len(tgt_items) + (rest if src is None else 0))
                    raise InputError(f"split {split.name!r}: {n_src} source segments ({', '.join(split.src)}) but "
                                     f"{n_tgt} target segments ({', '.join(split.tgt)})")
                src_items.append(src)
                tgt_items.append(tgt)
                if len(src_items) == rows:
                    break
            if not src_items:
                return
            yield shard, offset // PIECE_ROWS, (position, (src_items, tgt_items))
            position += len(src_items)

    def _phase_parse(self, split: SplitConfig, job: ParseJob, bar: tqdm) -> list[tuple[int, int]]:
        """Phase 1 for a split: filter each piece (workers), plan which lines to parse (here, in input order: a
        side's text parsed by an earlier row of this convert is not parsed again), parse (workers), then write
        each piece with the trees of the repeated lines copied from the piece that parsed them."""
        work = os.path.join(self.work, split.name)
        os.makedirs(work, exist_ok=True)
        pieces: list[tuple[int, int]] = []
        waiting: deque[_Piece] = deque()  # filtered in flight
        planned: deque[_Piece] = deque()  # parsed in flight

        def tasks() -> Iterator[tuple]:
            for shard, piece, task in self._pieces(split):
                pieces.append((shard, piece))
                prefix = _piece_prefix(work, shard, piece)
                self.piece_prefixes.append(prefix)
                if os.path.isfile(prefix + ".json"):
                    bar.update(len(task[1][0]))
                    self.reused.add((split.name, shard, piece))
                    self._load_store(prefix, job)
                else:
                    waiting.append(_Piece(prefix, len(self.piece_prefixes) - 1, *task))
                    yield task

        def plans() -> Iterator[tuple[list[str], list[str]]]:
            for filtered in self.map(_filter_piece, tasks(), _filter_setup, (job,), any(job.parsers)):
                item = waiting.popleft()
                item.filtered = filtered
                lines = self._plan(item, job)
                planned.append(item)
                yield lines

        results: Iterator[dict[str, Any]] = (
            self.map(_parse_lines, plans(), _parse_setup, (job,)) if any(job.parsers)
            else ({"sides": [[], []], "seconds": {}} for _ in plans()))
        try:
            for parsed in results:
                item = planned.popleft()
                self._write_piece(item, job, parsed)
                bar.update(item.filtered["input_pairs"])
        finally:
            while self.open_pieces:
                self.open_pieces.popitem()[1].close()
        return pieces

    def _plan(self, item: _Piece, job: ParseJob) -> tuple[list[str], list[str]]:
        """Per parsed side, each kept row's key and whether this piece parses it; the lines to parse."""
        lines: list[list[str]] = [[], []]
        for s, side in enumerate(SIDES):
            if job.parsers[s] is None:
                continue
            store, claimed = self.stores[side], self.claimed[side]
            rows = []
            normalized = item.filtered["normalized"][s]  # [normalize] applied by the filter step, else None
            for j, i in enumerate(item.filtered["kept"]):
                line = normalized[j] if normalized else item.items[s][i].decode("utf-8")  # what the parser is given
                key = text_key(line)
                first = key not in claimed and store.find(key) is None
                if first:
                    claimed.add(key)
                if first or not self.options.dedupe:
                    lines[s].append(line)
                rows.append((key, first, first or not self.options.dedupe))
            item.plan[s] = rows
        return lines[0], lines[1]

    def _side_results(self, item: _Piece, s: int, parsed: list[tuple[str, int]]) -> list[tuple[str, int]]:
        """(block without sent_id or error message, flags) of every kept row of one side."""
        if item.plan[s] is None:
            return item.filtered["preparsed"][s]
        mine = iter(parsed)
        here: dict[bytes, tuple[str, int]] = {}
        out = []
        for key, first, parse in item.plan[s]:
            result = next(mine) if parse else here.get(key) or self._fetch(SIDES[s], key)
            if first:
                here[key] = result
            out.append(result)
        return out

    def _fetch(self, side: str, key: bytes) -> tuple[str, int]:
        """The block (without sent_id) or error message an earlier piece stored for a key, and its flags."""
        location = self.stores[side].find(key)
        if location is None:
            raise InputError("the work folder lost a parsed sentence (changed since the run stopped?): run again "
                             "with --overwrite", self.work)
        piece, offset, length, flags = location
        if flags & ERROR:
            return self.stores[side].errors[key], flags & (ERROR | JOINED)
        path = f"{self.piece_prefixes[piece]}.{side}.{'spare' if flags & SPARE else 'conllu'}"
        handle = self.open_pieces.pop(path, None) or open(path, "rb")  # noqa: SIM115 - closed in _close_pieces
        self.open_pieces[path] = handle  # the most recently used last
        if len(self.open_pieces) > OPEN_PIECES:
            self.open_pieces.pop(next(iter(self.open_pieces))).close()
        handle.seek(offset)
        block = handle.read(length).decode("utf-8")
        if not flags & SPARE:  # the written block starts with its row's sent_id
            block = block[block.index("\n") + 1:]
        return block, flags & JOINED

    def _write_piece(self, item: _Piece, job: ParseJob, parsed: dict[str, Any]) -> None:
        """Assemble a piece (in input order: the pieces holding its repeated lines are written) and write it:
        CoNLL-U per side, the blocks parsed here but not written (spare), the new store entries, then the .json."""
        kept, results = item.filtered["kept"], [self._side_results(item, s, parsed["sides"][s]) for s in range(2)]
        rejected = list(item.filtered["rejected"])
        out: list[list[bytes]] = [[], []]
        spare: list[list[bytes]] = [[], []]
        tokens: list[list[str]] = [[], []]
        sizes, spare_sizes = [0, 0], [0, 0]
        entries: list[list[tuple[bytes, tuple[int, int, int, int]]]] = [[], []]
        errors: list[dict[str, str]] = [{}, {}]
        ids = []
        for j, i in enumerate(kept):
            pair = [results[0][j], results[1][j]]
            bad = next((s for s in range(2) if pair[s][1] & ERROR), None)
            if bad is not None:
                rejected.append([item.first_id + i, "invalid_tree", f"{SIDES[bad]}: {pair[bad][0]}",
                                 *(self._row_text(item, s, i, j) for s in range(2))])
            else:
                ids.append(item.first_id + i)
            for s in range(2):
                block, flags = pair[s]
                first = item.plan[s] is not None and item.plan[s][j][1]
                if bad is None:
                    data = f"# sent_id = {item.first_id + i}\n{block}".encode()
                    location = (item.index, sizes[s], len(data), flags)
                    out[s].append(data)
                    sizes[s] += len(data)
                    if job.write_tokens:
                        tokens[s].append(" ".join(_block_forms(block)) + "\n")
                elif flags & ERROR:
                    location = (item.index, -1, 0, flags)
                    if first:
                        errors[s][item.plan[s][j][0].hex()] = block
                else:  # parsed, but the other side's tree is broken: kept for the later rows that repeat it
                    data = block.encode()
                    location = (item.index, spare_sizes[s], len(data), flags | SPARE)
                    if first:
                        spare[s].append(data)
                        spare_sizes[s] += len(data)
                if first:
                    entries[s].append((item.plan[s][j][0], location))
        rejected.sort(key=lambda r: r[0])
        info = {
            "first_id": item.first_id, "input_pairs": item.filtered["input_pairs"], "ids": ids, "rejected": rejected,
            "rejected_counts": dict(Counter(r[1] for r in rejected)),
            "joined_lines": sum(bool(flags & JOINED) for side in results for _, flags in side),
            "seconds": {**item.filtered["seconds"], "parse": parsed["seconds"].get("parse", 0.0)},
            "sentences": {side: {"distinct": sum(r[1] for r in item.plan[s]),
                                 "repeated": sum(not r[1] for r in item.plan[s])}
                          for s, side in enumerate(SIDES) if item.plan[s] is not None},
            "store_errors": {side: errors[s] for s, side in enumerate(SIDES) if errors[s]},
            **({f"{side}_counts": count_words("".join(tokens[s])) for s, side in enumerate(SIDES)}
               if job.write_tokens else {})}
        for s, side in enumerate(SIDES):
            atomic_write(f"{item.prefix}.{side}.conllu", b"".join(out[s]))
            if spare[s]:
                atomic_write(f"{item.prefix}.{side}.spare", b"".join(spare[s]))
        _save_entries(item.prefix, entries)
        atomic_write(item.prefix + ".json", json.dumps(info, ensure_ascii=False).encode("utf-8"))
        self._remember(entries, errors)

    def _row_text(self, item: _Piece, s: int, i: int, j: int) -> str:
        texts, normalized = item.filtered["preparsed_texts"][s], item.filtered["normalized"][s]
        if texts is not None:
            return texts[j]
        return tsv_field(normalized[j] if normalized else item.items[s][i])

    def _remember(self, entries: list[list[tuple[bytes, tuple[int, int, int, int]]]],
                  errors: list[dict[str, str]]) -> None:
        """A written piece's entries go into the store (its claims are settled)."""
        for s, side in enumerate(SIDES):
            for key, location in entries[s]:
                self.stores[side].add(key, location, errors[s].get(key.hex()))
                self.claimed[side].discard(key)

    def _load_store(self, prefix: str, job: ParseJob) -> None:
        """The store entries of a piece an earlier run finished (--resume)."""
        path = prefix + ".store.npz"
        if not os.path.isfile(path) or not any(job.parsers):
            return
        with open(prefix + ".json", encoding="utf-8") as handle:
            errors = json.load(handle).get("store_errors", {})
        with np.load(path) as saved:
            for side in SIDES:
                if side in saved.files:
                    self.stores[side].add_array(saved[side])
                    for key, message in errors.get(side, {}).items():
                        self.stores[side].errors.setdefault(bytes.fromhex(key), message)

    def _learns_bpe(self) -> bool:
        return not self.config.bpe.codes and bool(self.config.bpe.symbols)

    def _train_counts(self, train_pieces: list[tuple[int, int]] | None) -> list[Counter[str]]:
        """Each side's word counts of the train tokens: the workers' counts, merged in input order as read."""
        if train_pieces is None:
            raise InputError("[bpe] symbols: learning codes needs a train split (or give [bpe] codes)")
        work = os.path.join(self.work, "train")
        per_side: list[Counter[str]] = [Counter(), Counter()]
        for shard, piece in train_pieces:
            path = _piece_prefix(work, shard, piece) + ".json"
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
            if "src_counts" not in info:
                raise InputError("the work folder was made by an older synprep (no word counts): run again "
                                 "with --overwrite", path)
            for index, side in enumerate(SIDES):
                per_side[index].update(info[f"{side}_counts"])
        return per_side

    def _phase_bpe(self, train_pieces: list[tuple[int, int]] | None
                   ) -> tuple[tuple[str | None, str | None], tuple[frozenset[str] | None, frozenset[str] | None]]:
        """Each side's codes (the joint file twice when joint; learned now unless given or already learned by
        the run being resumed) and, with a vocabulary threshold, each side's vocabulary."""
        bpe = self.config.bpe
        if bpe.codes or not bpe.symbols:
            return (bpe.side_codes("src"), bpe.side_codes("tgt")), (None, None)
        work = os.path.join(self.work, "train")
        vocab_paths = [os.path.join(self.out, f"vocab.{side}") for side in SIDES]
        if bpe.joint:
            codes = os.path.join(self.out, "codes.bpe")
            if not os.path.isfile(codes):
                per_side = self._train_counts(train_pieces)
                self._say(f"learn joint BPE: {bpe.symbols} merges on the train tokens (the codes subword-nmt "
                          "learns)")
                learn_joint_from_counts(per_side, codes + ".tmp", bpe.symbols, vocab_paths,
                                        bpe.min_frequency, verbose=self._progress(), where=work)
                os.replace(codes + ".tmp", codes)
            side_codes = (codes, codes)
        else:
            side_codes = tuple(os.path.join(self.out, f"codes.{side}.bpe") for side in SIDES)
            per_side = None
            for index, side in enumerate(SIDES):  # each side's codes on its own words only
                if os.path.isfile(side_codes[index]):
                    continue
                per_side = per_side or self._train_counts(train_pieces)
                symbols = bpe.side_symbols(side)
                self._say(f"learn {side} BPE: {symbols} merges on the {side} train tokens")
                tmp = side_codes[index] + ".tmp"
                learn_joint_from_counts([per_side[index]], tmp, symbols, [vocab_paths[index]], bpe.min_frequency,
                                        verbose=self._progress(), where=f"{work} ({side})")
                os.replace(tmp, side_codes[index])
        if not bpe.vocabulary_threshold:
            return side_codes, (None, None)  # type: ignore[return-value]
        src, tgt = (frozenset(read_vocabulary(path, bpe.vocabulary_threshold)) for path in vocab_paths)
        return side_codes, (src, tgt)  # type: ignore[return-value]

    def _phase_features(self, split: SplitConfig, job: FeatureJob, pieces: list[tuple[int, int]],
                        stats: SplitStats, bar: tqdm) -> list[dict[str, Any]]:
        work = os.path.join(self.work, split.name)
        folder = os.path.join(self.out, split.name)
        os.makedirs(folder, exist_ok=True)
        schema = pair_schema(job.features[0].features, job.features[1].features)
        by_shard: dict[int, list[int]] = {}
        for shard, piece in pieces:
            by_shard.setdefault(shard, []).append(piece)
        shards_info = []
        todo = [(shard, piece) for shard, piece in pieces
                if not os.path.isfile(os.path.join(folder, shard_name(shard)))]
        results = self.map(_features_piece, (_read_piece(_piece_prefix(work, s, p)) for s, p in todo),
                           _features_setup, (job,))
        for shard in sorted(by_shard):
            path = os.path.join(folder, shard_name(shard))
            stats_path = os.path.join(work, f"shard-{shard:05d}.json")
            built_now = not os.path.isfile(path)
            if built_now:
                batches, shard_stats = [], {"rows": 0, "rejected": Counter(), "seconds": Counter()}
                for piece in by_shard[shard]:
                    batch, info = next(results)
                    if batch is not None:
                        batches.append(batch)
                    shard_stats["rows"] += info["rows"]
                    shard_stats["rejected"].update(info["rejected"])
                    shard_stats["seconds"].update(info["seconds"])
                    bar.update(self.piece_pairs.get((split.name, shard, piece), 0))
                started = time.perf_counter()
                shard_stats["entry"] = write_shard(path + ".part", schema, batches, self.config.compression)
                shard_stats["entry"]["file"] = shard_name(shard)
                shard_stats["seconds"]["write"] = time.perf_counter() - started
                del batches
                pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed memory otherwise
                atomic_write(stats_path, json.dumps(shard_stats).encode())
                os.replace(path + ".part", path)  # the shard counts as done once its stats are stored
            with open(stats_path, encoding="utf-8") as handle:
                done = json.load(handle)
            if not built_now:
                bar.update(sum(self.piece_pairs.get((split.name, shard, p), 0) for p in by_shard[shard]))
            stats.rows += done["rows"]
            stats.rejected.update(done["rejected"])
            stats.seconds.update(done["seconds"] if built_now else {})  # a resumed run: only its own time
            shards_info.append(done["entry"])
        return shards_info

    def _signature(self, specs: dict[str, ParserSpec | None], codes: tuple[str | None, str | None],
                   langid_signature: str | None) -> dict[str, Any]:
        filter_settings = self.config.filter
        joint = self.config.bpe.joint or not codes[0]
        return {
            "synprep": __version__,
            "parsers": {side: spec.signature() if spec else "pre-parsed CoNLL-U" for side, spec in specs.items()},
            "bpe_codes_sha256": file_sha256(codes[0]) if joint and codes[0] else None,
            **({} if joint else {f"bpe_codes_sha256_{side}": file_sha256(path)  # type: ignore[arg-type]
                                 for side, path in zip(SIDES, codes, strict=True)}),
            "filter": {**filter_settings.to_dict(), "langid_signature": langid_signature} if filter_settings else None,
            "features": self.config.to_dict()["features"],
            **({"normalize": {side: list(self.config.normalize.side(side)) for side in SIDES}}
               if self.config.normalize != NormalizeConfig() else {}),
            **({"compression": f"{self.config.compression}|pyarrow {pa.__version__}"}
               if self.config.compression != "none" else {}),
        }

    def run(self) -> dict[str, SplitStats]:
        """All phases for all splits; returns per-split statistics (also in each manifest)."""
        self._check_inputs()
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise InputError("the output must be a folder, and this is a file", self.out)
        existed = os.path.isdir(self.out)
        lock = WriterLock(self.out)
        lock.acquire()  # one writer at a time (a second convert or --resume on the same folder is refused)
        fresh = not (self.options.resume and os.path.isdir(self.work))
        prepared = False
        try:
            self._prepare_output()
            prepared = True
            if self.options.resume and self._finished():
                return self._finished_stats()
            stats = self._run()
            if not self.options.keep_work:  # nothing left to resume: the work folder goes (renamed first, so
                os.replace(self.work, self.work + REMOVING)  # an interrupted removal never looks resumable)
                shutil.rmtree(self.work + REMOVING)
            return stats
        except InputError:
            if fresh and prepared:  # bad input found while working: leave no half-made folder that blocks the
                self._clear_output()  # corrected run (a rejections report stays, for the user to read)
                if not existed and not self._stop_reports():
                    shutil.rmtree(self.out, ignore_errors=True)
            raise
        finally:
            lock.release()

    def _finished_stats(self) -> dict[str, SplitStats]:
        """The statistics of a finished run, from its manifests (`--resume` of a finished output)."""
        for split in self.config.splits:
            manifest = load_manifest(os.path.join(self.out, split.name))
            self.stats[split.name] = SplitStats(manifest.input_lines, manifest.rows, Counter(manifest.rejected),
                                                manifest.joined_lines,
                                                {side: Counter(c) for side, c in manifest.sentences.items()})
        return self.stats

    def _run(self) -> dict[str, SplitStats]:
        specs = {side: self._parser_spec(parser, side)
                 for side, parser in (("src", self.config.src_parser), ("tgt", self.config.tgt_parser))}
        features = self.config.features
        configs = tuple(FeatureConfig(tuple(g for g in getattr(features, side) if g not in MADE_FROM_HEADS),
                                      features.root, features.non_projective, features.strip_subtypes)
                        for side in SIDES)  # distances are made from heads where used: not computed here
        ordered = sorted(self.config.splits, key=lambda s: s.name != "train")  # train first: BPE learns on it
        counts = [_count_pairs(split) for split in ordered]  # the bar's total: ETA and percentage
        bar = self._bar("filter+parse", None if None in counts else sum(counts))
        pieces, rejected_lines = {}, {}
        for split in ordered:
            job = ParseJob(self.config.filter if split.filter else None,
                           tuple(None if _is_conllu(split, files) else specs[side]
                                 for side, files in zip(SIDES, (split.src, split.tgt))),
                           split.name == "train" and self._learns_bpe(),
                           self.config.filter.max_chars if self.config.filter else MAX_LINE_CHARS,
                           (self.config.normalize.src, self.config.normalize.tgt))
            started = time.perf_counter()
            pieces[split.name] = self._phase_parse(split, job, bar)
            stats = self.stats[split.name] = SplitStats()
            stats.seconds["phase1_wall"] = time.perf_counter() - started
            rejected_lines[split.name] = self._read_pieces(split, pieces[split.name], stats)
            self._check_kept(split, stats, rejected_lines[split.name], bar)
        bar.close()
        started = time.perf_counter()
        codes, vocabularies = self._phase_bpe(pieces.get("train"))
        bpe_seconds = time.perf_counter() - started
        codes_text: list[str | None] = [None, None]
        for index, path in enumerate(codes):
            if path and self.options.engine == "ray":
                with open(path, encoding="utf-8") as handle:
                    codes_text[index] = handle.read()
        job = FeatureJob(configs, codes, vocabularies, tuple(codes_text))  # type: ignore[arg-type]
        identifier = make_identifier(self.config.filter) if self.config.filter else None
        signature = self._signature(specs, codes, identifier.signature() if identifier else None)
        for split in ordered:
            stats = self.stats[split.name]
            started = time.perf_counter()
            with self._bar(f"features+shards {split.name}", stats.input_pairs) as bar:
                shards = self._phase_features(split, job, pieces[split.name], stats, bar)
            stats.seconds["phase3_wall"] = time.perf_counter() - started
            stats.seconds["learn_bpe"] = bpe_seconds if split.name == "train" else 0.0
            folder = os.path.join(self.out, split.name)
            atomic_write(os.path.join(folder, "rejected.tsv"),
                         _rejected_text(rejected_lines.pop(split.name)))
            Manifest(split.name, self.config.to_dict(), signature, stats.input_pairs, stats.rows,
                     dict(stats.rejected), list(FILTER_REASONS) + list(CONVERT_REASONS), shards, stats.joined_lines,
                     PIECE_ROWS, self.config.shard_size, self.config.compression,
                     sentences={side: {"distinct": c["distinct"], "repeated": c["repeated"]}
                                for side, c in stats.sentences.items()}).write(folder)
        run_info = {"fingerprint": self._fingerprint(), "workers": self.workers, "engine": self.options.engine,
                    "seconds": {name: dict(s.seconds) for name, s in self.stats.items()}}
        atomic_write(os.path.join(self.out, RUN_INFO), json.dumps(run_info, indent=2).encode())  # not in shards
        return self.stats

    def _check_kept(self, split: SplitConfig, stats: SplitStats, rejected_lines: list[str], bar: tqdm) -> None:
        """Right after a split's filter: too few pairs kept (none; on train, under MIN_TRAIN_PAIRS when the filter
        rejected most of them) stops the run with one line naming the reasons, the likely cause and the rejections
        report (kept at OUT/rejected-<split>.tsv); more than WARN_REJECTED_SHARE rejected is a warning."""
        filtered = self.config.filter if split.filter else None
        rejected_total = sum(stats.rejected.values())
        kept = stats.input_pairs - rejected_total
        too_few = split.name == "train" and kept < MIN_TRAIN_PAIRS and 2 * rejected_total > stats.input_pairs
        if stats.input_pairs and (not kept or too_few):
            report = os.path.join(self.out, f"rejected-{split.name}.tsv")
            atomic_write(report, _rejected_text(rejected_lines))
            reason, count = stats.rejected.most_common(1)[0]
            details = [line.split("\t")[2] for line in rejected_lines if line.split("\t")[1] == reason]
            counts = ", ".join(f"{name} {n}" for name, n in stats.rejected.most_common())
            what = (f"all {stats.input_pairs} pairs rejected" if not kept else
                    f"{kept} of {stats.input_pairs} pairs kept, fewer than the {MIN_TRAIN_PAIRS} needed to train")
            share = "all" if count == rejected_total else f"{count} of {rejected_total}"
            raise InputError(f"split {split.name!r}: {what} ({counts}): {share} as {reason}: "
                             f"{likely_cause(reason, details, filtered)}; the rejected pairs: {report}")
        message = rejection_warning(stats.input_pairs, stats.rejected) if filtered else None
        if message:
            bar.clear()
            print(f"synprep convert: split {split.name!r}: {message} (OUT/{split.name}/rejected.tsv lists them)",
                  file=sys.stderr, flush=True)
            bar.refresh()

    def _read_pieces(self, split: SplitConfig, pieces: list[tuple[int, int]], stats: SplitStats) -> list[str]:
        """Each piece's phase-1 record, read once: counts into `stats`; returns the rejected.tsv lines."""
        work = os.path.join(self.work, split.name)
        lines = []
        for shard, piece in pieces:
            path = _piece_prefix(work, shard, piece) + ".json"
            try:
                with open(path, encoding="utf-8") as handle:
                    info = json.load(handle)
            except (OSError, ValueError):
                raise InputError("a piece of the work folder is missing or unreadable (changed since the run "
                                 "stopped?): run again with --overwrite", path) from None
            stats.input_pairs += info["input_pairs"]
            self.piece_pairs[(split.name, shard, piece)] = info["input_pairs"]  # for the features bar
            stats.rejected.update(info["rejected_counts"])
            stats.joined_lines += info["joined_lines"]
            for side, counts in info.get("sentences", {}).items():
                stats.sentences.setdefault(side, Counter()).update(counts)
            stats.seconds.update({} if (split.name, shard, piece) in self.reused else info["seconds"])
            lines += ["\t".join([str(row[0]), row[1], tsv_field(row[2]), row[3], row[4]]) for row in info["rejected"]]
        return lines


def _is_stop_report(name: str) -> bool:
    return name.startswith("rejected-") and name.endswith(".tsv")


def _rejected_text(lines: list[str]) -> bytes:
    """rejected.tsv's bytes from its lines."""
    return ("\n".join(lines) + "\n" if lines else "").encode()


def _count_pairs(split: SplitConfig) -> int | None:
    """The input pairs of a split, counted cheaply (newlines in the source files), or None where that is not the
    count of segments (CoNLL-U, SGML, XML) or would read the input twice (compressed files, pipes)."""
    counts = [count_lines(path) if (split.format or detect_format(path)) in ("text", "tsv") else None
              for path in split.src]
    return None if None in counts else sum(counts)  # type: ignore[arg-type]


def _is_conllu(split: SplitConfig, files: tuple[str, ...]) -> bool:
    return (split.format or "") == "conllu" or all(detect_format(f) == "conllu" for f in files)


def format_summary(config: PipelineConfig, stats: dict[str, SplitStats]) -> str:
    """The table printed at the end of `synprep convert`."""
    reasons = sorted({reason for s in stats.values() for reason in s.rejected})
    header = ["split", "input", "rows"] + reasons
    rows = [[name, str(s.input_pairs), str(s.rows)] + [str(s.rejected.get(r, 0)) for r in reasons]
            for name, s in stats.items()]
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
    lines = [f"synprep convert {config.name} -> {config.output}"]
    for row in [header] + rows:
        lines.append("  ".join(cell.rjust(width) if i else cell.ljust(width)
                               for i, (cell, width) in enumerate(zip(row, widths))))
    stage = Counter()
    for s in stats.values():
        stage.update({k: v for k, v in s.seconds.items() if not k.endswith("_wall")})
    total = sum(stage.values()) or 1.0
    timed = ", ".join(f"{k} {v:.1f}s ({100 * v / total:.0f}%)" for k, v in stage.items() if v)
    lines.append("worker time per stage: " + (timed or "none (everything was done by an earlier run)"))
    return "\n".join(lines)
