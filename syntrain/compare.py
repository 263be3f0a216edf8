"""The results table: runs decoded on one test split, BLEU and chrF with sacrebleu signatures, and a paired
bootstrap of each run against the baseline (sacrebleu's `--paired-bs`: 1,000 resamples); with `--subsets DIR`
(written by `synprep challenge`) also one table over the whole split and every challenge subset.

    syntrain compare --data out/multi30k-en-de/test runs/multi30k-vanilla runs/multi30k-pascal ...
    syntrain compare --data out/multi30k-en-de/test --subsets challenge/ runs/vanilla runs/pascal

(`python -m syntrain.compare` is the same command.) The first run is the baseline. A run is a folder with best.pt
(decoded here; the hypotheses are written to RUN/test.hyp, reused while the checkpoint, the split and the decoding
settings recorded beside them in RUN/test.hyp.json are this call's, and the run's
description to RUN/describe.json: the only files compare writes into a run folder, and it names each one it
writes) or only RUN/test.hyp (hypotheses brought back from another machine: one line per pair of the split, in
split order), described by RUN/describe.json ({"switches": str, "seed": int, "steps": int}) when present, else
'?'. The same whole-split numbers come from `sacrebleu REF -i RUN1/test.hyp RUN2/test.hyp -m bleu chrf
--paired-bs`. Prints Markdown tables (docs/results.md). Runs are scored on their outputs' text; a switch may
keep more of its outputs beside RUN/test.hyp (`DecodedOutputs.run_files`) and values in RUN/describe.json
(`describe_run`), and add a column to the table (`compare_header`, `compare_column`): tree decoding keeps its
outputs' transitions in RUN/test.trans (one line per pair) and its `trees` column gives the tree measure
(docs/tree-decoding.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from synprep.callables import make_callable
from synprep.results import Printed
from synprep.textio import atomic_write

if TYPE_CHECKING:
    from .model import Transformer

log = logging.getLogger(__name__)

HYPOTHESES = "test.hyp"
HYPOTHESES_DIGEST = "hypotheses_sha256"  # in test.hyp.json beside the key: test.hyp's content when written
HYPOTHESES_KEY = "test.hyp.json"  # what RUN/test.hyp was decoded from: checkpoint, split, decoding settings
DESCRIPTION = "describe.json"


def reference_texts(data_path: str) -> tuple[list[int], list[str]]:
    """(pair ids, raw target sentences `tgt_text`) of a split, in split order (the order of every hypothesis
    file)."""
    from synprep.shards import open_split

    table = open_split(data_path).table(["id", "tgt_text"]).to_pydict()
    return table["id"], table["tgt_text"]


def read_hypotheses(path: str, expected: int | None = None) -> list[str]:
    """One hypothesis a line; a count other than `expected` (the split's pairs) is an error naming the file."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        hyps = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text") from None
    if hyps and hyps[-1] == "":
        hyps.pop()
    if expected is not None and len(hyps) != expected:
        raise ValueError(f"{path}: {len(hyps)} hypotheses for a split of {expected} pairs (decoded on another split?)")
    return hyps


def run_hypotheses(run: str, data_path: str, device: str, expected: int | None = None,
                   written: list[str] | None = None, codes: dict[str, str] | None = None,
                   **given: float | None) -> list[str]:
    """Detokenized translations of the split by RUN/best.pt with the run's decoding settings (its final test's:
    `decode.run_settings`; `given`: beam, length_penalty, max_tokens, threads that replace them), cached in
    RUN/test.hyp: the run's final test writes them there, and they are reused while the key recorded beside them
    (`decoding_key`) is this call's; else decoded (progress on stderr). A run with only test.hyp (no
    checkpoint) is read as it is; a pretrained model's folder is decoded with `codes` (`row_codes`). The files
    written are added to `written`."""
    checkpoint, cached = os.path.join(run, "best.pt"), os.path.join(run, HYPOTHESES)
    if is_pretrained_folder(run):
        return pretrained_hypotheses(run, data_path, device, row_codes(run, codes or {}), **given)
    if not os.path.isfile(checkpoint):
        return read_hypotheses(cached, expected)
    from .config.recipe import stored_train_config
    from .config.resolve import signature_differences
    from .decode import decode_split, run_settings, settings_text
    from .runfolder.checkpoints import load_checkpoint, read_checkpoint

    settings = run_settings(stored_train_config(read_checkpoint(checkpoint), checkpoint), **given)
    key = decoding_key(checkpoint, data_path, settings.key(device))
    if os.path.isfile(cached) and _stored_key(run) == key:
        log.info(f"compare {run}: {cached} reused (the same checkpoint, split and decoding settings: "
                 f"{settings_text(key)})")
        return read_hypotheses(cached, expected)
    from .dataset import ParallelData

    model, vocab, ckpt = load_checkpoint(checkpoint, device)
    data = ParallelData(data_path, vocab, **model.switches.decoding_data_arguments())
    differ = signature_differences(ckpt.get("signature", {}), data.signature)
    if differ:
        log.warning(f"warning: {data_path} was not made with the {' and '.join(differ)} of {run}'s training data "
              "(synprep signatures differ)")
    pieces: list[list[str]] = []
    hyps = decode_split(model, data, vocab, settings, device=device, pieces=pieces,
                        progress=f"compare {run}: translating")
    write_hypotheses(run, model, hyps, pieces, key, written)
    return hyps


def is_pretrained_folder(run: str) -> bool:
    """A pretrained model's folder (config.json, no best.pt): compared as it is, nothing written into it."""
    return os.path.isfile(os.path.join(run, "config.json")) and not os.path.isfile(os.path.join(run, "best.pt"))


def row_codes(folder: str, codes: dict[str, str]) -> dict[str, str]:
    """The language codes compare decodes a pretrained model's folder with: `codes` (src_lang_code,
    tgt_lang_code) for a multilingual model, none for a model without codes (Marian)."""
    from .pretrained import PretrainedSource

    return dict(codes) if PretrainedSource.read(folder).codes else {}


def check_codes(runs: Sequence[str], codes: dict[str, str]) -> None:
    """compare's --src-lang-code / --tgt-lang-code: they go to every multilingual pretrained folder among the runs
    (checked there, `PretrainedSource.prefixes`), so given without one they do nothing, and such a folder needs
    both: ValueError in one line, before any decoding."""
    from .pretrained import PretrainedSource

    sources = [PretrainedSource.read(run) for run in runs if is_pretrained_folder(run)]
    multilingual = [source for source in sources if source.codes]
    if any(codes.values()) and not multilingual:
        raise ValueError("--src-lang-code/--tgt-lang-code do nothing without a multilingual pretrained model's "
                         "folder (M2M100, NLLB) among the runs")
    for source in multilingual:
        if not all(codes.values()):
            shown = ", ".join(list(source.codes)[:6]) + (", ..." if len(source.codes) > 6 else "")
            raise ValueError(f"{source.folder} is a multilingual pretrained model (language codes {shown}): give "
                             "--src-lang-code and --tgt-lang-code")
        source.prefixes(**codes)  # a code the model lacks: one line naming it


def pretrained_hypotheses(folder: str, data_path: str, device: str, codes: dict[str, str] | None = None,
                          **given: float | None) -> list[str]:
    """The translations of the split by a pretrained model folder as it is (a multilingual one with its language
    `codes`), decoded with the declared [train] defaults (`given` replacing them); nothing is written."""
    from .config.train import TrainConfig
    from .dataset import ParallelData
    from .decode import decode_split, run_settings
    from .pretrained import load_pretrained

    model, vocab, _ = load_pretrained(folder, device, **(codes or {}))
    data = ParallelData(data_path, vocab, **model.switches.decoding_data_arguments())
    return decode_split(model, data, vocab, run_settings(TrainConfig(), **given), device=device,
                        progress=f"compare {folder}: translating")


def write_hypotheses(run: str, model: Transformer, hyps: list[str], pieces: list[list[str]], key: dict,
                     written: list[str] | None = None) -> None:
    """RUN/test.hyp, the switches' run files (`DecodedOutputs.run_files`) and RUN/test.hyp.json (`key`, last: a
    key is only beside complete hypotheses); the paths are added to `written`."""
    from .switches import decoded

    for outputs in decoded(model.switches):
        for name, lines in outputs.run_files(pieces).items():
            _write_lines(os.path.join(run, name), lines, written)
    _write_lines(os.path.join(run, HYPOTHESES), hyps, written)
    text = "".join(line + "\n" for line in hyps).encode("utf-8")  # as _write_lines wrote it
    _write_lines(os.path.join(run, HYPOTHESES_KEY),
                 [json.dumps({**key, HYPOTHESES_DIGEST: hashlib.sha256(text).hexdigest()}, indent=1)], written)


def decoding_key(checkpoint: str, data_path: str, settings: dict) -> dict:
    """What a run's cached hypotheses depend on: the checkpoint (its sha256, a pretrained folder's files': another
    checkpoint of the same size and time is another), the split (its path and shard hashes) and the decoding
    settings (`DecodeSettings.key`). A cache with another key is decoded again."""
    from synprep.textio import path_sha256

    from .runfolder.resume import data_fingerprint

    return {"checkpoint": path_sha256(checkpoint), "data": os.path.realpath(data_path),
            "data_fingerprint": data_fingerprint(data_path), **settings}


def _stored_key(run: str) -> dict | None:
    """The key RUN/test.hyp.json records, when RUN/test.hyp is still the file it was written beside (its sha256,
    `hypotheses_sha256`); else None (decoded again, or flagged as a key the run lacks)."""
    from synprep.textio import file_sha256

    try:
        with open(os.path.join(run, HYPOTHESES_KEY), encoding="utf-8") as f:
            key = json.load(f)
        hypotheses = file_sha256(os.path.join(run, HYPOTHESES))
    except (OSError, ValueError):
        return None
    if not isinstance(key, dict) or key.pop(HYPOTHESES_DIGEST, None) != hypotheses:
        return None
    return key


def _write_lines(path: str, lines: list[str], written: list[str] | None) -> None:
    atomic_write(path, "".join(line + "\n" for line in lines).encode("utf-8"))
    if written is not None:
        written.append(path)


def read_description(run: str) -> dict:
    """RUN/describe.json as a dict ({} when absent); a damaged file is a ValueError naming it."""
    path = os.path.join(run, DESCRIPTION)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            described = json.load(f)
    except ValueError as err:  # bad JSON or bad bytes
        raise ValueError(f"{path}: not a run description ({err})") from None
    if not isinstance(described, dict):
        raise ValueError(f"{path}: not a run description (expected a JSON object)")
    return described


def describe(run: str, written: list[str] | None = None) -> dict:
    """A run's switches, seed, training steps, trained minutes (`elapsed_s`: what max_minutes counts) and system
    (`systems.system_key`): from best.pt when there is one (also written to RUN/describe.json, added to
    `written`), else from RUN/describe.json; '?' (the system: the run's own name) for what neither has."""
    checkpoint, path = os.path.join(run, "best.pt"), os.path.join(run, DESCRIPTION)
    if is_pretrained_folder(run):
        return {"switches": "none (pretrained, as it is)", "seed": "-", "steps": 0, "trained_steps": 0,
                "minutes": 0, "system": f"pretrained {os.path.abspath(run)}"}
    if os.path.isfile(checkpoint):
        from .config.recipe import stored_model_config, stored_train_config
        from .runfolder.checkpoints import read_checkpoint
        from .switches import decoded
        from .switches.active import ActiveSwitches
        from .systems import system_key

        ckpt = read_checkpoint(checkpoint)
        cfg = stored_model_config(ckpt, checkpoint)
        train_config = stored_train_config(ckpt, checkpoint)
        trained_steps, seconds = trained(run, ckpt)
        switches = ActiveSwitches(cfg)
        described = {"switches": switches.describe(), "seed": train_config.seed, "steps": ckpt.get("step", "?"),
                     "trained_steps": trained_steps, "minutes": round(seconds / 60, 1),
                     "system": system_key(cfg.to_dict(), dict(ckpt.get("train_config", {}))),
                     "training_data": _digest(ckpt.get("signature"))}
        for outputs in decoded(switches):
            described.update(outputs.describe_run())
        atomic_write(path, (json.dumps(described, indent=1) + "\n").encode("utf-8"))
        if written is not None:
            written.append(path)
    else:
        described = read_description(run)
    return {"switches": "?", "seed": "?", "steps": "?", "minutes": "?", **described,
            "trained_steps": described.get("trained_steps", described.get("steps", "?")),
            "system": described.get("system") or f"run {os.path.abspath(run)}"}


def _digest(value: Any) -> str:
    """A short digest of a recorded value (a dataset's synprep signature), as the table shows it."""
    import hashlib

    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def trained(run: str, ckpt: dict) -> tuple[int, float]:
    """(steps, trained seconds) of the whole run: the last step and `elapsed_s` in RUN/metrics.jsonl (best.pt may
    be from an earlier step), else best.pt's."""
    steps, seconds = int(ckpt.get("step", 0)), float(ckpt.get("elapsed_s", 0.0))
    try:
        with open(os.path.join(run, "metrics.jsonl"), encoding="utf-8") as f:
            for line in f:
                values = json.loads(line)
                if isinstance(values, dict) and isinstance(values.get("step"), int):
                    steps = max(steps, values["step"])
                    seconds = max(seconds, float(values.get("elapsed_s", 0.0)))
    except (OSError, ValueError, TypeError):
        pass  # a damaged or absent log: best.pt's values
    return steps, seconds


def _extra_cells(switches: list, run: str, data_path: str) -> list[str]:
    """The cells of the switches' columns for run folder `run` (their `Decoded.compare_column`, a classmethod:
    the run's model may lack the switch)."""
    described = read_description(run)
    return [switch.Decoded.compare_column(run, data_path, described) for switch in switches]


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def subset_table(systems: Sequence[tuple[str, list[str]]], references: Sequence[str], split_ids: Sequence[int],
                 subsets: Sequence[tuple[str, Sequence[int]]], samples: int = 1000, tokenize: str = "13a",
                 rows_out: list[dict] | None = None, normalized: str = "", flagged: Sequence[bool] = ()
                 ) -> list[str]:
    """Markdown lines: one row for the whole split (`all`) and one per subset (name, pair ids), BLEU and chrF
    of every system; with two or more systems, each later one's cell carries its paired-bootstrap p value
    against the first (sacrebleu's PairedTest, `samples` resamples), or "identical" where its hypotheses on the
    subset are the baseline's. An empty subset is a row of 0 pairs. `tokenize`: sacrebleu's BLEU tokenizer;
    `rows_out` gets one dict per subset row (`system_cells`); `flagged` (per system): its p values read
    `(p 0.006, flagged)` (compare's degeneracy and budget flags); `normalized`: the references' normalization note
    (`normalization_note`) added to the signature lines."""

    from synprep.challenge import subset_rows

    header = ["subset", "pairs"] + [f"{name} {m}" for name, _ in systems for m in ("BLEU", "chrF")]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    signatures: dict[str, object] = {}
    for name, ids in [("all", None), *subsets]:
        rows = list(range(len(references))) if ids is None else subset_rows(split_ids, ids, name)
        if not rows:
            lines.append(f"| {name} | 0 | " + " | ".join("-" for _ in range(2 * len(systems))) + " |")
            continue
        refs = [references[r] for r in rows]
        picked = [(sys_name, [hyps[r] for r in rows]) for sys_name, hyps in systems]
        signatures, results = system_cells(picked, refs, samples, tokenize)
        cells = [_fmt(result[m]) + ("" if i == 0 else " (identical)" if result["identical"] else
                                    f" (p {result['p_' + m]:.3f}{', flagged' if any(flagged[i:i + 1]) else ''})")
                 for i, result in enumerate(results) for m in ("bleu", "chrf")]
        if rows_out is not None:
            rows_out.append({"subset": name, "pairs": len(rows), "systems": results})
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(cells) + " |")
    lines.append("")
    if len(systems) > 1:
        lines.append(f"p: paired bootstrap against {systems[0][0]} on the same pairs, {samples} resamples "
                     "(identical: the same hypotheses as the baseline on that subset, no p value).")
    lines += [f"{metric}: `{signature}`{normalized}" for metric, signature in signatures.items()]
    return lines


def system_cells(systems: Sequence[tuple[str, list[str]]], references: Sequence[str], samples: int,
                 tokenize: str) -> tuple[dict[str, object], list[dict]]:
    """(signatures, per system {system, bleu, chrf, p_bleu, p_chrf, identical}) of `systems` on `references`;
    with two or more, a paired bootstrap (sacrebleu's PairedTest, `samples` resamples) of each later one against
    the first. A system whose hypotheses equal the baseline's is `identical` with no p value: sacrebleu's p is
    (1 + the resamples whose centred absolute difference exceeds the observed one) / (samples + 1); with equal
    hypotheses every difference is 0, none exceeds it, and it reports its smallest p, 1 / (samples + 1), which
    would read as a significant difference."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    metrics = {"BLEU": BLEU(tokenize=tokenize), "chrF": CHRF()}
    if len(systems) == 1:
        scores = {"System": [systems[0][0]], **{m: [metric.corpus_score(systems[0][1], [list(references)])]
                                                 for m, metric in metrics.items()}}
        signatures = {m: metric.get_signature() for m, metric in metrics.items()}
    else:
        signatures, scores = PairedTest(systems, metrics, [list(references)], test_type="bs", n_samples=samples)()
    bleu_key, chrf_key = [key for key in scores if key != "System"]  # sacrebleu names them BLEU, chrF2
    results = []
    for i, (name, hyps) in enumerate(systems):
        identical = i > 0 and hyps == systems[0][1]
        bleu, chrf = scores[bleu_key][i], scores[chrf_key][i]
        results.append({"system": name, "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
                        "p_bleu": None if i == 0 or identical else bleu.p_value,
                        "p_chrf": None if i == 0 or identical else chrf.p_value, "identical": identical})
    return signatures, results


def normalization_note(data_path: str, normalize_refs: Sequence[str] = ()) -> str:
    """What was done to a split's references before scoring, for the printed signature lines: the target
    normalizers its convert applied (recorded in the manifest: `tgt_text` is stored normalized) and the
    `--normalize-refs` ones applied at scoring time; "" when neither."""
    from synprep.shards import load_manifest

    converted = ((load_manifest(data_path).configuration.get("normalize") or {}).get("tgt") or [])
    parts = ([f"{', '.join(converted)} (by convert)"] if converted else []) + (
        [f"{', '.join(normalize_refs)} (--normalize-refs)"] if normalize_refs else [])
    return f"  references normalized: {'; '.join(parts)}" if parts else ""


DECODING = ("beam", "length_penalty", "max_tokens", "threads", "device")  # a hypothesis key's decoding settings
# Every field of a row's hypotheses key (`decoding_key`) makes two rows incomparable when it differs, except what
# each run is (its checkpoint), where the split lies (its content, `data_fingerprint`, is compared) and the CPU
# threads (the order of sums: rounding, not another system); so does its run's training data (`describe`). The
# budget (trained_steps) is flagged as unequal budgets; the rest of a description (switches, seed, system, best.pt's
# step) is what a comparison compares.
NOT_COMPARED = ("checkpoint", "data", "threads")
DESCRIPTION_COMPARED = ("training_data",)


def _steps(described: Sequence[dict]) -> list[int]:
    return [facts["trained_steps"] for facts in described if isinstance(facts["trained_steps"], int)]


def _budget_flag(facts: dict, described: Sequence[dict]) -> list[str]:
    """A run that trained fewer steps than another of the comparison: flagged (its scores are not comparable)."""
    steps, own = _steps(described), facts["trained_steps"]
    if isinstance(own, int) and steps and own < max(steps):
        return [f"unequal budget: {own} steps trained, another run {max(steps)}"]
    return []


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 24 else _digest(value)


def row_flags(described: Sequence[dict], keys: Sequence[dict | None], fingerprint: str) -> list[list[str]]:
    """Per row, the recorded fields in which it differs from the first row that records them (`NOT_COMPARED`
    aside), or that it lacks where others record them; and hypotheses of another split than `fingerprint`."""
    recorded = [{**{name: facts[name] for name in DESCRIPTION_COMPARED if name in facts},
                 **{name: value for name, value in (key or {}).items() if name not in NOT_COMPARED}}
                for facts, key in zip(described, keys)]
    names = list(dict.fromkeys(name for fields in recorded for name in fields))
    flags: list[list[str]] = [[] for _ in recorded]
    for fields, flagged in zip(recorded, flags):
        missing = [name for name in names if name not in fields]
        if missing:
            flagged.append(f"{', '.join(missing)} not recorded (other runs record them)")
        for name in names:
            if name not in fields:
                continue
            base = next(other[name] for other in recorded if name in other)
            if name == "data_fingerprint":
                if fields[name] != fingerprint:
                    flagged.append("its hypotheses were decoded from another split (data_fingerprint "
                                   f"{_shown(fields[name])}, this split's {_shown(fingerprint)})")
            elif fields[name] != base:
                flagged.append(f"{name} {_shown(fields[name])}, another run's {_shown(base)}")
    return flags


def comparison_flags(runs: Sequence[str], described: Sequence[dict], keys: Sequence[dict | None]) -> list[str]:
    """What makes the runs' scores hard to compare, in words: unequal steps, other decoding settings."""
    flags = []
    if len(set(_steps(described))) > 1:
        counted = ", ".join(f"{os.path.basename(os.path.normpath(run))} {facts['trained_steps']}"
                            for run, facts in zip(runs, described))
        flags.append(f"unequal budgets: the runs trained different numbers of steps ({counted}); under one time "
                     "budget a slower system trains fewer steps: compare runs of equal steps, or say so")
    decodings = {(key.get("beam"), key.get("length_penalty")) for key in keys if key}
    if len(decodings) > 1:
        flags.append("the runs were decoded with different beams or length penalties (their own final tests' "
                     "settings): give --beam and --length-penalty to decode them alike")
    return flags


def _p_cell(result: dict, metric: str, position: int, flagged: bool) -> str:
    if position == 0:
        return "baseline"
    if result["identical"]:
        return "identical"
    return f"{result['p_' + metric]:.3f}" + (" (flagged)" if flagged else "")


def system_table(groups: Sequence[Sequence[int]], systems: Sequence[tuple[str, list[str]]], scored: Sequence[dict],
                 references: Sequence[str], samples: int, tokenize: str, grouped: list[dict]) -> list[str]:
    """Markdown lines of the systems (runs of one system key, `groups` of positions): runs, seeds, steps, mean
    and spread of BLEU and chrF, and the p value of `systems.seed_bootstrap` against the first system; each
    system's values are added to `grouped`."""
    from sacrebleu.metrics import BLEU, CHRF

    from .systems import seed_bootstrap

    runs_hyps = [[systems[i][1] for i in group] for group in groups]
    tested = {name: seed_bootstrap(metric, runs_hyps, references, samples)
              for name, metric in (("bleu", BLEU(tokenize=tokenize)), ("chrf", CHRF()))}
    flagged_first = any(scored[i]["flags"] for i in groups[0])
    lines = ["| system | runs | seeds | steps | BLEU mean ± sd | p (BLEU) | chrF mean ± sd | p (chrF) | flags |",
             "|---" * 9 + "|"]
    for g, group in enumerate(groups):
        flags = [f"{scored[i]['system']}: {flag}" for i in group for flag in scored[i]["flags"]]
        flagged = bool(flags) or flagged_first
        row = {"system": scored[group[0]]["system_key"], "switches": scored[group[0]]["switches"],
               "runs": [scored[i]["run"] for i in group], "seeds": [scored[i]["seed"] for i in group],
               "steps": [scored[i]["trained_steps"] for i in group], "flags": flags, "p_flagged": flagged and g > 0}
        cells = []
        for name in ("bleu", "chrf"):
            result = tested[name][g]
            row.update({f"{name}_mean": round(result["mean"], 2), f"{name}_spread": None if result["spread"] is None
                        else round(result["spread"], 2), f"p_{name}": result["p"]})
            deviation = "-" if result["spread"] is None else f"{result['spread']:.2f}"
            p = "baseline" if g == 0 else "identical" if result["p"] is None else \
                f"{result['p']:.3f}" + (" (flagged)" if flagged else "")
            cells += [f"{result['mean']:.2f} ± {deviation}", p]
        grouped.append(row)
        names = ", ".join(scored[i]["system"] for i in group)
        lines.append(f"| {row['switches']} | {names} | {', '.join(map(str, row['seeds']))} | "
                     f"{', '.join(map(str, row['steps']))} | " + " | ".join(cells) + f" | {'; '.join(flags) or '-'} |")
    lines += ["", f"Systems: the runs of one configuration (model and training settings; seeds, budgets and machines "
              f"aside). p (systems): a bootstrap over the test sentences and each system's runs (seeds), {samples} "
              "resamples, against the first system: it counts seed variance as well as test-set resampling "
              "(docs/syntrain.md). sd: the spread of the runs' scores (sample standard deviation)."]
    return lines


def run_table(runs: Sequence[str], data_path: str, systems: Sequence[tuple[str, list[str]]], scored: list[dict],
              described: Sequence[dict], keys: Sequence[dict | None], fingerprint: str) -> list[str]:
    """Markdown lines of the runs' table: per run its switches, seed, steps, trained minutes, scores, p values
    (`(flagged)` beside a flag) and flags (`systems.degeneracy`, unequal budgets, `row_flags`), and the switches'
    columns;
    each run's values and flags are added to its `scored` dict."""
    from .switches import registered
    from .systems import degeneracy

    differ = row_flags(described, keys, fingerprint)
    for (_, hyps), result, run, facts, key, fields in zip(systems, scored, runs, described, keys, differ):
        result.update(run=run, **{name: facts[name] for name in ("switches", "seed", "steps", "trained_steps",
                                                                 "minutes")},
                      system_key=facts["system"], decoding=None if key is None else {k: key.get(k) for k in DECODING},
                      flags=degeneracy(hyps, result["bleu"]) + _budget_flag(facts, described) + fields)
    extra = [switch for switch in registered() if switch.Decoded.compare_header]  # the switches' columns
    lines = ["| run | switches | seed | steps | minutes | BLEU | p (BLEU) | chrF | p (chrF) | flags |"
             + "".join(f" {switch.Decoded.compare_header} |" for switch in extra), "|---" * (10 + len(extra)) + "|"]
    baseline_flagged = bool(scored[0]["flags"])
    for i, (result, run) in enumerate(zip(scored, runs)):
        flagged = baseline_flagged or bool(result["flags"])
        p_bleu, p_chrf = (_p_cell(result, "bleu", i, flagged), _p_cell(result, "chrf", i, flagged))
        result["p_flagged"] = flagged and i > 0 and not result["identical"]
        steps = f"{result['trained_steps']}" + ("" if result["steps"] == result["trained_steps"] else
                                                  f" (best.pt: {result['steps']})")
        lines.append(f"| {result['system']} | {result['switches']} | {result['seed']} | {steps} | "
                     f"{result['minutes']} | {result['bleu']:.2f} | {p_bleu} | {result['chrf']:.2f} | {p_chrf} | "
                     f"{'; '.join(result['flags']) or '-'} |"
                     + "".join(f" {cell} |" for cell in _extra_cells(extra, run, data_path)))
    return lines


def compare_table(runs: Sequence[str], data_path: str, beam: int | None = None, length_penalty: float | None = None,
                  samples: int = 1000, subsets_dir: str | None = None, written: list[str] | None = None,
                  tokenize: str = "auto", normalize_refs: Sequence[str] = (), results: dict | None = None,
                  max_tokens: int | None = None, threads: int | None = None, codes: dict[str, str] | None = None
                  ) -> str:
    """The Markdown table (runs[0] = the baseline; a multilingual pretrained folder's row decoded with the language
    `codes`); with `subsets_dir` (synprep challenge's output) also the
    table over the whole split and every subset (`subset_table`). The files written into run folders are added to
    `written`. BLEU's tokenizer: `tokenize`, or with 'auto' the one for the split's target language. The
    references are normalized by `normalize_refs` (synprep.normalize) first. `results` gets the tables' values
    (runs, scores, p values or `identical`, signatures, subsets)."""
    import torch

    from synprep.challenge import load_subsets
    from synprep.normalize import normalizer

    subsets = load_subsets(subsets_dir) if subsets_dir is not None else None  # checked before any decoding
    from .dataset import check_scored_split

    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_scored_split(data_path)
    split_ids, references = reference_texts(data_path)
    normalize = normalizer(normalize_refs)
    references = [normalize(ref) for ref in references]
    given = {"beam": beam, "length_penalty": length_penalty, "max_tokens": max_tokens, "threads": threads}
    systems = [(os.path.basename(os.path.normpath(run)), run_hypotheses(run, data_path, device, len(references),
                                                                         written, codes, **given))
               for run in runs]
    from synprep.shards import load_manifest

    from .decode import settings_text
    from .scoring import bleu_tokenizer
    from .systems import BLEU_FLOOR, group_runs

    tokenize = bleu_tokenizer(load_manifest(data_path).configuration.get("tgt_lang", ""), tokenize)
    signatures, scored = system_cells(systems, references, samples, tokenize)
    described = [describe(run, written) for run in runs]
    keys = [_stored_key(run) for run in runs]  # a run brought as hypotheses: the key they were decoded with
    notes = comparison_flags(runs, described, keys)
    from .runfolder.resume import data_fingerprint

    lines = run_table(runs, data_path, systems, scored, described, keys, data_fingerprint(data_path))
    lines.append("")
    settings = "; ".join(sorted({settings_text(key) for key in keys if key and all(k in key for k in DECODING)})) \
        or "as the hypothesis files were made"
    lines.append(f"Test: {data_path} ({len(references)} sentences), decoded with {settings}; "
                 f"paired bootstrap of each run against {systems[0][0]} (test-set resampling of one run each), "
                 f"{samples} resamples (p: the share of resamples whose "
                 "difference from the baseline's score, centred, exceeds the observed one; identical: the same "
                 "hypotheses as the baseline, no p value; flagged: a p value beside a degenerate output or an unequal "
                 f"budget, which it does not make comparable). Degenerate: BLEU below {BLEU_FLOOR:g}, or empty, "
                 "repeated or one same output on many lines (docs/syntrain.md).")
    lines += [f"Warning: {note}" for note in notes]
    note = normalization_note(data_path, normalize_refs)
    lines += [f"{metric}: `{signature}`{note}" for metric, signature in signatures.items()]
    groups = group_runs([facts["system"] for facts in described])
    grouped: list[dict] = []
    if any(len(group) > 1 for group in groups):
        lines += ["", *system_table(groups, systems, scored, references, samples, tokenize, grouped)]
    subset_rows: list[dict] = []
    if subsets is not None:
        names = [name for name, _ in systems]
        if len(set(names)) != len(names):  # PairedTest names the systems: keep them apart
            systems = [(f"{name} ({i + 1})", hyps) for i, (name, hyps) in enumerate(systems)]
        lines += ["", f"Challenge subsets: {subsets_dir} (synprep challenge)", ""]
        lines += subset_table(systems, references, split_ids, subsets, samples, tokenize, subset_rows, note,
                              [result["p_flagged"] for result in scored])
    if results is not None:
        results.update(data=os.path.abspath(data_path), pairs=len(references), beam=beam,
                       length_penalty=length_penalty, samples=samples, normalize_refs=list(normalize_refs),
                       signatures={m: str(signature) for m, signature in signatures.items()}, systems=scored,
                       subsets=subset_rows, groups=grouped, flags=notes)
    return "\n".join(lines)


@dataclass(frozen=True, repr=False)
class CompareResult(Printed):
    """`syntrain.compare`: the table's rows (one dict per run: system, bleu, chrf, p values, flags, ...), as a
    pandas DataFrame (`dataframe`, where pandas is installed), the Markdown tables `syntrain compare` prints
    (`text`), every value of its --json (`results`) and the files written into the run folders."""

    rows: list[dict[str, Any]]
    results: dict[str, Any]
    written: list[str]
    text: str

    @property
    def dataframe(self) -> Any:  # noqa: ANN401 (a pandas.DataFrame, or None without pandas)
        """The rows as a pandas DataFrame, where pandas is installed (else None)."""
        try:
            import pandas
        except ImportError:
            return None
        return pandas.DataFrame(self.rows)

    def _repr_html_(self) -> str:
        from html import escape

        columns = list(dict.fromkeys(key for row in self.rows for key in row))
        head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(row.get(c, '')))}</td>" for c in columns) + "</tr>"
                       for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def compare(runs: Sequence[str], data: str, *, subsets: str | None = None, beam: int | None = None,
            length_penalty: float | None = None, max_tokens: int | None = None, threads: int | None = None,
            samples: int = 1000, json_path: str | None = None, bleu_tokenize: str = "auto",
            normalize_refs: Sequence[str] = (), src_lang_code: str = "", tgt_lang_code: str = "") -> CompareResult:
    """`syntrain compare --data DATA RUNS...`: the results table of runs (folders with best.pt or test.hyp) on one
    test split (a pretrained model's folder, config.json: scored as it is, nothing written into it; a multilingual
    one with `src_lang_code` and `tgt_lang_code`, which do nothing without one), each run against the first with a
    paired bootstrap (`samples` resamples); decoding settings None: each run's own. `json_path`: also the tables
    as JSON. Returns a `CompareResult`."""
    from synprep.errors import InputError
    from synprep.outputs import check_outputs

    from .arguments import check_decoding, check_folders, syntrain_arguments, write_json

    checked = syntrain_arguments("syntrain compare", runs=runs, data=data, subsets=subsets, samples=samples,
                                 json_path=json_path)
    runs, data, subsets, json_path = list(checked["runs"]), checked["data"], checked["subsets"], checked["json_path"]
    settings = check_decoding("syntrain compare", beam=beam, length_penalty=length_penalty, max_tokens=max_tokens,
                              threads=threads)
    check_decoding("syntrain compare", bleu_tokenize=bleu_tokenize)
    codes = syntrain_arguments("syntrain compare", normalize_refs=normalize_refs, src_lang_code=src_lang_code,
                               tgt_lang_code=tgt_lang_code)
    codes = {name: codes[name] for name in ("src_lang_code", "tgt_lang_code")}
    missing = [run for run in runs if not is_pretrained_folder(run) and not any(
        os.path.isfile(os.path.join(run, name)) for name in ("best.pt", HYPOTHESES))]
    if missing:
        raise ValueError(f"no best.pt or {HYPOTHESES} in {', '.join(missing)} (train them first: syntrain run "
                         "RECIPE), and no config.json of a pretrained model")
    check_codes(runs, codes)
    written: list[str] = []
    results: dict[str, Any] = {}
    own = {f"the {name} compare writes into {run}": os.path.join(run, name) for run in runs
           if not is_pretrained_folder(run) for name in (HYPOTHESES, HYPOTHESES_KEY, DESCRIPTION)}
    try:
        check_folders([json_path])
        check_outputs({"--json": json_path}, {**{f"the run {run}": run for run in runs}, **own,
                                              "the split (--data)": data, "the challenge sets (--subsets)": subsets},
                      runs=True)
        table = compare_table(runs, data, settings["beam"], settings["length_penalty"], checked["samples"], subsets,
                              written, bleu_tokenize, normalize_refs, results, settings["max_tokens"],
                              settings["threads"], codes)
    except InputError as err:
        raise ValueError(str(err)) from None
    if json_path:
        write_json(json_path, {"runs": list(runs), **results, "table": table})
    return CompareResult(list(results.get("systems", [])), results, written, table)


make_callable(__name__, compare)  # syntrain.compare(...) is syntrain.compare.compare(...) (docs/python-api.md)


if __name__ == "__main__":  # `python -m syntrain.compare ...`: the older spelling of `syntrain compare ...`
    import runpy

    sys.argv = [sys.argv[0], "compare", *sys.argv[1:]]
    runpy.run_module("syntrain", run_name="__main__")
