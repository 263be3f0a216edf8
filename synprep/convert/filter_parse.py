"""`synprep convert`, phase 1 in the workers: filter a piece, parse the lines the driver plans (work).

Pure functions of a piece's lines and the configuration (ParseJob), so any worker of any engine gives the same
result. A tree travels back as its CoNLL-U block without `# sent_id` and store flags (treestore), a broken one
as its error message flagged ERROR.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conllu import chunk_trees, format_sentence, to_tree, tree_to_sentence
from ..errors import InputError
from ..filter import FilterSettings, check_pairs_detailed, make_identifier
from ..normalize import normalizer
from ..parse import ParserSpec
from ..textio import tsv_field
from ..trees import Tree
from .corpus import BadRow, ConlluBlock
from .pipeline import ParserConfig, PipelineConfig
from .treestore import ERROR, JOINED


@dataclass(frozen=True)
class ParseJob:
    """What a phase-1 worker needs for one split (picklable; workers load the models once from it)."""

    filter: FilterSettings | None  # None: only undecodable, empty and overlong pairs are rejected (valid/test)
    parsers: tuple[ParserSpec | None, ParserSpec | None]  # per side; None = the side is CoNLL-U already
    write_tokens: bool  # also count the words of the tokens (train, when BPE codes are learned)
    max_chars: int  # the [filter] max_chars bound, on every split
    normalize: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # [normalize] per side, before filter and parse


def filter_setups(jobs: tuple[ParseJob, ...]) -> tuple[tuple[ParseJob, Any], ...]:
    """A filter worker's state for every split (one pool filters the pieces of all splits): per split, its job
    and language identifier (one identifier per distinct filter setting)."""
    identifiers: dict[FilterSettings, Any] = {}
    for job in jobs:
        if job.filter is not None and job.filter not in identifiers:
            identifiers[job.filter] = make_identifier(job.filter)
    return tuple((job, identifiers[job.filter] if job.filter is not None else None) for job in jobs)


def filter_split_piece(states: tuple[tuple[ParseJob, Any], ...], task: tuple[int, tuple]) -> dict[str, Any]:
    """`filter_piece` for a piece of the split numbered `task[0]` (its state in `filter_setups`)."""
    split, piece = task
    return filter_piece(states[split], piece)


def parse_setup(job: ParseJob) -> tuple[Any, Any]:
    """A parse worker's state: each side's parser (None: pre-parsed), loaded once."""
    return tuple(spec.load() if spec else None for spec in job.parsers)  # type: ignore[return-value]


def all_parsers(jobs: list[ParseJob]) -> tuple[ParserSpec | None, ParserSpec | None]:
    """Each side's parser over the splits' jobs (a side pre-parsed in one split has nothing to parse there)."""
    return tuple(next((job.parsers[s] for job in jobs if job.parsers[s] is not None), None)  # type: ignore
                 for s in range(2))


def probe_parsers(parsers: tuple[ParserSpec | None, ...]) -> None:
    """Before the first line is parsed: a UDPipe model that cannot be loaded is one error now (loaded in a forked
    child, see `check_udpipe_model`; the workers then load it once each)."""
    from ..parse.udpipe import check_udpipe_model

    for spec in parsers:
        if spec is not None and spec.backend in ("udpipe", "spacy-udpipe"):
            check_udpipe_model(spec.model)  # type: ignore[arg-type]


def _preparsed_trees(blocks: list[ConlluBlock]) -> list[Tree | str]:
    """The token-level tree of every CoNLL-U block, or the error message of a broken one."""
    lines = [line for block in blocks for line in (*block.lines, "")]
    try:
        return list(chunk_trees(lines, blocks[0].path, blocks[0].line)) if blocks else []
    except InputError:  # some sentence is broken: find which, one by one
        out: list[Tree | str] = []
        for block in blocks:
            try:
                out.append(chunk_trees(list(block.lines), block.path, block.line)[0])
            except InputError as err:  # the file and line, not the sentence ordinal (unknown within a block)
                out.append(str(InputError(err.message, err.path, err.line)))
        return out


def _block_text(block: ConlluBlock) -> str:
    """The text of a broken CoNLL-U sentence (for the filter and rejected.tsv): `# text`, else its word forms."""
    for line in block.lines:
        name, sep, value = line[1:].partition("=")
        if line.startswith("#") and sep and name.strip() == "text":
            return value.strip()
    words = [line.split("\t") for line in block.lines if not line.startswith("#")]
    return " ".join(cols[1] for cols in words if len(cols) > 1 and cols[0].isdigit())


def _parsed_trees(parser: Any, texts: list[str]) -> tuple[list[Tree | str], list[bool]]:
    """Parse lines into token-level trees (or the message of a broken parser output), and whether the parser
    split each line into several sentences (joined); a tree's text is its line without outer whitespace."""
    parsed = parser.parse(texts)
    trees: list[Tree | str] = []
    for item, text in zip(parsed, texts):
        try:
            if not item.sentence.words:
                raise InputError("empty sentence")
            trees.append(to_tree(item.sentence, "<parser output>"))
            trees[-1].text = text.strip()
        except InputError as err:
            trees.append(err.message)
    return trees, [p.pieces > 1 for p in parsed]


def _block(tree: Tree | str, flags: int = 0) -> tuple[str, int]:
    """A tree as its CoNLL-U block without `# sent_id` (added per row when the piece is written) and its store
    flags; a parse error as its message, flagged ERROR."""
    if not isinstance(tree, Tree):
        return tree, flags | ERROR
    tree.sent_id = None
    return format_sentence(tree_to_sentence(tree)), flags


def _read_items(side_items: list) -> tuple[list[Any], list[Tree | str] | None]:
    """One side of a piece: what the filter sees per pair (raw bytes, or the text of a pre-parsed sentence) and,
    for pre-parsed input, the trees (or error messages)."""
    if not side_items or not isinstance(side_items[0], ConlluBlock):
        return list(side_items), None
    trees = _preparsed_trees(side_items)
    for tree in trees:
        if isinstance(tree, Tree) and tree.text is None:
            tree.text = " ".join(tree.tokens)
    return [tree.text if isinstance(tree, Tree) else _block_text(block)
            for tree, block in zip(trees, side_items)], trees


def _normalized(texts: list[Any], trees: list[Tree | str] | None, names: tuple[str, ...]
                ) -> tuple[list[Any], list[Tree | str] | None]:
    """One side of a piece with the [normalize] rules applied: to the raw lines (bytes that are not UTF-8 stay as
    they are, for the filter to reject), or to the text and tokens of pre-parsed trees."""
    if not names:
        return texts, trees
    apply = normalizer(names)
    if trees is None:
        out = []
        for raw in texts:
            if isinstance(raw, BadRow):  # a TSV row without this side's column: rejected as it is
                out.append(raw)
                continue
            try:
                out.append(apply(raw.decode("utf-8")).encode("utf-8"))
            except UnicodeDecodeError:
                out.append(raw)
        return out, None
    for tree in trees:
        if isinstance(tree, Tree):
            tree.tokens = [apply(token) for token in tree.tokens]
            tree.text = apply(tree.text) if tree.text is not None else None
    return [apply(text) for text in texts], trees


def _bad_row(src: Any, tgt: Any) -> tuple[str, str] | None:
    """A TSV row without a side's column: ('bad_row', what is wrong), else None."""
    bad = src if isinstance(src, BadRow) else tgt if isinstance(tgt, BadRow) else None
    return ("bad_row", bad.detail) if bad is not None else None


def filter_piece(state: tuple[ParseJob, Any], task: tuple) -> dict[str, Any]:
    """Phase 1, first step (per piece): the filter, and the trees of pre-parsed sides."""
    job, langid = state
    first_id, items = task  # items: per side, raw bytes (text) or ConlluBlock (pre-parsed)
    started = time.perf_counter()
    (src_texts, src_trees), (tgt_texts, tgt_trees) = (_normalized(*_read_items(side_items), names)
                                                      for side_items, names in zip(items, job.normalize))
    texts = (src_texts, tgt_texts)
    bad_rows = [_bad_row(src, tgt) for src, tgt in zip(*texts)]
    rows = [i for i, bad in enumerate(bad_rows) if bad is None]
    checked = list(bad_rows)
    for i, result in zip(rows, check_pairs_detailed([(texts[0][i], texts[1][i]) for i in rows], job.filter, langid,
                                                    job.max_chars)):
        checked[i] = result
    kept = [i for i, (reason, _) in enumerate(checked) if reason is None]
    return {
        "input_pairs": len(checked), "kept": kept,
        "rejected": [[first_id + i, reason, detail, *(tsv_field(side_texts[i]) for side_texts in texts)]
                     for i, (reason, detail) in enumerate(checked) if reason is not None],
        "preparsed": [None if trees is None else [_block(trees[i]) for i in kept] for trees in (src_trees, tgt_trees)],
        "preparsed_texts": [None if trees is None else [tsv_field(side_texts[i]) for i in kept]
                            for side_texts, trees in zip(texts, (src_trees, tgt_trees))],
        "normalized": [[side_texts[i].decode("utf-8") for i in kept] if names and trees is None else None
                       for side_texts, trees, names in zip(texts, (src_trees, tgt_trees), job.normalize)],
        "seconds": {"filter": time.perf_counter() - started}}


def parse_lines(parsers: tuple[Any, Any], task: tuple[list[str], list[str]]) -> dict[str, Any]:
    """Phase 1, second step (per piece): parse the lines that no earlier piece parses (per side); blocks and flags
    in order (see `_block`)."""
    started = time.perf_counter()
    sides: list[list[tuple[str, int]]] = []
    for parser, lines in zip(parsers, task):
        trees, joined = _parsed_trees(parser, lines) if lines else ([], [])
        sides.append([_block(tree, JOINED if j else 0) for tree, j in zip(trees, joined)])
    return {"sides": sides, "seconds": {"parse": time.perf_counter() - started}}


def parser_spec(parser: ParserConfig | None, side: str, out: str, say: Callable[[str], None]) -> ParserSpec | None:
    """A side's parser, checked now (its options, a UDPipe model's file; the model is loaded only when a line is
    parsed, `probe_parsers`; with `train_conllu` and no model, one is trained into OUT/models/ first); None for a
    pre-parsed side."""
    if parser is None:
        return None
    model = parser.model
    if model is None and parser.train_conllu:  # train a UDPipe model on the fly (sample pipeline)
        from ..parse.train import train_udpipe

        model = os.path.join(out, "models", f"{side}.udpipe")
        if not os.path.isfile(model):
            tmp = model + ".tmp"
            say(f"train the {side} parser: UDPipe, {parser.preset} preset, on {parser.train_conllu}")
            train_udpipe(parser.train_conllu, tmp, parser.preset, quiet=True)
            os.replace(tmp, model)
    spec = ParserSpec(parser.backend, model, parser.model_dir, parser.lang, parser.pretokenized)
    spec.check()
    if spec.backend in ("udpipe", "spacy-udpipe"):  # a missing file: one line now (loaded when something is parsed)
        from ..parse.udpipe import check_udpipe_model

        check_udpipe_model(model, probe=False)  # type: ignore[arg-type]
    return spec  # stanza / spaCy load in the workers (no torch state before fork); errors come back


def parser_specs(config: PipelineConfig, out: str, say: Callable[[str], None]) -> dict[str, ParserSpec | None]:
    """Each side's parser (`parser_spec`)."""
    return {side: parser_spec(parser, side, out, say)
            for side, parser in (("src", config.src_parser), ("tgt", config.tgt_parser))}
