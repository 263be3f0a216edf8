"""How far the pinned losses of tests/test_switch_compat.py move with the CPU's kernels, against a real change.

Not a benchmark (no timing): the measurement behind the tolerances of tests/test_switch_compat.py. Every recipe
of pipelines/train/ is run as the test runs it (tests/data/make_switch_fixtures.py: 3 optimizer steps, seed 1)
once per kernel set another CPU would run (SETTINGS: PyTorch's, MKL's and oneDNN's code paths forced down to
AVX2 or SSE4) and thread count, each in a fresh process. Printed per recipe: the relative distance of the final
loss from the pinned value and the largest absolute distance of the logged losses (4 decimals); then the worst
of each, and the same two for the planted change (learning rate x1.05) on one recipe.
The test's bounds must sit between the two.

    python benchmarks/pinned_loss_spread.py [--recipe NAME ...] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the kernels another x86-64 CPU would run: PyTorch's own vectorised kernels (ATEN_CPU_CAPABILITY), MKL's BLAS
# code path (MKL_ENABLE_INSTRUCTIONS: MKL picks per CPU, e.g. another path on AMD than on Intel) and oneDNN's
# (ONEDNN_MAX_CPU_ISA); each sums the same products in its own order
SETTINGS = {
    "this CPU": {},
    "AVX2 CPU": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "SSE4 CPU": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                 "ONEDNN_MAX_CPU_ISA": "SSE41"},
}
PLANTED = "multi30k-trans-gcn.toml"

_RUN = """
import json, sys, tempfile, torch
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.data import make_switch_fixtures as fixtures
torch.set_num_threads({threads})
fixtures.TRAIN["threads"] = {threads}
out = {{}}
for name in {names!r}:
    with tempfile.TemporaryDirectory() as tmp:
        values = fixtures.recipe_model(Path({repo!r}) / "pipelines" / "train" / name)
        logged = fixtures.train_run(values["model"], values["preset"], tmp + "/run",
                                    lr=fixtures.TRAIN["lr"] * {lr_factor})
        out[name] = {{"logged": logged, "final": fixtures.checkpoint_losses(tmp + "/run/last.pt")[0]["loss"]}}
print("RESULT" + json.dumps(out))
"""


def run(names: list[str], setting: str, threads: int, lr_factor: float = 1.0) -> dict:
    """The recipes' logged and final losses in a fresh process with that kernel set and thread count."""
    env = {**os.environ, **SETTINGS[setting]}
    code = _RUN.format(repo=str(REPO), names=names, threads=threads, lr_factor=lr_factor)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def distances(result: dict, pinned: dict) -> tuple[float, float]:
    """(relative distance of the final loss, largest absolute distance of a logged loss) from the pinned run."""
    final = abs(result["final"] - pinned["final"]["loss"]) / pinned["final"]["loss"]
    logged = max(abs(got[key] - want[key]) for got, want in zip(result["logged"], pinned["logged"])
                 for key in want if key != "step")
    return final, logged


def main() -> None:
    """Measure and print (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", action="append", default=[], help="only this recipe (repeatable)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    pinned = json.loads((REPO / "tests" / "data" / "switches" / "recipe_losses.json").read_text())["losses"]
    names = args.recipe or sorted(pinned)
    worst: dict[str, tuple[float, float]] = {name: (0.0, 0.0) for name in names}
    for setting in SETTINGS:
        for threads in args.threads:
            results = run(names, setting, threads)
            for name in names:
                final, logged = distances(results[name], pinned[name])
                worst[name] = (max(worst[name][0], final), max(worst[name][1], logged))
                print(f"{setting:8} threads {threads}  {name:34} final rel {final:.2e}  logged abs {logged:.1e}",
                      flush=True)
    planted = distances(run([PLANTED], "this CPU", 1, 1.05)[PLANTED], pinned[PLANTED])
    print(f"\nworst over kernels x threads: final rel {max(w[0] for w in worst.values()):.2e}, "
          f"logged abs {max(w[1] for w in worst.values()):.1e}")
    print(f"planted lr x1.05 on {PLANTED}: final rel {planted[0]:.2e}, logged abs {planted[1]:.1e}")


if __name__ == "__main__":
    main()
