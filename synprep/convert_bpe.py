"""`synprep convert`, phase 2: BPE codes learned on the train split's word counts (or the given codes).

The phase-1 workers counted the words of each train piece (in the piece's .json); the counts are merged in input
order and learned from at once (`bpe_learn.learn_joint_from_counts`: subword-nmt's codes and vocabularies, same
bytes): joint codes -> OUT/codes.bpe, or with `[bpe] joint = false` each side's codes on its own words ->
OUT/codes.{src,tgt}.bpe, and the vocabularies OUT/vocab.{src,tgt}. Codes already learned by the run being
resumed are kept.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable

from .bpe import read_vocabulary
from .bpe_learn import learn_joint_from_counts
from .convert_input import SIDES, piece_prefix
from .errors import InputError
from .pipeline import BpeConfig

SideCodes = tuple[str | None, str | None]  # per side: a codes file (the joint file twice when joint) or None
SideVocabularies = tuple[frozenset[str] | None, frozenset[str] | None]


def learns_bpe(bpe: BpeConfig) -> bool:
    """Whether the convert learns codes (so phase 1 counts the train words)."""
    return not bpe.codes and bool(bpe.symbols)


def train_counts(work: str, train_pieces: list[tuple[int, int]] | None) -> list[Counter[str]]:
    """Each side's word counts of the train tokens: the workers' counts, merged in input order as read."""
    if train_pieces is None:
        raise InputError("[bpe] symbols: learning codes needs a train split (or give [bpe] codes)")
    work = os.path.join(work, "train")
    per_side: list[Counter[str]] = [Counter(), Counter()]
    for shard, piece in train_pieces:
        path = piece_prefix(work, shard, piece) + ".json"
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
        if "src_counts" not in info:
            raise InputError("the work folder was made by an older synprep (no word counts): run again "
                             "with --overwrite", path)
        for index, side in enumerate(SIDES):
            per_side[index].update(info[f"{side}_counts"])
    return per_side


def learn_codes(bpe: BpeConfig, out: str, work: str, train_pieces: list[tuple[int, int]] | None,
                say: Callable[[str], None], verbose: bool) -> tuple[SideCodes, SideVocabularies]:
    """Each side's codes (the joint file twice when joint; learned now unless given or already learned by
    the run being resumed) and, with a vocabulary threshold, each side's vocabulary."""
    if bpe.codes or not bpe.symbols:
        return (bpe.side_codes("src"), bpe.side_codes("tgt")), (None, None)
    where = os.path.join(work, "train")
    vocab_paths = [os.path.join(out, f"vocab.{side}") for side in SIDES]
    if bpe.joint:
        codes = os.path.join(out, "codes.bpe")
        if not os.path.isfile(codes):
            per_side = train_counts(work, train_pieces)
            say(f"learn joint BPE: {bpe.symbols} merges on the train tokens (the codes subword-nmt learns)")
            learn_joint_from_counts(per_side, codes + ".tmp", bpe.symbols, vocab_paths,
                                    bpe.min_frequency, verbose=verbose, where=where)
            os.replace(codes + ".tmp", codes)
        side_codes: SideCodes = (codes, codes)
    else:
        paths = [os.path.join(out, f"codes.{side}.bpe") for side in SIDES]
        per_side = None
        for index, side in enumerate(SIDES):  # each side's codes on its own words only
            if os.path.isfile(paths[index]):
                continue
            per_side = per_side or train_counts(work, train_pieces)
            symbols = bpe.side_symbols(side)
            say(f"learn {side} BPE: {symbols} merges on the {side} train tokens")
            tmp = paths[index] + ".tmp"
            learn_joint_from_counts([per_side[index]], tmp, symbols, [vocab_paths[index]],  # type: ignore[arg-type]
                                    bpe.min_frequency, verbose=verbose, where=f"{where} ({side})")
            os.replace(tmp, paths[index])
        side_codes = (paths[0], paths[1])
    if not bpe.vocabulary_threshold:
        return side_codes, (None, None)
    src, tgt = (frozenset(read_vocabulary(path, bpe.vocabulary_threshold)) for path in vocab_paths)
    return side_codes, (src, tgt)
