"""How good a parser is, as far as synprep can tell, and whether the trees it made look like trees.

- `synprep parser train` records the model's held-out scores beside it: `MODEL.scores.json` next to a model file
  or folder (stanza: `DIR/<lang>.scores.json`), with the model's digest (`textio.path_sha256`: a file, or a
  folder's files), so that a record is only believed for the model it was made for.
- `synprep convert` reads that record for each side's parser: one line of its summary with the scores, or
  "unscored"; a warning when they are below the floor (UAS_FLOOR, LAS_FLOOR); and after each split a check of
  the trees it made (`TreeShapes`): one label on most arcs, flat trees (every word on one head) or chains (every
  word on its neighbour). Warnings go to stderr in one line each and into each split's manifest (`parsers`).

The floors and shares are documented in docs/synprep.md ("Parser quality"), with what to do about each.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..textio import atomic_write, path_sha256
from .base import JOIN_LABEL
from .evaluate import Scores

RECORD_SUFFIX = ".scores.json"
UAS_FLOOR, LAS_FLOOR = 50.0, 35.0  # below: most heads wrong, the syntax features mostly noise
LABEL_SHARE = 0.40  # one label on more of the arcs than this: degenerate (UD treebanks: at most ~15%)
SHAPE_SHARE = 0.50  # more of the sentences of SHAPE_WORDS+ words than this flat, or chains: degenerate
SHAPE_WORDS = 5
WHAT_TO_DO = ("train it longer or with a larger preset (synprep parser train --heldout shows its scores as it "
              "trains), on more data, or use a better model; synprep parser eval scores it on a gold treebank")


def interim_line(where: str, las: float, uas: float | None = None, heldout: bool = True) -> str:
    """The line `synprep parser train` prints each time the trainer scores its held-out set (`where`: the
    trainer's step or iteration; stanza's trainer reports LAS only); without --heldout the trainers score the
    training treebank itself, said so."""
    scored = f"UAS {uas:.1f} LAS {las:.1f}" if uas is not None else f"LAS {las:.1f}"
    return f"parser train: {'held-out' if heldout else 'training-set (no --heldout)'} {scored} at {where}"


def record_path(model_path: str) -> str:
    """Where the held-out scores of the model at `model_path` (a file or a folder) are recorded."""
    return os.path.normpath(model_path) + RECORD_SUFFIX


def write_record(model_path: str, backend: str, preset: str, heldout: str | None, scores: Sequence[Scores],
                 seconds: float) -> dict[str, Any]:
    """Record the model's held-out scores (none: trained without a held-out set) and digest beside it."""
    record = {"backend": backend, "model": os.path.basename(os.path.normpath(model_path)),
              "sha256": path_sha256(model_path), "preset": preset, "heldout": heldout,
              "trained_seconds": round(seconds, 1),
              "scores": {s.mode: {k: round(v, 2) for k, v in s.metrics().items() if k in ("upos", "uas", "las")}
                         for s in scores} or None}
    atomic_write(record_path(model_path), (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return record


def score_and_record(spec: dict[str, object], model_path: str, preset: str, heldout: str | None,
                     seconds: float, named: str | None = None) -> tuple[list[Scores], str | None]:
    """After `synprep parser train`: the model scored on the held-out treebank (`evaluate_model`, every mode
    it can be scored in; none without one), the record written beside it (`named`: the held-out path to
    record, when `heldout` is a copy); (the scores, a warning below the floor or None)."""
    from .evaluate import evaluate_model

    scores = evaluate_model(spec, heldout) if heldout else []
    record = write_record(model_path, str(spec["backend"]), preset, named or heldout, scores, seconds)
    if not scores:
        return scores, None
    judged = _scored(record)
    if judged["uas"] >= UAS_FLOOR and judged["las"] >= LAS_FLOOR:
        return scores, None
    return scores, (f"warning: held-out UAS {judged['uas']:.1f} / LAS {judged['las']:.1f} is below the floor "
                    f"(UAS {UAS_FLOOR:g}, LAS {LAS_FLOOR:g}; synprep convert will warn about this model): {WHAT_TO_DO}")


def read_record(model_path: str) -> tuple[dict[str, Any] | None, str]:
    """(the record, "") when one was made for these model bytes, else (None, why it is unscored)."""
    path = record_path(model_path)
    if not model_path or not os.path.exists(model_path):
        return None, "no model file or folder to score (an installed package?)"
    if not os.path.isfile(path):
        return None, "no held-out scores recorded (not trained by synprep parser train --heldout)"
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as err:
        return None, f"its score record {path} cannot be read ({err})"
    if not isinstance(record, dict) or record.get("sha256") != path_sha256(model_path):
        return None, f"its score record {path} is for other model files"
    if not record.get("scores"):
        return None, "trained without --heldout"
    return record, ""


def _scored(record: dict[str, Any]) -> dict[str, float]:
    """The scores convert judges (of a record or a manifest entry): from gold tokens where recorded (the parser
    alone), else from raw text."""
    scores = record["scores"]
    return scores.get("gold") or next(iter(scores.values()))


def parser_report(side: str, description: str, model_path: str) -> tuple[str | None, dict[str, Any]]:
    """(a warning when the recorded scores are below the floor, else None; the manifest's entry) for one
    side's parser (`description`: backend and model name)."""
    record, why = read_record(model_path)
    if record is None:
        return None, {"parser": description, "scores": None, "unscored": why}
    scores = _scored(record)
    entry: dict[str, Any] = {"parser": description, "scores": record["scores"], "heldout": record.get("heldout")}
    if scores["uas"] >= UAS_FLOOR and scores["las"] >= LAS_FLOOR:
        return None, entry
    warning = (f"warning: parser {side} ({description}) scored UAS {scores['uas']:.1f} / LAS {scores['las']:.1f} "
               f"on its held-out set, below the floor (UAS {UAS_FLOOR:g}, LAS {LAS_FLOOR:g}): most of its trees are "
               f"wrong and the {side} syntax features mostly noise; {WHAT_TO_DO}")
    entry["warnings"] = [warning]
    return warning, entry


def report_line(side: str, entry: dict[str, Any]) -> str:
    """One line for convert's summary: the side's parser and its recorded held-out scores, or why unscored."""
    if not entry.get("scores"):
        return f"parser {side} ({entry['parser']}): unscored: {entry.get('unscored', '')}"
    scores = _scored(entry)
    mode = "gold tokens" if "gold" in entry["scores"] else "raw text"
    flagged = " (below the floor)" if any("below the floor" in w for w in entry.get("warnings", [])) else ""
    return (f"parser {side} ({entry['parser']}): held-out UAS {scores['uas']:.1f} LAS {scores['las']:.1f}{flagged} "
            f"({mode}, {os.path.basename(entry.get('heldout') or '?')})")


@dataclass
class TreeShapes:
    """Counts over the trees of one side: arcs per label, and sentences of SHAPE_WORDS+ words that are flat
    (every word but the root on one head) or chains (every word but the root on a neighbouring word)."""

    arcs: int = 0
    labels: Counter = field(default_factory=Counter)
    long: int = 0
    flat: int = 0
    chain: int = 0

    def add(self, heads: Sequence[int], labels: Sequence[str] | None = None) -> None:
        """One tree: `heads` 1-based, 0 for the root (CONTRACT.md), `labels` its deprels where stored."""
        dependents = [(i, h) for i, h in enumerate(heads, start=1) if h]
        self.arcs += len(dependents)
        if labels is not None:
            self.labels.update(label for label, h in zip(labels, heads, strict=True) if h)
        if len(heads) >= SHAPE_WORDS:
            self.long += 1
            self.flat += len({h for _, h in dependents}) == 1
            self.chain += all(abs(i - h) == 1 for i, h in dependents)

    def problems(self) -> list[str]:
        """What looks degenerate, in words (empty: nothing)."""
        found = []
        if self.labels and self.arcs:
            label, count = self.labels.most_common(1)[0]
            if count > LABEL_SHARE * self.arcs:
                found.append(f"`{label}` on {100 * count / self.arcs:.0f}% of arcs"
                             + (" (the parser split the lines into sentences, joined by it)"
                                if label == JOIN_LABEL else ""))
        for name, count in (("flat (every word on one head)", self.flat), ("chains", self.chain)):
            if self.long and count > SHAPE_SHARE * self.long:
                found.append(f"{100 * count / self.long:.0f}% of the sentences of {SHAPE_WORDS}+ words {name}")
        return found


def shape_warning(side: str, split: str, description: str, shapes: TreeShapes) -> str | None:
    """The one-line warning about degenerate trees of a side of a split, or None."""
    found = shapes.problems()
    if not found:
        return None
    return (f"warning: the {side} trees of split {split} look degenerate ({'; '.join(found)}; parser "
            f"{description}): the parser is untrained or broken; {WHAT_TO_DO}")
