"""`synprep export`: a split (shard folder) in the input formats of the papers' released trainers.

So that a paper can be reproduced with its authors' own code on synprep's preprocessing. Every value is made by
the one implementation of `synprep.features` from the shards' trees and sub-words; docs/synprep.md ("Export")
describes each format and docs/handoff.md the released trainers' commands. Each format folder is a complete
hand-off: the files below, the BPE codes that made the sub-words (`codes.bpe`, or `codes.src.bpe` and
`codes.tgt.bpe` for BPE per side), `{name}.ref.{tgt}` (the raw target sentences, to score BLEU against) and a
generated README.md with the commands (`synprep.export_readme`).

- `pascal` (e-bug/pascal, fairseq task `tags_translation`): `{name}.{src}`, `{name}.{tgt}` (the sub-words, one
  sentence per line) and `tags/{name}.{src}`: per source sub-word its `parent_mid` (0-based, no BOS/EOS; `2.0`,
  `6.5`), the text of the released `scripts/bpe_tags_mean.py`; `tags/dict.{src}.txt` lists every such value
  below fairseq's 1,024 source positions, so that no valid/test tag becomes `<unk>`.
- `dbsa` (de9uch1/dbsa, fairseq task `translation_dep`): `{name}.{lang}` and `{name}.dep.{lang}` (the name its
  task opens): per sub-word the position of its `dbsa_head`, the output of the released
  `scripts/bpe_dependency.py` of the chosen release: `current` (master `b0cdef6`, the format since `b96fb46`,
  2021-09-02) 0-based, read as `[i, int(x)]`; `2020` (`43eef77`, `0e9dd5c`) 1-based, read as `int(x) - 1`.
- `nematus` (borgr/nematus, branch `generation`, tree decoding): `{name}.{src}` and `{name}.trns1.{tgt}`: the target
  transitions as the released `parsing/corpus.py` writes them without `--split` (`L<label>@@|` / `R<label>@@|`,
  sub-words as SHIFT, root kept: a final `R<root label>@@|`), only the rows whose tree can be encoded; `{name}.ids`
  the kept rows' `id` (input line numbers); `{name}.{src}.json` and `{name}.trns1.{tgt}.json`, the vocabularies as
  the released `data/build_dictionary.py` writes them (arc tokens included); `{name}.all.{src}` every row's
  source (to translate a test set whole; `{name}.ref.{tgt}` holds every row's reference). subword-nmt datasets only:
  the released reader finds a token's end by '@@' (a sentencepiece / hf-tokenizer dataset is refused).

An export is whole or absent: every format is written into a temporary folder beside the output folder, then
renamed into place (the output folder itself when it did not exist; else file by file, beside the other splits'
exports), so a failure (a full disk, a row that cannot be written) leaves the output folder as it was.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from . import features as F
from .callables import make_callable
from .errors import InputError
from .export_readme import readme
from .options import BPE_SEPARATOR
from .outputs import check_name, check_outputs
from .shards import Manifest, dataset_resolver, open_split, side_codes
from .subwords import registry
from .subwords.load import dataset_marker
from .textio import atomic_copy, atomic_folder, atomic_output, atomic_write
from .trees import is_projective, lift_projective

if TYPE_CHECKING:
    from .results import ExportResult

EXPORT_FORMATS = ("pascal", "dbsa", "nematus")
DBSA_RELEASES = ("current", "2020")  # de9uch1/dbsa: master b0cdef6 (0-based heads), 2020 43eef77/0e9dd5c (1-based)
LEFT, RIGHT, ACTION_END = "L", "R", "@@|"  # the released transition spelling (parsing/corpus.py, ConllSent)
PASCAL_POSITIONS = 1024  # fairseq's default --max-source-positions: the tags dictionary covers every parent below
NEMATUS_SPECIALS = ("<EOS>", "<GO>", "<UNK>")  # build_dictionary.py's first three entries (0, 1, 2)
RECORD = "export.json"  # per format folder: the DBSA release and, per exported split, what its README needs


def released_transition(item: str) -> str:
    """One item of a synprep transition sequence in the released nematus spelling (sub-words unchanged)."""
    if item.startswith(F.LEFT_ARC):
        return LEFT + item[len(F.LEFT_ARC):] + ACTION_END
    if item.startswith(F.RIGHT_ARC):
        return RIGHT + item[len(F.RIGHT_ARC):] + ACTION_END
    return item


def dbsa_line(heads: Sequence[int], subword_token: Sequence[int], release: str = "current") -> str:
    """One `.dep` line: the position of each sub-word's DBSA head, 0-based (`current`) or 1-based (`2020`)."""
    if release not in DBSA_RELEASES:
        raise ValueError(f"unknown DBSA release {release!r}; choose from {', '.join(DBSA_RELEASES)}")
    offset = 1 if release == "2020" else 0
    return " ".join(str(int(h) + offset) for h in F.dbsa_heads(heads, subword_token))


def pascal_line(heads: Sequence[int], subword_token: Sequence[int]) -> str:
    """One Pascal tags line: each sub-word's `parent_mid`, written as Python writes a float (`2.0`, `6.5`)."""
    return " ".join(repr(float(x)) for x in F.parent_mid(heads, subword_token))


def pascal_tags_dictionary(positions: int = PASCAL_POSITIONS) -> str:
    """A fairseq dictionary (`symbol count` lines) of every parent position a tags line can hold below
    `positions` sub-words (0.0, 0.5, ...), spelled as `pascal_line` spells them."""
    return "".join(f"{k / 2!r} 1\n" for k in range(2 * positions - 1))


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


def nematus_vocabulary(counts: Counter[str]) -> str:
    """build_dictionary.py's JSON: <EOS> 0, <GO> 1, <UNK> 2, then the tokens by falling count (ties: first
    seen), indent 2, UTF-8 unescaped; then the arc of the other direction of each label seen in one direction
    only (the released reader looks every arc token up in the labels it derives from this vocabulary)."""
    vocabulary = {name: i for i, name in enumerate(NEMATUS_SPECIALS)}
    for token, _ in sorted(counts.items(), key=lambda item: -item[1]):  # stable: ties keep first-seen order
        vocabulary.setdefault(token, len(vocabulary))
    with_arcs(vocabulary, arc_labels(vocabulary))
    return _vocabulary_text(vocabulary)


def _vocabulary_text(vocabulary: dict[str, int]) -> str:
    return json.dumps(vocabulary, indent=2, ensure_ascii=False) + "\n"


def arc_labels(tokens: Iterable[str]) -> list[str]:
    """The labels of the arc tokens (`L<label>@@|`, `R<label>@@|`) among `tokens`, in first-seen order."""
    arcs = (token for token in tokens if token.startswith((LEFT, RIGHT)) and token.endswith(ACTION_END))
    return list(dict.fromkeys(token[1:-len(ACTION_END)] for token in arcs))


def with_arcs(vocabulary: dict[str, int], labels: Iterable[str]) -> list[str]:
    """Add both arc tokens of each label to a nematus vocabulary (new ones at its end); the labels it lacked."""
    lacked = []
    for label in labels:
        for direction in (LEFT, RIGHT):
            token = direction + label + ACTION_END
            if token not in vocabulary:
                vocabulary[token] = len(vocabulary)
                lacked.append(label)
    return list(dict.fromkeys(lacked))


@dataclass
class ExportSummary:
    """Rows read, and lines written per format."""

    rows: int = 0
    written: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # rows left out per format (trees not encodable)
    codes: list[str] = field(default_factory=list)  # the BPE codes copied into each format folder
    missing_codes: list[str] = field(default_factory=list)  # codes the manifest names but this machine lacks
    longest: int = 0  # nematus: the most tokens of a written row, source or transitions
    added_labels: dict[str, list[str]] = field(default_factory=dict)  # nematus vocabulary file -> labels added


def _columns(formats: Sequence[str]) -> list[str]:
    needed = ["id", "tgt_text", "src_subwords", "tgt_subwords", "src_heads", "src_subword_token"]
    if "dbsa" in formats or "nematus" in formats:
        needed += ["tgt_heads", "tgt_subword_token"]
    if "nematus" in formats:
        needed.append("tgt_labels")
    return needed


def _rows(path: str, columns: Sequence[str]) -> tuple[Iterator[dict[str, Any]], Manifest, str]:
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

    return rows(), split.manifest, split.dataset_root()


def check_formats(formats: Sequence[str], release: str = "current") -> None:
    """Refuse an unknown or repeated format (two writers of one folder) and an unknown DBSA release."""
    unknown = [f for f in formats if f not in EXPORT_FORMATS]
    if unknown or not formats:
        raise ValueError(f"unknown export format(s) {', '.join(unknown) or '(none)'}; choose from "
                         f"{', '.join(EXPORT_FORMATS)}")
    repeated = sorted({f for f in formats if formats.count(f) > 1})
    if repeated:
        raise ValueError(f"export format(s) given twice: {', '.join(repeated)}")
    if release not in DBSA_RELEASES:
        raise ValueError(f"unknown DBSA release {release!r}; choose from {', '.join(DBSA_RELEASES)}")


def _files(formats: Sequence[str], name: str, src: str, tgt: str) -> dict[str, dict[str, str]]:
    files = {"pascal": {"src": f"{name}.{src}", "tgt": f"{name}.{tgt}", "tags": f"tags/{name}.{src}"},
             "dbsa": {"src": f"{name}.{src}", "tgt": f"{name}.{tgt}", "src_dep": f"{name}.dep.{src}",
                      "tgt_dep": f"{name}.dep.{tgt}"},
             "nematus": {"src": f"{name}.{src}", "tgt": f"{name}.trns1.{tgt}", "ids": f"{name}.ids",
                         "all_src": f"{name}.all.{src}"}}
    for fmt in formats:
        files[fmt]["ref"] = f"{name}.ref.{tgt}"
    return {fmt: files[fmt] for fmt in formats}


def formats_for(scheme: str) -> tuple[str, ...]:
    """The export formats whose released readers read a dataset's pieces: all of them for pieces marked as
    subword-nmt's ('@@' ending a piece that continues); not nematus for the other schemes (its reader finds a
    token's end by the '@@' marks)."""
    return EXPORT_FORMATS if _nematus_reads(scheme) else tuple(f for f in EXPORT_FORMATS if f != "nematus")


def _nematus_reads(scheme: str) -> bool:
    """Whether the scheme's pieces carry subword-nmt's marks, by which nematus's reader finds a token's end."""
    return registry.get(scheme).fixed_marker() == (BPE_SEPARATOR, "end")


def export_split(path: str, out: str, formats: Sequence[str] | None = None, name: str | None = None,
                 dbsa_release: str = "current") -> ExportSummary:
    """Write the split at `path` under `out/<format>/` in each of `formats` (module docstring): whole or not at
    all (written in a temporary folder, renamed into place when complete). `formats` None: every format whose
    released reader reads the dataset's pieces (`formats_for` its sub-word scheme). `out` and `name` follow the
    rule of synprep.outputs (not in a dataset, split or run folder; a plain file name)."""
    if formats is None:
        formats = formats_for(registry.of(open_split(path).manifest.configuration).name)
    formats = list(formats)
    check_formats(formats, dbsa_release)
    check_outputs({"-o": out}, {"the split": path})
    if name is not None:
        check_name(name, "--name")
    if "dbsa" in formats:
        check_release(os.path.join(out, "dbsa"), dbsa_release)
    rows, manifest, dataset_root = _rows(path, _columns(formats))
    config = manifest.configuration
    scheme = registry.of(config).name
    if "nematus" in formats and not _nematus_reads(scheme):
        raise InputError(f"--format nematus needs subword-nmt pieces: the released reader (parsing/corpus.py) finds "
                         f"a token's end by its '@@' marks, which this dataset's {scheme} pieces lack (--format "
                         "pascal,dbsa exports the others)", path)
    try:  # the README's scoring line joins target pieces fairseq cannot join by their recorded marker
        marker = (dataset_marker(config, manifest.signature, "tgt")
                  if registry.get(scheme).fairseq_pieces(config, "") is None else None)
    except ValueError as err:
        raise InputError(str(err), path) from None
    src, tgt = config.get("src_lang") or "src", config.get("tgt_lang") or "tgt"
    lift = config.get("features", {}).get("non_projective") == "lift"
    name = name or manifest.split or os.path.basename(os.path.normpath(path))
    files = _files(formats, name, src, tgt)
    makers: dict[str, Callable[[dict[str, Any]], dict[str, str] | None]] = {
        "pascal": lambda r: {"src": " ".join(r["src_subwords"]), "tgt": " ".join(r["tgt_subwords"]),
                             "tags": pascal_line(r["src_heads"], r["src_subword_token"])},
        "dbsa": lambda r: {"src": " ".join(r["src_subwords"]), "tgt": " ".join(r["tgt_subwords"]),
                           "src_dep": dbsa_line(r["src_heads"], r["src_subword_token"], dbsa_release),
                           "tgt_dep": dbsa_line(r["tgt_heads"], r["tgt_subword_token"], dbsa_release)},
        "nematus": lambda r: _nematus(r, lift),
    }
    summary = ExportSummary(written=dict.fromkeys(formats, 0), skipped=dict.fromkeys(formats, 0))
    vocabularies: dict[str, Counter[str]] = {"src": Counter(), "tgt": Counter()}
    with atomic_folder(out) as staging:
        _write_formats(staging, formats, files, rows, makers, vocabularies, summary)
        _write_extras(staging, out, formats, name, src, tgt, manifest, dataset_root, dbsa_release, vocabularies,
                      summary, marker)
    summary.codes = [os.path.join(out, os.path.relpath(path, staging)) for path in summary.codes]
    return summary


def _write_formats(out: str, formats: list[str], files: dict[str, dict[str, str]], rows: Iterator[dict[str, Any]],
                   makers: dict[str, Callable[[dict[str, Any]], dict[str, str] | None]],
                   vocabularies: dict[str, Counter[str]], summary: ExportSummary) -> None:
    """Every row in every format under `out/<format>/`."""
    with ExitStack() as stack:
        handles: dict[str, dict[str, IO]] = {
            fmt: {key: stack.enter_context(atomic_output(os.path.join(out, fmt, relative)))
                  for key, relative in files[fmt].items()} for fmt in formats}
        for row in rows:
            summary.rows += 1
            reference = (row["tgt_text"] or "").replace("\n", " ")
            for fmt in formats:
                handles[fmt]["ref"].write(reference + "\n")
                if fmt == "nematus":
                    handles[fmt]["all_src"].write(" ".join(row["src_subwords"]) + "\n")
                lines = makers[fmt](row)
                if lines is None:
                    summary.skipped[fmt] += 1
                    continue
                for key, line in lines.items():
                    handles[fmt][key].write(line + "\n")
                if fmt == "nematus":
                    source, target = lines["src"].split(), lines["tgt"].split()
                    vocabularies["src"].update(source)
                    vocabularies["tgt"].update(target)
                    summary.longest = max(summary.longest, len(source), len(target))
                summary.written[fmt] += 1


def _write_extras(out: str, final: str, formats: Sequence[str], name: str, src: str, tgt: str, manifest: Manifest,
                  dataset_root: str, dbsa_release: str, vocabularies: dict[str, Counter[str]],
                  summary: ExportSummary, marker: tuple[str, str] | None = None) -> None:
    """The hand-off beside the lines, in the staging folder `out`: BPE codes, vocabularies (Pascal's tags,
    nematus'), README.md (`marker`: an hf-tokenizer dataset's target (marker, kind), which its scoring line joins
    the pieces by); what earlier exports put into `final` (the export folder) is read from there."""
    codes = _codes(manifest, dataset_root)
    summary.missing_codes = [path for path in codes.values() if not os.path.isfile(path)]
    for fmt in formats:
        folder = os.path.join(out, fmt)
        for target, source in codes.items():
            if os.path.isfile(source):
                atomic_copy(source, os.path.join(folder, target), "cannot copy the BPE codes")
                summary.codes.append(os.path.join(folder, target))
        if fmt == "pascal":
            atomic_write(os.path.join(folder, "tags", f"dict.{src}.txt"), pascal_tags_dictionary().encode())
        record = folder_record(os.path.join(final, fmt))
        record.setdefault("splits", {})[name] = {"rows": summary.written[fmt]}
        if fmt == "dbsa":
            record["dbsa_release"] = dbsa_release
        if fmt == "nematus":
            for side, relative in (("src", f"{name}.{src}.json"), ("tgt", f"{name}.trns1.{tgt}.json")):
                atomic_write(os.path.join(folder, relative), nematus_vocabulary(vocabularies[side]).encode("utf-8"))
            record["splits"][name].update(longest=summary.longest, labels=arc_labels(vocabularies["tgt"]))
            summary.added_labels = _cover_labels(folder, os.path.join(final, fmt), tgt, record["splits"])
        atomic_write(os.path.join(folder, RECORD), (json.dumps(record, indent=1) + "\n").encode("utf-8"))
        maxlen = max((split.get("longest", 0) for split in record["splits"].values()), default=0)
        text = readme(fmt, manifest.configuration, sorted(codes), dbsa_release, maxlen, marker)
        atomic_write(os.path.join(folder, "README.md"), text.encode("utf-8"))


def folder_record(folder: str) -> dict[str, Any]:
    """The format folder's `export.json` (what was exported into it), empty when there is none yet."""
    path = os.path.join(folder, RECORD)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot read the export record ({err}); export into an empty folder", path) from None


def check_release(folder: str, release: str) -> None:
    """Refuse to export DBSA files of `release` into a folder that holds splits of the other release: one trainer
    reads every split of a folder, and reads one release's heads only."""
    recorded = folder_record(folder).get("dbsa_release")
    if recorded is not None and recorded != release:
        raise InputError(f"this folder holds splits exported for DBSA release {recorded!r}, not {release!r}: "
                         f"export every split of one trainer with one --dbsa-release, into another folder (-o)",
                         folder)


def _cover_labels(folder: str, final: str, tgt: str, splits: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Give every exported split's nematus target vocabulary both arcs of every label of every split in the
    folder (a valid label missing from the train vocabulary stops the released trainer at validation). The
    vocabularies are read from the staging `folder` (this export's) or else `final` (earlier exports'); each
    changed one is written into the staging folder (moved into place with the rest). The vocabulary files
    changed -> the labels they lacked."""
    labels = list(dict.fromkeys(label for split in splits.values() for label in split.get("labels", [])))
    added = {}
    for split in splits:
        path = os.path.join(folder, f"{split}.trns1.{tgt}.json")
        source = path if os.path.isfile(path) else os.path.join(final, os.path.basename(path))
        if not os.path.isfile(source):
            continue
        with open(source, encoding="utf-8") as handle:
            vocabulary = json.load(handle)
        lacked = with_arcs(vocabulary, labels)
        if lacked:
            atomic_write(path, _vocabulary_text(vocabulary).encode("utf-8"))
            added[os.path.basename(path)] = lacked
    return added


def _codes(manifest: Manifest, dataset_root: str) -> dict[str, str]:
    """Export file name -> the codes file that made the sub-words (joint: codes.bpe; per side: one per side; a
    sentencepiece / hf-tokenizer dataset: its model, subwords.model or tokenizer.json); empty without BPE."""
    config, resolve = manifest.configuration, dataset_resolver(dataset_root)
    sides = {side: side_codes(config, manifest.signature, dataset_root, side, resolve)[0] for side in ("src", "tgt")}
    scheme = registry.of(config)  # sentencepiece, hf-tokenizer: the model's file
    if config.get("bpe", {}).get("joint", True):
        return {scheme.model_file(): sides["src"]} if sides["src"] else {}  # type: ignore[dict-item]
    return {scheme.model_file(side): path for side, path in sides.items() if path}  # type: ignore[misc]


def _nematus(row: dict[str, Any], lift: bool) -> dict[str, str] | None:
    target = nematus_line(row["tgt_heads"], row["tgt_labels"], row["tgt_subwords"], row["tgt_subword_token"], lift)
    if target is None:
        return None
    return {"src": " ".join(row["src_subwords"]), "tgt": target, "ids": str(row["id"])}


def summary_line(summary: ExportSummary, out: str) -> str:
    """The one-line report of `synprep export`."""
    parts = [f"{fmt} {n} rows" + (f" ({summary.skipped[fmt]} not encodable, left out)" if summary.skipped[fmt]
                                 else "") for fmt, n in summary.written.items()]
    codes = (f"; BPE codes not found, not in the hand-off: {', '.join(summary.missing_codes)}"
             if summary.missing_codes else "")
    labels = "".join(f"; {path} given the arcs of {len(lacked)} label(s) of other splits it lacked "
                     f"({', '.join(lacked)})" for path, lacked in summary.added_labels.items())
    return f"exported {summary.rows} rows to {out}: " + ", ".join(parts) + codes + labels


def export(split: str, output: str, *, formats: Sequence[str] | str | None = None, name: str | None = None,
           dbsa_release: str = "current") -> ExportResult:
    """`synprep export SPLIT -o OUTPUT`: the split in the input formats of the papers' released trainers
    (`formats`: pascal, dbsa, nematus; a list or "a,b"; default: every one whose reader reads the dataset's
    pieces), with BPE codes, references and a README. Returns an `ExportResult` (`summary`)."""
    from .arguments import check_arguments
    from .results import ExportResult

    listed = [formats] if isinstance(formats, str) else formats
    checked = check_arguments("synprep export", split=split, output=output, formats=listed, name=name,
                              dbsa_release=dbsa_release)
    given = ",".join(checked["formats"])  # "a,b" and ["a", "b"] alike
    chosen = tuple(f.strip() for f in given.split(",") if f.strip()) if checked["formats"] else None
    try:
        check_formats(EXPORT_FORMATS if chosen is None else chosen, checked["dbsa_release"])
    except ValueError as err:
        from .arguments import invalid

        raise invalid("synprep export", "formats", f"{err}, got {given!r}") from None
    summary = export_split(checked["split"], checked["output"], chosen, checked["name"],
                           checked["dbsa_release"])
    return ExportResult(checked["output"], summary, summary_line(summary, checked["output"]))


make_callable(__name__, export)  # synprep.export(...) is synprep.export.export(...) (docs/python-api.md)
