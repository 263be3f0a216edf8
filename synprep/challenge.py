"""`synprep challenge`: syntactic challenge sets (Choshen & Abend 2019) from any parsed corpus.

A challenge set is the subset of a test split whose source or target tree contains a phenomenon: a lexical
long-distance dependency, two or more non-consecutive words that together correspond to one word in the
other language (`put ... out`, `schlug ... vor`, `sich ... richtet`, `whom ... aimed at`).

The phenomena are **data**: `RULES` is a table of `Rule`s, each a dependent-token pattern (labels, optional
forms or FEATS value) plus geometric conditions on the arc to its head (distance, direction, nothing of a
kind after the dependent in its phrase). One function (`rule_matches`) reads every rule; a new phenomenon is
a new table entry (in Python, or a `[[rule]]` table in a TOML file given with `--rules`), never new code.

Rules work on what the shards store: surface tokens, 1-based heads and full UD labels (the `labels` feature
group). Shards store no UPOS and no FEATS, so an adposition is read as the relation `case` and a nominal as
a nominal relation (`NOMINAL_RELATIONS`); a rule's `feature` (e.g. `Reflex=Yes`) is used only where the
sentence comes with features (a CoNLL-U file), the form lexicon everywhere. Multiword tokens are single
tokens (CONTRACT.md), so distances count surface tokens and a clitic inside a multiword token is no match.

Output (`write_challenge`): DIR/summary.json, and per (side, phenomenon) DIR/<side>.<name>.ids (the pair
`id`s, one per line, in split order: what `syntrain eval --subsets` and `syntrain.compare --subsets` read)
and DIR/<side>.<name>.tsv (id, dependent, head, the side's text: for reading the matches).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .callables import make_callable
from .errors import InputError
from .outputs import check_outputs
from .textio import atomic_write

if TYPE_CHECKING:
    from .results import ChallengeResult
    from .shards import Split

SUMMARY = "summary.json"

# Relations (the part before ':') whose dependent is a nominal: read in place of UPOS NOUN/PROPN/PRON, which
# the shards do not store.
NOMINAL_RELATIONS = ("nsubj", "obj", "iobj", "obl", "nmod", "appos", "vocative", "dislocated", "expl")

# Reflexive pronouns by language (lower case), for rules on relations that also take other pronouns (`obj`,
# `expl`). Only forms that are always reflexive: German `mich`, `uns` are also plain objects and are found
# only through `expl:pv` or, in CoNLL-U input, Reflex=Yes. A language not listed uses the union of all.
REFLEXIVE_PRONOUNS: dict[str, tuple[str, ...]] = {
    "en": ("myself", "yourself", "himself", "herself", "itself", "oneself", "ourselves", "yourselves", "themselves",
           "themself"),
    "de": ("sich",),
    "nl": ("zich", "zichzelf"),
    "fr": ("se", "s'", "s’", "soi"),
    "es": ("se", "sí"),
    "it": ("si", "sé"),
    "pt": ("se", "si"),
    "cs": ("se", "si"),
    "pl": ("się", "siebie", "sobie"),
    "sv": ("sig", "sej"),
    "da": ("sig",),
    "no": ("seg",), "nb": ("seg",), "nn": ("seg",),
}


@dataclass(frozen=True)
class Rule:
    """One phenomenon: a sentence matches when some token (the dependent) satisfies every condition.

    - `labels`: its relation, exact (subtypes included: `compound:prt`);
    - `forms`: when given (language -> lower-case forms; a language not listed: all forms together), its
      form must be one of them, or its FEATS contain `feature` (only where features are known), unless its
      label is one of `any_form` (a label that implies the property, e.g. `expl:pv`);
    - `min_distance`: |dependent - head| >= this, in tokens (2 = not adjacent); the root arc never matches;
    - `after_head`: the dependent follows its head;
    - `not_followed_by`: no token after the dependent inside its phrase (the subtree of its head's head; the
      whole sentence when the head is the root) is the phrase's head or has one of these relations (the part
      before ':');
    - `languages`: the languages the rule is meant for (None: any UD language); elsewhere it is skipped.
    """

    name: str
    description: str
    example: str
    labels: tuple[str, ...]
    forms: Mapping[str, tuple[str, ...]] | None = None
    feature: str | None = None
    any_form: tuple[str, ...] = ()
    min_distance: int = 1
    after_head: bool = False
    not_followed_by: tuple[str, ...] = ()
    languages: tuple[str, ...] | None = None

    def applies_to(self, lang: str | None) -> bool:
        """Whether the rule is meant for `lang` (an unknown language: only language-independent rules)."""
        return self.languages is None or lang in self.languages

    def form_set(self, lang: str | None) -> frozenset[str] | None:
        """The dependent's allowed lower-case forms in `lang` (None: any form)."""
        if self.forms is None:
            return None
        if lang in self.forms:
            return frozenset(self.forms[lang])
        return frozenset(form for forms in self.forms.values() for form in forms)


RULES: tuple[Rule, ...] = (
    Rule("particle", "particle verb: a `compound:prt` token not adjacent to its head",
         "en `John put the fire out` (out -> put, 3 apart); de `Er schlug einen Plan vor` (vor -> schlug)",
         labels=("compound:prt",), min_distance=2),
    Rule("reflexive", "reflexive verb: a reflexive pronoun attached as `expl:pv`, `obj` or `expl`, not adjacent to "
         "its head (`expl:pv` is reflexive by definition; `obj`/`expl` need a form of REFLEXIVE_PRONOUNS or, in "
         "CoNLL-U input, Reflex=Yes)",
         "de `die Gruppe, an die sich der Plan richtet` (sich -> richtet, 3 apart)",
         labels=("expl:pv", "obj", "expl"), forms=REFLEXIVE_PRONOUNS, feature="Reflex=Yes", any_form=("expl:pv",),
         min_distance=2),
    Rule("stranding", "preposition stranding (English): a `case` token after its head with no nominal after it in "
         "its phrase (nominal relations of NOMINAL_RELATIONS, or the phrase's head itself: so possessive 's in "
         "`John 's book` is no match)",
         "en `What are you looking for ?` (for -> What); `the group to whom the plan is aimed at` (at -> whom)",
         labels=("case",), after_head=True, not_followed_by=NOMINAL_RELATIONS, languages=("en",)),
)


def _in_subtree(heads: Sequence[int], token: int, top: int) -> bool:
    """Whether 1-based `token` lies in the subtree of `top` (0 = the whole sentence)."""
    seen = 0
    while token and seen <= len(heads):
        if token == top:
            return True
        token, seen = heads[token - 1], seen + 1
    return top == 0


def rule_matches(rule: Rule, heads: Sequence[int], labels: Sequence[str], tokens: Sequence[str],
                 lang: str | None = None, feats: Sequence[str] | None = None) -> list[tuple[int, int]]:
    """(dependent, head) of every arc of one sentence that matches `rule`, 1-based, in order; [] when the rule
    is not meant for `lang`. `feats`: the FEATS column per token, when known."""
    if not rule.applies_to(lang):
        return []
    forms = rule.form_set(lang)
    found = []
    for dep, (head, label) in enumerate(zip(heads, labels), 1):
        if label not in rule.labels or head == 0 or abs(dep - head) < rule.min_distance:
            continue
        if rule.after_head and dep < head:
            continue
        if forms is not None and label not in rule.any_form and tokens[dep - 1].lower() not in forms:
            if not (rule.feature and feats is not None and rule.feature in feats[dep - 1].split("|")):
                continue
        if rule.not_followed_by:
            top = heads[head - 1]
            if any(_in_subtree(heads, k, top) and (k == top or labels[k - 1].split(":")[0] in rule.not_followed_by)
                   for k in range(dep + 1, len(heads) + 1)):
                continue
        found.append((dep, head))
    return found


def find_phenomena(record: Mapping[str, Any], rules: Sequence[Rule] = RULES, lang: str | None = None
                   ) -> dict[str, list[tuple[int, int]]]:
    """rule name -> matching (dependent, head) arcs of one sentence record (`tokens`, `heads`, `labels`,
    optionally `feats`); only rules with a match are keys."""
    out = {}
    for rule in rules:
        arcs = rule_matches(rule, record["heads"], record["labels"], record["tokens"], lang, record.get("feats"))
        if arcs:
            out[rule.name] = arcs
    return out


# ------------------------------------------------------------------------------------------ rules from TOML


def load_rules(path: str) -> tuple[Rule, ...]:
    """User rules from a TOML file: `[[rule]]` tables with Rule's fields (`forms` a table of lists)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as err:
        raise InputError(f"cannot read rules: {err.strerror or err}", path) from None
    except tomllib.TOMLDecodeError as err:
        raise InputError(f"not valid TOML: {err}", path) from None
    except UnicodeDecodeError as err:
        raise InputError(f"not UTF-8 text (byte {err.start})", path) from None
    entries = data.get("rule")
    if not isinstance(entries, list) or set(data) != {"rule"}:
        raise InputError("expected [[rule]] tables only (name, description, example, labels, ...)", path)
    known = {f.name for f in fields(Rule)}
    rules = []
    for number, entry in enumerate(entries, 1):
        where = f"[[rule]] #{number}"
        unknown = set(entry) - known
        missing = {"name", "labels"} - set(entry)
        if unknown or missing:
            problem = f"unknown key(s) {', '.join(sorted(unknown))}" if unknown else \
                f"missing {', '.join(sorted(missing))}"
            raise InputError(f"{where}: {problem} (keys: {', '.join(sorted(known))})", path)
        values = dict(entry)
        values.setdefault("description", values["name"])
        values.setdefault("example", "")
        try:
            for key in ("labels", "any_form", "not_followed_by", "languages"):
                if key in values:
                    values[key] = tuple(_strings(values[key], key))
            if "forms" in values:
                values["forms"] = {lang: tuple(_strings(v, f"forms.{lang}")) for lang, v in values["forms"].items()}
            for key, kind in (("min_distance", int), ("after_head", bool), ("name", str), ("feature", str)):
                if key in values and not isinstance(values[key], kind):
                    raise ValueError(f"{key} must be a {kind.__name__}")
        except (ValueError, AttributeError) as err:
            raise InputError(f"{where}: {err}", path) from None
        rules.append(Rule(**values))
    return tuple(rules)


def _strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of strings")
    return value


def select_rules(names: Iterable[str] | None, extra: Sequence[Rule] = ()) -> tuple[Rule, ...]:
    """The built-in rules plus `extra` (a rule of the same name replaces the built-in one), only `names` when
    given (unknown or repeated names raise: a repeated one would count its pairs twice in the summary)."""
    table = {rule.name: rule for rule in (*RULES, *extra)}
    if names is None:
        return tuple(table.values())
    names = list(names)
    unknown = [name for name in names if name not in table]
    if unknown:
        raise InputError(f"unknown phenomenon {', '.join(unknown)} (choose from {', '.join(table)})")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(f"phenomenon {', '.join(repeated)} named more than once")
    return tuple(table[name] for name in names)


# ------------------------------------------------------------------------------------------ a split


@dataclass
class Subset:
    """The pairs of one (side, phenomenon): their ids and (dependent, head) arcs, or why the rule was skipped."""

    side: str
    rule: Rule
    ids: list[int] = field(default_factory=list)
    arcs: list[list[tuple[int, int]]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def name(self) -> str:
        """`<side>.<phenomenon>`: the subset's name in tables and its files' stem."""
        return f"{self.side}.{self.rule.name}"


def side_languages(configuration: Mapping[str, Any]) -> dict[str, str | None]:
    """The languages of a split's sides from its manifest configuration (None where not recorded)."""
    return {side: configuration.get(f"{side}_lang") or None for side in ("src", "tgt")}


def scan_split(split: Split, sides: Sequence[str] = ("src", "tgt"), rules: Sequence[Rule] = RULES) -> list[Subset]:
    """Every (side, rule) subset of a converted split (`synprep.shards.open_split`), in the order of `sides`
    and `rules`. A side without stored labels is an InputError; a rule not meant for a side's language, or one
    on labels with subtypes when the split stripped them, is kept with `skipped` set (0 pairs)."""
    path = split.path
    langs = side_languages(split.manifest.configuration)
    stripped = bool(split.manifest.policies.get("strip_subtypes"))
    columns = ["id"]
    for side in sides:
        missing = split.missing_columns([f"{side}_labels"])
        if missing:
            raise InputError(f"the split stores no {side}_labels: challenge sets need the labels feature group "
                             f"(convert with [features] {side} = [..., \"labels\"])", path)
        columns += [f"{side}_text", f"{side}_tokens", f"{side}_heads", f"{side}_labels"]
    table = split.table(columns).to_pydict()
    subsets = []
    for side in sides:
        lang = langs.get(side)
        tokens, heads, labels = table[f"{side}_tokens"], table[f"{side}_heads"], table[f"{side}_labels"]
        for rule in rules:
            subset = Subset(side, rule)
            if not rule.applies_to(lang):
                subset.skipped = f"{'/'.join(rule.languages or ())} only; side language {lang or 'unknown'}"
            elif stripped and any(":" in label for label in rule.labels):
                subset.skipped = "the split stripped label subtypes (strip_subtypes)"
            else:
                for i, pair_id in enumerate(table["id"]):
                    arcs = rule_matches(rule, heads[i], labels[i], tokens[i], lang)
                    if arcs:
                        subset.ids.append(pair_id)
                        subset.arcs.append(arcs)
                        subset.texts.append(table[f"{side}_text"][i])
            subsets.append(subset)
    return subsets


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def write_challenge(path: str, out_dir: str, sides: Sequence[str] = ("src", "tgt"),
                    rules: Sequence[Rule] = RULES) -> dict[str, Any]:
    """Scan a split and write DIR (module docstring); returns the summary written to DIR/summary.json."""
    from .shards import open_split

    check_outputs({"-o": out_dir}, {"the split": path})
    split = open_split(path)
    subsets = scan_split(split, sides, rules)
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    for subset in subsets:
        ids_file, tsv_file = f"{subset.name}.ids", f"{subset.name}.tsv"
        atomic_write(os.path.join(out_dir, ids_file), "".join(f"{i}\n" for i in subset.ids).encode())
        rows = ["id\tdependent\thead\ttext\n"]
        for pair_id, arcs, text in zip(subset.ids, subset.arcs, subset.texts):
            rows.append(f"{pair_id}\t{','.join(str(d) for d, _ in arcs)}\t{','.join(str(h) for _, h in arcs)}\t"
                        f"{_escape(text)}\n")
        atomic_write(os.path.join(out_dir, tsv_file), "".join(rows).encode("utf-8"))
        entries.append({"name": subset.name, "side": subset.side, "phenomenon": subset.rule.name,
                        "pairs": len(subset.ids), "ids": ids_file, "matches": tsv_file, "skipped": subset.skipped})
    summary = {"split": os.path.abspath(path), "rows": split.manifest.rows,
               "languages": side_languages(split.manifest.configuration),
               "rules": {rule.name: {"description": rule.description, "example": rule.example,
                                     "languages": list(rule.languages) if rule.languages else None}
                         for rule in rules},
               "subsets": entries}
    atomic_write(os.path.join(out_dir, SUMMARY), (json.dumps(summary, indent=2, ensure_ascii=False) + "\n").encode())
    return summary


def format_summary(summary: Mapping[str, Any]) -> str:
    """The counts table (phenomena x sides) for the terminal; `-` = skipped (the reason below the table)."""
    sides = list(dict.fromkeys(entry["side"] for entry in summary["subsets"]))
    names = list(dict.fromkeys(entry["phenomenon"] for entry in summary["subsets"]))
    cells = {(e["phenomenon"], e["side"]): ("-" if e["skipped"] else str(e["pairs"])) for e in summary["subsets"]}
    langs = summary.get("languages", {})
    header = ["phenomenon", *(f"{side} ({langs.get(side) or '?'})" for side in sides)]
    table = [header] + [[name, *(cells.get((name, side), "") for side in sides)] for name in names]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [f"{summary['split']}: {summary['rows']} pairs"]
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in table]
    lines += [f"- {e['name']}: skipped ({e['skipped']})" for e in summary["subsets"] if e["skipped"]]
    return "\n".join(lines)


def load_subsets(out_dir: str) -> list[tuple[str, list[int]]]:
    """(name, pair ids) of every subset written by `write_challenge` into `out_dir` (skipped ones left out),
    in the summary's order: what `syntrain eval --subsets` and `syntrain.compare --subsets` score."""
    path = os.path.join(out_dir, SUMMARY)
    try:
        with open(path, encoding="utf-8") as handle:
            summary = json.load(handle)
    except FileNotFoundError:
        raise InputError("no summary.json: not a folder written by synprep challenge", out_dir) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"summary.json is not valid JSON: {err}", path) from None
    subsets = []
    for entry in summary.get("subsets", []):
        if entry.get("skipped"):
            continue
        ids_path = os.path.join(out_dir, entry["ids"])
        ids = []
        with open(ids_path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip().isdigit():
                    raise InputError(f"not a pair id: {line.strip()!r}", ids_path, number)
                ids.append(int(line))
        subsets.append((entry["name"], ids))
    return subsets


def subset_rows(split_ids: Sequence[int], subset_ids: Sequence[int], name: str = "subset") -> list[int]:
    """Row positions in a split of the pairs `subset_ids` (split order kept); an id the split lacks raises."""
    position = {pair_id: row for row, pair_id in enumerate(split_ids)}
    missing = [i for i in subset_ids if i not in position]
    if missing:
        raise InputError(f"{name}: pair id(s) {', '.join(map(str, missing[:5]))} not in the split (subsets made "
                         "from another split?)")
    return sorted(position[i] for i in subset_ids)


# ------------------------------------------------------------------------------------------ CoNLL-U input


def conllu_records(path: str) -> Iterator[dict[str, Any]]:
    """Token-level records (`tokens`, `heads`, `labels`, `feats`, `text`) of a CoNLL-U file: multiword tokens
    collapsed as in the shards, each token taking the FEATS of the word whose head and label it has."""
    from .conllu import FEATS, read_conllu, to_tree, token_spans, word_heads

    for sentence in read_conllu(path):
        tree = to_tree(sentence, path)
        spans = token_spans(sentence, word_heads(sentence, path))
        yield {"tokens": tree.tokens, "heads": tree.heads, "labels": tree.labels,
               "feats": [sentence.words[top - 1][FEATS] for _, _, top in spans],
               "text": tree.text if tree.text is not None else " ".join(tree.tokens)}


def conllu_language(path: str) -> str | None:
    """The language of a CoNLL-U file from its name: a UD treebank's prefix (`en_ewt-ud-test.conllu` -> en) or
    a two-letter part before `.conllu` (`train.de.conllu`, `de.conllu` -> de); else None."""
    name = os.path.basename(path)
    prefix, parts = name.split("_", 1)[0], name.split(".")
    if "_" in name and 2 <= len(prefix) <= 3 and prefix.isalpha():
        return prefix.lower()
    if len(parts) >= 2 and len(parts[-2]) == 2 and parts[-2].isalpha():
        return parts[-2].lower()
    return None


def challenge(split: str, output: str, *, side: str = "both", phenomena: Sequence[str] | str | None = None,
              rules: str | None = None) -> ChallengeResult:
    """`synprep challenge SPLIT -o OUTPUT`: the pairs of a converted split whose trees contain each phenomenon
    (`phenomena`: rule names, default all; `rules`: a TOML file of extra [[rule]] tables), written to `output`
    (summary.json, one .ids/.tsv per subset). Returns a `ChallengeResult` (`summary`)."""
    from .arguments import check_arguments
    from .results import ChallengeResult

    checked = check_arguments("synprep challenge", split=split, output=output, side=side, rules=rules)
    extra = load_rules(checked["rules"]) if checked["rules"] else ()
    if isinstance(phenomena, str):
        phenomena = phenomena.split(",")
    names = [n.strip() for n in phenomena if n.strip()] if phenomena else None
    sides = ("src", "tgt") if checked["side"] == "both" else (checked["side"],)
    summary = write_challenge(checked["split"], checked["output"], sides, select_rules(names, extra))
    return ChallengeResult(checked["output"], summary, format_summary(summary) + "\n"
                           f"wrote {os.path.join(checked['output'], SUMMARY)}")


make_callable(__name__, challenge)  # synprep.challenge(...) is synprep.challenge.challenge(...) (docs/python-api.md)
