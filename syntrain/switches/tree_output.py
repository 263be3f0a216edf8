"""What tree decoding's outputs are beyond their text (docs/tree-decoding.md): the tree measure of decoded
transitions against the reference ones, its log and table text, and the predicted trees as CoNLL-U.

`TreeOutputs` is the tree switch's `Switch.Decoded` (`syntrain.switches.tree_decoding` names it), built from the tree
options (`transition_root`); this module registers no switch. `tree_rows` turns an output's pieces into its tree
through `synprep.features.from_transitions`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from synprep.features import BPE_SEPARATOR, LEFT_ARC, RIGHT_ARC, from_transitions
from synprep.subwords import pieces_to_tokens

from .base import DecodedOutputs

TGT_TRANSITIONS = "tgt_transitions"  # the shard column of the target transitions (CONTRACT.md)
TRANSITIONS = "test.trans"  # a compared run's decoded transitions (one line per pair), beside RUN/test.hyp
TREE_KEYS = ("valid_trees", "exact_outputs", "exact_uas", "exact_las")


def is_arc(item: str) -> bool:
    """A transition token (LEFT-ARC:<label> / RIGHT-ARC:<label>), not a sub-word."""
    return item.startswith(LEFT_ARC) or item.startswith(RIGHT_ARC)


def text_pieces(pieces: Sequence[str]) -> list[str]:
    """The sub-words of an output (transition tokens removed)."""
    return [piece for piece in pieces if not is_arc(piece)]


Boundary = tuple[str, str]  # (marker, marker kind) of the target pieces (`synprep.features.TransitionState`)
SUBWORD_NMT_BOUNDARY: Boundary = (BPE_SEPARATOR, "end")


def tree_scores(pieces: Sequence[Sequence[str]], references: Sequence[Sequence[str] | None], root: str = "drop",
                boundary: Boundary = SUBWORD_NMT_BOUNDARY) -> dict:
    """The tree measure of docs/tree-decoding.md for outputs and their reference transitions (None: none):
    `valid_trees` = share (%) of outputs the inverse accepts; on the outputs whose sub-words equal the
    reference's (`exact_outputs`, % of the rows with a reference), `exact_uas`/`exact_las` = attachment scores
    (%) of the predicted tree against the reference tree (the reference transitions decoded, i.e. the parser's
    tree as the shards encode it)."""
    valid = exact = tokens = heads_ok = both_ok = counted = 0
    for output, reference in zip(pieces, references):
        try:
            _, predicted_owner, predicted_heads, predicted_labels = from_transitions(list(output), root, *boundary)
            subwords = text_pieces(output)
            valid += 1
        except ValueError:
            continue
        if reference is None:
            continue
        counted += 1
        ref_subwords, ref_owner, ref_heads, ref_labels = from_transitions(reference, root, *boundary)
        if subwords != ref_subwords or predicted_owner != ref_owner:
            continue
        exact += 1
        tokens += len(ref_heads)
        for h, lab, rh, rlab in zip(predicted_heads, predicted_labels, ref_heads, ref_labels):
            heads_ok += h == rh
            both_ok += h == rh and lab == rlab
    n = max(len(pieces), 1)
    return {"valid_trees": round(100 * valid / n, 2), "exact_outputs": round(100 * exact / max(counted, 1), 2),
            "exact_uas": round(100 * heads_ok / tokens, 2) if tokens else None,
            "exact_las": round(100 * both_ok / tokens, 2) if tokens else None}


def tree_text(result: dict) -> str:
    """The tree measure of a tree-decoding model's scores, for a log line ('' for other models)."""
    if "valid_trees" not in result:
        return ""
    uas, las = result["exact_uas"], result["exact_las"]
    exact = f", UAS {uas:.2f} / LAS {las:.2f} on them" if uas is not None else ""
    return f" | valid trees {result['valid_trees']:.1f}% | outputs = reference {result['exact_outputs']:.1f}%{exact}"


def tree_rows(pieces: Sequence[str], root: str = "drop", boundary: Boundary = SUBWORD_NMT_BOUNDARY
              ) -> list[tuple[str, int, str]]:
    """An output's transitions -> its tree as (token, head, label) per token (heads 1-based, 0 = root),
    through `synprep.features.from_transitions` (sub-words read by the pieces' `boundary`, tokens spelled by
    `synprep.subwords.pieces_to_tokens`); ValueError when the output is not a valid sequence."""
    subwords, owner, heads, labels = from_transitions(list(pieces), root, *boundary)
    tokens = pieces_to_tokens(subwords, *boundary) if subwords else []
    if len(tokens) != len(heads):  # a token of one marker alone ("@@", "▁"): keep the pieces' grouping
        tokens = ["".join(pieces_to_tokens([p for p, o in zip(subwords, owner) if o == t], *boundary))
                  for t in range(len(heads))]
    return list(zip(tokens, heads, labels))


def conllu_block(tree: Sequence[tuple[str, int, str]], sent_id: str) -> str:
    """One CoNLL-U sentence (ID, FORM, HEAD, DEPREL; the other columns '_')."""
    lines = [f"# sent_id = {sent_id}"]
    lines += [f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{label}\t_\t_" for i, (form, head, label) in enumerate(tree, 1)]
    return "\n".join(lines) + "\n\n"


def conllu_text(pieces: Sequence[Sequence[str]], rows: Sequence[int], root: str,
                boundary: Boundary = SUBWORD_NMT_BOUNDARY) -> str:
    """The predicted trees of the outputs `pieces` of split rows `rows` as CoNLL-U (sent_id = the row)."""
    return "".join(conllu_block(tree_rows(output, root, boundary), str(int(row)))
                   for row, output in zip(rows, pieces))


def tree_column(run: str, data_path: str, root: str, boundary: Boundary = SUBWORD_NMT_BOUNDARY) -> str:
    """The tree measure of a compared run (RUN/test.trans against the split's reference transitions, root policy
    `root`, pieces read by `boundary`), '' for a run without RUN/test.trans."""
    path = os.path.join(run, TRANSITIONS)
    if not os.path.isfile(path):
        return ""
    from synprep.shards import open_split

    with open(path, encoding="utf-8") as f:
        pieces = [line.split() for line in f.read().splitlines()]
    split = open_split(data_path)
    references = split.table([TGT_TRANSITIONS]).column(0).to_pylist() if TGT_TRANSITIONS in split.columns \
        else [None] * len(pieces)
    trees = tree_scores(pieces, references, root, boundary)
    exact = "" if trees["exact_uas"] is None else f", UAS {trees['exact_uas']:.1f} / LAS {trees['exact_las']:.1f}"
    return f"valid {trees['valid_trees']:.1f}%, = ref {trees['exact_outputs']:.1f}%{exact}"


class TreeOutputs(DecodedOutputs):
    """Tree decoding's outputs: the text without the transition tokens, the tree measure (trainer, `syntrain
    eval`), `syntrain eval --trees` (CoNLL-U), RUN/test.trans and the `trees` column of `syntrain compare`; the
    trees are read under the root policy `transition_root` of the options."""

    files: ClassVar[dict[str, tuple[str, str]]] = {
        "trees": ("Tree-decoding models: also write the predicted target trees (CoNLL-U).",
                  'a tree-decoding model (decoder_target = "transitions")')}
    compare_header: ClassVar[str] = "trees"

    def text(self, pieces: list[str]) -> list[str]:
        return text_pieces(pieces)

    def scores(self, pieces: list[list[str]], data: Any, rows: Any) -> dict[str, Any]:
        return tree_scores(pieces, data.column_values(TGT_TRANSITIONS, rows), self.options.transition_root,
                           self.options.boundary)

    def scores_text(self, result: dict[str, Any], line: bool = False) -> str:
        text = tree_text(result)
        return f"trees:{text[2:]}" if line and text else text

    def file_text(self, name: str, pieces: list[list[str]], rows: Any) -> str:
        return conllu_text(pieces, rows, self.options.transition_root, self.options.boundary)

    def run_files(self, pieces: list[list[str]]) -> dict[str, list[str]]:
        return {TRANSITIONS: [" ".join(p) for p in pieces]}

    def describe_run(self) -> dict[str, Any]:
        return {"transition_root": self.options.transition_root, **({"transition_boundary": list(self.options.boundary)}
                if self.options.boundary != SUBWORD_NMT_BOUNDARY else {})}

    @classmethod
    def compare_column(cls, run: str, data_path: str, described: dict[str, Any]) -> str:
        return tree_column(run, data_path, described.get("transition_root", "drop"),
                           tuple(described.get("transition_boundary", SUBWORD_NMT_BOUNDARY)))  # type: ignore[arg-type]
