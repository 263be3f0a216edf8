"""Pipeline files (TOML) for `synprep convert`: reading, checking every key, resolving paths.

Relative paths resolve against `pipeline.data_root` (default: the folder of the TOML file); `~` and
`$VARS` are expanded. The code runs on the resolved paths; `to_dict` (what manifests record) gives them as
written in the file and leaves out the output folder, so a manifest does not depend on where it was written.
Every key is documented in docs/synprep.md ("Pipeline files"). Each table's keys are declared once on its dataclass
with `synprep.tables.option` (type, range, choices): a wrong value is one error naming the file, the table and the
key, found before any work, as is a `[bpe] codes` file that is missing or damaged.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import InputError
from ..filter import FilterSettings
from ..langid import check_iso_639_1
from ..options import INPUT_FORMATS, NON_PROJECTIVE_POLICIES, PARSER_BACKENDS, ROOT_POLICIES, UDPIPE_PRESETS
from ..schema import FEATURE_GROUPS
from ..shards import COMPRESSIONS, DEFAULT_COMPRESSION
from ..subwords import CUTS, MODEL_TYPES, registry
from ..tables import LiveChoices, config_from_dict, did_you_mean, option, repeated
from ..textio import UTF8_BOM, wide_encoding
from .corpus import detect_format

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class HeadConfig:
    """The [pipeline] table: the languages, the run's name and where and how its shards are written."""

    src_lang: str = option(help="the source language (ISO 639-1)")
    tgt_lang: str = option(help="the target language (ISO 639-1)")
    name: str | None = option(None, help="the run's name, kept in the manifests (default: the file's name)")
    output: str | None = option(None, help="the output folder, relative to the file's folder (default: out/NAME); "
                                           "--output overrides")
    data_root: str | None = option(None, help="where relative input and model paths resolve (default: the "
                                              "file's folder)")
    shard_size: int = option(10000, ge=1, help="input pairs per shard; --shard-size overrides")
    source: str = option("", help="where to get the data (free text, kept in the manifest)")
    compression: str = option(DEFAULT_COMPRESSION, choices=COMPRESSIONS,
                              help="of the shards (none: memory-mappable); --compression overrides")


@dataclass(frozen=True)
class SplitConfig:
    """A [splits.X] table; loaded, `src` and `tgt` are tuples of resolved paths (`tsv` folded into them)."""

    name: str
    src: str | tuple[str, ...] | None = option(None, help="the source input: a file or a list (concatenated)")
    tgt: str | tuple[str, ...] | None = option(None, help="the target input: a file or a list (concatenated)")
    format: str | None = option(None, choices=INPUT_FORMATS,
                                help="format of every input file (default: from each file name)")
    filter: bool = option(True, help="apply the [filter] settings (default: true for train, false for valid/test)")
    src_column: int = option(0, ge=0, help="TSV input: the source's column (0-based)")
    tgt_column: int = option(1, ge=0, help="TSV input: the target's column (0-based)")
    max_pairs: int | None = option(None, ge=1, help="take only the first N pairs of the split's input (default: all)")
    # Added fields go last; `tsv` is never recorded (it stands for src = tgt = the files, format = "tsv").
    tsv: str | tuple[str, ...] | None = option(None, conflicts=("src", "tgt"),
                                               help="both sides in one TSV file or a list of them (columns "
                                                    "src_column / tgt_column): src = tgt = the files, format = tsv")


def _keys(cls: type) -> set[str]:
    """The keys of a table: the fields its dataclass declares with `option`."""
    return {spec.name for spec in fields(cls) if "help" in spec.metadata}


_KEYS = {
    "": {"pipeline", "splits", "filter", "parser", "bpe", "features", "normalize", "parse"},
    "pipeline": _keys(HeadConfig),
    "split": _keys(SplitConfig),
    "filter": {"langid", "min_len", "max_len", "max_ratio", "langid_languages", "langid_min_letters", "max_chars",
               "segmentation"},
    "parser": {"backend", "model", "model_dir", "lang", "pretokenized", "train_conllu", "preset"},
    "bpe": {"enabled", "joint", "symbols", "src_symbols", "tgt_symbols", "codes", "min_frequency",
            "vocabulary_threshold", "scheme", "model", "vocab_size", "model_type", "character_coverage",
            "byte_fallback", "cut"},
    "features": {"src", "tgt", "root", "non_projective", "strip_subtypes"},
    "normalize": {"src", "tgt"},
    "parse": {"cache", "cache_max_gb", "cache_stages"},
}


@dataclass(frozen=True)
class ParserConfig:
    backend: str = option("udpipe", choices=PARSER_BACKENDS, help="parser backend")
    model: str | None = option(None, requires={"backend": ("udpipe", "spacy-udpipe", "spacy")},
                               help="model file (udpipe, spacy-udpipe) or spaCy pipeline")
    model_dir: str | None = option(None, requires={"backend": "stanza"}, help="stanza: local model folder")
    lang: str | None = option(None, help="language code (default: the side's language)")
    pretokenized: bool = option(False, help="the input is tokenized: keep its tokens")
    train_conllu: str | None = option(None, requires={"backend": ("udpipe", "spacy-udpipe")}, conflicts=("model",),
                                      help="train a UDPipe model from this treebank when `model` is missing")
    preset: str = option("tiny", choices=UDPIPE_PRESETS, requires={"train_conllu": None},
                         help="UDPipe training preset (with train_conllu)")


LEARNING_KEYS = ("symbols", "src_symbols", "tgt_symbols", "min_frequency", "vocabulary_threshold")  # of BPE codes
PER_SIDE = {"joint": False}  # the keys of separate BPE per side


@dataclass(frozen=True)
class BpeConfig:
    symbols: int | None = option(16000, ge=1, help="merges of the joint codes learned on the train split "
                                                   "(joint = false: merges of each side's codes)")
    codes: str | dict | None = option(None, conflicts=LEARNING_KEYS,
                                      help="use these codes instead of learning them: one file (joint) or a table "
                                           "{src = FILE, tgt = FILE} (joint = false)")
    min_frequency: int = option(2, ge=1, help="learning stops when no pair is this frequent")
    vocabulary_threshold: int | None = option(None, ge=1, help="with learned codes: revert merges rarer than this "
                                                                "in each side's vocabulary")
    enabled: bool = option(True, help="false: no BPE, the sub-words are the tokens")
    # Added fields go last and leave the manifest of a joint run as before (`PipelineConfig.to_dict`).
    joint: bool = option(True, help="one set of codes learned on both sides; false: separate codes per side")
    src_symbols: int | None = option(None, ge=1, requires=PER_SIDE,
                                       help="joint = false: merges of the source codes (default: symbols)")
    tgt_symbols: int | None = option(None, ge=1, requires=PER_SIDE,
                                       help="joint = false: merges of the target codes (default: symbols)")
    scheme: str = option(registry.DEFAULT, choices=LiveChoices(registry.names),
                         help="how tokens are cut into pieces: subword-nmt (BPE codes), sentencepiece, hf-tokenizer "
                              "(a local tokenizer.json), characters (each character a piece), or another registered "
                              "scheme (synprep.subwords)")
    model: str | dict | None = option(None, help="sentencepiece / hf-tokenizer: use this model (a .model file; a "
                                                  "tokenizer.json or its folder) instead of learning one: one file "
                                                  "(joint) or a table {src = FILE, tgt = FILE} (joint = false)")
    vocab_size: int | None = option(None, ge=8, help="sentencepiece: pieces of the model learned on the train "
                                                     "tokens (default 8000; joint = false: of each side's model)")
    model_type: str = option("unigram", choices=MODEL_TYPES, help="sentencepiece: the model learned")
    character_coverage: float = option(1.0, ge=0.98, le=1, help="sentencepiece: share of the train characters the "
                                                              "learned model covers (the rest are unknown)")
    byte_fallback: bool = option(False, help="sentencepiece: a character outside the learned model becomes byte "
                                             "pieces <0xNN> instead of an unknown piece")
    cut: str = option("token", choices=CUTS, help="hf-tokenizer: token (each token cut on its own) or raw (the "
                                                  "sentence's text cut at once, each piece given to the token of its "
                                                  "first character; a sentence where a token gets no piece is "
                                                  "rejected as unaligned_pieces)")

    def side_codes(self, side: str) -> str | None:
        """The given codes file of one side (the joint file for both sides when joint), or None."""
        return self.codes.get(side) if isinstance(self.codes, dict) else self.codes

    def side_symbols(self, side: str) -> int | None:
        """The merges to learn for one side (joint: `symbols`, for the joint codes)."""
        return (self.src_symbols if side == "src" else self.tgt_symbols) or self.symbols


    def side_model(self, side: str) -> str | None:
        """The given model file of one side (a scheme with a model), or None (learned, or no model)."""
        return self.model.get(side) if isinstance(self.model, dict) else self.model

    def scheme_settings(self) -> dict[str, Any]:
        """Everything that decides the pieces (the scheme, its model or what it is learned with): the [bpe] part
        of manifests and fingerprints."""
        return _bpe_dict(asdict(self))


SEPARATE_BPE_KEYS = ("joint", "src_symbols", "tgt_symbols")  # absent from a joint run's manifest and fingerprint
COMMON_KEYS = ("enabled", "joint")  # every scheme's; the others are declared by the schemes (`Scheme.keys`)
DEFAULT_VOCAB_SIZE = 8000


def _bpe_dict(data: dict[str, Any]) -> dict[str, Any]:
    """The [bpe] part of a manifest: the common keys and the scheme's own (`Scheme.keys`; its learning keys only
    when it learned its model), `scheme` only when it is not the default: a joint subword-nmt configuration is
    recorded as before separate BPE and other schemes existed."""
    scheme = registry.get(data.get("scheme"))
    own = {*COMMON_KEYS, *scheme.keys} | ({"scheme"} if scheme.name != registry.DEFAULT else set())
    data = {key: value for key, value in data.items() if key in own
            and not (data.get("model") and key in scheme.learn_keys)}
    if data.get("joint", True):
        data = {key: value for key, value in data.items() if key not in SEPARATE_BPE_KEYS}
    if data.get("cut") == "token":  # the default cut: recorded only when raw
        del data["cut"]
    return data


@dataclass(frozen=True)
class FeaturesConfig:
    src: tuple[str, ...] = option(("parents",), help="source feature groups")
    tgt: tuple[str, ...] = option(("transitions",), help="target feature groups")
    root: str = option("drop", choices=ROOT_POLICIES, help="root transition policy")
    non_projective: str = option("drop", choices=NON_PROJECTIVE_POLICIES, help="non-projective tree policy")
    strip_subtypes: bool = option(False, help="compound:prt -> compound in labels and transitions")


@dataclass(frozen=True)
class NormalizeConfig:
    src: tuple[str, ...] = option((), help="normalizations of the source text, in order, before filtering and "
                                           "parsing: romanian, remove-diacritics (synprep.normalize)")
    tgt: tuple[str, ...] = option((), help="the same for the target text")

    def side(self, side: str) -> tuple[str, ...]:
        """The names for 'src' or 'tgt'."""
        return self.src if side == "src" else self.tgt


@dataclass(frozen=True)
class ParseConfig:
    cache: str | None = option(None, help="parse cache folder shared by converts (synprep.convert.parse_cache): "
                                          "sentences parsed by an earlier convert with the same parser are not parsed "
                                          "again")
    cache_max_gb: float = option(20.0, gt=0, help="the cache's entries are kept within this size (the least "
                                                  "recently used deleted first)")
    cache_stages: bool = option(True, help="also keep the filter's decisions, the BPE codes and the features of "
                                           "each piece in the cache (synprep.convert.stage_cache): a convert "
                                           "recomputes only the stages whose inputs changed")


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    src_lang: str
    tgt_lang: str
    output: str
    splits: tuple[SplitConfig, ...]
    src_parser: ParserConfig | None  # None when the source side is given as CoNLL-U
    tgt_parser: ParserConfig | None
    filter: FilterSettings | None = None  # the [filter] settings (splits with filter = false only drop empty pairs)
    bpe: BpeConfig = BpeConfig()
    features: FeaturesConfig = FeaturesConfig()
    shard_size: int = 10000
    source: str = ""  # where users get the data (free text)
    compression: str = DEFAULT_COMPRESSION  # of the shards: none | lz4 | zstd
    data_root: str = "."  # where relative input paths resolve (absolute; as written in manifests)
    file: str = ""  # the pipeline file (absolute)
    given: tuple[tuple[str, str], ...] = ()  # (resolved path, as written) for every input path
    normalize: NormalizeConfig = NormalizeConfig()  # [normalize]: text normalizations per side
    parse: ParseConfig = ParseConfig()  # [parse]: the parse cache (decides no byte of the output: not recorded)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for the manifest: input paths as written in the pipeline file, no output folder."""
        given = dict(self.given)

        def portable(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: portable(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [portable(v) for v in value]
            return given.get(value, value) if isinstance(value, str) else value

        data = _without_unset(asdict(self))
        for key in ("output", "file", "given", "parse"):
            del data[key]
        data["filter"] = self.filter.to_dict() if self.filter else None
        data["bpe"] = _bpe_dict(data["bpe"])
        return portable(data)

    def fingerprint_dict(self) -> dict[str, Any]:
        """Everything that decides the output, with resolved paths (for `--resume` checks, not for manifests)."""
        data = _without_unset(asdict(self))
        del data["given"], data["parse"]
        data["filter"] = self.filter.to_dict() if self.filter else None
        data["bpe"] = _bpe_dict(data["bpe"])
        return data


def _without_unset(data: dict[str, Any]) -> dict[str, Any]:
    """A split's `max_pairs` only where it is set, and never `tsv` (folded into src and tgt): the manifests and
    fingerprints stay as they were before the keys existed (a resume or a signature comparison across versions
    still matches)."""
    for split in data["splits"]:
        split.pop("tsv", None)
        if split.get("max_pairs") is None:
            split.pop("max_pairs", None)
    return data


def _check_keys(table: dict, allowed: set[str], where: str, path: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        hints = [key + did_you_mean(key, allowed) for key in unknown]
        listed = "" if all(hints[i] != key for i, key in enumerate(unknown)) else \
            f" (allowed: {', '.join(sorted(allowed))})"
        raise InputError(f"unknown key(s) {', '.join(hints)} in [{where}]{listed}", path)


def _typed(cls: type, table: dict, where: str, path: str) -> Any:
    """A config dataclass from a TOML table; a value of the wrong type is an error naming [where] and the file."""
    try:
        return config_from_dict(cls, table, f"[{where}]")
    except (TypeError, ValueError) as err:  # the dataclass's own checks (FilterSettings) do not name the table
        message = str(err)
        raise InputError(message if message.startswith(f"[{where}]") else f"[{where}] {message}", path) from None


def _resolve(value: str, root: str, given: dict[str, str] | None = None) -> str:
    resolved = os.path.expanduser(os.path.expandvars(value))
    resolved = resolved if os.path.isabs(resolved) else os.path.normpath(os.path.join(root, resolved))
    if given is not None:
        given[resolved] = value
    return resolved


def _tsv_split(split: SplitConfig, table: dict, path: str) -> SplitConfig:
    """A [splits.X] table read (types, ranges and `tsv` against src / tgt: declared): `tsv = FILE(S)` (both sides
    in columns src_column / tgt_column, default 0 / 1) stands for src = tgt = FILE(S), format = "tsv"; otherwise
    src and tgt are needed; the columns are for TSV input only, and two."""
    where = f"[splits.{split.name}]"
    if split.tsv is not None:
        if split.format not in (None, "tsv"):
            raise InputError(f"{where} tsv = ... reads TSV: leave out format = {split.format!r}", path)
        split = replace(split, src=split.tsv, tgt=split.tsv, format="tsv", tsv=None)
    elif split.src is None or split.tgt is None:
        raise InputError(f"{where} needs src and tgt (or tsv = a file with both sides in columns)", path)
    files = {side: (value,) if isinstance(value, str) else tuple(value) for side in ("src", "tgt")
             for value in [getattr(split, side)]}
    empty = ["tsv" if "tsv" in table else side for side, names in files.items() if not names]
    if empty:
        raise InputError(f"{where} {empty[0]} names no file: give a file name or a non-empty list of them", path)
    columns = [key for key in ("src_column", "tgt_column") if key in table]
    formats = {split.format or detect_format(f) for names in files.values() for f in names}
    if columns and "tsv" not in formats:  # only TSV has columns: on other files the keys would be ignored
        raise InputError(f"{where} {' and '.join(columns)} choose columns of TSV input, but these files are read as "
                         f"{', '.join(sorted(formats))}: use tsv = FILE (both sides in one file), format = \"tsv\" "
                         "or files named *.tsv, or leave the key out", path)
    if split.src_column == split.tgt_column:
        raise InputError(f"{where} src_column and tgt_column are the same column", path)
    return replace(split, **files)


def _features(value: Any, key: str, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(v in FEATURE_GROUPS for v in value):
        raise InputError(f"[features] {key} must be a list of {', '.join(FEATURE_GROUPS)}, got {value!r}", path)
    if repeated(value):
        raise InputError(f"[features] {key} lists {repeated(value)[0]!r} twice", path)
    return tuple(g for g in FEATURE_GROUPS if g in value)


def _read_toml(path: str) -> dict:
    """The tables of a UTF-8 TOML file (a UTF-8 byte order mark is skipped; UTF-16/32 is named)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise InputError("no such pipeline file", path) from None
    except OSError as err:
        raise InputError(f"cannot read the pipeline file: {err.strerror or err}", path) from None
    encoding = wide_encoding(raw[:4096])
    if encoding:
        raise InputError(f"is {encoding}, not UTF-8 (a pipeline file is UTF-8 TOML)", path)
    try:
        return tomllib.loads(raw.removeprefix(UTF8_BOM).decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 (a pipeline file is UTF-8 TOML)", path) from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"not valid TOML: {err}", path) from None


def _bpe_config(table: dict, root: str, given: dict[str, str], path: str) -> BpeConfig:
    """[bpe]: learn codes (symbols) or use given ones (codes, checked now, before any work) or none (enabled =
    false), jointly or per side (joint = false); the keys that do not fit the choice are errors, not ignored."""
    table = dict(table)
    scheme = table.get("scheme", registry.DEFAULT)
    if scheme not in registry.names():  # checked first: the messages below name the scheme
        raise InputError(f"[bpe] scheme = {scheme!r}: choose one of {', '.join(registry.names())}", path)
    if not registry.get(scheme).bpe_codes:
        return _scheme_config(table, root, given, path)
    _check_scheme_keys(table, path)
    if table.get("enabled", True) is False:
        extra = sorted(set(table) - {"enabled"})
        if extra:
            raise InputError(f"[bpe] enabled = false takes no other key, got {', '.join(extra)}", path)
        table["symbols"] = None
    bpe = _typed(BpeConfig, table, "bpe", path)
    _check_sides(bpe, path)
    if bpe.codes is not None:
        from ..bpe import read_codes

        resolved = {}
        for side, value in (bpe.codes.items() if isinstance(bpe.codes, dict) else [("", bpe.codes)]):
            key = f"codes.{side}" if side else "codes"
            resolved[side] = _resolve(value, root, given)
            try:
                read_codes(resolved[side])  # missing, not UTF-8, cut off: an error now, not after the input is read
            except InputError as err:
                raise InputError(f"[bpe] {key}: {err.message}", err.path, err.line) from None
        bpe = BpeConfig(None, resolved.get("") or {side: resolved[side] for side in ("src", "tgt")},
                        joint=bpe.joint)
    return bpe


def _check_scheme_keys(table: dict, path: str) -> None:
    """The [bpe] keys are the scheme's own (`Scheme.keys`) or common ones (`enabled` only for BPE codes): another
    scheme's key is an error naming the schemes that take it."""
    scheme = registry.get(table.get("scheme"))
    extra = sorted(set(table) - {"scheme", "joint", *scheme.keys, *(["enabled"] if scheme.bpe_codes else [])})
    if extra:
        owners = [other.name for other in registry.schemes()
                  if other is not scheme and set(extra) & {*other.keys, *(["enabled"] if other.bpe_codes else [])}]
        wanted = "scheme = " + " or ".join(f'"{name}"' for name in owners) if owners else "another scheme"
        raise InputError(f"[bpe] {', '.join(extra)}: for {wanted} ({scheme.name} {scheme.keys_help})", path)


def _scheme_config(table: dict, root: str, given: dict[str, str], path: str) -> BpeConfig:
    """[bpe] of a scheme other than BPE codes: a model given (checked now: it loads), learned on the train tokens
    (sentencepiece: vocab_size, model_type, character_coverage, byte_fallback), or none (`Scheme.files` empty)."""
    from ..subwords.load import load_cutter, model_path

    scheme = registry.get(table["scheme"])
    _check_scheme_keys(table, path)
    if "model" in table:
        learning = sorted(set(table) & set(scheme.learn_keys))
        if learning:
            raise InputError(f"[bpe] {', '.join(learning)} is for learning a model: give vocab_size (learn one) or "
                             "model (use it), not both", path)
    elif scheme.needs_model:
        raise InputError(f"[bpe] scheme = \"{scheme.name}\" needs model = {scheme.model_help}", path)
    table["symbols"] = None
    bpe = _typed(BpeConfig, table, "bpe", path)
    if bpe.cut not in scheme.cuts:
        takers = " or ".join(f'"{other.name}"' for other in registry.schemes() if bpe.cut in other.cuts)
        raise InputError(f"[bpe] cut = \"{bpe.cut}\" is for scheme = {takers} (its offsets place the pieces)", path)
    if scheme.per_side:  # the model named once, each side cut by a file of its own: recorded as joint = false
        if "joint" in table or isinstance(bpe.model, dict):
            raise InputError(f"[bpe] scheme = \"{scheme.name}\" names its model once (model = {scheme.model_help}) "
                             "and cuts each side with its own file: give neither joint nor a model table", path)
        bpe = replace(bpe, joint=False)
    elif isinstance(bpe.model, dict) == bpe.joint and bpe.model is not None:
        raise InputError("[bpe] model: one file when joint, a table {src = FILE, tgt = FILE} with joint = false", path)
    if isinstance(bpe.model, dict) and (sorted(bpe.model) != ["src", "tgt"]
                                        or not all(isinstance(v, str) for v in bpe.model.values())):
        raise InputError(f"[bpe] model must name one file for each side: {{src = \"FILE\", tgt = \"FILE\"}}, got "
                         f"{bpe.model!r}", path)
    if bpe.model is None:
        return replace(bpe, vocab_size=bpe.vocab_size or DEFAULT_VOCAB_SIZE) if scheme.learns else bpe
    resolved = {}
    for side, value in (bpe.model.items() if isinstance(bpe.model, dict) else [("", bpe.model)]):
        try:
            resolved[side] = _resolve(value, root, given)  # as written in manifests (a folder stays a folder)
            load_cutter(scheme.name, model_path(scheme.name, resolved[side]))  # missing or damaged: an error now
        except InputError as err:
            raise InputError(f"[bpe] model{'.' + side if side else ''}: {err.message}", err.path, err.line) from None
    return replace(bpe, model=resolved.get("") or {side: resolved[side] for side in ("src", "tgt")})


def _check_transition_markers(bpe: BpeConfig, features: FeaturesConfig, path: str) -> None:
    """Transitions tell where a token ends by the marker of its pieces: a side with transitions whose model's pieces
    carry none (marker kind `none`, a plain BPE or word-level tokenizer) is refused."""
    scheme = registry.get(bpe.scheme)
    for side in ("src", "tgt"):
        model = bpe.side_model(side)
        if "transitions" not in getattr(features, side) or (scheme.files and not model):
            continue  # a model the scheme learns: its declared marker
        if scheme.marker_of(scheme.model_path(model) if model else None)[1] == "none":
            raise InputError(f"[features] {side} transitions: the pieces of the {scheme.name} {model or '(no model)'} "
                             f"carry no marker ({scheme.unmarked_help}), so token ends cannot be read from them", path)


def _check_readable(bpe: BpeConfig, path: str) -> None:
    """A given model cutting token by token whose pieces cannot be read back to their tokens at all (no marker,
    and not one piece per word: `TokenCutter.unreadable`) is refused in one line; the raw cut keeps its own rule."""
    from ..subwords.load import load_cutter

    scheme = registry.get(bpe.scheme)
    for side in ("src", "tgt") if bpe.cut == "token" and scheme.files and not scheme.bpe_codes else ():
        model = bpe.side_model(side)
        why = model and getattr(load_cutter(scheme.name, scheme.model_path(model)), "unreadable", lambda: None)()
        if why:
            raise InputError(f"[bpe] model{'.' + side if isinstance(bpe.model, dict) else ''}: the {scheme.name} "
                             f"{model}: {why}", path)


def _check_sides(bpe: BpeConfig, path: str) -> None:
    """The per-side keys fit `joint`: src_symbols / tgt_symbols and a codes table only with joint = false, and a
    codes table names a file for src and for tgt (nothing else)."""
    if bpe.joint:  # src_symbols and tgt_symbols: declared (`requires`)
        if isinstance(bpe.codes, dict):
            raise InputError("[bpe] codes is a table {src, tgt} only with joint = false (joint codes are one file)",
                             path)
        return
    if isinstance(bpe.codes, str):
        raise InputError(f"[bpe] joint = false: codes must be a table {{src = \"FILE\", tgt = \"FILE\"}}, got "
                         f"{bpe.codes!r}", path)
    if isinstance(bpe.codes, dict):
        if sorted(bpe.codes) != ["src", "tgt"] or not all(isinstance(v, str) for v in bpe.codes.values()):
            raise InputError("[bpe] codes must name one file for each side: {src = \"FILE\", tgt = \"FILE\"}, "
                             f"got {bpe.codes!r}", path)


def _normalize_config(table: Any, path: str) -> NormalizeConfig:
    """[normalize] src / tgt: lists of known normalization names (synprep.normalize)."""
    from ..normalize import check_names

    if not isinstance(table, dict):
        raise InputError("[normalize] must be a table with src and/or tgt", path)
    _check_keys(table, _KEYS["normalize"], "normalize", path)
    config = _typed(NormalizeConfig, table, "normalize", path)
    for side in ("src", "tgt"):
        try:
            check_names(config.side(side))
        except ValueError as err:
            raise InputError(f"[normalize] {side}: {err}", path) from None
    return config


def _parse_config(table: dict, here: str, path: str) -> ParseConfig:
    """[parse]: the parse cache folder (relative to the pipeline file's folder) and its size limit."""
    _check_keys(table, _KEYS["parse"], "parse", path)
    config = _typed(ParseConfig, table, "parse", path)  # cache = "": refused as every empty optional text
    return replace(config, cache=_resolve(config.cache, here)) if config.cache else config


def load_pipeline(path: str, output: str | None = None, shard_size: int | None = None,
                  compression: str | None = None) -> PipelineConfig:
    """Read and check a pipeline file; `output` / `shard_size` / `compression` override the file's values."""
    data = _read_toml(path)
    head = _pipeline_table(data, path)
    here = os.path.dirname(os.path.abspath(path))
    given: dict[str, str] = {}
    root = _resolve(head.data_root or ".", here, given)
    splits = _splits(data.get("splits", {}), root, given, path)
    parsers = {side: _parser_config(data.get("parser", {}).get(side), side, head, root, given, path)
               for side in ("src", "tgt")}
    _check_parsed_or_parser(splits, parsers, path)
    bpe_table = data.get("bpe", {})
    _check_keys(bpe_table, _KEYS["bpe"], "bpe", path)
    bpe = _bpe_config(bpe_table, root, given, path)
    features = _features_config(data.get("features", {}), path)
    _check_transition_markers(bpe, features, path)
    _check_readable(bpe, path)
    normalize = _normalize_config(data.get("normalize", {}), path)
    parse = _parse_config(data.get("parse", {}), here, path)
    settings = _filter_settings(data.get("filter", {}), head, path)
    out = _resolve(output, os.getcwd()) if output else _resolve(head.output or "out/" + (head.name or "run"), here)
    return PipelineConfig(head.name or os.path.splitext(os.path.basename(path))[0], head.src_lang, head.tgt_lang,
                          out, tuple(splits), parsers["src"], parsers["tgt"], settings, bpe, features,
                          shard_size or head.shard_size, head.source, compression or head.compression, root,
                          os.path.abspath(path), tuple(sorted(given.items())), normalize, parse)


def _pipeline_table(data: dict, path: str) -> HeadConfig:
    """The file's tables checked (known names, tables not arrays or values) and its [pipeline] table (known keys,
    declared values, both languages given and known)."""
    _check_keys(data, _KEYS[""], "top level", path)
    for name, table in data.items():
        if isinstance(table, list) and all(isinstance(item, dict) for item in table):
            raise InputError(f"[[{name}]] is an array of tables: write [{name}] (one table)", path)
        if not isinstance(table, dict):
            raise InputError(f"{name} = {table!r}: expected a table [{name}]", path)
    table = data.get("pipeline", {})
    _check_keys(table, _KEYS["pipeline"], "pipeline", path)
    for key in ("src_lang", "tgt_lang"):
        if key not in table:
            raise InputError(f"[pipeline] needs {key}", path)
    head = _typed(HeadConfig, table, "pipeline", path)
    for key in ("src_lang", "tgt_lang"):
        try:
            check_iso_639_1(getattr(head, key))
        except ValueError as err:
            raise InputError(f"[pipeline] {key}: {err}", path) from None
    return head


def _splits(tables: dict, root: str, given: dict[str, str], path: str) -> list[SplitConfig]:
    """[splits.train|valid|test], in the file's order, their input paths resolved (and noted in `given`)."""
    splits = []
    for name, table in tables.items():
        if name not in SPLITS:
            raise InputError(f"unknown split [splits.{name}]" + (did_you_mean(name, SPLITS) or
                                                                   f" (use {', '.join(SPLITS)})"), path)
        _check_keys(table, _KEYS["split"], f"splits.{name}", path)
        split = _tsv_split(_typed(SplitConfig, {"filter": name == "train", **table, "name": name}, f"splits.{name}",
                                  path), table, path)
        splits.append(replace(split, **{side: tuple(_resolve(file, root, given) for file in getattr(split, side))
                                        for side in ("src", "tgt")}))
    if not splits:
        raise InputError("no [splits.train|valid|test] given", path)
    return splits


def _parser_config(table: dict | None, side: str, head: HeadConfig, root: str, given: dict[str, str],
                   path: str) -> ParserConfig | None:
    """[parser.src] or [parser.tgt] (None when absent), its files resolved (a spaCy package name is not a file)."""
    if table is None:
        return None
    _check_keys(table, _KEYS["parser"], f"parser.{side}", path)
    table = {"lang": head.src_lang if side == "src" else head.tgt_lang, **table}
    parser = _typed(ParserConfig, table, f"parser.{side}", path)
    paths = {key: _resolve(getattr(parser, key), root, given) for key in ("model", "model_dir", "train_conllu")
             if getattr(parser, key) is not None
             and not (parser.backend == "spacy" and key == "model" and "/" not in getattr(parser, key))}
    return replace(parser, **paths)


def _check_parsed_or_parser(splits: list[SplitConfig], parsers: dict[str, ParserConfig | None], path: str) -> None:
    """Every input is a file, and a side without a parser is CoNLL-U in every split."""
    for split in splits:
        for side, files in (("src", split.src), ("tgt", split.tgt)):
            folders = [f for f in files if os.path.isdir(f)]
            if folders:
                raise InputError(f"[splits.{split.name}] {side} names a folder, not an input file: {folders[0]}", path)
            given_format = (split.format or "").lower()
            preparsed = given_format == "conllu" if given_format else all(detect_format(f) == "conllu" for f in files)
            if parsers[side] is None and not preparsed:
                hint = (f" (format = \"{split.format}\" reads its .conllu files as raw text: drop the format line to "
                        "read them as parsed)" if any(detect_format(f) == "conllu" for f in files) else "")
                raise InputError(f"[parser.{side}] is needed: [splits.{split.name}] {side} is not CoNLL-U{hint}", path)


def _features_config(table: dict, path: str) -> FeaturesConfig:
    feats = dict(table)
    _check_keys(feats, _KEYS["features"], "features", path)
    for side in ("src", "tgt"):
        if side in feats:
            feats[side] = _features(feats[side], side, path)
    return _typed(FeaturesConfig, feats, "features", path)


def _filter_settings(table: dict, head: HeadConfig, path: str) -> FilterSettings:
    """[filter], with the pipeline's languages (`langid = "none"`: no language identification)."""
    filter_table = dict(table)
    _check_keys(filter_table, _KEYS["filter"], "filter", path)
    if filter_table.get("langid") == "none":
        filter_table["langid"] = None
    return _typed(FilterSettings, {"src_lang": head.src_lang, "tgt_lang": head.tgt_lang, **filter_table},
                  "filter", path)
