"""`synprep inspect`: statistics and examples of a split folder (convert's output) or a CoNLL-U file.

A dataset to inspect (`open_dataset`: shards through `synprep.shards`, or a CoNLL-U file), counting
(`compute_stats`), the example pick shared with the HTML report, and the terminal views (`format_stats`,
`render_example`; the counts and views both share: `synprep.views`). The HTML report is `synprep.report`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .callables import make_callable
from .challenge import conllu_language, side_languages
from .conllu import read_trees
from .errors import InputError
from .featurize import FeatureConfig, sentence_features
from .schema import FEATURE_GROUPS
from .shards import SIDES, Row, Split, open_split
from .views import (  # noqa: F401
    LENGTH_BIN,
    DatasetStats,
    SideStats,
    SideView,
    arc_lanes,
    example_sides,
    flatten,
    summary_rows,
    tree_diagram,
)

if TYPE_CHECKING:
    from .report import InspectResult



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


def inspect(path: str, *, show: int = 0, html: str | None = None, examples: int = 3) -> InspectResult:
    """`synprep inspect PATH`: the statistics of a split folder or a CoNLL-U file, `show` examples picked as the
    terminal shows them (`result.show()`), and with `html` the self-contained report written there (in a
    notebook the result shows as that report, with `examples` example trees)."""
    from .arguments import check_arguments
    from .report import InspectResult

    checked = check_arguments("synprep inspect", path=path, show=show, html=html, examples=examples)
    dataset = open_dataset(checked["path"])
    stats = compute_stats(dataset)
    picked = pick_examples(dataset, checked["show"]) if checked["show"] else []
    report_examples = pick_examples(dataset, checked["examples"], max_tokens=24)
    if checked["html"]:
        from .report import write_html

        write_html(checked["html"], stats, report_examples)
    return InspectResult(checked["path"], stats, report_examples, picked,
                         "\n".join(render_example(row) for row in picked), format_stats(stats), checked["html"])


make_callable(__name__, inspect)  # synprep.inspect(...) is synprep.inspect.inspect(...) (docs/python-api.md)
