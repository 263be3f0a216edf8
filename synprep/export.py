"""`synprep export`: a split (shard folder) in the input formats of the papers' released trainers.

So that a paper can be reproduced with its authors' own code on synprep's preprocessing. Every value is made by
the one implementation of `synprep.features` from the shards' trees and sub-words; docs/synprep.md ("Export")
describes each format and the released reader it was checked against.

- `pascal` (e-bug/pascal, fairseq task `tags_translation`): `{name}.{src}`, `{name}.{tgt}` (the sub-words, one
  sentence per line) and `tags/{name}.{src}`: per source sub-word its `parent_mid` (0-based, no BOS/EOS; `2.0`,
  `6.5`), the text of the released `scripts/bpe_tags_mean.py`.
- `dbsa` (de9uch1/dbsa, fairseq task `translation_dep`): `{name}.{lang}` and `{name}.{lang}.dep`: per sub-word the
  1-based position of its `dbsa_head` (the output of the released `scripts/bpe_dependency.py`), both sides.
- `nematus` (borgr/nematus, branch `generation`, tree decoding): `{name}.{src}` and `{name}.trns1.{tgt}`: the target
  transitions as the released `parsing/corpus.py` writes them without `--split` (`L<label>@@|` / `R<label>@@|`,
  sub-words as SHIFT, root kept: a final `R<root label>@@|`), only the rows whose tree can be encoded; `{name}.ids`
  the kept rows' `id` (input line numbers), one per line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, TextIO

from . import features as F
from .errors import InputError
from .shards import Manifest, open_split
from .trees import is_projective, lift_projective

EXPORT_FORMATS = ("pascal", "dbsa", "nematus")
LEFT, RIGHT, ACTION_END = "L", "R", "@@|"  # the released transition spelling (parsing/corpus.py, ConllSent)


def released_transition(item: str) -> str:
    """One item of a synprep transition sequence in the released nematus spelling (sub-words unchanged)."""
    if item.startswith(F.LEFT_ARC):
        return LEFT + item[len(F.LEFT_ARC):] + ACTION_END
    if item.startswith(F.RIGHT_ARC):
        return RIGHT + item[len(F.RIGHT_ARC):] + ACTION_END
    return item


def dbsa_line(heads: Sequence[int], subword_token: Sequence[int]) -> str:
    """One `.dep` line: the 1-based position of each sub-word's DBSA head."""
    return " ".join(str(int(h) + 1) for h in F.dbsa_heads(heads, subword_token))


def pascal_line(heads: Sequence[int], subword_token: Sequence[int]) -> str:
    """One Pascal tags line: each sub-word's `parent_mid`, written as Python writes a float (`2.0`, `6.5`)."""
    return " ".join(repr(float(x)) for x in F.parent_mid(heads, subword_token))


def nematus_line(heads: Sequence[int], labels: Sequence[str], subwords: Sequence[str],
                 subword_token: Sequence[int], lift: bool) -> str | None:
    """The released nematus target line (root kept), or None when the tree cannot be encoded (non-projective
    and not `lift`)."""
    if not is_projective(heads):
        if not lift:
            return None
        heads = lift_projective(heads)
    pieces = F.token_pieces(subwords, subword_token, len(heads))
    sequence = F.to_transitions(heads, labels, pieces, root="keep")
    return None if sequence is None else " ".join(released_transition(item) for item in sequence)


@dataclass
class ExportSummary:
    """Rows read, and lines written per format."""

    rows: int = 0
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # rows left out per format (trees not encodable)


def _columns(formats: Sequence[str]) -> list[str]:
    needed = ["id", "src_subwords", "tgt_subwords", "src_heads", "src_subword_token"]
    if "dbsa" in formats or "nematus" in formats:
        needed += ["tgt_heads", "tgt_subword_token"]
    if "nematus" in formats:
        needed.append("tgt_labels")
    return needed


def _rows(path: str, columns: Sequence[str]) -> tuple[Iterator[dict[str, Any]], Manifest]:
    split = open_split(path)
    missing = split.missing_columns(columns)
    if missing:
        raise InputError(f"the split has no {', '.join(missing)} (nematus needs the target labels: convert with "
                         "[features] tgt = [..., \"labels\"])", path)
    table = split.table(list(columns))

    def rows() -> Iterator[dict[str, Any]]:
        for batch in table.to_batches():
            values = {name: batch.column(name).to_pylist() for name in columns}
            for i in range(batch.num_rows):
                yield {name: values[name][i] for name in columns}

    return rows(), split.manifest


def export_split(path: str, out: str, formats: Sequence[str] = EXPORT_FORMATS, name: str | None = None
                 ) -> ExportSummary:
    """Write the split at `path` under `out/<format>/` in each of `formats` (module docstring)."""
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(unknown)}; choose from {', '.join(EXPORT_FORMATS)}")
    rows, manifest = _rows(path, _columns(formats))
    config = manifest.configuration
    src, tgt = config.get("src_lang") or "src", config.get("tgt_lang") or "tgt"
    lift = config.get("features", {}).get("non_projective") == "lift"
    name = name or manifest.split or os.path.basename(os.path.normpath(path))
    files = {"pascal": {"src": f"{name}.{src}", "tgt": f"{name}.{tgt}", "tags": f"tags/{name}.{src}"},
             "dbsa": {"src": f"{name}.{src}", "tgt": f"{name}.{tgt}", "src_dep": f"{name}.{src}.dep",
                      "tgt_dep": f"{name}.{tgt}.dep"},
             "nematus": {"src": f"{name}.{src}", "tgt": f"{name}.trns1.{tgt}", "ids": f"{name}.ids"}}
    makers: dict[str, Callable[[dict[str, Any]], dict[str, str] | None]] = {
        "pascal": lambda r: {"src": " ".join(r["src_subwords"]), "tgt": " ".join(r["tgt_subwords"]),
                             "tags": pascal_line(r["src_heads"], r["src_subword_token"])},
        "dbsa": lambda r: {"src": " ".join(r["src_subwords"]), "tgt": " ".join(r["tgt_subwords"]),
                           "src_dep": dbsa_line(r["src_heads"], r["src_subword_token"]),
                           "tgt_dep": dbsa_line(r["tgt_heads"], r["tgt_subword_token"])},
        "nematus": lambda r: _nematus(r, lift),
    }
    summary = ExportSummary(written=dict.fromkeys(formats, 0), skipped=dict.fromkeys(formats, 0))
    with ExitStack() as stack:
        handles: dict[str, dict[str, TextIO]] = {}
        for fmt in formats:
            handles[fmt] = {}
            for key, relative in files[fmt].items():
                target = os.path.join(out, fmt, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                handles[fmt][key] = stack.enter_context(open(target, "w", encoding="utf-8", newline="\n"))
        for row in rows:
            summary.rows += 1
            for fmt in formats:
                lines = makers[fmt](row)
                if lines is None:
                    summary.skipped[fmt] += 1
                    continue
                for key, line in lines.items():
                    handles[fmt][key].write(line + "\n")
                summary.written[fmt] += 1
    return summary


def _nematus(row: dict[str, Any], lift: bool) -> dict[str, str] | None:
    target = nematus_line(row["tgt_heads"], row["tgt_labels"], row["tgt_subwords"], row["tgt_subword_token"], lift)
    if target is None:
        return None
    return {"src": " ".join(row["src_subwords"]), "tgt": target, "ids": str(row["id"])}


def summary_line(summary: ExportSummary, out: str) -> str:
    """The one-line report of `synprep export`."""
    parts = [f"{fmt} {n} rows" + (f" ({summary.skipped[fmt]} not encodable, left out)" if summary.skipped[fmt]
                                 else "") for fmt, n in summary.written.items()]
    return f"exported {summary.rows} rows to {out}: " + ", ".join(parts)

