"""`synprep validate`: check every contract invariant on every row of a shard directory.

Every feature is recomputed from the stored `heads` (+ `subword_token`) with the library functions that
wrote it (`synprep.features`, `synprep.trees`), under the policies of the manifest's `[features]`; the
transition sequence is also decoded back (`from_transitions`) and must give the stored tree. Counts are
checked against the manifest: rows per shard, rows in all, input lines = rows + rejected, ids strictly
increasing and below the number of input lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from . import features as F
from .bpe import SEPARATOR, align_subwords
from .callables import make_callable
from .errors import InputError
from .featurize import boundary_of
from .parallel import ordered_map
from .schema import SUBWORD_FEATURES
from .shards import SIDES, Manifest, Split, batch_rows, count_batches, load_manifest, read_shard
from .subwords import CodesRule, TokenCutter, read_back, registry
from .subwords.load import load_cutter
from .textio import file_sha256
from .trees import find_cycle, is_projective, lift_projective

if TYPE_CHECKING:
    from .results import ValidateResult

_CODES = CodesRule(SEPARATOR)  # the read-back rule of BPE codes and of no sub-words


@dataclass(frozen=True)
class Failure:
    """One broken invariant: where (file, row id) and what (field, message)."""

    file: str
    row: int | None
    field: str
    message: str

    def format(self) -> str:
        return f"{self.file}\t{'-' if self.row is None else f'id={self.row}'}\t{self.field}\t{self.message}"


@dataclass
class Report:
    path: str
    rows: int = 0
    shards: int = 0
    failures: list[Failure] = field(default_factory=list)
    failure_count: int = 0  # all failures, also those beyond the kept list

    @property
    def ok(self) -> bool:
        return self.failure_count == 0

    def summary(self, manifest: Manifest) -> str:
        if self.ok:
            rejected = sum(manifest.rejected.values())
            return (f"OK {self.path}: {self.rows} rows in {self.shards} shard(s), "
                    f"{manifest.input_lines} input lines ({rejected} rejected); "
                    f"every stored feature equals its recomputation")
        return f"FAILED {self.path}: {self.failure_count} failure(s) in {self.rows} rows"


def _short(value: Any, limit: int = 80) -> str:
    text = str(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _differs(stored: Any, expected: np.ndarray) -> bool:
    if stored is None:
        return True
    array = np.asarray(stored, dtype=expected.dtype)
    return array.shape != expected.shape or not np.array_equal(array, expected)


def check_side(record: dict[str, Any], groups: tuple[str, ...], policy: dict[str, Any],
               cutter: TokenCutter | None = None) -> Iterator[tuple[str, str]]:
    """(field, message) for every broken invariant of one side of a row (unprefixed field names); `cutter`: the
    side's sentencepiece / hf-tokenizer model (None: subword-nmt pieces, checked by their '@@' marks)."""
    tokens, heads = record.get("tokens"), record.get("heads")
    if tokens is None or heads is None:
        yield "tokens" if tokens is None else "heads", "missing (null)"
        return
    n = len(tokens)
    if len(heads) != n:
        yield "heads", f"{len(heads)} heads for {n} tokens"
        return
    if any(not 0 <= h <= n for h in heads):
        yield "heads", f"head out of range 0..{n}: {_short(heads)}"
        return
    if sum(h == 0 for h in heads) != 1:
        yield "heads", f"{sum(h == 0 for h in heads)} roots (head 0), expected 1"
        return
    if find_cycle(heads):
        yield "heads", f"cycle through tokens {find_cycle(heads)}"
        return
    labels = record.get("labels")
    if "labels" in groups:
        if labels is None or len(labels) != n:
            yield "labels", f"{'null' if labels is None else len(labels)} labels for {n} tokens"
            labels = None
        elif policy.get("strip_subtypes") and any(":" in label for label in labels):
            yield "labels", "label with a subtype under strip_subtypes"
    subwords, owner = record.get("subwords"), record.get("subword_token")
    if subwords is None or owner is None or len(subwords) != len(owner):
        yield "subword_token", "sub-words and subword_token missing or of different lengths"
        return
    if list(owner) != sorted(owner) or sorted(set(owner)) != list(range(n)):
        yield "subword_token", f"not a non-decreasing cover of tokens 0..{n - 1}: {_short(owner)}"
        return
    pieces = F.token_pieces(subwords, owner, n)
    surface = align_subwords(tokens)[0]  # tokens as the sub-word stage sees them (inner whitespace -> '▁')
    if not registry.get(policy.get("subword_scheme")).bpe_codes:  # checked against the scheme's own cut
        if cutter is not None and policy.get("subword_cut") == "raw":
            yield from _check_raw_pieces(cutter, record.get("text"), tokens, pieces)
        elif cutter is not None:
            yield from _check_model_pieces(cutter, surface, pieces)
        surface = []  # (a missing model is one failure of the split, not one per row)
    failed = read_back(_CODES, surface, pieces) if surface else None  # BPE codes or no sub-words: '@@' read back
    if failed is not None:
        yield "subwords", f"{failed[0]}: {failed[1]}"
    projective = is_projective(heads)
    if record.get("projective") != projective:
        yield "projective", f"stored {record.get('projective')}, recomputed {projective}"
    if not projective and policy.get("non_projective") == "drop":
        yield "projective", "non-projective row kept under non_projective = drop"
    for feature in SUBWORD_FEATURES:  # the declared per-sub-word features (parent_mid, ...), by their functions
        if feature.group in groups:
            expected = getattr(F, feature.function)(heads, [len(heads)], owner)
            if _differs(record.get(feature.field), expected):
                yield feature.field, f"stored {_short(record.get(feature.field))} != recomputed {_short(expected)}"
    if "distances" in groups and "distances" in record:  # shards of format 2 make them from heads where used
        expected = F.tree_distances(heads).ravel()
        if _differs(record.get("distances"), expected):
            yield "distances", f"stored {_short(record.get('distances'))} != recomputed {_short(expected)}"
    if "transitions" in groups and (cutter is not None or registry.get(policy.get("subword_scheme")).bpe_codes):
        yield from _check_transitions(record, heads, labels, pieces, projective, policy, boundary_of(cutter))


def _check_model_pieces(cutter: TokenCutter, surface: list[str], pieces: list[list[str]]) -> Iterator[tuple[str, str]]:
    """A side cut by a scheme's model token by token: each token's pieces are the model's own cut of it, and they
    read back to the tokens (`synprep.subwords.read_back`, the check convert and align keep sentences by)."""
    cut = True
    for index, (token, parts) in enumerate(zip(surface, pieces)):
        if parts != cutter.segment_word(token).split(" "):
            cut = False
            yield "subwords", f"token {index + 1} {token!r}: pieces {parts} are not the model's cut of it"
    failed = read_back(cutter, surface, pieces) if cut else None
    if failed is not None:
        yield "subwords", f"{failed[0]}: {failed[1]}"


def _check_raw_pieces(cutter: TokenCutter, text: str | None, tokens: list[str], pieces: list[list[str]]
                      ) -> Iterator[tuple[str, str]]:
    """[bpe] cut = "raw": the pieces are the tokenizer's cut of the row's text, each given to the token of its
    first character."""
    expected = cutter.cut_text(text or " ".join(tokens), tokens)
    if expected != pieces:
        yield "subwords", f"pieces {_short(pieces)} are not the tokenizer's cut of the text {_short(expected)}"


def _check_transitions(record: dict[str, Any], heads: list[int], labels: list[str] | None,
                       pieces: list[list[str]], projective: bool, policy: dict[str, Any],
                       boundary: tuple[str, str] = (SEPARATOR, "end")) -> Iterator[tuple[str, str]]:
    """The stored sequence is the oracle's and reads back (`from_transitions` under the pieces' (marker, kind)
    `boundary`) to the stored sub-words, their tokens, the heads (lifted under `lift`) and the labels."""
    stored = record.get("transitions")
    root = policy.get("root", "drop")
    encodable = projective or policy.get("non_projective") == "lift"
    if not encodable:
        if stored is not None:
            yield "transitions", "not null for a non-projective tree under non_projective = keep"
        return
    if stored is None:
        yield "transitions", "null for an encodable tree"
        return
    tree_heads = heads if projective else lift_projective(heads)
    try:
        subwords, owner, decoded_heads, decoded_labels = F.from_transitions(stored, root, *boundary)
    except ValueError as err:
        yield "transitions", f"cannot be decoded: {err}"
        return
    if subwords != list(record["subwords"]) or owner != list(record["subword_token"]):
        yield "transitions", "decoded sub-words differ from the stored sub-words"
    if decoded_heads != list(tree_heads):
        what = "heads" if projective else "lifted heads"
        yield "transitions", f"decoded heads {_short(decoded_heads)} != {what} {_short(tree_heads)}"
        return
    if labels is None:
        labels = decoded_labels  # no labels stored: the sequence must still be the oracle's for its own labels
    elif root == "drop":
        root_index = decoded_heads.index(0)
        mismatch = [i + 1 for i, (a, b) in enumerate(zip(decoded_labels, labels)) if a != b and i != root_index]
        if mismatch:
            yield "transitions", f"decoded labels differ from the stored labels at tokens {mismatch[:10]}"
    elif decoded_labels != list(labels):
        yield "transitions", "decoded labels differ from the stored labels"
    expected = F.to_transitions(tree_heads, labels, pieces, root)
    if expected != list(stored):
        yield "transitions", f"stored {_short(' '.join(stored))} != oracle {_short(' '.join(expected or []))}"


@dataclass
class ShardResult:
    """What checking one shard found (rows, the id range, failures: the first `max_failures` and a count)."""

    rows: int = 0
    first_id: int | None = None
    last_id: int | None = None
    failures: list[Failure] = field(default_factory=list)
    failure_count: int = 0


def _shard_setup(schema: pa.Schema, groups: dict[str, tuple[str, ...]], policy: dict[str, Any],
                 input_lines: int | None, max_failures: int) -> tuple:
    models = policy.get("subword_models")
    cutters = {side: load_cutter(policy["subword_scheme"], models[side]) if models else None for side in SIDES}
    return schema, groups, policy, input_lines, max_failures, cutters


def check_shard(state: tuple, task: tuple[str, str, int, int | None]) -> ShardResult:
    """Every row of some record batches of one shard file (`task` = (name, path, first batch, end batch or None:
    the last)); ids checked within them."""
    schema, groups, policy, input_lines, max_failures, cutters = state
    name, path, start, stop = task
    result = ShardResult()

    def fail(row: int | None, field_name: str, message: str) -> None:
        result.failure_count += 1
        if len(result.failures) < max_failures:
            result.failures.append(Failure(name, row, field_name, message))

    previous = None
    try:
        for batch in read_shard(path, batches=(start, stop)).to_batches():
            if not batch.schema.equals(schema):
                fail(None, "schema", "differs from the schema of the manifest's features")
                break
            for row in batch_rows(batch, name):
                result.rows += 1
                if previous is None:
                    result.first_id = row.id
                elif row.id <= previous:
                    fail(row.id, "id", f"not strictly increasing (after {previous})")
                if isinstance(input_lines, int) and not 0 <= row.id < input_lines:
                    fail(row.id, "id", f"outside 0..{input_lines - 1}")
                previous = result.last_id = row.id
                for side in SIDES:
                    for field_name, message in check_side(row.sides[side], groups[side], policy, cutters[side]):
                        fail(row.id, f"{side}_{field_name}", message)
    except (pa.ArrowInvalid, OSError, InputError) as err:
        fail(None, "file", f"unreadable Arrow stream: {getattr(err, 'message', err)}")
    return result


TASKS_PER_WORKER = 4  # record-batch ranges per worker when shards are cut (few shards, several workers)


def shard_tasks(directory: str, names: list[str], workers: int) -> list[tuple[str, str, int, int | None]]:
    """The checks to run: each shard whole with one worker; with several, each shard's record batches cut into
    ranges, about TASKS_PER_WORKER per worker over all shards (so that one shard keeps every worker busy). A shard
    that cannot be read stays one task (its check reports it)."""
    paths = [os.path.join(directory, name) for name in names]
    if workers <= 1:
        return [(name, path, 0, None) for name, path in zip(names, paths)]
    counts = []
    for path in paths:
        try:
            counts.append(count_batches(path))
        except InputError:
            counts.append(0)
    size = max(1, -(-sum(counts) // (workers * TASKS_PER_WORKER)))
    return [task for name, path, count in zip(names, paths, counts)
            for task in ([(name, path, start, start + size) for start in range(0, count, size)]
                         if count else [(name, path, 0, None)])]


def _scheme_models(directory: str, manifest: Manifest, fail: Callable[..., None]) -> dict[str, str | None] | None:
    """Each side's model of a scheme other than BPE codes in the dataset folder (the split folder's parent; None
    for a scheme without a model), its digest and marker checked against the signature; None when one is missing
    (a failure)."""
    bpe = manifest.configuration["bpe"]
    scheme = registry.get(bpe["scheme"])
    root = os.path.dirname(os.path.abspath(directory))
    joint = bpe.get("joint", True)
    if not scheme.files:
        for side in SIDES:
            recorded = (manifest.signature.get("subword_marker") or {}).get(side)
            if recorded is not None and list(scheme.marker_of(None)) != list(recorded):
                fail("manifest.json", None, "subword_model", f"marker {scheme.marker_of(None)} differs from the "
                     f"signature's subword_marker {recorded}")
        return dict.fromkeys(SIDES)
    models = {side: os.path.join(root, scheme.model_file(None if joint else side) or "") for side in SIDES}
    for side, path in models.items():
        key = "subword_model_sha256" if joint else f"subword_model_sha256_{side}"
        if not os.path.isfile(path):
            fail(os.path.basename(path), None, "subword_model", f"the dataset's {bpe['scheme']} model is missing")
            return None
        if file_sha256(path) != manifest.signature.get(key):
            fail(os.path.basename(path), None, "subword_model", f"sha256 differs from the signature's {key}")
        recorded = (manifest.signature.get("subword_marker") or {}).get(side)
        if recorded is not None and list(scheme.marker_of(path)) != list(recorded):
            fail(os.path.basename(path), None, "subword_model", f"marker {scheme.marker_of(path)} differs from "
                 f"the signature's subword_marker {recorded}")
    recorded_files = manifest.signature.get("subword_files_sha256") or {}
    for name in scheme.further_files(joint):
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            fail(name, None, "subword_model", f"the dataset's {bpe['scheme']} file {name} is missing")
            return None
        if file_sha256(path) != recorded_files.get(name):
            fail(name, None, "subword_model", f"sha256 differs from the signature's subword_files_sha256[{name!r}]")
    return models  # type: ignore[return-value]


def validate_directory(directory: str, max_failures: int = 1000, workers: int = 1) -> tuple[Report, Manifest]:
    """Check a shard directory (`workers` processes, one range of record batches each at a time: `shard_tasks`);
    returns the report (at most `max_failures` kept) and the manifest."""
    manifest = load_manifest(directory)
    report = Report(directory)

    def fail(file: str, row: int | None, name: str, message: str) -> None:
        report.failure_count += 1
        if len(report.failures) < max_failures:
            report.failures.append(Failure(file, row, name, message))

    policy = manifest.policies
    bpe = manifest.configuration.get("bpe") or {}
    if not registry.of(manifest.configuration).bpe_codes:
        policy = {**policy, "subword_scheme": bpe["scheme"], "subword_cut": bpe.get("cut", "token"),
                  "subword_models": _scheme_models(directory, manifest, fail)}
    groups = {side: manifest.features(side) for side in SIDES}
    schema = manifest.schema()
    input_lines = manifest.input_lines
    rejected = manifest.rejected
    if input_lines != manifest.rows + sum(rejected.values()):
        fail("manifest.json", None, "input_lines",
             f"{input_lines} input lines != {manifest.rows} rows + {sum(rejected.values())} rejected")
    listed = [shard["file"] for shard in manifest.shards]
    for name in sorted(os.listdir(directory)):
        if name.startswith("part-") and name.endswith(".arrow") and name not in listed:
            fail(name, None, "file", "shard not listed in manifest.json")
        elif ".tmp-" in name or name.endswith(".part"):
            fail(name, None, "file", "left over from an interrupted write (safe to delete)")
    for problem in Split(directory, manifest).verify_hashes():
        path, _, message = problem.partition(": ")
        fail(os.path.basename(path), None, "sha256", message)
    present = []
    for shard in manifest.shards:
        name = shard.get("file", "")
        if os.path.isfile(os.path.join(directory, name)):
            present.append(shard)
        else:
            fail(name, None, "file", "listed in manifest.json but missing")
    tasks = shard_tasks(directory, [shard["file"] for shard in present], workers)
    results = ordered_map(check_shard, tasks, min(workers, len(tasks)), _shard_setup,
                          (schema, groups, policy, input_lines, max_failures), in_flight_per_worker=1)
    previous, rows, shards = -1, 0, iter(present)
    for index, ((name, *_), result) in enumerate(zip(tasks, results)):
        if result.first_id is not None and result.first_id <= previous:  # ids increase across batches and shards
            fail(name, result.first_id, "id", f"not strictly increasing (after {previous})")
        previous = result.last_id if result.last_id is not None else previous
        report.failure_count += result.failure_count - len(result.failures)
        for failure in result.failures:
            fail(failure.file, failure.row, failure.field, failure.message)
        rows += result.rows
        if index + 1 == len(tasks) or tasks[index + 1][2] == 0:  # the shard's last batches: its rows
            shard = next(shards)
            report.shards += 1
            report.rows += rows
            if rows != shard["rows"]:
                fail(name, None, "rows", f"{rows} rows, manifest says {shard['rows']}")
            rows = 0
    if report.rows != manifest.rows:
        fail("manifest.json", None, "rows", f"{report.rows} rows in the shards, manifest says {manifest.rows}")
    return report, manifest


def validate(directory: str, *, max_failures: int = 1000, workers: int = 0) -> ValidateResult:
    """`synprep validate DIRECTORY`: every contract invariant on every row of a split folder (`workers` 0: all
    cores). Returns a `ValidateResult` (`ok`, `failures`, ...); its `text` is what the command prints."""
    from .arguments import check_arguments
    from .parallel import default_workers
    from .results import ValidateResult

    checked = check_arguments("synprep validate", directory=directory, max_failures=max_failures, workers=workers)
    report, manifest = validate_directory(checked["directory"], checked["max_failures"],
                                          checked["workers"] or default_workers())
    summary = report.summary(manifest)
    text = "\n".join([*(failure.format() for failure in report.failures), summary])
    return ValidateResult(report.ok, report.rows, report.shards, list(report.failures), report.failure_count,
                          summary, text)


make_callable(__name__, validate)  # synprep.validate(...) is synprep.validate.validate(...) (docs/python-api.md)
