"""`synprep convert`, phase 3: the features of each parsed piece (workers) -> one Arrow shard per shard of input.

A worker reads a piece's CoNLL-U (sent with the task: Ray nodes need no access to OUT/.work), applies BPE and
featurizes both sides (featurize), and returns one record batch; the driver writes each shard's batches to
OUT/<split>/part-KKKKK.arrow with its statistics in OUT/.work/<split>/shard-KKKKK.json (a shard counts as done
once they are stored: a resumed run skips it).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from ..bpe import Bpe
from ..conllu import chunk_trees
from ..featurize import FeatureColumns, FeatureConfig, boundary_of, featurize, pair_batch, read_back_of
from ..schema import MADE_FROM_HEADS, pair_schema
from ..shards import shard_name, write_shard
from ..subwords import TokenCutter, registry
from ..subwords.load import load_cutter
from ..textio import atomic_write, tsv_field
from ..trees import Tree
from .accounting import SplitStats
from .bpe_codes import SideCodes, SideVocabularies
from .inputs import SIDES, piece_prefix
from .pipeline import PipelineConfig, SplitConfig
from .stage_cache import StageCache


@dataclass(frozen=True)
class FeatureJob:
    """What a phase-3 worker needs for one split."""

    features: tuple[FeatureConfig, FeatureConfig]
    codes: tuple[str | None, str | None]  # per side (the same file twice when joint)
    vocabularies: tuple[frozenset[str] | None, frozenset[str] | None] = (None, None)
    codes_text: tuple[str | None, str | None] = (None, None)  # the codes' text: workers elsewhere need not see OUT
    scheme: str = registry.DEFAULT  # how `codes` cut tokens: subword-nmt codes, or another scheme's model (or none)
    cut: str = "token"  # raw: the sentence's text cut at once (hf-tokenizer)


def feature_job(config: PipelineConfig, codes: SideCodes, vocabularies: SideVocabularies, engine: str) -> FeatureJob:
    """The phase-3 job of a convert (with Ray, the codes' text travels with it)."""
    features = config.features
    configs = tuple(FeatureConfig(tuple(g for g in getattr(features, side) if g not in MADE_FROM_HEADS),
                                  features.root, features.non_projective, features.strip_subtypes)
                    for side in SIDES)  # distances are made from heads where used: not computed here
    codes_text: list[str | None] = [None, None]
    for index, path in enumerate(codes):
        if path and engine == "ray" and registry.get(config.bpe.scheme).bpe_codes:  # others: read where OUT is
            with open(path, encoding="utf-8") as handle:
                codes_text[index] = handle.read()
    return FeatureJob(configs, codes, vocabularies, tuple(codes_text), config.bpe.scheme,  # type: ignore[arg-type]
                      config.bpe.cut)


Cutters = tuple["FeatureJob", Bpe | TokenCutter | None, Bpe | TokenCutter | None]  # a features worker's state


def features_setup(job: FeatureJob) -> Cutters:
    """A features worker's state: the job and each side's BPE applier (or scheme model), loaded once."""
    if not registry.get(job.scheme).bpe_codes:
        return job, *(load_cutter(job.scheme, path) for path in job.codes)  # type: ignore[return-value]
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


def read_piece(prefix: str) -> tuple[str, str, str]:
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


def _raw_cut(cutter: Bpe | TokenCutter | None) -> Callable[[str, list[str]], list[list[str]] | None]:
    """[bpe] cut = "raw": the sentence's text cut at once by the scheme's cutter (`TokenCutter.cut_text`)."""
    return cutter.cut_text  # type: ignore[union-attr]


def features_piece(state: Cutters, task: tuple[str, str, str]
                    ) -> tuple[pa.RecordBatch | None, dict[str, Any]]:
    """Features of one parsed piece (see `read_piece`) as a record batch (None if it has no rows), and its
    stats."""
    job, src_bpe, tgt_bpe = state
    pa.default_memory_pool().release_unused()  # the previous piece's batch (sent by now): keep the worker flat
    started = time.perf_counter()
    prefix, *texts = task
    trees = [_trees_of(text, f"{prefix}.{side}.conllu") for side, text in zip(SIDES, texts, strict=True)]
    columns: list[FeatureColumns] = [
        featurize(side_trees, config, bpe.segment_word if bpe else None, _raw_cut(bpe) if job.cut == "raw" else None,
                  boundary_of(bpe), read_back_of(bpe) if job.cut == "token" else None)
        for side_trees, config, bpe in zip(trees, job.features, (src_bpe, tgt_bpe))]
    dropped = {**columns[1].dropped, **columns[0].dropped}  # the source side's reason first
    lines = _rejected_lines(trees, columns, dropped)
    if dropped:  # keep the rows that both sides kept
        both = [i for i in range(len(trees[0])) if i not in dropped]
        columns = [c.take([row_of[i] for i in both]) for c in columns
                   for row_of in [{position: row for row, position in enumerate(c.kept)}]]
    kept = columns[0].kept
    schema = pair_schema(job.features[0].features, job.features[1].features)
    batch = pair_batch([int(trees[0][i].sent_id) for i in kept], [trees[0][i].text for i in kept],
                       [trees[1][i].text for i in kept], columns[0], columns[1], schema) if kept else None
    return batch, {"rows": len(kept), "rejected": dict(Counter(dropped.values())), "rejected_lines": lines,
                   "seconds": {"bpe+features": time.perf_counter() - started}}


def _rejected_lines(trees: list[list[Tree]], columns: list[FeatureColumns], dropped: dict[int, str]) -> list[str]:
    """rejected.tsv's lines of the pairs the features left out (id, reason, the side and what it found, both
    sentences' texts), in input order."""
    lines = []
    for i in sorted(dropped, key=lambda i: int(trees[0][i].sent_id)):
        side = next(s for s in (0, 1) if columns[s].dropped.get(i) == dropped[i])
        detail = f"{SIDES[side]}: {columns[side].notes.get(i, dropped[i])}"
        lines.append("\t".join([str(int(trees[0][i].sent_id)), dropped[i], tsv_field(detail),
                                *(tsv_field(trees[s][i].text or " ".join(trees[s][i].tokens)) for s in (0, 1))]))
    return lines


class ShardPhase:
    """Phase 3 for one split at a time: the shards not yet written, from the pieces of phase 1."""

    def __init__(self, config: PipelineConfig, out: str, work: str, mapper: Callable,
                 piece_pairs: dict[tuple[str, int, int], int], stages: StageCache | None = None) -> None:
        self.config = config
        self.stages = stages  # the features' stage cache (None: every piece is featurized)
        self.out = out
        self.work = work
        self.map = mapper
        self.piece_pairs = piece_pairs  # input pairs per (split, shard, piece): for the bar
        self.rejected_lines: dict[str, list[str]] = {}  # split -> rejected.tsv lines of the pairs features left out

    def run(self, split: SplitConfig, job: FeatureJob, pieces: list[tuple[int, int]], stats: SplitStats,
            bar: tqdm) -> list[dict[str, Any]]:
        """Write the split's missing shards; counts into `stats`; returns every shard's manifest entry."""
        work = os.path.join(self.work, split.name)
        folder = os.path.join(self.out, split.name)
        os.makedirs(folder, exist_ok=True)
        by_shard: dict[int, list[int]] = {}
        for shard, piece in pieces:
            by_shard.setdefault(shard, []).append(piece)
        shards_info = []
        todo = [(shard, piece) for shard, piece in pieces
                if not os.path.isfile(os.path.join(folder, shard_name(shard)))]
        tasks = (read_piece(piece_prefix(work, s, p)) for s, p in todo)

        def run(tasks: Iterator[tuple[str, str, str]]) -> Iterator[tuple[pa.RecordBatch | None, dict[str, Any]]]:
            return self.map(features_piece, tasks, features_setup, (job,))

        results = run(tasks) if self.stages is None else self.stages.features(split.name, job, tasks, run)
        for shard in sorted(by_shard):
            path = os.path.join(folder, shard_name(shard))
            stats_path = os.path.join(work, f"shard-{shard:05d}.json")
            built_now = not os.path.isfile(path)
            if built_now:
                self._build(split, shard, by_shard[shard], job, results, bar)
            with open(stats_path, encoding="utf-8") as handle:
                done = json.load(handle)
            if not built_now:
                bar.update(sum(self.piece_pairs.get((split.name, shard, p), 0) for p in by_shard[shard]))
            stats.rows += done["rows"]
            stats.rejected.update(done["rejected"])
            self.rejected_lines.setdefault(split.name, []).extend(done.get("rejected_lines", []))
            stats.seconds.update(done["seconds"] if built_now else {})  # a resumed run: only its own time
            shards_info.append(done["entry"])
        return shards_info

    def _build(self, split: SplitConfig, shard: int, pieces: list[int], job: FeatureJob,
               results: Iterator[tuple[pa.RecordBatch | None, dict[str, Any]]], bar: tqdm) -> None:
        """One shard from its pieces' batches (the next ones `results` gives), then its statistics."""
        path = os.path.join(self.out, split.name, shard_name(shard))
        batches, shard_stats = [], {"rows": 0, "rejected": Counter(), "rejected_lines": [], "seconds": Counter()}
        for piece in pieces:
            batch, info = next(results)
            if batch is not None:
                batches.append(batch)
            shard_stats["rows"] += info["rows"]
            shard_stats["rejected"].update(info["rejected"])
            shard_stats["rejected_lines"] += info.get("rejected_lines", [])
            shard_stats["seconds"].update(info["seconds"])
            bar.update(self.piece_pairs.get((split.name, shard, piece), 0))
        schema = pair_schema(job.features[0].features, job.features[1].features)
        started = time.perf_counter()
        shard_stats["entry"] = write_shard(path + ".part", schema, batches, self.config.compression)
        shard_stats["entry"]["file"] = shard_name(shard)
        shard_stats["seconds"]["write"] = time.perf_counter() - started
        del batches
        pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed memory otherwise
        atomic_write(os.path.join(self.work, split.name, f"shard-{shard:05d}.json"), json.dumps(shard_stats).encode())
        os.replace(path + ".part", path)  # the shard counts as done once its stats are stored
