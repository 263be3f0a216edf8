"""`synprep inspect --html`: one self-contained HTML file (inline SVG, no scripts, no network).

Summary tables, length and label histograms, and for a few examples per side: the dependency tree as arcs
(crossing arcs in red), the Pascal Gaussian prior N(j | parent_mid_t, 1) and the syntax-distance matrix as
heatmaps, and the transition sequence. The markup is well-formed XML (the tests parse it). `InspectResult`
(synprep.inspect's result) shows in a notebook as this report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from . import __version__
from . import features as F
from .features import parent_prior
from .results import Printed
from .shards import Row
from .trees import crossing_arcs
from .views import DatasetStats, arc_lanes, example_sides, flatten, summary_rows

CHAR = 7.8  # px per character of the 13px monospace font
VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
STYLE = """
body { font-family: 'DejaVu Sans', Arial, sans-serif; margin: 24px; color: #222; max-width: 1600px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; border-bottom: 1px solid #ccc; margin-top: 28px; }
h3 { font-size: 15px; margin: 18px 0 6px; } h4 { font-size: 14px; margin: 12px 0 4px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 3px 8px; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #f3f3f3; } .path { color: #666; font-family: monospace; }
.charts, .maps { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.example { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; margin: 14px 0; }
.text { font-family: monospace; color: #444; }
.scroll { overflow-x: auto; }
.seq { line-height: 1.9; font-family: monospace; font-size: 12px; }
.t { border-radius: 3px; padding: 1px 4px; margin: 0 1px; white-space: nowrap; }
.sw { background: #eee; } .la { background: #cfe3ff; } .ra { background: #ffdcb8; }
svg text { font-family: 'DejaVu Sans Mono', monospace; }
"""


def _color(value: float) -> str:
    """Viridis-like colour of a value in [0, 1]."""
    value = min(max(value, 0.0), 1.0) * (len(VIRIDIS) - 1)
    low = min(int(value), len(VIRIDIS) - 2)
    frac = value - low
    rgb = [round(a + (b - a) * frac) for a, b in zip(VIRIDIS[low], VIRIDIS[low + 1])]
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def _text(x: float, y: float, content: str, size: int = 12, anchor: str = "middle", fill: str = "#222",
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"{extra}>'
            f"{escape(content)}</text>")


# ---------------------------------------------------------------------------------------------- charts


def bar_chart(bins: list[tuple[str, int]], title: str) -> str:
    """Vertical bars (the length histogram)."""
    bar, gap, left, top, plot = 26, 4, 44, 40, 150
    width = max(left + len(bins) * (bar + gap) + 20, left + 8 * len(title))  # room for the title on few bins
    most = max((count for _, count in bins), default=0) or 1
    body = [_text(left, 16, title, 13, "start"),
            f'<line x1="{left - 4}" y1="{top + plot}" x2="{width - 10}" y2="{top + plot}" stroke="#888"/>',
            _text(left - 8, top + 8, str(most), 10, "end", "#666"), _text(left - 8, top + plot, "0", 10, "end", "#666")]
    for i, (label, count) in enumerate(bins):
        x = left + i * (bar + gap)
        h = plot * count / most
        body.append(f'<rect x="{x}" y="{top + plot - h:.1f}" width="{bar}" height="{h:.1f}" fill="#3b7dd8">'
                    f"<title>{escape(label)}: {count}</title></rect>")
        body.append(_text(x + bar / 2, top + plot + 12, label.split("-")[0], 9, "middle", "#444"))
        if count:
            body.append(_text(x + bar / 2, top + plot - h - 3, str(count), 9, "middle", "#444"))
    body.append(_text(left + (width - left) / 2, top + plot + 28, "tokens per sentence (bin start)", 10))
    return _svg(width, top + plot + 36, body, title)


def hbar_chart(items: list[tuple[str, int]], title: str) -> str:
    """Horizontal bars (the label distribution), with shares."""
    row, left, plot = 17, 12 + CHAR * max((len(k) for k, _ in items), default=4), 260
    total = sum(c for _, c in items) or 1
    most = max((c for _, c in items), default=0) or 1
    body = [_text(4, 16, title, 13, "start")]
    for i, (label, count) in enumerate(items):
        y = 26 + i * row
        w = plot * count / most
        body.append(_text(left - 6, y + 12, label, 11, "end"))
        body.append(f'<rect x="{left:.1f}" y="{y + 2}" width="{w:.1f}" height="{row - 4}" fill="#e0803a"/>')
        body.append(_text(left + w + 4, y + 12, f"{count} ({100 * count / total:.1f}%)", 10, "start", "#444"))
    return _svg(max(left + plot + 110, 4 + 8 * len(title)), 30 + len(items) * row, body, title)


def tree_svg(tokens: list[str], heads: list[int], labels: list[str], pieces: list[list[str]]) -> str:
    """The dependency tree as arcs above the tokens (arrow at the dependent), sub-words underneath."""
    widths = [CHAR * max(len(t), len(" ".join(p))) + 18 for t, p in zip(tokens, pieces)]
    label_widths = [6.6 * len(label) + 8 for label in labels]
    centers, x = [], 12.0
    for w in widths:
        centers.append(x + w / 2)
        x += w
    lanes = arc_lanes(heads)
    lane_of = {(t, b): lane for t, b, lane in lanes}
    levels = max((lane for _, _, lane in lanes), default=-1) + 1
    step = 24
    base = 36 + (levels + 1) * step
    crossing = crossing_arcs(heads).any(axis=1) if len(heads) else np.zeros(0, dtype=bool)
    body: list[str] = []
    labels_drawn: list[str] = []
    for dep, head in enumerate(heads):
        colour = "#d62728" if crossing[dep] else "#333"
        if head == 0:
            cx = centers[dep]
            body.append(f'<line x1="{cx:.1f}" y1="14" x2="{cx:.1f}" y2="{base - 6}" stroke="{colour}" '
                        f'stroke-width="1.3" stroke-dasharray="3 2"/>')
            body.append(f'<path d="M{cx - 4:.1f},{base - 12} L{cx + 4:.1f},{base - 12} L{cx:.1f},{base - 4} Z" '
                        f'fill="{colour}"/>')
            labels_drawn.append(_label_box(cx, 14, labels[dep], label_widths[dep], colour))
            continue
        h = head - 1
        lane = lane_of[(min(dep, h), max(dep, h))]
        hx = centers[h] + (4 if dep > h else -4)
        dx = centers[dep]
        y = base - 6 - (lane + 1) * step
        r = min(8.0, abs(dx - hx) / 2)
        sx = 1 if dx > hx else -1
        body.append(f'<path d="M{hx:.1f},{base - 6} L{hx:.1f},{y + r:.1f} Q{hx:.1f},{y:.1f} {hx + sx * r:.1f},{y:.1f} '
                    f'L{dx - sx * r:.1f},{y:.1f} Q{dx:.1f},{y:.1f} {dx:.1f},{y + r:.1f} L{dx:.1f},{base - 10}" '
                    f'fill="none" stroke="{colour}" stroke-width="1.3"/>')
        body.append(f'<path d="M{dx - 4:.1f},{base - 12} L{dx + 4:.1f},{base - 12} L{dx:.1f},{base - 4} Z" '
                    f'fill="{colour}"/>')
        labels_drawn.append(_label_box((hx + dx) / 2, y, labels[dep], label_widths[dep], colour))
    body += labels_drawn
    for i, (token, cx) in enumerate(zip(tokens, centers)):
        body.append(_text(cx, base + 12, token, 13, extra=' font-weight="bold"'))
        body.append(_text(cx, base + 28, " ".join(pieces[i]), 11, fill="#2a7"))
        body.append(_text(cx, base + 42, str(i + 1), 9, fill="#999"))
    return _svg(x + 12, base + 50, body, "dependency tree")


def _label_box(x: float, y: float, label: str, width: float, colour: str) -> str:
    return (f'<rect x="{x - width / 2:.1f}" y="{y - 8:.1f}" width="{width:.1f}" height="15" rx="3" fill="#fff" '
            f'stroke="#ccc" stroke-width="0.6"/>' + _text(x, y + 3.5, label, 11, fill=colour))


def heatmap(matrix: np.ndarray, rows: list[str], cols: list[str], title: str, numbers: bool = False,
            caption: str = "") -> str:
    """A matrix as coloured cells (viridis, from its minimum to its maximum), labelled rows and columns."""
    n_rows, n_cols = matrix.shape
    cell = 18 if max(n_rows, n_cols) <= 30 else 11
    left = 10 + 7 * max((len(r) for r in rows), default=1)
    top = 30 + 6 * max((len(c) for c in cols), default=1)
    low, high = (float(matrix.min()), float(matrix.max())) if matrix.size else (0.0, 1.0)
    span = (high - low) or 1.0
    body = [_text(4, 16, title, 13, "start")]
    for i in range(n_rows):
        body.append(_text(left - 4, top + i * cell + cell * 0.7, rows[i], 10, "end"))
        for j in range(n_cols):
            value = float(matrix[i, j])
            shade = (value - low) / span
            body.append(f'<rect x="{left + j * cell}" y="{top + i * cell}" width="{cell}" height="{cell}" '
                        f'fill="{_color(shade)}"><title>{escape(rows[i])} / {escape(cols[j])}: {value:.3g}</title>'
                        f"</rect>")
            if numbers and cell >= 18:
                body.append(_text(left + j * cell + cell / 2, top + i * cell + 13, f"{value:g}", 9,
                                  fill="#000" if shade > 0.55 else "#fff"))
    for j in range(n_cols):
        cx, cy = left + j * cell + cell * 0.65, top - 4
        body.append(_text(cx, cy, cols[j], 10, "start", extra=f' transform="rotate(-60 {cx:.1f} {cy:.1f})"'))
    legend_y = top + n_rows * cell + 14
    for k in range(40):
        body.append(f'<rect x="{left + k * 3}" y="{legend_y}" width="3" height="8" fill="{_color(k / 39)}"/>')
    body.append(_text(left - 4, legend_y + 8, f"{low:.3g}", 9, "end", "#444"))
    body.append(_text(left + 124, legend_y + 8, f"{high:.3g}", 9, "start", "#444"))
    if caption:
        body.append(_text(left, legend_y + 24, caption, 10, "start", "#555"))
    width = max(left + n_cols * cell + 20, left + 180, 8.0 * len(title), 6.2 * len(caption) + left)
    return _svg(width, legend_y + (32 if caption else 16), body, title)


# --------------------------------------------------------------------------------------------- document


def _table(rows: list[list[str]], header: bool = True, numeric: bool = True) -> str:
    out = ["<table>"]
    for k, row in enumerate(rows):
        if header and k == 0:
            cells = "".join(f"<th>{escape(c)}</th>" for c in row)
        else:
            cells = "".join(f"<td>{escape(c)}</td>" if i == 0 or not numeric else f'<td class="num">{escape(c)}</td>'
                            for i, c in enumerate(row))
        out.append(f"<tr>{cells}</tr>")
    return "".join(out) + "</table>"


def _example(row: Row) -> str:
    parts = [f'<div class="example"><h3>id {row.id}' + (f" <small>({escape(row.file)})</small>" if row.file else "")
             + "</h3>"]
    for view in example_sides(row, unknown_label=""):
        record, tokens, subwords = view.record, view.tokens, view.subwords
        kind = "projective" if view.projective else "non-projective (crossing arcs in red)"
        parts.append(f'<h4>{escape(view.side)} <small>{len(tokens)} tokens, {len(subwords)} sub-words, {kind}'
                     f'</small></h4><div class="text">{escape(view.text)}</div>')
        parts.append(f'<div class="scroll">{tree_svg(tokens, view.heads, view.labels, view.pieces)}</div>')
        stored = record.get("parent_mid") is not None
        mid = np.asarray(record["parent_mid"] if stored else F.parent_mid(view.heads, view.owner), dtype=np.float64)
        names = [f"{i}:{p}" for i, p in enumerate(subwords)]
        keys = np.arange(len(subwords), dtype=np.float64)
        prior = heatmap(parent_prior(mid, keys), names, names, "Pascal prior N(j | parent_mid_t, 1)",
                        caption="row t: sub-word t, column j: sub-word j (0-based, as parent_mid)"
                        + ("" if stored else " (parent_mid from heads)"))
        n = len(tokens)
        distances = (np.asarray(record["distances"], dtype=np.int64).reshape(n, n)
                     if record.get("distances") is not None else F.tree_distances(view.heads))
        token_names = [f"{i}:{t}" for i, t in enumerate(tokens)]  # 0-based like the sub-words beside it
        syntax = heatmap(distances, token_names, token_names, "syntax distance (arcs between tokens)",
                         numbers=n <= 30, caption=("stored" if record.get("distances") is not None
                                                   else "computed from heads") + "; token i (0-based) = CoNLL-U ID i+1")
        parts.append(f'<div class="maps scroll">{prior}{syntax}</div>')
        if "transitions" in record:
            sequence = record["transitions"]
            if sequence is None:
                parts.append("<p>transitions: null (not encodable under the non-projective policy)</p>")
            else:
                chips = "".join(f'<span class="t {_chip(item)}">{escape(item)}</span> ' for item in sequence)
                parts.append(f'<p><b>transitions</b> ({len(sequence)} items)</p><div class="seq">{chips}</div>')
    return "".join(parts) + "</div>"


def _chip(item: str) -> str:
    return "la" if item.startswith(F.LEFT_ARC) else "ra" if item.startswith(F.RIGHT_ARC) else "sw"


def build_html(stats: DatasetStats, examples: list[Row], top_labels: int = 25) -> str:
    """The whole report as one string."""
    title = f"synprep inspect: {stats.path}"
    parts = ['<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>',
             f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
             f'<h1>synprep inspect</h1><p class="path">{escape(stats.path)} — {stats.pairs} '
             f'{"pairs" if stats.kind == "shards" else "sentences"} — synprep {escape(__version__)}</p>',
             "<h2>Summary</h2>", _table(summary_rows(stats))]
    manifest = stats.manifest
    if manifest is not None:
        counts = [["split", str(manifest.get("split"))], ["input lines", str(manifest.get("input_lines"))],
                  ["rows", str(manifest.get("rows"))], ["shards", str(len(manifest.get("shards", [])))]]
        counts += [[f"rejected: {reason}", str(n)] for reason, n in sorted(stats.rejected.items())]
        parts.append("<h3>Manifest</h3>" + _table(counts, header=False))
        if manifest.get("signature"):
            rows = [[key, value if isinstance(value, str) else json.dumps(value)]
                    for key, value in flatten(manifest["signature"])]
            parts.append("<h3>Signature</h3>" + _table([["key", "value"]] + rows, numeric=False))
    parts.append('<h2>Sentence length</h2><div class="charts">')
    parts += [bar_chart(side.length_bins(), f"{name}: sentences per length") for name, side in stats.sides.items()
              if side.lengths]
    parts.append('</div><h2>Labels</h2><div class="charts">')
    parts += [hbar_chart(side.labels.most_common(top_labels), f"{name}: {len(side.labels)} labels"
                         + (f" (top {top_labels})" if len(side.labels) > top_labels else ""))
              for name, side in stats.sides.items() if side.labels]
    parts.append('</div><h2 id="examples">Examples</h2>')
    parts += [_example(row) for row in examples]
    parts.append("</body></html>\n")
    return "".join(parts)


def write_html(path: str, stats: DatasetStats, examples: list[Row]) -> None:
    """Write the report (UTF-8)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write(build_html(stats, examples))


@dataclass(frozen=True, repr=False)
class InspectResult(Printed):
    """`synprep.inspect`: the statistics (`stats`: per side lengths, labels, depths, ...), the report's examples
    (`examples`: rows with their trees), those shown in the terminal (`shown`, rendered in `shown_text`), the
    statistics' text and the HTML report's path; in a notebook it shows as the HTML report."""

    path: str
    stats: Any
    examples: list[Any]
    shown: list[Any]
    shown_text: str  # the `shown` examples as the terminal renders them (`synprep inspect --show N`)
    text: str
    html: str | None = None

    def _repr_html_(self) -> str:
        return build_html(self.stats, self.examples)
