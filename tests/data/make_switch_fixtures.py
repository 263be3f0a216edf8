"""Regenerate the syntax-switch compatibility fixtures of tests/test_switch_compat.py.

Run from a checkout (any commit whose syntrain has `train`, `TrainConfig`, `accumulate_gradients`,
`load_checkpoint`, `translate`), e.g. on an older commit to pin its behaviour:

    python tests/data/make_switch_fixtures.py [--shards-only | --reference-only] [--commit REV]
    python tests/data/make_switch_fixtures.py --recipe multi30k-dbsa.toml [--recipe ...]   # only those entries

e.g. against an exported older tree (the fixtures here were made so, from 4554382):

    git archive 4554382 | tar -x -C /tmp/old && PYTHONPATH=/tmp/old \
        python tests/data/make_switch_fixtures.py --reference-only --commit 4554382

Writes under tests/data/switches/:
- shards/{train,valid}: a small synthetic corpus (synprep synth, seed 3, every source and target feature),
  converted once and committed, so the fixtures do not depend on later changes to synth or convert;
- recipe_losses.json: per recipe of pipelines/train/, the logged losses (translation and auxiliary) of the
  first steps of `train()` on those shards, seed 1, with the recipe's [model] options at tiny sizes;
- text.pt / tree.pt: two small checkpoints (model, config, vocabulary only) trained a few steps (text: Pascal,
  syntax-directed, DBSA, SyncAttn, LISA, S&H; tree: transitions with PARENT, GCN and BiTran), and
  checkpoints.json: the losses and greedy outputs each gives on the validation rows.

recipe_losses.json also pins VARIANTS: a recipe with some [model] options changed (under "variants").

`--recipe NAME` (repeatable; a recipe or a VARIANTS name) redoes only those entries of recipe_losses.json on
the current code (shards, checkpoints and the other entries untouched), recording the commit under
"remade_by": for a change that is meant to change those recipes' losses (e.g. DBSA's sub-word heads,
`dbsa_rule`), or a new variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent / "switches"
REPO = Path(__file__).resolve().parents[2]
SHARDS = HERE / "shards"
STEPS = 3
# [model] options shrunk so that every recipe trains in seconds on a CPU (layers and heads kept)
TINY = {"d_model": 32, "d_ff": 64}
TRAIN = {"max_steps": STEPS, "max_tokens": 300, "warmup": 2, "log_interval": 1, "eval_interval": 1000,
         "seed": 1, "threads": 1, "lr": 1e-3, "device": "cpu"}
CHECKPOINTS = {
    "text": {"enc_layers": 2, "dec_layers": 2, "dropout": 0.1, "pascal_heads": [2], "parent_ignore": 0.3,
             "directed_heads": [0, 2], "double_context": True, "dbsa_encoder": True, "dbsa_decoder": True,
             "sync_lambda": 0.5, "lisa_layer": 2, "label_embedding": 4},
    # tree: stored with the old spellings `target` (now decoder_target) and `gcn_layers` (now gcn_layer_count)
    "tree": {"enc_layers": 1, "dec_layers": 2, "dropout": 0.1, "target": "transitions", "parent_layers": [2],
             "gcn_layers": 1, "bidirectional": True},
}


def make_shards() -> None:
    """The synthetic corpus, converted into SHARDS (train and valid only: small files)."""
    from synprep.synth import SynthConfig, write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        write_corpus(f"{tmp}/corpus", 120, 3, SynthConfig(max_depth=1, non_projective_rate=0.1), bpe_symbols=60)
        subprocess.run([sys.executable, "-m", "synprep.cli", "convert", f"{tmp}/corpus/pipeline.toml", "--output",
                        f"{tmp}/shards"], check=True, capture_output=True)
        shutil.rmtree(SHARDS, ignore_errors=True)
        for split in ("train", "valid"):
            shutil.copytree(f"{tmp}/shards/{split}", SHARDS / split)


def recipe_model(path: Path) -> dict:
    """A recipe's [model] options (preset included) at TINY sizes."""
    try:
        from syntrain.config.recipe import load_run_config
    except ImportError:  # older checkouts: the CLI module held it
        from syntrain.cli import load_run_config
    values = load_run_config(str(path))
    return {"preset": values.get("preset", "tiny"), "model": {**values.get("model", {}), **TINY}}


def train_run(model: dict, preset: str, out: str, **extra: object) -> list[dict]:
    """`train()` on the fixture shards; the metrics.jsonl lines of the logged steps."""
    from syntrain.train import TrainConfig, train

    cfg = TrainConfig.from_dict({**TRAIN, **extra, "data": str(SHARDS / "train"), "out": out, "preset": preset,
                                 "model": model})
    train(cfg)
    lines = [json.loads(line) for line in open(f"{out}/metrics.jsonl", encoding="utf-8")]
    return [{k: v for k, v in r.items() if k == "step" or k.startswith("loss")} for r in lines if "loss" in r]


# variants of a recipe pinned beside it: name -> (recipe, [model] options changed); a choice whose default is
# the recipe's own (e.g. DBSA's bi-affine scores as the authors released them, `dbsa_biaffine`)
VARIANTS = {"multi30k-dbsa.toml dbsa_biaffine=released": ("multi30k-dbsa.toml", {"dbsa_biaffine": "released"})}


def recipe_run(path: Path, out: str, changed: dict | None = None) -> dict:
    """A recipe's first STEPS steps (its [model] options with `changed`): the logged losses, and the
    full-precision losses of the model it saved."""
    values = recipe_model(path)
    logged = train_run({**values["model"], **(changed or {})}, values["preset"], out)
    return {"logged": logged, "final": checkpoint_losses(f"{out}/last.pt")[0]}


def recipe_losses(names: list[str] | None = None) -> dict:
    """Recipe file name -> `recipe_run` (of every recipe of pipelines/train/, or of `names`)."""
    results = {}
    paths = sorted((REPO / "pipelines" / "train").glob("*.toml"))
    unknown = sorted(set(names or ()) - {path.name for path in paths})
    if unknown:
        raise SystemExit(f"no such recipe in pipelines/train/: {', '.join(unknown)}")
    for path in paths:
        if names and path.name not in names:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            results[path.name] = recipe_run(path, f"{tmp}/run")
    return results


def checkpoint_losses(path: str) -> tuple[dict, tuple]:
    """({loss, tokens, aux}: translation and auxiliary losses in eval mode over all validation rows as one
    update, (model, vocabulary, validation data)) of a checkpoint on the fixture's validation split."""
    from syntrain.dataset import ParallelData
    from syntrain.runfolder.checkpoints import load_checkpoint
    from syntrain.train import accumulate_gradients

    model, vocab, _ = load_checkpoint(path)
    data = ParallelData(str(SHARDS / "valid"), vocab, skip_null=True,
                        **model.switches.parallel_data_arguments(training=True))
    batches = [data.collate(rows) for rows in data.batches(400, shuffle=False)]
    aux: dict = {}
    loss, tokens = accumulate_gradients(model, batches, torch.device("cpu"), contextlib.nullcontext(), 0.1, aux)
    losses = {"loss": loss.item(), "tokens": tokens, "aux": {name: float(value) for name, value in aux.items()}}
    return losses, (model, vocab, data)


def checkpoint_results(path: str) -> dict:
    """`checkpoint_losses` and the greedy outputs of the first validation rows (and their pieces)."""
    from syntrain.decode import DecodeSettings, decode_split

    losses, (model, vocab, data) = checkpoint_losses(path)
    pieces: list[list[str]] = []
    outputs = decode_split(model, data, vocab, DecodeSettings(beam=1), rows=data.keep[:8], pieces=pieces)
    return {**losses, "outputs": outputs, "pieces": pieces}


def checkpoints() -> dict:
    """Train the CHECKPOINTS models a few steps, keep model/config/vocabulary, and their results."""
    results = {}
    for name, model in CHECKPOINTS.items():
        with tempfile.TemporaryDirectory() as tmp:
            train_run({**model, **TINY}, "tiny", f"{tmp}/run", max_steps=150, lr=3e-3, warmup=30)
            ckpt = torch.load(f"{tmp}/run/last.pt", map_location="cpu", weights_only=False)
        kept = {key: ckpt[key] for key in ("model", "model_config", "vocab")}
        torch.save(kept, HERE / f"{name}.pt")
        results[name] = checkpoint_results(str(HERE / f"{name}.pt"))
    return results


def main() -> None:
    """Write the fixtures (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards-only", action="store_true", help="only rebuild the shards")
    parser.add_argument("--reference-only", action="store_true", help="keep the shards, redo losses/checkpoints")
    parser.add_argument("--commit", default="", help="the commit of the syntrain code run (default: its git HEAD)")
    parser.add_argument("--recipe", action="append", default=[], help="redo only this recipe's entry (repeatable)")
    args = parser.parse_args()
    if args.recipe:
        remake_recipes(args.recipe, args.commit)
        return
    HERE.mkdir(parents=True, exist_ok=True)
    if not args.reference_only:
        make_shards()
    if args.shards_only:
        return
    import syntrain

    code = Path(syntrain.__file__).resolve().parent
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=code)
    meta = {"commit": args.commit or commit.stdout.strip(), "torch": torch.__version__}
    (HERE / "recipe_losses.json").write_text(json.dumps({"made_by": meta, "losses": recipe_losses(),
                                                         "variants": variant_losses()}, indent=1) + "\n")
    (HERE / "checkpoints.json").write_text(json.dumps({"made_by": meta, **checkpoints()}, indent=1) + "\n")


def code_commit(commit: str = "") -> dict:
    """{commit, torch} of the syntrain code run (`commit` given: that one)."""
    import syntrain

    code = Path(syntrain.__file__).resolve().parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=code)
    return {"commit": commit or head.stdout.strip(), "torch": torch.__version__}


def variant_losses(names: list[str] | None = None) -> dict:
    """VARIANTS name -> `recipe_run` of the recipe with its changed options (all, or those of `names`)."""
    results = {}
    for name, (recipe, changed) in VARIANTS.items():
        if names is None or name in names:
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = recipe_run(REPO / "pipelines" / "train" / recipe, f"{tmp}/run", changed)
    return results


def remake_recipes(names: list[str], commit: str = "") -> None:
    """Redo the recipe_losses.json entries of `names` only (recipes or VARIANTS; the rest of the file kept as
    it is)."""
    path = HERE / "recipe_losses.json"
    pinned = json.loads(path.read_text())
    recipes = [name for name in names if name not in VARIANTS]
    if recipes:
        pinned["losses"].update(recipe_losses(recipes))
    pinned.setdefault("variants", {}).update(variant_losses([name for name in names if name in VARIANTS]))
    remade = pinned.setdefault("remade_by", {})
    for name in names:
        remade[name] = code_commit(commit)
    path.write_text(json.dumps(pinned, indent=1) + "\n")


if __name__ == "__main__":
    main()
