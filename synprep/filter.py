"""Parallel-corpus filtering: every input pair is either kept or rejected for exactly one counted reason.

Checks run in `REASONS` order, cheap ones first; a rejected pair gets the reason of the first check it fails:

1. invalid_utf8  either side is not valid UTF-8
2. empty         either side is empty or whitespace only
3. identical     source = target (after stripping surrounding whitespace): untranslated copies
4. too_short     either side has fewer than `min_len` tokens
5. too_long      either side has more than `max_len` tokens
6. ratio         longer side / shorter side (in tokens) > `max_ratio`
7. src_lang      the identifier does not say `src_lang` for the source ('und', no letters, counts as wrong)
8. tgt_lang      the identifier does not say `tgt_lang` for the target

Tokens are whitespace tokens, except for languages written without spaces (ja, zh, th, lo, km, my) with
segmentation 'auto': there a character rule (`synprep.languages.count_tokens`, docs/languages.md) stands in for
the words a parser would find, so `min_len`/`max_len`/`max_ratio` mean the same in every language.

Library use (`convert` runs this before parsing): `check_pair` for one pair, `filter_chunk` for a list of raw
pairs, `filter_files` for two files. The settings are a frozen dataclass with `to_dict` for signatures.
"""

from __future__ import annotations

import logging
import lzma
import os
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice, zip_longest
from typing import TYPE_CHECKING

from .callables import make_callable
from .errors import InputError, WriteError
from .langid import BACKENDS, LanguageIdentifier, check_iso_639_1, get_identifier
from .languages import SEGMENTATIONS, count_tokens
from .options import DEFAULT_LANGID, MAX_LINE_CHARS
from .outputs import check_outputs
from .parallel import default_workers, ordered_map
from .progress import progress as progress_bar
from .tables import option, repeated
from .textio import atomic_folder, check_text_file, count_lines, is_standard, open_binary, tsv_field

if TYPE_CHECKING:
    from .results import FilterResult

log = logging.getLogger(__name__)

REASONS = ("invalid_utf8", "empty", "line_too_long", "identical", "too_short", "too_long", "ratio", "src_lang",
           "tgt_lang")
WARN_REJECTED_SHARE = 0.30  # warn (one stderr line) when more than this share of pairs is rejected
CHUNK_SIZE = 1000  # pairs per unit of work; memory is O(workers x chunk), not O(corpus)
IDS_NAME, REJECTED_NAME = "ids", "rejected.tsv"


LANGUAGE_CHECKS = {"langid": tuple(BACKENDS)}  # the keys that tune the language checks do nothing without them


@dataclass(frozen=True)
class FilterSettings:
    """What decides which pairs are kept; serializable with `to_dict` / `from_dict`.

    langid: backend name (`synprep.langid.BACKENDS`; default py3langid, docs/langid.md has the measurement) or
    None to skip the language checks.
    langid_languages: candidate languages for the identifier (None = the backend's default set); src_lang and
    tgt_lang are always added.
    langid_min_letters: a side with fewer letters skips its language check (0 = check every side); short
    lines are where identifiers err most (benchmarks/README.md has the measured trade-off).
    segmentation: how lengths are counted: 'auto' (the character rule for languages written without spaces,
    whitespace tokens elsewhere) or 'whitespace' (always; for input tokenized beforehand).
    """

    src_lang: str
    tgt_lang: str
    min_len: int = option(1, ge=0, help="pairs with a shorter side (tokens) are rejected")
    max_len: int = option(80, ge=1, help="pairs with a longer side (tokens) are rejected")
    max_ratio: float = option(3.0, ge=1, help="pairs whose longer side has more than this times the tokens of the "
                                             "other are rejected")
    langid: str | None = option(DEFAULT_LANGID, help="language identifier: py3langid, langdetect (none: no "
                                                     "language checks)")
    langid_languages: tuple[str, ...] | None = option(None, requires=LANGUAGE_CHECKS,
                                                      help="candidate languages of the identifier (default: its own "
                                                           "set)")
    langid_min_letters: int = option(0, ge=0, requires=LANGUAGE_CHECKS,
                                     help="a side with fewer letters skips its language check")
    max_chars: int = option(MAX_LINE_CHARS, ge=1, help="longer lines are rejected before anything else looks at "
                                                      "them")
    segmentation: str = option("auto", choices=SEGMENTATIONS, help="how lengths are counted")

    def __post_init__(self) -> None:
        object.__setattr__(self, "src_lang", check_iso_639_1(self.src_lang))
        object.__setattr__(self, "tgt_lang", check_iso_639_1(self.tgt_lang))
        if self.langid_languages is not None:
            if repeated(self.langid_languages):
                raise ValueError(f"langid_languages lists {repeated(self.langid_languages)[0]!r} twice")
            try:
                codes = tuple(sorted({check_iso_639_1(c) for c in self.langid_languages}))
            except ValueError as err:
                raise ValueError(f"langid_languages: {err}") from None
            object.__setattr__(self, "langid_languages", codes)
        if self.langid is not None and self.langid not in BACKENDS:
            raise ValueError(f"unknown langid backend {self.langid!r} (choose from {', '.join(BACKENDS)})")
        if self.min_len < 0 or self.max_len < self.min_len:
            raise ValueError(f"need 0 <= min_len <= max_len, got {self.min_len} and {self.max_len}")
        if self.max_chars < 1:
            raise ValueError(f"max_chars must be >= 1, got {self.max_chars}")
        if self.langid_min_letters < 0:
            raise ValueError(f"langid_min_letters must be >= 0, got {self.langid_min_letters}")
        if self.segmentation not in SEGMENTATIONS:
            raise ValueError(f"segmentation must be one of {', '.join(SEGMENTATIONS)}, got {self.segmentation!r}")
        if self.max_ratio < 1:
            raise ValueError(f"max_ratio must be >= 1, got {self.max_ratio}")

    def identifier_languages(self) -> tuple[str, ...] | None:
        """Candidate set handed to the identifier: the configured one plus both expected languages."""
        if self.langid_languages is None:
            return None
        return tuple(sorted({*self.langid_languages, self.src_lang, self.tgt_lang}))

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict (tuples become lists)."""
        data = asdict(self)
        if self.langid_languages is not None:
            data["langid_languages"] = list(self.langid_languages)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> FilterSettings:
        """Inverse of `to_dict`."""
        data = dict(data)
        if data.get("langid_languages") is not None:
            data["langid_languages"] = tuple(data["langid_languages"])
        return cls(**data)


def make_identifier(settings: FilterSettings) -> LanguageIdentifier | None:
    """The identifier `settings` asks for (None without language checks), checked to know both languages."""
    if settings.langid is None:
        return None
    identifier = get_identifier(settings.langid, settings.identifier_languages())
    identifier.check_languages([settings.src_lang, settings.tgt_lang])
    return identifier


def _decode(side: str | bytes) -> str | None:
    if isinstance(side, str):
        return side
    try:
        return side.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_pair(src: str | bytes, tgt: str | bytes, settings: FilterSettings | None,
               langid: LanguageIdentifier | None = None) -> str | None:
    """The first failing check's reason (see `REASONS`), or None to keep the pair. Bytes are decoded here.
    Without settings (splits that are not filtered) only undecodable and empty pairs are rejected."""
    return check_pair_detailed(src, tgt, settings, langid)[0]


def check_pair_detailed(src: str | bytes, tgt: str | bytes, settings: FilterSettings | None,
                        langid: LanguageIdentifier | None = None, max_chars: int | None = None
                        ) -> tuple[str | None, str]:
    """`check_pair` and a detail for rejected.tsv: for src_lang/tgt_lang the language the identifier detected and
    its probability (`detected fr 0.98`), for line_too_long the length, else ''. Without settings, lines longer
    than `max_chars` (default MAX_LINE_CHARS) are rejected too: bounded work per line on every split."""
    return check_pairs_detailed([(src, tgt)], settings, langid, max_chars)[0]


def check_pairs_detailed(pairs: Sequence[tuple[str | bytes, str | bytes]], settings: FilterSettings | None,
                         langid: LanguageIdentifier | None = None, max_chars: int | None = None
                         ) -> list[tuple[str | None, str]]:
    """`check_pair_detailed` of every pair; the language checks of all pairs go to the identifier together
    (`detect_scored_many`), the source sides first, then the targets of the pairs whose source passed."""
    checked = [_check_shape(src, tgt, settings, max_chars) for src, tgt in pairs]
    result: list[tuple[str | None, str]] = [(reason, detail) for reason, detail, _ in checked]
    if langid is None or settings is None:
        return result
    for side, (reason, expected) in enumerate((("src_lang", settings.src_lang), ("tgt_lang", settings.tgt_lang))):
        todo = [i for i, (rejected, _, texts) in enumerate(checked)
                if rejected is None and result[i][0] is None and _checked(texts[side], settings)]
        scored = langid.detect_scored_many([checked[i][2][side] for i in todo])
        for i, (detected, probability) in zip(todo, scored):
            if detected != expected:
                result[i] = (reason, f"detected {detected} {probability:.2f}")
    return result


def _check_shape(src: str | bytes, tgt: str | bytes, settings: FilterSettings | None, max_chars: int | None
                 ) -> tuple[str | None, str, tuple[str, str]]:
    """The checks before the language checks: (reason or None, detail, the stripped texts)."""
    src_text, tgt_text = _decode(src), _decode(tgt)
    if src_text is None or tgt_text is None:
        return "invalid_utf8", "", ("", "")
    texts = src_text.strip(), tgt_text.strip()
    src_text, tgt_text = texts
    if not src_text or not tgt_text:
        return "empty", "", texts
    limit = settings.max_chars if settings is not None else max_chars or MAX_LINE_CHARS
    if max(len(src_text), len(tgt_text)) > limit:
        return "line_too_long", f"{max(len(src_text), len(tgt_text))} characters > {limit}", texts
    if settings is None:
        return None, "", texts
    if src_text == tgt_text:
        return "identical", "", texts
    src_len = count_tokens(src_text, settings.src_lang, settings.segmentation)
    tgt_len = count_tokens(tgt_text, settings.tgt_lang, settings.segmentation)
    if min(src_len, tgt_len) < settings.min_len:
        return "too_short", "", texts
    if max(src_len, tgt_len) > settings.max_len:
        return "too_long", "", texts
    if max(src_len, tgt_len) > settings.max_ratio * min(src_len, tgt_len):
        return "ratio", "", texts
    return None, "", texts


def _checked(text: str, settings: FilterSettings) -> bool:
    """Whether a side gets the language check (it has at least `langid_min_letters` letters)."""
    return settings.langid_min_letters == 0 or sum(char.isalpha() for char in text) >= settings.langid_min_letters


def filter_chunk(pairs: Sequence[tuple[bytes | str, bytes | str]], settings: FilterSettings,
                 langid: LanguageIdentifier | None) -> list[str | None]:
    """`check_pair` over a chunk of (src, tgt) lines without line ends: one reason or None per pair."""
    return [reason for reason, _ in check_pairs_detailed(pairs, settings, langid)]


@dataclass
class FilterSummary:
    """Counts of one filtering run: total = kept + sum(rejected.values()), always."""

    total: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))

    def add(self, reason: str | None) -> None:
        """Count one pair."""
        self.total += 1
        if reason is None:
            self.kept += 1
        else:
            self.rejected[reason] += 1

    @property
    def rejected_total(self) -> int:
        """All rejected pairs."""
        return sum(self.rejected.values())

    def format(self) -> str:
        """Human-readable summary: totals, then one line per reason in check order."""
        lines = [f"{self.total} pairs: {self.kept} kept, {self.rejected_total} rejected"]
        lines += [f"  {reason:<12} {self.rejected[reason]}" for reason in REASONS]
        return "\n".join(lines)

    def warning(self, threshold: float = WARN_REJECTED_SHARE) -> str | None:
        """One line if more than `threshold` of the pairs were rejected, naming the biggest reasons."""
        return rejection_warning(self.total, self.rejected, threshold)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready counts."""
        return {"total": self.total, "kept": self.kept, "rejected": dict(self.rejected)}


def rejection_warning(total: int, rejected: Mapping[str, int], threshold: float = WARN_REJECTED_SHARE
                      ) -> str | None:
    """`warning: ...` (one line) when more than `threshold` of `total` pairs were rejected, naming the three
    biggest reasons; None otherwise. The one implementation of the warning of `synprep filter` and `convert`."""
    rejected_total = sum(rejected.values())
    if not total or rejected_total <= threshold * total:
        return None
    top = sorted((r for r in rejected if rejected[r]), key=lambda r: -rejected[r])[:3]
    reasons = ", ".join(f"{r} {100 * rejected[r] / total:.1f}%" for r in top)
    return (f"warning: {100 * rejected_total / total:.1f}% of {total} pairs rejected "
            f"({reasons}); check the languages, the settings and that the files are parallel")


def likely_cause(reason: str, details: Sequence[str], settings: FilterSettings | None) -> str:
    """The most likely cause of many pairs rejected for `reason`, in words with the setting to check; `details`:
    the rejected.tsv details of those pairs (for src_lang/tgt_lang, `detected xx 0.98`)."""
    if reason in ("src_lang", "tgt_lang"):
        side, expected = ("source", "src_lang") if reason == "src_lang" else ("target", "tgt_lang")
        detected = Counter(d.split()[1] for d in details if d.startswith("detected ") and len(d.split()) > 1)
        if detected:
            language = detected.most_common(1)[0][0]
            want = getattr(settings, expected, None) if settings else None
            return (f"the {side} looks like {language}" + (f", not {want}" if want else "")
                    + "; check src_lang/tgt_lang (swapped?) and that src and tgt name the right files")
        return f"the language identifier does not recognise the {side}; check {expected}"
    limit = (lambda name: f" = {getattr(settings, name)}") if settings else (lambda name: "")
    causes = {
        "ratio": f"one side has over max_ratio{limit('max_ratio')} times the other's whitespace tokens: a language "
                 "written without spaces (zh, ja, th) counts a sentence as one token; raise [filter] max_ratio or "
                 "segment the text first",
        "too_long": f"sentences over max_len{limit('max_len')} whitespace tokens; raise [filter] max_len",
        "too_short": f"sentences under min_len{limit('min_len')} tokens; lower [filter] min_len",
        "identical": "source and target are the same text; check that src and tgt name different files",
        "empty": "a side is empty; check that the files are parallel and not empty",
        "invalid_utf8": "the text is not UTF-8; convert the files (iconv -f ENCODING -t UTF-8)",
        "line_too_long": f"lines over max_chars{limit('max_chars')} characters; is the input one sentence a line?",
        "invalid_tree": "the parser gave no usable tree; check the [parser] models and their languages",
        "bad_row": "TSV rows without the side's column; check src_column/tgt_column and that the file is "
                   "tab-separated",
    }
    return causes.get(reason, f"check the settings behind {reason}")


def output_name(path: str) -> str:
    """Base name of an input without .gz/.xz: the name of its filtered output."""
    name = os.path.basename(path)
    for suffix in (".gz", ".xz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _strip_newline(raw: bytes) -> bytes:
    return raw[:-1].rstrip(b"\r") if raw.endswith(b"\n") else raw.rstrip(b"\r")


def _mismatch(src_path: str, src_count: int, tgt_path: str, tgt_count: int) -> InputError:
    return InputError(f"source and target have different line counts: {src_path} has {src_count} lines, "
                      f"{tgt_path} has {tgt_count} lines; nothing written", src_path)


def _read_pairs(src_path: str, tgt_path: str) -> Iterator[tuple[bytes, bytes]]:
    """(src, tgt) raw lines without line ends, in lockstep; InputError naming both counts if they differ."""
    src_stream, tgt_stream = open_binary(src_path), open_binary(tgt_path)
    count = 0
    try:
        pairs = zip_longest(src_stream, tgt_stream)
        for src, tgt in pairs:
            if src is None or tgt is None:
                rest = 1 + sum(1 for _ in pairs)
                src_count, tgt_count = (count, count + rest) if src is None else (count + rest, count)
                raise _mismatch(src_path, src_count, tgt_path, tgt_count)
            count += 1
            yield _strip_newline(src), _strip_newline(tgt)
    except (OSError, EOFError, lzma.LZMAError) as err:
        raise InputError(f"cannot read input: {err}", f"{src_path} or {tgt_path}") from None
    finally:
        for stream in (src_stream, tgt_stream):
            if not is_standard(stream):
                stream.close()


def _chunks(pairs: Iterator[tuple[bytes, bytes]], size: int) -> Iterator[list[tuple[bytes, bytes]]]:
    while chunk := list(islice(pairs, size)):
        yield chunk


def _filter_task(langid: LanguageIdentifier | None, task: tuple[FilterSettings, list[tuple[bytes, bytes]]]
                 ) -> list[tuple[str | None, str]]:
    settings, chunk = task
    return check_pairs_detailed(chunk, settings, langid)  # as convert's filter: the chunk's languages in one batch


def _results(chunks: Iterator[list[tuple[bytes, bytes]]], settings: FilterSettings, workers: int,
             langid: LanguageIdentifier | None
             ) -> Iterator[tuple[list[tuple[bytes, bytes]], list[tuple[str | None, str]]]]:
    """(chunk, (reason, detail) per pair) in input order; at most 2 x workers chunks in flight (flat memory)."""
    if workers <= 1:  # reuse the caller's identifier
        for chunk in chunks:
            yield chunk, _filter_task(langid, (settings, chunk))
        return
    pending: deque = deque()  # the chunks whose reasons are on their way, in order

    def tasks() -> Iterator[tuple[FilterSettings, list[tuple[bytes, bytes]]]]:
        for chunk in chunks:
            pending.append(chunk)
            yield settings, chunk

    for reasons in ordered_map(_filter_task, tasks(), workers, make_identifier, (settings,)):
        yield pending.popleft(), reasons


def _missing_dirs(path: str) -> list[str]:
    missing = []
    path = os.path.abspath(path)
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    return missing


def check_output_dir(out_dir: str, overwrite: bool) -> None:
    """`out_dir` is missing, an empty folder, or (with `overwrite`) a folder whose same-named files get replaced;
    anything else is an InputError naming it."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError("the output must be a folder, and this is a file", out_dir)
    if not overwrite and os.path.isdir(out_dir) and os.listdir(out_dir):
        raise InputError("output folder exists and is not empty: pass --overwrite to replace its files", out_dir)


def filter_files(src_path: str, tgt_path: str, out_dir: str, settings: FilterSettings, workers: int | None = None,
                 chunk_size: int = CHUNK_SIZE, warn: Callable[[str], None] | None = None,
                 progress: bool | None = None, overwrite: bool = False) -> FilterSummary:
    """Filter a parallel corpus into `out_dir`: kept sides (input base names), `ids`, `rejected.tsv`.

    Output is identical for any number of `workers` (None = all cores). Files are written to a temporary folder
    beside `out_dir` and moved in at the end, so a failure (e.g. different line counts) leaves nothing behind.
    A non-empty `out_dir` is refused unless `overwrite` (then those four files are replaced, others left alone).
    `warn` receives the rejected-share warning (default: printed to stderr). `progress`: a tqdm bar on stderr
    (None: only when stderr is a terminal).
    """
    names = [output_name(src_path), output_name(tgt_path)]
    if names[0] == names[1] or {IDS_NAME, REJECTED_NAME} & set(names):
        raise InputError(f"output names would collide: {names[0]}, {names[1]}, {IDS_NAME}, {REJECTED_NAME}; "
                         "rename an input", src_path)
    for path in (src_path, tgt_path):
        check_text_file(path)  # missing, UTF-16/UTF-32: one error before any work
    check_outputs({"-o": out_dir}, {"the source (--src)": src_path, "the target (--tgt)": tgt_path})
    check_output_dir(out_dir, overwrite)
    counts = count_lines(src_path), count_lines(tgt_path)
    if None not in counts and counts[0] != counts[1]:
        raise _mismatch(src_path, counts[0], tgt_path, counts[1])  # type: ignore[arg-type]
    langid = make_identifier(settings)  # fails on unknown languages before touching the disk
    workers = default_workers() if workers is None else max(1, workers)

    created = _missing_dirs(os.path.dirname(os.path.abspath(out_dir)))
    os.makedirs(os.path.dirname(os.path.abspath(out_dir)), exist_ok=True)
    summary = FilterSummary()
    try:
        with atomic_folder(out_dir) as tmp_dir:  # the folder appears whole: all four files or none
            paths = [os.path.join(tmp_dir, name) for name in (*names, IDS_NAME, REJECTED_NAME)]
            outputs = [open(path, "wb") for path in paths]  # noqa: SIM115 (closed below)
            try:
                src_out, tgt_out, ids_out, rejected_out = outputs
                chunks = _chunks(_read_pairs(src_path, tgt_path), chunk_size)
                bar = progress_bar("filter", counts[0], "pairs", shown=progress, lines=False)  # None: a terminal
                for chunk, results in _results(chunks, settings, workers, langid):
                    start = summary.total
                    for offset, ((src, tgt), (reason, detail)) in enumerate(zip(chunk, results)):
                        summary.add(reason)
                        if reason is None:
                            src_out.write(src + b"\n")
                            tgt_out.write(tgt + b"\n")
                            ids_out.write(b"%d\n" % (start + offset))
                        else:
                            row = f"{start + offset}\t{reason}\t{detail}\t{tsv_field(src)}\t{tsv_field(tgt)}\n"
                            rejected_out.write(row.encode("utf-8"))
                    bar.update(len(chunk))
                bar.close()
            finally:
                for stream in outputs:
                    stream.close()
    except BaseException as err:
        for path in created:  # deepest first
            if os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
        if isinstance(err, OSError) and err.filename is None and not isinstance(err, BrokenPipeError):
            raise WriteError(f"cannot write: {err.strerror or err}", out_dir) from None  # a full disk, named
        raise
    message = summary.warning()
    if message:
        (warn or (lambda text: log.warning(f"synprep filter: {text}")))(message)
    return summary


def filter_corpus(src: str, tgt: str, src_lang: str, tgt_lang: str, output_dir: str, *,
                  langid: str = DEFAULT_LANGID, langid_languages: Sequence[str] | str | None = None,
                  langid_min_letters: int = 0, min_len: int = 1, max_len: int = 80, max_ratio: float = 3.0,
                  max_chars: int = MAX_LINE_CHARS, segmentation: str = "auto", workers: int = 0,
                  overwrite: bool = False, progress: bool | None = None) -> FilterResult:
    """`synprep filter`: keep or reject (one counted reason) every pair of `src`/`tgt` into `output_dir` (the
    kept sides, ids, rejected.tsv); the same output for any `workers` (0: all cores). `synprep.filter(...)`.
    Returns a `FilterResult` (`summary`: `kept`, `rejected` by reason)."""
    from .arguments import check_arguments
    from .results import FilterResult

    checked = check_arguments("synprep filter", src=src, tgt=tgt, src_lang=src_lang, tgt_lang=tgt_lang,
                              output_dir=output_dir, langid=langid, langid_min_letters=langid_min_letters,
                              min_len=min_len, max_len=max_len, max_ratio=max_ratio, max_chars=max_chars,
                              segmentation=segmentation, workers=workers, overwrite=overwrite,
                              progress=progress)
    if isinstance(langid_languages, str):
        langid_languages = langid_languages.split(",")
    languages = tuple(c for c in langid_languages if c.strip()) if langid_languages else None
    try:
        settings = FilterSettings(src_lang, tgt_lang, min_len, max_len, max_ratio,
                                  None if langid == "none" else langid, languages, langid_min_letters, max_chars,
                                  segmentation)
    except ValueError as err:
        raise InputError(str(err)) from None
    summary = filter_files(checked["src"], checked["tgt"], checked["output_dir"], settings,
                           workers or None, overwrite=overwrite, progress=progress)
    return FilterResult(summary, summary.format())


make_callable(__name__, filter_corpus)  # synprep.filter(...) is synprep.filter.filter_corpus(...)
