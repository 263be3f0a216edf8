"""`synprep convert`'s accounting and what it tells: per-split statistics, progress, the stop after a filter that
kept too few pairs, rejected.tsv, the manifest and its signature, and the summary table.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from .. import __version__
from ..errors import InputError
from ..featurize import UNALIGNED, UNMARKED
from ..filter import REASONS as FILTER_REASONS
from ..filter import likely_cause, make_identifier, rejection_warning
from ..parse import ParserSpec
from ..parse.quality import TreeShapes, parser_report, report_line, shape_warning
from ..progress import progress
from ..shards import Manifest, load_manifest, read_shard, shard_columns
from ..subwords import SPECIAL_PIECES, UNREAD_PIECES, registry
from ..textio import atomic_write, file_sha256, tsv_field
from .inputs import PIECE_ROWS, SIDES, is_conllu, piece_prefix
from .pipeline import NormalizeConfig, PipelineConfig, SplitConfig

log = logging.getLogger(__name__)

CONVERT_REASONS = ("invalid_tree", "non_projective", "bad_row")  # convert's own (bad_row: a TSV row, read)
# a parsed side's counts in the manifest; the parse cache's (only with a cache: they do not change the shards, and
# a warm cache's differ from a cold one's) go to OUT/run.json's `parse_cache`, with the run's other statistics
SENTENCE_COUNTS = ("distinct", "repeated")
CACHE_COUNTS = ("cache_hits", "cache_misses", "cache_damaged")
MIN_TRAIN_PAIRS = 10  # fewer train pairs kept, most rejected: the run stops after the filter (as with none kept)


@dataclass
class SplitStats:
    input_pairs: int = 0
    rows: int = 0
    rejected: Counter = field(default_factory=Counter)
    joined_lines: int = 0  # lines the parser split into several sentences (joined into one tree)
    sentences: dict[str, Counter] = field(default_factory=dict)  # per parsed side: distinct, repeated
    seconds: Counter = field(default_factory=Counter)  # per stage
    parsers: dict[str, dict[str, Any]] = field(default_factory=dict)  # per parsed side: scores, warnings


class Progress:
    """convert's progress on stderr (`synprep.progress`): a bar per stage and a line per stage without one where
    `shown` is True, or None and stderr is a terminal; off a terminal (None) a plain line per stage at the
    progress interval; nothing with False."""

    def __init__(self, shown: bool | None) -> None:
        self.setting = shown

    @property
    def shown(self) -> bool:
        return sys.stderr.isatty() if self.setting is None else self.setting

    def bar(self, stage: str, total: int | None, later_pairs: int = 0) -> tqdm:
        """A stage's counter; `later_pairs`: pairs of the next splits of the same stage (in the lines' ETA)."""
        return progress(stage, total, "pairs", shown=self.setting, prefix="convert: ", later_units=later_pairs)

    def say(self, line: str) -> None:
        """One line for a stage without a bar of its own."""
        if self.shown:
            tqdm.write(line, file=sys.stderr)

    @staticmethod
    def tell(line: str) -> None:
        """One line on stderr whatever the progress setting (parser scores, warnings)."""
        tqdm.write(line, file=sys.stderr)


SHAPE_ROWS = 20_000  # rows of a split whose trees are checked (the first shards')


def _description(spec: ParserSpec) -> str:
    return f"{spec.backend} {os.path.basename(os.path.normpath(spec.model_path())) or spec.model or ''}".strip()


def parser_quality(specs: dict[str, ParserSpec | None], tell: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Each parsing side's recorded held-out scores (`synprep.parse.quality`; in the summary), a warning told
    below the floor; the manifest's entry per side."""
    judged = {}
    for side, spec in specs.items():
        if spec is None:
            continue
        warning, entry = parser_report(side, _description(spec), spec.model_path())
        if warning:
            tell(f"synprep: {warning}")
        judged[side] = entry
    return judged


def tree_check(out: str, split: SplitConfig, shards: list[dict[str, Any]], specs: dict[str, ParserSpec | None],
               judged: dict[str, dict[str, Any]], tell: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The trees a parser made for this split (its first SHAPE_ROWS rows) checked for degenerate shapes
    (`TreeShapes`); a warning told and added to the side's manifest entry."""
    entries = {}
    for side, files in zip(SIDES, (split.src, split.tgt), strict=True):
        spec = specs.get(side)
        if spec is None or is_conllu(split, files):
            continue
        entry = {**judged[side], "warnings": list(judged[side].get("warnings", []))}
        shapes, rows = TreeShapes(), 0
        for shard in shards:
            if rows >= SHAPE_ROWS:
                break
            path = os.path.join(out, split.name, shard["file"])
            names = shard_columns(path)
            columns = [name for name in (f"{side}_heads", f"{side}_labels") if name in names]
            if f"{side}_heads" not in columns:
                break
            table = read_shard(path, columns=columns)
            labels = table.column(f"{side}_labels").to_pylist() if len(columns) == 2 else None
            for i, heads in enumerate(table.column(f"{side}_heads").to_pylist()):
                shapes.add(heads, labels[i] if labels else None)
            rows += table.num_rows
        warning = shape_warning(side, split.name, _description(spec), shapes)
        if warning:
            tell(f"synprep: {warning}")
            entry["warnings"].append(warning)
        if not entry["warnings"]:
            del entry["warnings"]
        entries[side] = entry
    return entries


def read_piece_records(work: str, split: SplitConfig, pieces: list[tuple[int, int]], stats: SplitStats,
                       reused: set[tuple[str, int, int]], piece_pairs: dict[tuple[str, int, int], int]) -> list[str]:
    """Each piece's phase-1 record, read once: counts into `stats` and `piece_pairs` (the pieces in
    `reused`, done by an earlier run: no timings); returns the rejected.tsv lines."""
    work = os.path.join(work, split.name)
    lines = []
    for shard, piece in pieces:
        path = piece_prefix(work, shard, piece) + ".json"
        try:
            with open(path, encoding="utf-8") as handle:
                info = json.load(handle)
        except (OSError, ValueError):
            raise InputError("a piece of the work folder is missing or unreadable (changed since the run "
                             "stopped?): run again with --overwrite", path) from None
        stats.input_pairs += info["input_pairs"]
        piece_pairs[(split.name, shard, piece)] = info["input_pairs"]  # for the features bar
        stats.rejected.update(info["rejected_counts"])
        stats.joined_lines += info["joined_lines"]
        for side, counts in info.get("sentences", {}).items():
            stats.sentences.setdefault(side, Counter()).update(counts)
        stats.seconds.update({} if (split.name, shard, piece) in reused else info["seconds"])
        lines += ["\t".join([str(row[0]), row[1], tsv_field(row[2]), row[3], row[4]]) for row in info["rejected"]]
    return lines


def check_kept(config: PipelineConfig, out: str, split: SplitConfig, stats: SplitStats, rejected_lines: list[str],
               bar: tqdm) -> None:
    """Right after a split's filter: too few pairs kept (none, or empty input files; on train, under
    MIN_TRAIN_PAIRS when the filter rejected most of them) stops the run with one line naming the reasons, the
    likely cause and the rejections report (kept at OUT/rejected-<split>.tsv); more than WARN_REJECTED_SHARE
    rejected is a warning."""
    filtered = config.filter if split.filter else None
    rejected_total = sum(stats.rejected.values())
    kept = stats.input_pairs - rejected_total
    too_few = split.name == "train" and kept < MIN_TRAIN_PAIRS and 2 * rejected_total > stats.input_pairs
    if not stats.input_pairs:  # a split with no pair kept stops the run, also when its files hold none
        raise InputError(f"split {split.name!r}: its input holds no pairs (empty files): a split of 0 pairs "
                         "cannot be trained or scored; give files with pairs, or leave the split out",
                         split.src[0] if split.src else None)
    if stats.input_pairs and (not kept or too_few):
        report = os.path.join(out, f"rejected-{split.name}.tsv")
        atomic_write(report, rejected_text(rejected_lines))
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
        log.warning(f"synprep convert: split {split.name!r}: {message} (OUT/{split.name}/rejected.tsv lists them)")
        bar.refresh()


def signature(config: PipelineConfig, specs: dict[str, ParserSpec | None], codes: tuple[str | None, str | None]
              ) -> dict[str, Any]:
    """The manifest's signature: everything that decides the shards' bytes (CONTRACT.md)."""
    identifier = make_identifier(config.filter) if config.filter else None
    langid_signature = identifier.signature() if identifier else None
    filter_settings = config.filter
    joint = config.bpe.joint or not codes[0]
    subwords = registry.get(config.bpe.scheme)
    if not subwords.bpe_codes:  # the model's digest under its own key; bpe_codes_sha256 stays null
        scheme = {"bpe_codes_sha256": None, "subword_scheme": subwords.name,
                  **(({"subword_model_sha256": file_sha256(codes[0])} if joint else  # type: ignore[arg-type]
                      {f"subword_model_sha256_{side}": file_sha256(path)  # type: ignore[arg-type]
                       for side, path in zip(SIDES, codes, strict=True)}) if subwords.files else {}),
                  **({"subword_files_sha256": {name: file_sha256(os.path.join(os.path.dirname(codes[0]), name))
                                               for name in subwords.further_files(joint)}}
                     if codes[0] and subwords.further_files(joint) else {}),
                  # how transitions and decoded pieces are read: each side's (marker, marker kind)
                  "subword_marker": {side: list(subwords.marker_of(subwords.model_path(path) if path else None))
                                     for side, path in zip(SIDES, codes, strict=True)}}
    else:
        learned = [os.path.join(config.output, f"vocab.{side}") for side in SIDES]  # `learn_codes`'s vocabularies
        scheme = {"bpe_codes_sha256": file_sha256(codes[0]) if joint and codes[0] else None,
                  **({} if joint else {f"bpe_codes_sha256_{side}": file_sha256(path)  # type: ignore[arg-type]
                                       for side, path in zip(SIDES, codes, strict=True)}),
                  **({f"bpe_vocabulary_sha256_{side}": file_sha256(path) for side, path in zip(SIDES, learned,
                                                                                            strict=True)}
                     if config.bpe.vocabulary_threshold and all(map(os.path.isfile, learned)) else {})}
    return {
        "synprep": __version__,
        "parsers": {side: spec.signature() if spec else "pre-parsed CoNLL-U" for side, spec in specs.items()},
        **scheme,
        "filter": {**filter_settings.to_dict(), "langid_signature": langid_signature} if filter_settings else None,
        "features": config.to_dict()["features"],
        **({"normalize": {side: list(config.normalize.side(side)) for side in SIDES}}
           if config.normalize != NormalizeConfig() else {}),
        **({"compression": f"{config.compression}|pyarrow {pa.__version__}"}
           if config.compression != "none" else {}),
    }


def write_split(config: PipelineConfig, out: str, split: SplitConfig, stats: SplitStats, shards: list[dict[str, Any]],
                signature: dict[str, Any], rejected_lines: list[str]) -> None:
    """A split's rejected.tsv and manifest.json (written last: the split is complete)."""
    folder = os.path.join(out, split.name)
    atomic_write(os.path.join(folder, "rejected.tsv"), rejected_text(rejected_lines))
    Manifest(split.name, config.to_dict(), signature, stats.input_pairs, stats.rows,
             dict(stats.rejected), _reasons(config, stats.rejected), shards,
             stats.joined_lines,
             PIECE_ROWS, config.shard_size, config.compression,
             sentences={side: {key: c[key] for key in SENTENCE_COUNTS if key in c}
                        for side, c in stats.sentences.items()}, parsers=stats.parsers).write(folder)


def _reasons(config: PipelineConfig, rejected: dict[str, int]) -> list[str]:
    """The manifest's `rejected_reasons`: the filter's and convert's, the cut's (`_cut_reasons`), and a read-back
    reason counted beyond them (BPE codes or no sub-words: a token holding the separator, `unread_pieces`)."""
    declared = list(FILTER_REASONS) + list(CONVERT_REASONS) + _cut_reasons(config)
    return declared + [reason for reason in (UNMARKED, UNREAD_PIECES, SPECIAL_PIECES)
                       if rejected.get(reason) and reason not in declared]


def _cut_reasons(config: PipelineConfig) -> list[str]:
    """The rejections the cut adds: the raw-text cut's ([bpe] cut = "raw"; with transitions, a token whose pieces
    do not show its bounds); the read-back of a scheme's model cutting token by token (`subwords.read_back`: bounds
    not shown, pieces that do not spell their token, a special piece); none for BPE codes (the manifests as
    before; `_reasons` adds one that was counted)."""
    features = config.features.src + config.features.tgt
    scheme = registry.get(config.bpe.scheme)
    read_back = not scheme.bpe_codes and config.bpe.cut == "token"
    return ([UNALIGNED] if config.bpe.cut == "raw" else []) + \
        ([UNMARKED] if read_back or (not scheme.bpe_codes and "transitions" in features) else []) + \
        ([UNREAD_PIECES, SPECIAL_PIECES] if read_back else [])


def cache_counts(stats: dict[str, SplitStats]) -> dict[str, dict[str, dict[str, int]]]:
    """Per split and parsed side the parse cache's counts (CACHE_COUNTS; {} without a cache): run.json's
    `parse_cache`."""
    counted = {name: {side: {key: c[key] for key in CACHE_COUNTS if key in c}
                      for side, c in s.sentences.items() if any(key in c for key in CACHE_COUNTS)}
               for name, s in stats.items()}
    return {name: sides for name, sides in counted.items() if sides}


def finished_stats(config: PipelineConfig, out: str, cached: dict | None = None) -> dict[str, SplitStats]:
    """The statistics of a finished run, from its manifests (`--resume` of a finished output) and `cached`
    (run.json's `parse_cache`)."""
    stats: dict[str, SplitStats] = {}
    for split in config.splits:
        manifest = load_manifest(os.path.join(out, split.name))
        sentences = {side: Counter({**c, **(cached or {}).get(split.name, {}).get(side, {})})
                     for side, c in manifest.sentences.items()}
        stats[split.name] = SplitStats(manifest.input_lines, manifest.rows, Counter(manifest.rejected),
                                       manifest.joined_lines, sentences, parsers=manifest.parsers)
    return stats


def rejected_text(lines: list[str]) -> bytes:
    """rejected.tsv's bytes from its lines."""
    return ("\n".join(lines) + "\n" if lines else "").encode()


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
    parsers: dict[str, dict[str, Any]] = {}
    for s in stats.values():
        for side, entry in s.parsers.items():
            parsers.setdefault(side, entry)
    lines += [report_line(side, entry) for side, entry in sorted(parsers.items(), key=lambda item: item[0] != "src")]
    cached = Counter()
    for s in stats.values():
        for counts in s.sentences.values():
            cached.update({k: v for k, v in counts.items() if k.startswith("cache_")})
    if cached:
        damaged = f" ({cached['cache_damaged']} damaged entries parsed again)" if cached["cache_damaged"] else ""
        lines.append(f"parse cache: {cached['cache_hits']} distinct sentences found, {cached['cache_misses']} parsed "
                     f"and stored{damaged}")
    return "\n".join(lines)
