"""`synprep convert`: whole parallel corpora -> Arrow shards (CONTRACT.md "Arrow shards").

Orchestration only; every stage is the library code of its own module:
read (corpus) -> filter (filter) -> parse (parse) -> BPE (bpe) -> features (align) -> shards (shards).

Work is cut into pieces of PIECE_ROWS input pairs; shard k holds the kept pairs of input pairs
[k * shard_size, (k + 1) * shard_size), one Arrow record batch per piece. Every piece is a pure function of
its input lines and the configuration, so the shards are byte-identical whatever the number of workers or
the engine, and an interrupted run resumes by skipping what is complete:
  phase 1  filter + parse each piece      -> OUT/.work/<split>/piece-KKKKK-JJJ.{json,src.conllu,tgt.conllu}
  phase 2  learn joint BPE on train        -> OUT/codes.bpe (skipped with given codes)
  phase 3  features of each piece -> shard -> OUT/<split>/part-KKKKK.arrow, then OUT/<split>/manifest.json
Every file is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from . import __version__
from .align import FeatureConfig, featurize
from .bpe import Bpe, learn_joint
from .conllu import format_sentence, parse_conllu_text, read_conllu, to_tree
from .corpus import count_segments, detect_format, read_side
from .errors import InputError
from .filter import REASONS as FILTER_REASONS
from .filter import FilterSettings, check_pair, make_identifier
from .parallel import default_workers, ordered_map
from .parse import ParserSpec
from .parse.base import file_signature
from .pipeline import ParserConfig, PipelineConfig, SplitConfig
from .schema import SCHEMA_VERSION, pair_schema, records_to_batch
from .textio import file_sha256

PIECE_ROWS = 1000  # input pairs per unit of work and per Arrow record batch (changing it changes the bytes)
CONVERT_REASONS = ("invalid_tree", "non_projective")  # rejections after the filter
ENGINES = ("local", "ray")


@dataclass(frozen=True)
class Side:
    """How one side of a split is turned into trees."""

    parser: ParserSpec | None  # None: the input is CoNLL-U already
    features: FeatureConfig


@dataclass(frozen=True)
class SplitJob:
    """Everything a worker needs for one split (picklable; workers load models once from it)."""

    split: str
    filter: FilterSettings | None
    src: Side
    tgt: Side
    src_vocabulary: frozenset[str] | None = None
    tgt_vocabulary: frozenset[str] | None = None
    codes: str | None = None


@dataclass
class SplitStats:
    input_pairs: int = 0
    rows: int = 0
    rejected: Counter = field(default_factory=Counter)
    joined_lines: int = 0  # lines the parser split into several sentences (joined into one tree)
    seconds: Counter = field(default_factory=Counter)  # per stage

    def add_piece(self, info: dict[str, Any]) -> None:
        self.input_pairs += info["input_pairs"]
        self.rejected.update(info["rejected_counts"])
        self.joined_lines += info["joined_lines"]
        self.seconds.update(info["seconds"])


# ---------------------------------------------------------------------------------------------- files


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


def shard_name(index: int) -> str:
    """File name of shard `index` (CONTRACT.md: part-00000.arrow, ...)."""
    return f"part-{index:05d}.arrow"


def _piece_prefix(work: str, shard: int, piece: int) -> str:
    return os.path.join(work, f"piece-{shard:05d}-{piece:03d}")


# ------------------------------------------------------------------------------------ phase 1: parse


def _text_of(item: bytes, preparsed: bool) -> bytes | str:
    """What the filter sees: the line, or the sentence text of a pre-parsed CoNLL-U sentence."""
    if not preparsed:
        return item
    sentence = parse_conllu_text(item.decode("utf-8"))[0]
    return sentence.text if sentence.text is not None else " ".join(w[1] for w in sentence.words)


def _parse_setup(job: SplitJob) -> tuple[SplitJob, Any, Any, Any]:
    langid = make_identifier(job.filter) if job.filter else None
    src = job.src.parser.load() if job.src.parser else None
    tgt = job.tgt.parser.load() if job.tgt.parser else None
    return job, langid, src, tgt


def _basic_check(src: bytes | str, tgt: bytes | str) -> str | None:
    """Without the filter (valid/test) only undecodable and empty pairs are rejected."""
    try:
        texts = [s.decode("utf-8") if isinstance(s, bytes) else s for s in (src, tgt)]
    except UnicodeDecodeError:
        return "invalid_utf8"
    return "empty" if not all(t.strip() for t in texts) else None


def _parse_side(parser: Any, items: list[bytes], ids: list[int]) -> tuple[list[str | None], list[str], int]:
    """CoNLL-U text per kept pair (None when the tree is broken: reason in the second list), joins."""
    if parser is None:  # pre-parsed
        sentences = [parse_conllu_text(item.decode("utf-8"))[0] for item in items]
        joined = 0
    else:
        parsed = parser.parse([item.decode("utf-8") for item in items])
        sentences = [p.sentence for p in parsed]
        joined = sum(p.pieces > 1 for p in parsed)
    texts: list[str | None] = []
    problems: list[str] = []
    for sentence, item, pair_id in zip(sentences, items, ids):
        text = (sentence.text or " ".join(w[1] for w in sentence.words)) if parser is None \
            else item.decode("utf-8").strip()
        comments = [f"sent_id = {pair_id}"] + ([f"text = {text}"] if text is not None else [])
        sentence.comments = comments
        try:
            if not sentence.words:
                raise InputError("empty sentence")
            to_tree(sentence, "<parser output>")
            texts.append(format_sentence(sentence))
            problems.append("")
        except InputError as err:
            texts.append(None)
            problems.append(err.message)
    return texts, problems, joined


def _parse_piece(state: tuple[SplitJob, Any, Any, Any], task: tuple) -> dict[str, Any]:
    """Filter and parse one piece; returns what phase 1 stores for it."""
    job, langid, src_parser, tgt_parser = state
    first_id, src_items, tgt_items = task
    started = time.perf_counter()
    src_pre, tgt_pre = job.src.parser is None, job.tgt.parser is None
    reasons = []
    for src, tgt in zip(src_items, tgt_items):
        src_text, tgt_text = _text_of(src, src_pre), _text_of(tgt, tgt_pre)
        reasons.append(check_pair(src_text, tgt_text, job.filter, langid) if job.filter
                       else _basic_check(src_text, tgt_text))
    filtered = time.perf_counter()
    kept = [i for i, reason in enumerate(reasons) if reason is None]
    ids = [first_id + i for i in kept]
    src_texts, src_problems, src_joined = _parse_side(src_parser, [src_items[i] for i in kept], ids)
    tgt_texts, tgt_problems, tgt_joined = _parse_side(tgt_parser, [tgt_items[i] for i in kept], ids)
    # rejected rows: [id, reason, detail, src, tgt] (both sides, for rejected.tsv)
    def row(i: int, reason: str, detail: str = "") -> list:
        return [first_id + i, reason, detail, src_items[i].decode("utf-8", "replace"),
                tgt_items[i].decode("utf-8", "replace")]

    rejected = [row(i, reason) for i, reason in enumerate(reasons) if reason is not None]
    src_out, tgt_out, kept_ids = [], [], []
    for i, s, t, sp, tp in zip(kept, src_texts, tgt_texts, src_problems, tgt_problems):
        if s is None or t is None:
            rejected.append(row(i, "invalid_tree", f"src: {sp}" if s is None else f"tgt: {tp}"))
            continue
        src_out.append(s)
        tgt_out.append(t)
        kept_ids.append(first_id + i)
    rejected.sort(key=lambda r: r[0])
    done = time.perf_counter()
    return {
        "first_id": first_id, "input_pairs": len(src_items), "ids": kept_ids,
        "rejected": rejected, "rejected_counts": dict(Counter(r[1] for r in rejected)),
        "joined_lines": src_joined + tgt_joined,
        "seconds": {"filter": filtered - started, "parse": done - filtered},
        "src": "".join(src_out), "tgt": "".join(tgt_out),
    }


# --------------------------------------------------------------------------------- phase 3: features


def _features_setup(job: SplitJob) -> tuple[SplitJob, Bpe | None, Bpe | None]:
    if job.codes is None:
        return job, None, None
    src = Bpe(job.codes, set(job.src_vocabulary) if job.src_vocabulary else None)
    tgt = Bpe(job.codes, set(job.tgt_vocabulary) if job.tgt_vocabulary else None)
    return job, src, tgt


def _features_piece(state: tuple[SplitJob, Bpe | None, Bpe | None], prefix: str
                    ) -> tuple[pa.RecordBatch | None, dict[str, Any]]:
    """Features of one parsed piece as a record batch (None if it has no rows), and its stats."""
    job, src_bpe, tgt_bpe = state
    started = time.perf_counter()
    src = read_conllu(prefix + ".src.conllu") if os.path.getsize(prefix + ".src.conllu") else iter(())
    tgt = read_conllu(prefix + ".tgt.conllu") if os.path.getsize(prefix + ".tgt.conllu") else iter(())
    records, rejected = [], Counter()
    pairs = list(zip(src, tgt))
    src_trees, tgt_trees = [], []
    for src_sentence, tgt_sentence in pairs:
        src_trees.append(to_tree(src_sentence))
        tgt_trees.append(to_tree(tgt_sentence))
    src_columns = featurize(src_trees, job.src.features, src_bpe.segment_word if src_bpe else None)
    tgt_columns = featurize(tgt_trees, job.tgt.features, tgt_bpe.segment_word if tgt_bpe else None)
    src_row = {position: row for row, position in enumerate(src_columns.kept)}
    tgt_row = {position: row for row, position in enumerate(tgt_columns.kept)}
    for i, (src_sentence, _) in enumerate(pairs):
        reason = src_columns.dropped.get(i) or tgt_columns.dropped.get(i)
        if reason:
            rejected[reason] += 1
            continue
        record = {"id": int(src_sentence.sent_id), "src_text": src_trees[i].text, "tgt_text": tgt_trees[i].text}
        record.update({"src_" + k: v for k, v in src_columns.record(src_row[i]).items()})
        record.update({"tgt_" + k: v for k, v in tgt_columns.record(tgt_row[i]).items()})
        records.append(record)
    schema = pair_schema(job.src.features.features, job.tgt.features.features)
    batch = records_to_batch(records, schema) if records else None
    return batch, {"rows": len(records), "rejected": dict(rejected),
                   "seconds": {"bpe+features": time.perf_counter() - started}}


# --------------------------------------------------------------------------------------- engines


def _make_mapper(engine: str, workers: int, ray_address: str | None) -> Callable:
    """A function like `parallel.ordered_map(func, tasks, workers, setup, setup_args)` for the engine."""
    if engine == "local":
        return lambda func, tasks, setup, args: ordered_map(func, tasks, workers, setup, args)
    from .ray_engine import ray_ordered_map

    return lambda func, tasks, setup, args: ray_ordered_map(func, tasks, workers, setup, args, ray_address)


# ------------------------------------------------------------------------------------ the pipeline


@dataclass
class ConvertOptions:
    workers: int = 0  # 0 = all cores
    engine: str = "local"
    resume: bool = False
    overwrite: bool = False
    ray_address: str | None = None
    progress: bool | None = None  # None: when stderr is a terminal


class Converter:
    """Runs one pipeline configuration into its output folder."""

    def __init__(self, config: PipelineConfig, options: ConvertOptions) -> None:
        if options.engine not in ENGINES:
            raise InputError(f"unknown engine {options.engine!r} (choose from {', '.join(ENGINES)})")
        self.config = config
        self.options = options
        self.workers = options.workers or default_workers()
        self.out = config.output
        self.work = os.path.join(self.out, ".work")
        self.map = _make_mapper(options.engine, self.workers, options.ray_address)
        self.stats: dict[str, SplitStats] = {}

    # -- set-up

    def _check_inputs(self) -> dict[str, int]:
        """Every file exists and both sides of every split have the same number of segments."""
        counts = {}
        for split in self.config.splits:
            for path in split.src + split.tgt:
                if not os.path.isfile(path):
                    raise InputError(f"input file of split {split.name!r} not found (the comments at the top of "
                                     "the pipeline file say where to get it)", path)
            n_src = count_segments(split.src, split.format, self.config.src_lang)
            n_tgt = count_segments(split.tgt, split.format, self.config.tgt_lang)
            if n_src != n_tgt:
                raise InputError(f"split {split.name!r}: {n_src} source segments ({', '.join(split.src)}) but "
                                 f"{n_tgt} target segments ({', '.join(split.tgt)})")
            counts[split.name] = n_src
        return counts

    def _fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.config.to_dict(), sort_keys=True).encode()).hexdigest()

    def _prepare_output(self) -> None:
        marker = os.path.join(self.work, "config.json")
        exists = os.path.isdir(self.out) and os.listdir(self.out)
        if exists and not self.options.resume:
            if not self.options.overwrite:
                raise InputError("output folder exists and is not empty: pass --resume to continue an interrupted "
                                 "run or --overwrite to start again", self.out)
            if not os.path.isfile(marker):
                raise InputError("refusing to --overwrite a folder that synprep convert did not create", self.out)
            shutil.rmtree(self.out)
        if self.options.resume and os.path.isfile(marker):
            with open(marker, encoding="utf-8") as handle:
                previous = json.load(handle)
            if previous.get("fingerprint") != self._fingerprint():
                raise InputError("--resume: this output was made with a different configuration "
                                 "(use --overwrite or another --output)", self.out)
        os.makedirs(self.work, exist_ok=True)
        _atomic_write(marker, json.dumps({"fingerprint": self._fingerprint(), "config": self.config.to_dict()},
                                         indent=2, sort_keys=True).encode())

    def _parser_spec(self, parser: ParserConfig | None, side: str) -> ParserSpec | None:
        if parser is None:
            return None
        model = parser.model
        if model is None and parser.train_conllu:  # train a UDPipe model on the fly (sample pipeline)
            from .parse.train import train_udpipe

            model = os.path.join(self.out, "models", f"{side}.udpipe")
            if not os.path.isfile(model):
                tmp = model + ".tmp"
                train_udpipe(parser.train_conllu, tmp, parser.preset, quiet=True)
                os.replace(tmp, model)
        spec = ParserSpec(parser.backend, model, parser.model_dir, parser.lang, parser.pretokenized)
        spec.check()
        if spec.backend in ("udpipe", "spacy-udpipe"):  # cheap to load: fail now, in one line, if unusable
            spec.load()
        return spec  # stanza / spaCy load in the workers (no torch state before fork); errors come back

    # -- phases

    def _pieces(self, split: SplitConfig, total: int) -> Iterator[tuple[int, int, tuple]]:
        """(shard, piece, task) for every piece of the split, in input order."""
        size = self.config.shard_size
        src = read_side(split.src, split.format, self.config.src_lang)
        tgt = read_side(split.tgt, split.format, self.config.tgt_lang)
        position = 0
        while position < total:
            shard, offset = divmod(position, size)
            rows = min(PIECE_ROWS, size - offset, total - position)
            src_items = [next(src) for _ in range(rows)]
            tgt_items = [next(tgt) for _ in range(rows)]
            yield shard, offset // PIECE_ROWS, (position, src_items, tgt_items)
            position += rows

    def _phase_parse(self, split: SplitConfig, job: SplitJob, total: int, bar: tqdm) -> list[tuple[int, int]]:
        work = os.path.join(self.work, split.name)
        os.makedirs(work, exist_ok=True)
        pieces: list[tuple[int, int]] = []
        todo = []
        for shard, piece, task in self._pieces(split, total):
            pieces.append((shard, piece))
            if os.path.isfile(_piece_prefix(work, shard, piece) + ".json"):
                bar.update(len(task[1]))
            else:
                todo.append((shard, piece, task))
        tasks = (task for _, _, task in todo)
        for (shard, piece, _), info in zip(todo, self.map(_parse_piece, tasks, _parse_setup, (job,))):
            prefix = _piece_prefix(work, shard, piece)
            _atomic_write(prefix + ".src.conllu", info.pop("src").encode("utf-8"))
            _atomic_write(prefix + ".tgt.conllu", info.pop("tgt").encode("utf-8"))
            _atomic_write(prefix + ".json", json.dumps(info, ensure_ascii=False).encode("utf-8"))
            bar.update(info["input_pairs"])
        return pieces

    def _phase_bpe(self) -> tuple[str | None, dict[str, frozenset[str] | None]]:
        bpe = self.config.bpe
        vocab: dict[str, frozenset[str] | None] = {"src": None, "tgt": None}
        if bpe.codes:
            return bpe.codes, vocab
        if not bpe.symbols:
            return None, vocab
        codes = os.path.join(self.out, "codes.bpe")
        vocab_paths = [os.path.join(self.out, f"vocab.{side}") for side in ("src", "tgt")]
        if not os.path.isfile(codes):
            train = os.path.join(self.work, "train")
            if not os.path.isdir(train):
                raise InputError("[bpe] symbols: learning codes needs a train split (or give [bpe] codes)")
            token_files = []
            for side in ("src", "tgt"):
                path = os.path.join(self.work, f"train.tokens.{side}")
                with open(path, "w", encoding="utf-8") as out:
                    for name in sorted(os.listdir(train)):
                        if name.endswith(f".{side}.conllu"):
                            for sentence in read_conllu(os.path.join(train, name)) \
                                    if os.path.getsize(os.path.join(train, name)) else ():
                                out.write(" ".join(to_tree(sentence).tokens).replace("\n", " ") + "\n")
                token_files.append(path)
            tmp = codes + ".tmp"
            learn_joint(token_files, tmp, bpe.symbols, vocab_paths, bpe.min_frequency)
            os.replace(tmp, codes)
        if bpe.vocabulary_threshold:
            from .bpe import read_vocabulary

            for side, path in zip(("src", "tgt"), vocab_paths):
                vocab[side] = frozenset(read_vocabulary(path, bpe.vocabulary_threshold))
        return codes, vocab

    def _phase_features(self, split: SplitConfig, job: SplitJob, pieces: list[tuple[int, int]],
                        stats: SplitStats) -> list[dict[str, Any]]:
        work = os.path.join(self.work, split.name)
        folder = os.path.join(self.out, split.name)
        os.makedirs(folder, exist_ok=True)
        schema = pair_schema(job.src.features.features, job.tgt.features.features)
        by_shard: dict[int, list[int]] = {}
        for shard, piece in pieces:
            by_shard.setdefault(shard, []).append(piece)
        shards_info = []
        todo = [(shard, piece) for shard, piece in pieces
                if not os.path.isfile(os.path.join(folder, shard_name(shard)))]
        results = self.map(_features_piece, (_piece_prefix(work, s, p) for s, p in todo), _features_setup, (job,))
        result_iter = iter(zip(todo, results))
        for shard in sorted(by_shard):
            path = os.path.join(folder, shard_name(shard))
            stats_path = os.path.join(work, f"shard-{shard:05d}.json")
            if not os.path.isfile(path):
                batches, shard_stats = [], {"rows": 0, "rejected": Counter(), "seconds": Counter()}
                for _ in by_shard[shard]:
                    (_, _), (batch, info) = next(result_iter)
                    if batch is not None:
                        batches.append(batch)
                    shard_stats["rows"] += info["rows"]
                    shard_stats["rejected"].update(info["rejected"])
                    shard_stats["seconds"].update(info["seconds"])
                started = time.perf_counter()
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, schema) as writer:
                    for batch in batches:
                        writer.write_batch(batch)
                shard_stats["seconds"]["write"] = time.perf_counter() - started
                _atomic_write(stats_path, json.dumps(shard_stats).encode())
                _atomic_write(path, sink.getvalue().to_pybytes())
            with open(stats_path, encoding="utf-8") as handle:
                done = json.load(handle)
            stats.rows += done["rows"]
            stats.rejected.update(done["rejected"])
            stats.seconds.update(done["seconds"])
            shards_info.append({"file": shard_name(shard), "rows": done["rows"]})
        return shards_info

    def _signature(self, codes: str | None, job_filter: FilterSettings | None) -> dict[str, Any]:
        parsers = {}
        for side, parser in (("src", self.config.src_parser), ("tgt", self.config.tgt_parser)):
            if parser is None:
                parsers[side] = "pre-parsed CoNLL-U"
                continue
            model = parser.model or os.path.join(self.out, "models", f"{side}.udpipe")
            target = parser.model_dir if parser.backend == "stanza" else model
            digest = file_sha256(target) if target and os.path.isfile(target) else file_signature(target or "")
            parsers[side] = {"backend": parser.backend, "model": os.path.basename(target or ""),
                             "sha256": digest, "pretokenized": parser.pretokenized}
        identifier = make_identifier(job_filter) if job_filter else None
        return {
            "synprep": __version__,
            "parsers": parsers,
            "bpe_codes_sha256": file_sha256(codes) if codes else None,
            "filter": {**job_filter.to_dict(), "langid_signature": identifier.signature() if identifier else None}
            if job_filter else None,
            "features": self.config.to_dict()["features"],
        }

    def _filter_settings(self, split: SplitConfig) -> FilterSettings | None:
        if not split.filter:
            return None
        table = dict(self.config.filter)
        if "langid_languages" in table and table["langid_languages"] is not None:
            table["langid_languages"] = tuple(table["langid_languages"])
        if table.get("langid") == "none":
            table["langid"] = None
        try:
            return FilterSettings(self.config.src_lang, self.config.tgt_lang, **table)
        except (TypeError, ValueError) as err:
            raise InputError(f"[filter]: {err}") from None

    def run(self) -> dict[str, SplitStats]:
        """All phases for all splits; returns per-split statistics (also in each manifest)."""
        counts = self._check_inputs()
        self._prepare_output()
        specs = {side: self._parser_spec(parser, side)
                 for side, parser in (("src", self.config.src_parser), ("tgt", self.config.tgt_parser))}
        features = self.config.features
        sides = {side: Side(specs[side], FeatureConfig(getattr(features, side), features.root,
                                                       features.non_projective, features.strip_subtypes))
                 for side in ("src", "tgt")}
        ordered = sorted(self.config.splits, key=lambda s: s.name != "train")  # train first: BPE learns on it
        total = sum(counts.values())
        bar = tqdm(total=total, unit=" pairs", desc="filter+parse", file=sys.stderr,
                   disable=None if self.options.progress is None else not self.options.progress)
        jobs, pieces = {}, {}
        for split in ordered:
            src_pre = _is_conllu(split, split.src)
            tgt_pre = _is_conllu(split, split.tgt)
            jobs[split.name] = SplitJob(split.name, self._filter_settings(split),
                                        Side(None if src_pre else sides["src"].parser, sides["src"].features),
                                        Side(None if tgt_pre else sides["tgt"].parser, sides["tgt"].features))
            started = time.perf_counter()
            pieces[split.name] = self._phase_parse(split, jobs[split.name], counts[split.name], bar)
            self.stats[split.name] = SplitStats()
            self.stats[split.name].seconds["phase1_wall"] = time.perf_counter() - started
        bar.close()
        started = time.perf_counter()
        codes, vocab = self._phase_bpe()
        bpe_seconds = time.perf_counter() - started
        for split in ordered:
            job = SplitJob(split.name, jobs[split.name].filter, jobs[split.name].src, jobs[split.name].tgt,
                           vocab["src"], vocab["tgt"], codes)
            stats = self.stats[split.name]
            work = os.path.join(self.work, split.name)
            for shard, piece in pieces[split.name]:
                with open(_piece_prefix(work, shard, piece) + ".json", encoding="utf-8") as handle:
                    stats.add_piece(json.load(handle))
            started = time.perf_counter()
            shards = self._phase_features(split, job, pieces[split.name], stats)
            stats.seconds["phase3_wall"] = time.perf_counter() - started
            stats.seconds["learn_bpe"] = bpe_seconds if split.name == "train" else 0.0
            self._write_manifest(split, job, codes, shards, stats, counts[split.name], pieces[split.name])
        run_info = {"workers": self.workers, "engine": self.options.engine,
                    "seconds": {name: dict(s.seconds) for name, s in self.stats.items()}}
        _atomic_write(os.path.join(self.out, "run.json"), json.dumps(run_info, indent=2).encode())  # not in shards
        return self.stats

    def _write_manifest(self, split: SplitConfig, job: SplitJob, codes: str | None, shards: list[dict],
                        stats: SplitStats, total: int, pieces: list[tuple[int, int]]) -> None:
        rejected_total = sum(stats.rejected.values())
        if stats.rows + rejected_total != total:
            raise RuntimeError(f"accounting error in split {split.name}: {stats.rows} rows + {rejected_total} "
                               f"rejected != {total} input pairs")
        folder = os.path.join(self.out, split.name)
        lines = []
        work = os.path.join(self.work, split.name)
        for shard, piece in pieces:
            with open(_piece_prefix(work, shard, piece) + ".json", encoding="utf-8") as handle:
                for row in json.load(handle)["rejected"]:
                    lines.append("\t".join([str(row[0]), row[1], *(_tsv(x) for x in row[2:])]))
        _atomic_write(os.path.join(folder, "rejected.tsv"), ("\n".join(lines) + "\n" if lines else "").encode())
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "split": split.name,
            "configuration": self.config.to_dict(),
            "signature": self._signature(codes, job.filter),
            "input_lines": total,
            "rows": stats.rows,
            "rejected": dict(sorted(stats.rejected.items())),
            "rejected_reasons": list(FILTER_REASONS) + list(CONVERT_REASONS),
            "joined_lines": stats.joined_lines,
            "piece_rows": PIECE_ROWS,
            "shard_size": self.config.shard_size,
            "shards": shards,
            "schema": pair_schema(job.src.features.features, job.tgt.features.features).to_string(),
        }
        _atomic_write(os.path.join(folder, "manifest.json"),
                      json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8"))


def _tsv(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")


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
    lines.append("worker time per stage: " + ", ".join(f"{k} {v:.1f}s ({100 * v / total:.0f}%)"
                                                      for k, v in stage.items() if v))
    return "\n".join(lines)
