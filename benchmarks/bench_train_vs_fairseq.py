"""Benchmark: syntrain vs fairseq training speed on the same data, model and batch rule (CPU or GPU).

    python benchmarks/bench_train_vs_fairseq.py [--dataset out/multi30k-en-de] [--pairs 3] [--steps 40]
                                                [--fairseq-python .venv-fairseq/bin/python] [--threads 2]

fairseq lives in a side virtual environment (it pins old packages); one command makes it:

    python3 -m venv .venv-fairseq && .venv-fairseq/bin/pip install torch==2.13.0 fairseq-fixed==0.12.3.1

(fairseq-fixed is the fairseq 0.12 fork for Python 3.11+; it builds from source in ~5 minutes.) Without it
the benchmark says so and exits 0.

Both tools train the Multi30k vanilla recipe's model (tiny: d_model 256, 4 heads, 3+3 layers, d_ff 1024,
shared embeddings, pre-norm, dropout 0.3, attention and activation dropout as `--dropouts` says (the recipe's:
0.3, the default; or fairseq's defaults: 0), max_tokens 4096, label
smoothing 0.1, Adam (0.9, 0.98), eps 1e-9, lr 1e-3, inverse-sqrt warm-up 400) on the same BPE'd sentences:
the training split's `src_subwords`/`tgt_subwords`, binarized for fairseq with a joined dictionary once
(cached in --work). Runs alternate (fairseq, syntrain, fairseq, ...). Speed = target tokens per second
(padding excluded, EOS counted, as both tools count them: fairseq's `wpb`, syntrain's `tokens`) pooled over
steps 11..N, timed by when each step's log line arrives (both log every step, unbuffered).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_TIMED = 10  # steps 1..10 are warm-up; steps 11..N are timed


def export_text(dataset: Path, work: Path) -> None:
    """The split's BPE'd sentences as fairseq's parallel text files work/{train,valid}.{en,de}."""
    from synprep.shards import open_split

    for split in ("train", "valid"):
        table = open_split(str(dataset / split)).table(["src_subwords", "tgt_subwords"])
        for column, lang in (("src_subwords", "en"), ("tgt_subwords", "de")):
            with open(work / f"{split}.{lang}", "w", encoding="utf-8") as f:
                f.writelines(" ".join(pieces) + "\n" for pieces in table.column(column).to_pylist())


def binarize(fairseq_python: str, dataset: Path, work: Path) -> Path:
    destination = work / "bin"
    if (destination / "train.en-de.en.bin").exists():
        return destination
    export_text(dataset, work)
    subprocess.run([fairseq_python, "-m", "fairseq_cli.preprocess", "--source-lang", "en", "--target-lang", "de",
                    "--trainpref", str(work / "train"), "--validpref", str(work / "valid"), "--destdir",
                    str(destination), "--joined-dictionary", "--workers", "2"], check=True, capture_output=True)
    return destination


def timed_lines(command: list[str], pattern: str, env: dict[str, str]) -> tuple[dict[int, float], list[str]]:
    """Run `command`; arrival time of each line matching `pattern` (its group 1 = the step), all lines."""
    arrivals, lines = {}, []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            now = time.perf_counter()
            lines.append(line)
            match = re.search(pattern, line)
            if match:
                arrivals[int(match.group(1))] = now
    if proc.returncode:
        sys.exit(f"{command[0]} ... failed (exit {proc.returncode}):\n" + "".join(lines[-20:]))
    return arrivals, lines


def pooled(arrivals: dict[int, float], tokens: dict[int, int], steps: int) -> tuple[float, float, float]:
    """(target tokens/s, seconds/step, target tokens/step) over steps FIRST_TIMED + 1 .. steps."""
    seconds, total = arrivals[steps] - arrivals[FIRST_TIMED], sum(tokens[s] for s in range(FIRST_TIMED + 1, steps + 1))
    return total / seconds, seconds / (steps - FIRST_TIMED), total / (steps - FIRST_TIMED)


def run_fairseq(args, data_bin: Path, model, env) -> float:
    command = [args.fairseq_python, "-m", "fairseq_cli.train", str(data_bin), "--arch", "transformer",
               "--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "256",
               "--decoder-embed-dim", "256", "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
               "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings",
               "--encoder-normalize-before", "--decoder-normalize-before", "--dropout", "0.3",
               "--attention-dropout", str(model.dropouts.attn_dropout),
               "--activation-dropout", str(model.dropouts.ff_dropout),
               "--max-tokens", "4096",
               "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--optimizer", "adam",
               "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-9", "--lr", "1e-3", "--lr-scheduler",
               "inverse_sqrt", "--warmup-updates", "400", "--max-update", str(args.steps), "--log-interval", "1",
               "--log-format", "json", "--num-workers", "0", "--no-save", "--disable-validation", "--seed", "1",
               "--max-source-positions", "256", "--max-target-positions", "256",
               "--skip-invalid-size-inputs-valid-test", *([] if args.gpu else ["--cpu"])]
    arrivals, lines = timed_lines(command, r'"num_updates": "(\d+)"', env)
    tokens = {}
    for line in lines:
        match = re.search(r"(\{.*\"num_updates\".*\})", line)
        if match:
            record = json.loads(match.group(1))
            tokens[int(record["num_updates"])] = round(float(record["wpb"]))
    return pooled(arrivals, tokens, args.steps)


def run_syntrain(args, env, model) -> float:
    out = Path(args.work) / "syntrain-run"
    command = [sys.executable, "-m", "syntrain", "run", str(ROOT / "pipelines" / "train" / "multi30k-vanilla.toml"),
               "--data", str(Path(args.dataset) / "train"), "--valid", "", "--test", "", "--out", str(out),
               "--overwrite", "--max-steps", str(args.steps), "--log-interval", "1", "--eval-interval", "1000000",
               "--seed", "1", "--attention-dropout", str(model.dropouts.attn_dropout), "--activation-dropout",
               str(model.dropouts.ff_dropout)]
    arrivals, _ = timed_lines(command, r"^step (\d+) \| loss", env)
    tokens = {}
    with open(out / "metrics.jsonl", encoding="utf-8") as f:
        for record in map(json.loads, f):
            if "tokens" in record:
                tokens[record["step"]] = record["tokens"]
    return pooled(arrivals, tokens, args.steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(ROOT / "out" / "multi30k-en-de"))
    parser.add_argument("--fairseq-python", default=str(ROOT / ".venv-fairseq" / "bin" / "python"))
    parser.add_argument("--work", default=str(ROOT / "bench_out" / "fairseq"))
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2, help="OMP/MKL threads of both tools")
    parser.add_argument("--gpu", action="store_true", help="run both on the GPU (default: CPU)")
    parser.add_argument("--dropouts", choices=["recipe", "fairseq"], default="recipe",
                        help="attention/activation dropout of both tools: the vanilla recipe's (= dropout) or "
                             "fairseq's defaults (0)")
    args = parser.parse_args()
    if args.steps <= FIRST_TIMED:
        parser.error(f"--steps must be > {FIRST_TIMED} (steps 1..{FIRST_TIMED} are warm-up)")
    if not os.path.isfile(args.fairseq_python) and not shutil.which(args.fairseq_python):
        print(f"skipped: no fairseq Python at {args.fairseq_python} (make it: python3 -m venv .venv-fairseq && "
              ".venv-fairseq/bin/pip install torch==2.13.0 fairseq-fixed==0.12.3.1)")
        return
    if not (Path(args.dataset) / "train").is_dir():
        print(f"skipped: no dataset at {args.dataset} (synprep convert pipelines/multi30k-en-de.toml)")
        return
    from syntrain.cli import load_run_config
    from syntrain.config.core import PRESETS
    from syntrain.config.model import ModelConfig

    recipe = load_run_config(str(ROOT / "pipelines" / "train" / "multi30k-vanilla.toml"))
    model = ModelConfig.from_dict({**PRESETS[recipe.get("preset", "tiny")], **recipe["model"], "vocab_size": 1})
    if args.dropouts == "fairseq":  # fairseq's defaults: no attention or activation dropout
        model = model.replace(attention_dropout=0.0, activation_dropout=0.0)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    data_bin = binarize(args.fairseq_python, Path(args.dataset), work)
    threads = str(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1"}
    if not args.gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    ratios = []
    for pair in range(args.pairs):
        fairseq = run_fairseq(args, data_bin, model, env)
        ours = run_syntrain(args, env, model)
        ratios.append(ours[0] / fairseq[0])
        print(f"pair {pair + 1}: fairseq {fairseq[0]:,.0f}, syntrain {ours[0]:,.0f} target tokens/s (steps "
              f"{FIRST_TIMED + 1}-{args.steps}; s/step {fairseq[1]:.2f} vs {ours[1]:.2f}, target tokens/step "
              f"{fairseq[2]:,.0f} vs {ours[2]:,.0f}): syntrain / fairseq = {ratios[-1]:.3f}", flush=True)
    print(f"{'GPU' if args.gpu else 'CPU'}, {threads} threads, dropout {model.dropouts.dropout}, attention dropout "
          f"{model.dropouts.attn_dropout}, activation dropout {model.dropouts.ff_dropout}: syntrain / "
          f"fairseq = {', '.join(f'{r:.3f}' for r in ratios)} (mean {sum(ratios) / len(ratios):.3f}; target >= 1.0)")


if __name__ == "__main__":
    main()
