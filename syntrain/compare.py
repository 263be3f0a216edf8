"""The results table: runs' best.pt decoded on one test split, BLEU and chrF with sacrebleu signatures, and a
paired bootstrap of each run against the baseline (sacrebleu's `--paired-bs`: 1,000 resamples).

    python -m syntrain.compare --data out/multi30k-en-de/test runs/multi30k-vanilla runs/multi30k-pascal ...

The first run is the baseline. Hypotheses are written to RUN/test.hyp (reused when newer than best.pt), so
the same numbers come from `sacrebleu REF -i RUN1/test.hyp RUN2/test.hyp -m bleu chrf --paired-bs`. Prints a
Markdown table (README "syntax switches: results"). Tree-decoding runs (target = transitions) are scored on
their text (transition tokens removed); their raw outputs go to RUN/test.trans (one line of transitions per
sentence) and the table's `trees` column gives the tree measure (README "tree decoding").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence


def run_hypotheses(run: str, data_path: str, beam: int, length_penalty: float, device: str) -> list[str]:
    """Detokenized translations of the split by RUN/best.pt (cached in RUN/test.hyp; a tree-decoding run's
    transitions in RUN/test.trans)."""
    from .data import ParallelData
    from .decode import translate
    from .train import load_checkpoint

    checkpoint, cached = os.path.join(run, "best.pt"), os.path.join(run, "test.hyp")
    if os.path.isfile(cached) and os.path.getmtime(cached) >= os.path.getmtime(checkpoint):
        with open(cached, encoding="utf-8") as f:
            return f.read().splitlines()
    model, vocab, _ = load_checkpoint(checkpoint, device)
    data = ParallelData(data_path, vocab, features=model.cfg.batch_features(training=False),
                        labels=model.cfg.source_labels)
    pieces: list[list[str]] = []
    hyps = translate(model, data, vocab, beam, length_penalty, device=device, pieces=pieces)
    if model.cfg.target == "transitions":
        with open(os.path.join(run, "test.trans"), "w", encoding="utf-8") as f:
            f.writelines(" ".join(p) + "\n" for p in pieces)
    with open(cached, "w", encoding="utf-8") as f:
        f.writelines(h + "\n" for h in hyps)
    return hyps


def tree_column(run: str, data_path: str) -> str:
    """The tree measure of a tree-decoding run (from RUN/test.trans), '' for other runs."""
    path = os.path.join(run, "test.trans")
    if not os.path.isfile(path):
        return ""
    import torch

    from .data import ParallelData, Vocab
    from .decode import tree_scores
    from .model import ModelConfig

    cfg = ModelConfig.from_dict(torch.load(os.path.join(run, "best.pt"), map_location="cpu",
                                           weights_only=False)["model_config"])
    with open(path, encoding="utf-8") as f:
        pieces = [line.split() for line in f.read().splitlines()]
    data = ParallelData(data_path, Vocab.load(os.path.join(run, "vocab.json")))
    trees = tree_scores(pieces, data, data.keep, cfg.transition_root)
    exact = "" if trees["exact_uas"] is None else f", UAS {trees['exact_uas']:.1f} / LAS {trees['exact_las']:.1f}"
    return f"valid {trees['valid_trees']:.1f}%, = ref {trees['exact_outputs']:.1f}%{exact}"


def describe(run: str) -> tuple[str, int, int]:
    """(syntax switches, seed, training steps) of a run, from its checkpoint."""
    import torch

    ckpt = torch.load(os.path.join(run, "best.pt"), map_location="cpu", weights_only=False)
    from .model import ModelConfig

    return ModelConfig.from_dict(ckpt["model_config"]).switches(), ckpt["train_config"]["seed"], ckpt["step"]


def compare(runs: Sequence[str], data_path: str, beam: int = 4, length_penalty: float = 0.6,
            samples: int = 1000) -> str:
    """The Markdown table (runs[0] = the baseline)."""
    import torch
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    from .data import ParallelData, Vocab

    device = "cuda" if torch.cuda.is_available() else "cpu"
    systems = [(os.path.basename(os.path.normpath(run)), run_hypotheses(run, data_path, beam, length_penalty,
                                                                         device)) for run in runs]
    reference_data = ParallelData(data_path, Vocab.load(os.path.join(runs[0], "vocab.json")))
    references = reference_data.references(reference_data.keep)
    metrics = {"BLEU": BLEU(), "chrF": CHRF()}
    if len(systems) > 1:
        signatures, scores = PairedTest(systems, metrics, [references], test_type="bs", n_samples=samples)()
    else:
        scores = {"System": [systems[0][0]], **{m: [metric.corpus_score(systems[0][1], [references])]
                                                  for m, metric in metrics.items()}}
        signatures = {m: metric.get_signature() for m, metric in metrics.items()}
    bleu_key, chrf_key = [key for key in scores if key != "System"]  # sacrebleu names them BLEU, chrF2
    lines = ["| run | switches | seed | steps | BLEU | p (BLEU) | chrF | p (chrF) | trees |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, (name, run) in enumerate(zip(scores["System"], runs)):
        switches, seed, steps = describe(run)
        bleu, chrf = scores[bleu_key][i], scores[chrf_key][i]
        p_bleu = "baseline" if i == 0 else f"{bleu.p_value:.3f}"
        p_chrf = "baseline" if i == 0 else f"{chrf.p_value:.3f}"
        lines.append(f"| {name.replace('* ', '').replace('Baseline: ', '')} | {switches} | {seed} | {steps} | "
                     f"{bleu.score:.2f} | {p_bleu} | {chrf.score:.2f} | {p_chrf} | {tree_column(run, data_path)} |")
    lines.append("")
    lines.append(f"Test: {data_path} ({len(references)} sentences), beam {beam}, length penalty {length_penalty}; "
                 f"paired bootstrap against {systems[0][0]}, {samples} resamples.")
    for metric, signature in signatures.items():
        lines.append(f"{metric}: `{signature}`")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories (best.pt, vocab.json); the first = baseline")
    parser.add_argument("--data", required=True, help="test split directory")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--length-penalty", type=float, default=0.6)
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--json", help="also write the table's rows here")
    args = parser.parse_args(argv)
    missing = [run for run in args.runs if not os.path.isfile(os.path.join(run, "best.pt"))]
    if missing:
        sys.exit(f"no best.pt in {', '.join(missing)} (train them first: syntrain run RECIPE)")
    table = compare(args.runs, args.data, args.beam, args.length_penalty, args.samples)
    print(table)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"runs": args.runs, "table": table}, f, indent=1)


if __name__ == "__main__":
    main()
