"""`synprep inspect`: statistics and examples of a split folder (convert's output) or a CoNLL-U file.

A dataset to inspect (`open_dataset`: shards through `synprep.shards`, or a CoNLL-U file), counting
(`compute_stats`), the example pick shared with the HTML report, and the terminal views (`format_stats`,
`render_example`). The HTML report is `synprep.report`.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import features as F
from .challenge import RULES, conllu_language, find_phenomena, side_languages
from .conllu import read_trees
from .errors import InputError
from .featurize import FeatureConfig, sentence_features
from .schema import FEATURE_GROUPS
from .shards import SIDES, Row, Split, open_split

LENGTH_BIN = 5  # tokens per bin of the length histogram


# ------------------------------------------------------------------------------------------ reading


@dataclass
class Dataset:
    """A split folder (its shards and manifest) or a CoNLL-U file (one side, named after the file)."""

    path: str
    kind: str  # "shards" | "conllu"
    split: Split | None = None

    @property
    def manifest(self) -> dict[str, Any] | None:
        """The split's manifest as JSON data (None for a CoNLL-U file)."""
        return json.loads(self.split.manifest.to_json()) if self.split else None

    @property
    def sides(self) -> tuple[str, ...]:
        return SIDES if self.kind == "shards" else ("conllu",)

    def rows(self) -> Iterator[Row]:
        if self.split is not None:
            yield from self.split.rows()
            return
        config = FeatureConfig(features=FEATURE_GROUPS, non_projective="keep")
        for index, tree in enumerate(read_trees(self.path)):
            record = sentence_features(tree, config)  # no BPE: sub-words = tokens
            record["text"] = tree.text if tree.text is not None else " ".join(tree.tokens)
            yield Row(index, {"conllu": record}, os.path.basename(self.path))


def open_dataset(path: str) -> Dataset:
    """A split folder (manifest.json + part-*.arrow) or a CoNLL-U file."""
    if os.path.isdir(path):
        return Dataset(path, "shards", open_split(path))
    if os.path.isfile(path):
        return Dataset(path, "conllu")
    raise InputError("no such split folder or CoNLL-U file", path)


# ------------------------------------------------------------------------------------------ statistics


@dataclass
class SideStats:
    sentences: int = 0
    tokens: int = 0
    subwords: int = 0
    projective: int = 0
    transitions_null: int = 0
    has_transitions: bool = False
    labels: Counter = field(default_factory=Counter)
    lengths: Counter = field(default_factory=Counter)  # tokens per sentence -> sentences
    lang: str | None = None
    phenomena: Counter | None = None  # challenge rule -> sentences with it (None: no labels stored)

    def add(self, record: dict[str, Any]) -> None:
        self.sentences += 1
        n = len(record["tokens"])
        self.tokens += n
        self.subwords += len(record["subwords"])
        self.projective += bool(record["projective"])
        self.lengths[n] += 1
        if record.get("labels") is not None:
            self.labels.update(record["labels"])
            if self.phenomena is None:
                self.phenomena = Counter({rule.name: 0 for rule in RULES if rule.applies_to(self.lang)})
            self.phenomena.update(find_phenomena(record, RULES, self.lang).keys())
        if "transitions" in record:
            self.has_transitions = True
            self.transitions_null += record["transitions"] is None

    @property
    def subwords_per_token(self) -> float:
        return self.subwords / self.tokens if self.tokens else 0.0

    @property
    def projective_share(self) -> float:
        return self.projective / self.sentences if self.sentences else 0.0

    def length_bins(self, width: int = LENGTH_BIN) -> list[tuple[str, int]]:
        """(label 'a-b', sentences) for every bin from the shortest to the longest sentence."""
        if not self.lengths:
            return []
        first, last = (min(self.lengths) - 1) // width, (max(self.lengths) - 1) // width
        bins = Counter({b: 0 for b in range(first, last + 1)})
        for length, count in self.lengths.items():
            bins[(length - 1) // width if length else 0] += count
        return [(f"{b * width + 1}-{(b + 1) * width}", bins[b]) for b in range(first, last + 1)]


@dataclass
class DatasetStats:
    path: str
    kind: str
    pairs: int = 0
    sides: dict[str, SideStats] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None

    @property
    def rejected(self) -> dict[str, int]:
        return dict((self.manifest or {}).get("rejected", {}))


def compute_stats(dataset: Dataset) -> DatasetStats:
    """Count everything in one pass over the rows."""
    langs = (side_languages(dataset.split.manifest.configuration) if dataset.split is not None
             else {"conllu": conllu_language(dataset.path)})
    stats = DatasetStats(dataset.path, dataset.kind, manifest=dataset.manifest,
                         sides={side: SideStats(lang=langs.get(side)) for side in dataset.sides})
    for row in dataset.rows():
        stats.pairs += 1
        for side, record in row.sides.items():
            if "tokens" in record:
                stats.sides[side].add(record)
    return stats


def flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested dicts as (dotted key, value) pairs (the signature's lines)."""
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = []
        for key, inner in value.items():
            items += flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return items
    return [(prefix, value)]


def summary_rows(stats: DatasetStats) -> list[list[str]]:
    """The summary table: a header row (blank, side names), then one row per measure."""
    names = list(stats.sides)
    table = [["", *names]]
    for label, get in (("sentences", lambda s: f"{s.sentences}"), ("tokens", lambda s: f"{s.tokens}"),
                       ("tokens/sentence", lambda s: f"{s.tokens / s.sentences:.2f}" if s.sentences else "-"),
                       ("sub-words", lambda s: f"{s.subwords}"),
                       ("sub-words/token", lambda s: f"{s.subwords_per_token:.3f}"),
                       ("projective", lambda s: f"{100 * s.projective_share:.1f}%"),
                       ("transitions null", lambda s: f"{s.transitions_null}" if s.has_transitions else "-")):
        table.append([label, *(get(stats.sides[n]) for n in names)])
    for rule in RULES:  # challenge-set phenomena (synprep.challenge): sentences; '-' = not counted
        table.append([rule.name, *(str(s.phenomena[rule.name]) if s.phenomena is not None and rule.name in
                                   s.phenomena else "-" for s in (stats.sides[n] for n in names))])
    return table


def format_stats(stats: DatasetStats, top_labels: int = 12) -> str:
    """The terminal summary of `synprep inspect`."""
    lines = []
    unit = "pairs" if stats.kind == "shards" else "sentences"
    head = f"{stats.path}: {stats.pairs} {unit}"
    if stats.manifest is not None:
        manifest = stats.manifest
        rejected = sum(stats.rejected.values())
        head += (f" in {len(manifest.get('shards', []))} shard(s); split {manifest.get('split')}, "
                 f"{manifest.get('input_lines')} input lines, {rejected} rejected")
    lines.append(head)
    if stats.rejected:
        lines.append("rejected: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.rejected.items())))
    names = list(stats.sides)
    table = summary_rows(stats)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              for r in table]
    for name in names:
        side = stats.sides[name]
        bins = side.length_bins()
        if bins:
            most = max(count for _, count in bins) or 1
            lines.append(f"sentence length ({name}, tokens):")
            width = max(len(b) for b, _ in bins)
            lines += [f"  {b.rjust(width)} {'█' * round(30 * count / most):<30} {count}" for b, count in bins]
        if side.labels:
            total = sum(side.labels.values())
            top = side.labels.most_common(top_labels)
            rest = total - sum(c for _, c in top)
            shown = ", ".join(f"{label} {100 * c / total:.1f}%" for label, c in top)
            lines.append(f"labels ({name}, {len(side.labels)} kinds): {shown}" + (f", other {100 * rest / total:.1f}%"
                                                                                 if rest else ""))
    if stats.manifest is not None and stats.manifest.get("signature"):
        lines.append("signature:")
        lines += [f"  {key} = {json.dumps(value, ensure_ascii=False)}"
                  for key, value in flatten(stats.manifest["signature"])]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ examples


def pick_examples(dataset: Dataset, count: int, max_tokens: int = 40, scan: int = 2000) -> list[Row]:
    """The first `count` rows whose sides have at most `max_tokens` tokens; the last one is swapped for a
    non-projective row when none was picked and one exists among the first `scan` rows."""
    picked: list[Row] = []
    non_projective: Row | None = None
    for seen, row in enumerate(dataset.rows()):
        if seen >= scan or (len(picked) >= count and non_projective is not None):
            break
        short = all(len(r.get("tokens", ())) <= max_tokens for r in row.sides.values())
        if not short:
            continue
        if non_projective is None and not all(r.get("projective", True) for r in row.sides.values()):
            non_projective = row
        if len(picked) < count:
            picked.append(row)
    if count and non_projective is not None and all(r.get("projective", True) for p in picked
                                                   for r in p.sides.values()):
        picked[-1] = non_projective
    return picked


_BOX = {  # (up, down, left, right) -> character
    (True, True, False, False): "│", (False, False, True, True): "─", (False, True, False, True): "╭",
    (True, False, False, True): "╰", (True, True, False, True): "├", (False, True, True, True): "┬",
    (True, False, True, True): "┴", (True, True, True, True): "┼",
}


def arc_lanes(heads: list[int]) -> list[tuple[int, int, int]]:
    """(top row, bottom row, lane) of every arc (0-based rows): shorter arcs get inner lanes (lane 0)."""
    arcs = sorted(((min(d, h - 1), max(d, h - 1)) for d, h in enumerate(heads) if h),
                  key=lambda a: (a[1] - a[0], a[0]))
    placed: list[tuple[int, int, int]] = []
    for top, bottom in arcs:
        lane = 0
        while any(lane == k and t <= bottom and top <= b for t, b, k in placed):
            lane += 1
        placed.append((top, bottom, lane))
    return placed


def tree_diagram(heads: list[int]) -> list[str]:
    """A vertical arc diagram, one line per token (to be followed by the token); arrows point to dependents."""
    n = len(heads)
    lanes = arc_lanes(heads)
    width = max((lane for _, _, lane in lanes), default=-1) + 1
    reach = [-1] * n  # the outermost lane with an arc ending on each row
    for top, bottom, lane in lanes:
        reach[top] = max(reach[top], lane)
        reach[bottom] = max(reach[bottom], lane)
    lines = []
    for row in range(n):
        cells = []
        for lane in range(width - 1, -1, -1):
            up = any(k == lane and t < row <= b for t, b, k in lanes)
            down = any(k == lane and t <= row < b for t, b, k in lanes)
            right = reach[row] >= lane
            cells.append(_BOX.get((up, down, reach[row] > lane, right), " "))
        tip = ("►" if heads[row] else "─") if reach[row] >= 0 else " "
        lines.append("".join(cells) + tip)
    return lines


@dataclass
class SideView:
    """One side of an example as both views show it: the stored fields, with what is missing filled in
    (labels, sub-words = tokens, the pieces of every token)."""

    side: str
    text: str
    tokens: list[str]
    heads: list[int]
    labels: list[str]
    subwords: list[str]
    owner: list[int]  # subword_token
    pieces: list[list[str]]  # the sub-words of every token
    positions: list[list[int]]  # their 0-based sub-word positions
    projective: bool
    record: dict[str, Any]  # everything stored (parent_mid, distances, transitions, ...)


def example_sides(row: Row, unknown_label: str = "?") -> Iterator[SideView]:
    """The sides of a row that hold a tree, ready to show (`unknown_label` where no labels are stored)."""
    for side, record in row.sides.items():
        if "tokens" not in record:
            continue
        tokens, heads = record["tokens"], record["heads"]
        subwords = record.get("subwords") or tokens
        owner = record.get("subword_token") or list(range(len(tokens)))
        positions: list[list[int]] = [[] for _ in tokens]
        for position, token in enumerate(owner):
            positions[token].append(position)
        yield SideView(side, record.get("text") or " ".join(tokens), tokens, heads,
                       record.get("labels") or ["root" if h == 0 else unknown_label for h in heads], subwords, owner,
                       F.token_pieces(subwords, owner, len(tokens)), positions, bool(record.get("projective")), record)


def render_example(row: Row, wrap: int = 100) -> str:
    """A pair in the terminal: per side the arc diagram, tokens, labels, sub-words and parent_mid, then the
    transition sequence."""
    out = [f"── id {row.id}" + (f" ({row.file})" if row.file else "") + " " + "─" * 40]
    for view in example_sides(row):
        record, tokens = view.record, view.tokens
        kind = "projective" if view.projective else "NON-PROJECTIVE"
        out.append(f"{view.side}: {view.text}")
        out.append(f"  {len(tokens)} tokens, {len(view.subwords)} sub-words, {kind}")
        diagram = tree_diagram(view.heads)
        has_mid = record.get("parent_mid") is not None
        cols = [[f"{i + 1}", tokens[i], view.labels[i], f"{view.heads[i]}", " ".join(view.pieces[i]),
                 " ".join(f"{record['parent_mid'][p]:g}" for p in view.positions[i]) if has_mid else ""]
                for i in range(len(tokens))]
        header = ["#", "token", "label", "head", "sub-words", "parent_mid" if has_mid else ""]
        widths = [max(len(c[k]) for c in cols + [header]) for k in range(len(header))]
        pad = " " * len(diagram[0]) if diagram else ""
        out.append("  " + pad + " " + "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        for line, c in zip(diagram, cols):
            cells = [c[0].rjust(widths[0])] + [x.ljust(w) for x, w in zip(c[1:], widths[1:])]
            out.append("  " + line + " " + "  ".join(cells).rstrip())
        if "transitions" in record:
            sequence = record["transitions"]
            text = "null (not encodable under the non-projective policy)" if sequence is None else " ".join(sequence)
            out += _wrap("  transitions:", text, wrap, "    ")
    return "\n".join(out)


def _wrap(prefix: str, text: str, width: int, indent: str) -> list[str]:
    lines, line = [], prefix
    for word in text.split(" "):
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent + word
        else:
            line = f"{line} {word}"
    return lines + [line]
