"""Vocabularies: the specials and their ids, a joint source/target vocabulary (or one per side when the
dataset's BPE is per side, `[bpe] joint = false`) counted from the shards, saved beside a run and in its
checkpoints; de-BPE of decoded pieces."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from .arrow import count_strings, encode_strings
from .columns import SRC_SUBWORDS, TGT_SUBWORDS, TargetColumn

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)


def separate_bpe(configuration: dict) -> bool:
    """Whether a dataset's sub-words come from separate BPE codes per side (pipeline `[bpe] joint = false`)."""
    bpe = configuration.get("bpe") or {}
    return bpe.get("joint", True) is False and bpe.get("enabled", True) is not False


class Vocab:
    """The target vocabulary (the joint source/target one unless `source` is given): the specials first, then
    sub-words by frequency (ties: alphabetical). `source`: the source side's own vocabulary (separate BPE)."""

    def __init__(self, tokens: Sequence[str], source: Vocab | None = None) -> None:
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}")
        self.itos = list(tokens)
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        self._values: pa.Array | None = None  # itos as an Arrow array (for pc.index_in)
        self.source = source

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def src(self) -> Vocab:
        """The vocabulary of the source ids: the source's own, or this joint one."""
        return self.source or self

    @classmethod
    def build(cls, tables: Iterable[pa.Table], min_freq: int = 1, decoder_target: TargetColumn | None = None,
              joint: bool = True) -> Vocab:
        """Count `src_subwords` and `tgt_subwords` of the given tables (one joint vocabulary; `joint` false: a
        target vocabulary with a source vocabulary of its own); a declared `decoder_target` (`TargetColumn`; None:
        the target sub-words): the items of its column it counts (tree decoding: LEFT-ARC/RIGHT-ARC), target side."""
        tables = list(tables)
        declaration = decoder_target
        if declaration is not None:
            for table in tables:
                if declaration.column not in table.column_names:
                    raise ValueError(declaration.missing_error("the training split"))
        counted = [(TGT_SUBWORDS, None)] + ([(declaration.column, declaration.counted)] if declaration else [])
        if joint:
            return cls(_counted(tables, [(SRC_SUBWORDS, None), *counted], min_freq))
        return cls(_counted(tables, counted, min_freq), cls(_counted(tables, [(SRC_SUBWORDS, None)], min_freq)))

    @classmethod
    def from_checkpoint(cls, ckpt: dict) -> Vocab:
        """The vocabulary a checkpoint stores: `vocab`, and `src_vocab` when the source has its own."""
        source = ckpt.get("src_vocab")
        return cls(ckpt["vocab"], cls(source) if source is not None else None)

    def checkpoint_fields(self) -> dict[str, list[str]]:
        """What `from_checkpoint` reads back (a joint vocabulary: only `vocab`, as before)."""
        return {"vocab": self.itos, **({"src_vocab": self.source.itos} if self.source else {})}

    def encode_column(self, column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """A list<string> column -> (flat int32 ids, int64 offsets); unknown pieces map to <unk>.
        (int32: half the RAM of int64 for WMT-size splits held by every training process.)"""
        return encode_strings(column, self._value_set(), 0, UNK_ID)

    def _value_set(self) -> pa.Array:
        if self._values is None or len(self._values) != len(self.itos):
            self._values = pa.array(self.itos, pa.string())
        return self._values

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids -> pieces, stopping at EOS and skipping the other specials."""
        pieces = []
        for i in ids:
            if i == EOS_ID:
                break
            if i >= len(SPECIALS):
                pieces.append(self.itos[i])
        return pieces

    def save(self, path: str) -> None:
        """One JSON list of pieces; a source vocabulary of its own goes beside it (vocab.json -> vocab.src.json)."""
        from synprep.textio import atomic_write  # whole or not at all; a write error names the file

        atomic_write(path, json.dumps(self.itos, ensure_ascii=False).encode("utf-8"))
        if self.source:
            self.source.save(source_vocab_path(path))

    @classmethod
    def load(cls, path: str) -> Vocab:
        """Read what `save` wrote."""
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))


def source_vocab_path(path: str) -> str:
    """Where `Vocab.save(path)` writes a separate source vocabulary."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.src{ext}"


def _counted(tables: list[pa.Table], columns: list[tuple[str, Callable[[str], bool] | None]], min_freq: int
             ) -> list[str]:
    """The specials, then the strings of `columns` ((name, which strings count: None = all)) by frequency."""
    counts: dict[str, int] = {}
    for table in tables:
        for column, keep in columns:
            found = count_strings(table.column(column), keep)
            for value, count in found.items():
                counts[value] = counts.get(value, 0) + count
    kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in SPECIALS), key=lambda t: (-counts[t], t))
    return list(SPECIALS) + kept


def debpe(pieces: Sequence[str]) -> list[str]:
    """BPE pieces -> tokens (subword-nmt's "@@ " continuation marker removed)."""
    return re.sub(r"@@( |$)", "", " ".join(pieces)).split()


def pieces_joiner(configuration: dict, split: str | None = None, signature: dict | None = None
                  ) -> Callable[[Sequence[str]], list[str]]:
    """Decoded pieces -> tokens, by the dataset's sub-word scheme (`debpe` for BPE codes; otherwise by the
    pieces' marker: `synprep.subwords.pieces_to_tokens`). The target pieces' marker as the manifest's `signature`
    records it (`subword_marker`); a dataset without the record: the scheme's declared marker, or one read from
    the dataset's model (beside `split`, a split folder) or the file the configuration names; found in neither:
    Metaspace's '▁'."""
    from synprep.subwords import pieces_to_tokens, registry

    bpe = configuration.get("bpe") or {}
    scheme = registry.of(configuration)
    if scheme.bpe_codes:
        return debpe
    recorded = ((signature or {}).get("subword_marker") or {}).get("tgt")
    if recorded:
        return lambda pieces: pieces_to_tokens(pieces, recorded[0], recorded[1])

    model = bpe.get("model")
    candidates = [model.get("tgt") if isinstance(model, dict) else model]
    if split and os.path.isdir(split) and scheme.files:
        joint = bpe.get("joint", True)
        candidates.insert(0, os.path.join(os.path.dirname(os.path.abspath(split)),
                                          scheme.model_file(None if joint else "tgt") or ""))
    marker, kind = scheme.fixed_marker() or ("\u2581", "start")
    for path in candidates if scheme.fixed_marker() is None else ():
        if path and os.path.isfile(path):
            marker, kind = scheme.marker_of(path)
            break
    return lambda pieces: pieces_to_tokens(pieces, marker, kind)


def _with_specials(pieces: Iterable[str]) -> Vocab:
    return Vocab(list(SPECIALS) + [piece for piece in pieces if piece not in SPECIALS])


def check_subword_models(split: str, signature: dict) -> None:
    """The sub-word model files of the dataset of `split` (codes.bpe, subwords.model, tokenizer.json; joint or per
    side) compared by content with the sha256 its manifest's signature records: a file replaced under the same
    name (another dataset's model: its pieces would be read with a foreign vocabulary) is one ValueError naming it.
    A missing file is left to the reader that needs it."""
    from synprep.subwords.load import model_file_name
    from synprep.textio import file_sha256

    root = os.path.dirname(os.path.abspath(split))
    scheme = signature.get("subword_scheme") or "subword-nmt"
    files = [(os.path.join(root, model_file_name(scheme, named.group(1))), recorded)
             for key, recorded in sorted(signature.items())
             if (named := re.fullmatch(r"(?:subword_model|bpe_codes)_sha256(?:_(src|tgt))?", key))
             and isinstance(recorded, str)]
    files += [(os.path.join(root, name), recorded)  # a scheme's further files (`Scheme.files`)
              for name, recorded in sorted((signature.get("subword_files_sha256") or {}).items())]
    for path, recorded in files:
        if os.path.isfile(path) and (found := file_sha256(path)) != recorded:
            raise ValueError(f"{path}: not the sub-word model this dataset was cut with (its sha256 is "
                             f"{found[:16]}..., the manifest of {split} records {recorded[:16]}...): it was "
                             "replaced after convert; restore it, or convert the dataset again")


def scheme_vocab(configuration: dict, train_split: str) -> Vocab | None:
    """The vocabulary of a dataset cut by a model whose pieces are the vocabulary (`Scheme.own_vocabulary`:
    sentencepiece, hf-tokenizer), used as is: the specials, then the model's pieces in id order, its own special
    pieces (unknown, begin, end, pad) mapped onto ours; per side when the dataset's models are per side. None for
    the other schemes (subword-nmt, characters: counted from the shards, `Vocab.build`)."""
    from synprep.subwords import registry
    from synprep.subwords.load import load_cutter

    bpe = configuration.get("bpe") or {}
    scheme = registry.of(configuration)
    if not scheme.own_vocabulary:
        return None
    root = os.path.dirname(os.path.abspath(train_split))

    def side(name: str | None) -> Vocab:
        cutter = load_cutter(scheme.name, os.path.join(root, scheme.model_file(name) or ""))
        theirs = set(cutter.specials().values())
        return _with_specials(piece for piece in cutter.vocabulary() if piece not in theirs)

    if bpe.get("joint", True):
        return side(None)
    vocab = side("tgt")  # the target side's, holding the source side's own
    vocab.source = side("src")
    return vocab
