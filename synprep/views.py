"""The statistics and example views that `synprep inspect` (terminal) and `synprep.report` (HTML) share: the
counts of a dataset's sides (`SideStats`, `DatasetStats`, the summary table), and the trees of an example ready to
show (`example_sides`, the arc lanes of a diagram)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import features as F
from .challenge import RULES, find_phenomena
from .shards import Row

LENGTH_BIN = 5  # tokens per bin of the length histogram


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
