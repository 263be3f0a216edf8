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

import json
import logging
import os
import sys
from collections.abc import Sequence

from synprep.textio import atomic_write

log = logging.getLogger(__name__)

HYPOTHESES = "test.hyp"
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


def run_hypotheses(run: str, data_path: str, beam: int, length_penalty: float, device: str,
                   expected: int | None = None, written: list[str] | None = None) -> list[str]:
    """Detokenized translations of the split by RUN/best.pt, cached in RUN/test.hyp; a run with only test.hyp
    (no checkpoint) is read as it is. The files written are added to `written`."""
    checkpoint, cached = os.path.join(run, "best.pt"), os.path.join(run, HYPOTHESES)
    if not os.path.isfile(checkpoint):
        return read_hypotheses(cached, expected)
    key = decoding_key(checkpoint, data_path, beam, length_penalty)
    if os.path.isfile(cached) and _stored_key(run) == key:
        return read_hypotheses(cached, expected)
    from .checkpoints import load_checkpoint
    from .config import signature_differences
    from .dataset import ParallelData
    from .decode import translate
    from .switches import decoded

    model, vocab, ckpt = load_checkpoint(checkpoint, device)
    data = ParallelData(data_path, vocab, batch_columns=model.cfg.batch_columns(training=False),
                        data_options=model.cfg.data_options())
    differ = signature_differences(ckpt.get("signature", {}), data.signature)
    if differ:
        log.warning(f"warning: {data_path} was not made with the {' and '.join(differ)} of {run}'s training data "
              "(synprep signatures differ)")
    pieces: list[list[str]] = []
    hyps = translate(model, data, vocab, beam, length_penalty, device=device, pieces=pieces,
                     progress=f"compare {run}: translating")
    for outputs in decoded(model.switches):
        for name, lines in outputs.run_files(pieces).items():
            _write_lines(os.path.join(run, name), lines, written)
    _write_lines(cached, hyps, written)
    _write_lines(os.path.join(run, HYPOTHESES_KEY), [json.dumps(key, indent=1)], written)
    return hyps


def decoding_key(checkpoint: str, data_path: str, beam: int, length_penalty: float) -> dict:
    """What a run's cached hypotheses depend on: the checkpoint (size and modification time), the split (its
    path and shard hashes) and the decoding settings. A cache with another key is decoded again."""
    from .runfolder import data_fingerprint

    info = os.stat(checkpoint)
    return {"checkpoint": [info.st_size, info.st_mtime_ns], "data": os.path.abspath(data_path),
            "data_fingerprint": data_fingerprint(data_path), "beam": beam, "length_penalty": length_penalty}


def _stored_key(run: str) -> dict | None:
    try:
        with open(os.path.join(run, HYPOTHESES_KEY), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


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


def describe(run: str, written: list[str] | None = None) -> tuple[str, object, object]:
    """(syntax switches, seed, training steps) of a run: from best.pt when there is one (also written to
    RUN/describe.json, added to `written`), else from RUN/describe.json, else '?'."""
    checkpoint, path = os.path.join(run, "best.pt"), os.path.join(run, DESCRIPTION)
    if os.path.isfile(checkpoint):
        from .checkpoints import read_checkpoint
        from .config import stored_model_config, stored_train_config
        from .switches import decoded

        ckpt = read_checkpoint(checkpoint)
        cfg = stored_model_config(ckpt, checkpoint)
        described = {"switches": cfg.describe_switches(), "seed": stored_train_config(ckpt, checkpoint).seed,
                     "steps": ckpt.get("step", "?")}
        for outputs in decoded(cfg.active_switches()):
            described.update(outputs.describe_run())
        atomic_write(path, (json.dumps(described, indent=1) + "\n").encode("utf-8"))
        if written is not None:
            written.append(path)
    else:
        described = read_description(run)
    return described.get("switches", "?"), described.get("seed", "?"), described.get("steps", "?")


def _extra_cells(switches: list, run: str, data_path: str) -> list[str]:
    """The cells of the switches' columns for run folder `run` (their `Decoded.compare_column`, a classmethod:
    the run's model may lack the switch)."""
    described = read_description(run)
    return [switch.Decoded.compare_column(run, data_path, described) for switch in switches]


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def subset_table(systems: Sequence[tuple[str, list[str]]], references: Sequence[str], split_ids: Sequence[int],
                 subsets: Sequence[tuple[str, Sequence[int]]], samples: int = 1000, tokenize: str = "13a",
                 rows_out: list[dict] | None = None, normalized: str = "") -> list[str]:
    """Markdown lines: one row for the whole split (`all`) and one per subset (name, pair ids), BLEU and chrF
    of every system; with two or more systems, each later one's cell carries its paired-bootstrap p value
    against the first (sacrebleu's PairedTest, `samples` resamples), or "identical" where its hypotheses on the
    subset are the baseline's. An empty subset is a row of 0 pairs. `tokenize`: sacrebleu's BLEU tokenizer;
    `rows_out` gets one dict per subset row (`system_cells`); `normalized`: the references' normalization note
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
                                    f" (p {result['p_' + m]:.3f})")
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


def compare(runs: Sequence[str], data_path: str, beam: int = 4, length_penalty: float = 0.6,
            samples: int = 1000, subsets_dir: str | None = None, written: list[str] | None = None,
            tokenize: str = "auto", normalize_refs: Sequence[str] = (), results: dict | None = None) -> str:
    """The Markdown table (runs[0] = the baseline); with `subsets_dir` (synprep challenge's output) also the
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
    systems = [(os.path.basename(os.path.normpath(run)), run_hypotheses(run, data_path, beam, length_penalty,
                                                                         device, len(references), written))
               for run in runs]
    from synprep.shards import load_manifest

    from .decode import bleu_tokenizer
    from .switches import registered

    tokenize = bleu_tokenizer(load_manifest(data_path).configuration.get("tgt_lang", ""), tokenize)
    signatures, scored = system_cells(systems, references, samples, tokenize)
    extra = [switch for switch in registered() if switch.Decoded.compare_header]  # the switches' columns
    lines = ["| run | switches | seed | steps | BLEU | p (BLEU) | chrF | p (chrF) |"
             + "".join(f" {switch.Decoded.compare_header} |" for switch in extra), "|---" * (8 + len(extra)) + "|"]
    for i, (result, run) in enumerate(zip(scored, runs)):
        switches, seed, steps = describe(run, written)
        result.update(run=run, switches=switches, seed=seed, steps=steps)
        p_bleu, p_chrf = ("baseline", "baseline") if i == 0 else ("identical", "identical") if result["identical"] \
            else (f"{result['p_bleu']:.3f}", f"{result['p_chrf']:.3f}")
        lines.append(f"| {result['system']} | {switches} | {seed} | {steps} | {result['bleu']:.2f} | {p_bleu} | "
                     f"{result['chrf']:.2f} | {p_chrf} |"
                     + "".join(f" {cell} |" for cell in _extra_cells(extra, run, data_path)))
    lines.append("")
    lines.append(f"Test: {data_path} ({len(references)} sentences), beam {beam}, length penalty {length_penalty}; "
                 f"paired bootstrap against {systems[0][0]}, {samples} resamples (p: the share of resamples whose "
                 "difference from the baseline's score, centred, exceeds the observed one; identical: the same "
                 "hypotheses as the baseline, no p value).")
    note = normalization_note(data_path, normalize_refs)
    lines += [f"{metric}: `{signature}`{note}" for metric, signature in signatures.items()]
    subset_rows: list[dict] = []
    if subsets is not None:
        names = [name for name, _ in systems]
        if len(set(names)) != len(names):  # PairedTest names the systems: keep them apart
            systems = [(f"{name} ({i + 1})", hyps) for i, (name, hyps) in enumerate(systems)]
        lines += ["", f"Challenge subsets: {subsets_dir} (synprep challenge)", ""]
        lines += subset_table(systems, references, split_ids, subsets, samples, tokenize, subset_rows, note)
    if results is not None:
        results.update(data=os.path.abspath(data_path), pairs=len(references), beam=beam,
                       length_penalty=length_penalty, samples=samples, normalize_refs=list(normalize_refs),
                       signatures={m: str(signature) for m, signature in signatures.items()}, systems=scored,
                       subsets=subset_rows)
    return "\n".join(lines)


if __name__ == "__main__":  # `python -m syntrain.compare ...`: the older spelling of `syntrain compare ...`
    import runpy

    sys.argv = [sys.argv[0], "compare", *sys.argv[1:]]
    runpy.run_module("syntrain", run_name="__main__")
