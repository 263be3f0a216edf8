"""`synprep convert`: whole parallel corpora -> Arrow shards (CONTRACT.md "Arrow shards").

Orchestration only; every stage is the library code of its own module:
read (corpus) -> filter (filter) -> parse (parse) -> BPE (bpe) -> features (featurize) -> shards (shards),
driven phase by phase by the package's modules: inputs (the inputs, in pieces), filter_parse and work (phase 1:
workers and driver), bpe_codes (phase 2), write_shards (phase 3), accounting (statistics, manifests,
summary) and output (the output folder, resume and overwrite).

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
Every file is written under a temporary name and renamed when complete. With a parse cache, the stage caches
beside it (stage_cache) give the filter's decisions, the codes and the features of whatever an earlier convert
made from the same inputs: only the stages whose inputs changed run.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, is_dataclass
from typing import Any

from ..errors import InputError, WriteError
from ..filter import MAX_LINE_CHARS
from ..options import ENGINES
from ..outputs import check_outputs
from ..parallel import WorkerLost, capped_workers, default_workers, ordered_map
from ..parse import ParserSpec
from ..shards import WriterLock
from .accounting import (
    MIN_TRAIN_PAIRS,
    Progress,
    SplitStats,
    cache_counts,
    check_kept,
    finished_stats,
    format_summary,
    parser_quality,
    read_piece_records,
    signature,
    tree_check,
    write_split,
)
from .bpe_codes import SideCodes, SideVocabularies, learn_codes, learns_bpe
from .dataset_card import write_dataset_card, write_hf_links
from .filter_parse import ParseJob, parser_specs
from .inputs import SIDES, check_inputs, count_pairs, is_conllu, piece_prefix
from .output import OutputFolder, refuse_run_folders
from .pipeline import PipelineConfig, SplitConfig
from .stage_cache import StageCache
from .work import ParsePhase
from .write_shards import ShardPhase, feature_job

__all__ = ["MIN_TRAIN_PAIRS", "ConvertOptions", "Converter", "SplitStats", "WorkKept", "format_summary"]


class WorkKept(InputError):
    """A convert that failed once work was done (a full disk, a write error, a lost worker): OUT/.work is kept,
    and the same command with `--resume` continues."""

    def __reduce__(self) -> tuple:
        return (WorkKept, (self.message,))


def _make_mapper(engine: str, workers: int, ray_address: str | None) -> Callable:
    """A function like `parallel.ordered_map(func, tasks, workers, setup, setup_args)` for the engine; `light=True`
    for a stage that runs beside another one and needs little CPU (Ray: its actors reserve no CPU)."""
    if engine == "local":
        return lambda func, tasks, setup, args, light=False: ordered_map(func, tasks, workers, setup, args)
    from .ray_engine import ray_ordered_map

    return lambda func, tasks, setup, args, light=False: ray_ordered_map(
        func, tasks, workers, setup, args, ray_address, cpus=0 if light else 1)


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
    parse_cache: str | None = None  # the parse cache folder (overrides the pipeline's [parse] cache)
    cache: bool = True  # False: no parse cache and no stage caches (--no-cache)

    def check(self) -> None:
        if self.engine not in ENGINES:
            raise InputError(f"unknown engine {self.engine!r} (choose from {', '.join(ENGINES)})")
        if self.workers < 0:
            raise InputError(f"--workers must be >= 0 (0 = all cores), got {self.workers}")
        if self.parse_cache is not None and not self.parse_cache.strip():  # an unset $CACHE: not "no cache"
            raise InputError("--parse-cache must name a folder (leave the option out for no cache)")
        if self.ray_address is not None and self.engine != "ray":
            raise InputError("--ray-address is for --engine ray (the local engine would ignore it)")

    def worker_count(self) -> int:
        """The workers to start (0: all cores); capped per core of this machine unless they run on a Ray cluster
        (`--ray-address`): the local engine and a Ray started here share this machine's cores."""
        workers = self.workers or default_workers()
        return workers if self.engine == "ray" and self.ray_address else capped_workers(workers)


class Converter:
    """Runs one pipeline configuration into its output folder: phase 1 for every split (ParsePhase), phase 2
    (learn_codes), phase 3 for every split (ShardPhase) with its manifest, then run.json."""

    def __init__(self, config: PipelineConfig, options: ConvertOptions) -> None:
        options.check()
        self.config, self.options = config, options
        self.workers = options.worker_count()
        self.folder = OutputFolder(config)
        self.out, self.work = self.folder.out, self.folder.work
        self.progress = Progress(options.progress)
        self.map = _make_mapper(options.engine, self.workers, options.ray_address)
        self.stats: dict[str, SplitStats] = {}
        folder = (options.parse_cache or config.parse.cache) if options.cache else None
        self.cache = folder  # the parse cache's folder (None: no cache)
        self.stages: StageCache | None = None  # opened by run when the cache keeps the stages
        self.piece_pairs: dict[tuple[str, int, int], int] = {}  # input pairs per (split, shard, piece)
        self.parsed = False  # phase 1 finished for every split

    def run(self) -> dict[str, SplitStats]:
        """All phases for all splits; returns per-split statistics (also in each manifest). A failure once work is
        done (phase 1 finished, or a piece finished before a write error or a lost worker) keeps OUT/.work and is
        raised as WorkKept (`--resume` continues); bad input found while working, or any failure before work,
        leaves no folder of this run's making (a fresh run's)."""
        check_inputs(self.config)
        if os.path.exists(self.out) and not os.path.isdir(self.out):
            raise InputError("the output must be a folder, and this is a file", self.out)
        refuse_run_folders(self.out)  # a run in the folder or a split folder of it, named with its files
        check_outputs({"--output": self.out}, {f"the {split.name} split's input": path
                                               for split in self.config.splits for path in (*split.src, *split.tgt)},
                      dataset=True)
        if self.options.engine == "ray" and self.options.ray_address:  # bounded, before any folder is made
            from .ray_engine import check_reachable

            check_reachable(self.options.ray_address)
        existed = os.path.isdir(self.out)
        lock = WriterLock(self.out)
        lock.acquire()  # one writer at a time (a second convert or --resume on the same folder is refused)
        fresh = not (self.options.resume and os.path.isdir(self.work))
        prepared = False
        try:
            self.folder.prepare(self.options.resume, self.options.overwrite)
            prepared = True
            if self.options.resume and self.folder.finished():
                return finished_stats(self.config, self.out, self.folder.run_info().get("parse_cache"))
            if self.cache and self.config.parse.cache_stages:
                self.stages = StageCache(self.cache, self.config.parse.cache_max_gb)
            return self._run()
        except Exception as err:
            if self._keeps_work(err):
                if isinstance(err, OSError):  # a full disk in a library's own write (pyarrow, numpy)
                    raise WorkKept(f"{err.filename or self.out}: {err.strerror or err}") from None
                if isinstance(err, InputError):
                    raise WorkKept(str(err)) from None
                raise  # not ours: its traceback, the work kept
            # bad input, or a failure before any work: leave no half-made folder that blocks the corrected run
            if fresh and (prepared or not existed):
                self.folder.discard(existed)
            raise
        finally:
            if self.stages is not None:
                self.stages.close()
                self.stages = None
            lock.release()

    def _keeps_work(self, err: Exception) -> bool:
        """Whether a failure leaves work worth resuming: a lost worker; a write error (a full disk) or any failure
        that is not bad input, once phase 1 finished or a piece is finished. Bad input is not (its run is
        corrected, not resumed)."""
        if isinstance(err, WorkKept) or not os.path.isdir(self.work):
            return False
        if isinstance(err, WorkerLost):
            return True
        if isinstance(err, InputError) and not isinstance(err, WriteError):
            return False
        return self.parsed or bool(glob.glob(os.path.join(self.work, "*", "piece-*.json")))

    def _run(self) -> dict[str, SplitStats]:
        specs = parser_specs(self.config, self.out, self.progress.say)
        self.folder.check_made_files()  # a resumed run: what the interrupted one learned into OUT, unchanged
        judged = parser_quality(specs, self.progress.tell)
        ordered = sorted(self.config.splits, key=lambda s: s.name != "train")  # train first: BPE learns on it
        pieces, rejected_lines = self._parse(ordered, specs)
        self.parsed = True  # from here on, a failure keeps the work folder
        started = time.perf_counter()
        codes, vocabularies = self._codes(pieces.get("train"))
        self.folder.check_made_files()
        bpe_seconds = time.perf_counter() - started
        job = feature_job(self.config, codes, vocabularies, self.options.engine)
        signed = signature(self.config, specs, codes)
        for i, split in enumerate(ordered):
            stats = self.stats[split.name]
            started = time.perf_counter()
            later = sum(self.stats[s.name].input_pairs for s in ordered[i + 1:])  # in the ETA of the lines
            root = self.out if self.folder.published(split.name) else self.folder.staged  # (a resumed run's)
            shards = ShardPhase(self.config, root, self.work, self.map, self.piece_pairs, self.stages)
            with self.progress.bar(f"features+shards {split.name}", stats.input_pairs, later) as bar:
                written = shards.run(split, job, pieces[split.name], stats, bar)
            stats.seconds["phase3_wall"] = time.perf_counter() - started
            stats.parsers = tree_check(root, split, written, specs, judged, self.progress.tell)
            stats.seconds["learn_bpe"] = bpe_seconds if split.name == "train" else 0.0
            lines = rejected_lines.pop(split.name) + shards.rejected_lines.pop(split.name, [])
            lines.sort(key=lambda line: int(line.split("\t", 1)[0]))  # in input order, as phase 1 lists them
            write_split(self.config, root, split, stats, written, signed, lines)
            self.folder.publish(split.name)
        names = [split.name for split in self.config.splits]
        write_hf_links(self.out, names)
        write_dataset_card(self.out, names)
        cached = cache_counts(self.stats)
        self.folder.finish({"workers": self.workers, "engine": self.options.engine,
                            "seconds": {name: dict(s.seconds) for name, s in self.stats.items()},
                            **({"parse_cache": cached} if cached else {}),
                            **({"reused": {split.name: self.stages.reused(split.name) for split in ordered}}
                               if self.stages is not None else {})},
                           self.options.keep_work)
        return self.stats

    def _codes(self, train: list[tuple[int, int]] | None) -> tuple[SideCodes, SideVocabularies]:
        """Phase 2 (`learn_codes`), through the BPE stage cache when there is one and codes are learned."""
        def learn() -> tuple[SideCodes, SideVocabularies]:
            return learn_codes(self.config.bpe, self.out, self.work, train, self.progress.say, self.progress.shown)

        if self.stages is None or train is None or not learns_bpe(self.config.bpe):
            return learn()
        count_files = [piece_prefix(os.path.join(self.work, "train"), *piece) + ".json" for piece in train]
        return self.stages.codes(_subword_settings(self.config), count_files, self.out, learn)

    def _parse(self, ordered: list[SplitConfig], specs: dict[str, ParserSpec | None]
               ) -> tuple[dict[str, list[tuple[int, int]]], dict[str, list[str]]]:
        """Phase 1 for all splits, each checked as its last piece is written; its pieces and rejected.tsv lines."""
        counts = [count_pairs(split) for split in ordered]  # the bar's total: ETA and percentage
        phase = ParsePhase(self.config, self.work, self.map, self.options.dedupe, self.cache, self.stages)
        rejected_lines = {}

        def finished(split: SplitConfig, pieces: list[tuple[int, int]], seconds: float) -> None:
            stats = self.stats[split.name] = SplitStats()
            stats.seconds["phase1_wall"] = seconds
            rejected_lines[split.name] = read_piece_records(self.work, split, pieces, stats, phase.reused,
                                                            self.piece_pairs)
            check_kept(self.config, self.out, split, stats, rejected_lines[split.name], bar)

        # closed on the way out (Ctrl-C too): a bar left open is drawn again when collected, after the last word
        with self.progress.bar("filter+parse", None if None in counts else sum(counts)) as bar:  # type: ignore[arg-type]
            pieces = phase.run([(split, _parse_job(self.config, split, specs)) for split in ordered], bar, finished)
        return pieces, rejected_lines


def _subword_settings(config: PipelineConfig) -> dict[str, Any]:
    """The pipeline's sub-word section(s) as read (every key, whatever scheme): what the BPE stage is made from,
    besides the train words."""
    return {f.name: asdict(value) if is_dataclass(value) else value  # type: ignore[arg-type]
            for f in fields(config) if f.name in ("bpe", "subword") for value in [getattr(config, f.name)]}


def _parse_job(config: PipelineConfig, split: SplitConfig, specs: dict[str, ParserSpec | None]) -> ParseJob:
    """What the phase-1 workers need for a split: its filter, parsers (none for a pre-parsed side), and whether
    they count the words (train, when codes are learned)."""
    return ParseJob(config.filter if split.filter else None,
                    tuple(None if is_conllu(split, files) else specs[side]  # type: ignore[arg-type]
                          for side, files in zip(SIDES, (split.src, split.tgt))),
                    split.name == "train" and learns_bpe(config.bpe),
                    config.filter.max_chars if config.filter else MAX_LINE_CHARS,
                    (config.normalize.src, config.normalize.tgt))
