"""Raw source lines -> the source features of a dataset, made exactly as `synprep convert` made them (same
parser model, BPE codes and vocabulary, feature groups and policies; hashes checked against the signature).
`syntrain translate` calls this for raw text.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import pyarrow as pa

from . import schema as S
from .bpe import Bpe, read_vocabulary
from .conllu import to_tree
from .errors import InputError
from .featurize import FeatureConfig, boundary_of, featurize
from .normalize import normalizer
from .parse import ParserSpec
from .shards import SourcePreparation
from .subwords import registry
from .subwords.load import load_cutter
from .textio import file_sha256, path_sha256


@functools.lru_cache(maxsize=2)
def _loaded(spec: ParserSpec):  # noqa: ANN202 (a Parser)
    """A parser loaded once per process (syntrain translate --interactive prepares one line at a time)."""
    return spec.load()


def _checked_file(path: str | None, expected: str | None, what: str) -> None:
    if path is None:
        return
    if not os.path.isfile(path):
        raise InputError(f"the dataset's {what} is missing (it was made with this file; copy it back or convert "
                         "the data again)", path)
    if expected and file_sha256(path) != expected:
        raise InputError(f"not the {what} of the dataset (sha256 differs from its signature)", path)


def prepare_source(lines: Sequence[str], preparation: SourcePreparation, max_words: int = 0) -> pa.Table:
    """One row per line (none may be blank): id (the line's index in `lines`), src_text, tgt_text (empty), the
    dataset's src_* features and an empty tgt_subwords. Non-projective policy `drop` becomes `keep` here: every
    line gets a row, except with `max_words` > 0 a line parsed into more words: it is left out before its
    features are made (the tree distances of a sentence take memory growing with the cube of its words)."""
    if any(not line.strip() for line in lines):
        raise ValueError("prepare_source: blank lines have no tree (leave them out and keep their places)")
    parser = preparation.parser
    if parser.get("backend") in ("udpipe", "spacy-udpipe"):
        _checked_file(parser.get("model"), preparation.parser_sha256, "source parser model")
    scheme = registry.get(preparation.scheme)
    _checked_file(preparation.codes, preparation.codes_sha256, scheme.model_what())
    segment, cut_sentence, cutter = None, None, None
    if not scheme.bpe_codes and (preparation.codes or not scheme.files):
        cutter = load_cutter(preparation.scheme, preparation.codes)
        segment = cutter.segment_word
        if preparation.cut == "raw":  # the tokenizer cuts the line's text, as convert cut the training data
            cut_sentence = cutter.cut_text
    elif preparation.codes:
        vocabulary = None
        if preparation.vocabulary:
            _checked_file(preparation.vocabulary, preparation.vocabulary_sha256, "source BPE vocabulary")
            vocabulary = read_vocabulary(preparation.vocabulary, preparation.vocabulary_threshold)
        segment = Bpe(preparation.codes, vocabulary).segment_word
    spec = ParserSpec(parser["backend"], parser.get("model"), parser.get("model_dir"), parser.get("lang"),
                      bool(parser.get("pretokenized", False)))
    folder = spec.model_path()
    if preparation.parser_sha256 and os.path.isdir(folder) and path_sha256(folder) != preparation.parser_sha256:
        raise InputError("not the source parser model of the dataset (sha256 of its files differs from its "
                         "signature)", folder)
    apply = normalizer(preparation.normalize)
    texts = [apply(line.rstrip("\n")) for line in lines]
    trees = [to_tree(item.sentence, "<parser output>") for item in _loaded(spec).parse(texts)]
    ids = [i for i, tree in enumerate(trees) if not max_words or len(tree.tokens) <= max_words]
    if len(ids) < len(trees):
        trees, texts = [trees[i] for i in ids], [texts[i] for i in ids]
    policies = dict(preparation.policies)
    if policies.get("non_projective") == "drop":
        policies["non_projective"] = "keep"
    config = FeatureConfig(preparation.features, policies.get("root", "drop"), policies.get("non_projective", "keep"),
                           bool(policies.get("strip_subtypes", False)))
    columns = featurize(trees, config, segment, cut_sentence, boundary_of(cutter))
    if len(columns.kept) < len(trees):  # a token without a piece (raw cut) or unmarked pieces: no row for the line
        ids, texts = [ids[i] for i in columns.kept], [texts[i] for i in columns.kept]
    src_fields = S.feature_fields(preparation.features, "src_", S.SCHEMA_VERSION)  # as convert stores them
    n = len(texts)
    arrays = [S.plain_array(ids, pa.int64()), S.plain_array(texts, pa.string()),
              S.plain_array([""] * n, pa.string())] + columns.arrays(src_fields, "src_")
    names = ["id", "src_text", "tgt_text"] + [f.name for f in src_fields]
    empty = S.list_array([], [0] * n, pa.list_(pa.string()))
    return pa.table(arrays + [empty], names=names + ["tgt_subwords"])
