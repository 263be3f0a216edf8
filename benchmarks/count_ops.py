"""Count what one training step costs the host: the aten operations it dispatches (on a GPU each is a kernel
launch the host pays for) and the Python function calls around them (the trainer's own overhead); and time it.
A check that a change of the trainer's code launches no extra kernels and adds no Python work per step.

    python benchmarks/count_ops.py [--steps 200] [--precision bf16|fp32]
    PYTHONPATH=/tmp/old python benchmarks/count_ops.py      # an older tree (git archive REV | tar -x -C /tmp/old)

A small model (d_model 64, 4 heads, 2 + 2 layers, vocabulary 100) on a random batch of 8 pairs, on the CPU with
one thread: vanilla and with Pascal heads. A step is the trainer's: `accumulate_gradients` (forward under the
autocast of `--precision`, label-smoothed loss, auxiliary losses, backward) and an Adam update. torch's profiler
counts the aten operations of one step; `sys.setprofile` counts the Python function calls and the calls into
C functions made from Python (both exact and machine-independent: equal counts mean equal work for the host
whatever the device); the CPU time per step (this thread's, median of 5 runs of `--steps` steps) is the
measured cost of both.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from syntrain.batch import Batch
from syntrain.model import build_model
from syntrain.train import accumulate_gradients

try:
    from syntrain.precision import autocast_context
except ImportError:  # trees before syntrain/precision.py
    from syntrain.train import autocast_context  # type: ignore[no-redef, attr-defined]


def python_calls(step: Callable[[], None]) -> tuple[int, int]:
    """(Python function calls, calls into C functions from Python) of one call of `step`."""
    counts = {"call": 0, "c_call": 0}

    def count(frame: object, event: str, arg: object) -> None:
        if event in counts:
            counts[event] += 1

    sys.setprofile(count)
    try:
        step()
    finally:
        sys.setprofile(None)
    return counts["call"] - 1, counts["c_call"]  # less the call of `step` itself


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    device = torch.device("cpu")
    for name, extra in (("vanilla", {}), ("pascal", {"pascal_heads": [2]})):
        model = build_model(vocab_size=100, d_model=64, n_heads=4, enc_layers=2, dec_layers=2, d_ff=128,
                            **extra).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        src, tgt = torch.randint(4, 100, (8, 12)), torch.randint(4, 100, (8, 13))
        batch = Batch(src, tgt[:, :-1], tgt[:, 1:], None, {"src_parent_mid": torch.randint(0, 12, (8, 12)).float()})
        autocast = autocast_context(args.precision, device)

        def step(model: torch.nn.Module = model, optimizer: torch.optim.Optimizer = optimizer, batch: Batch = batch,
                 autocast: object = autocast) -> None:
            optimizer.zero_grad(set_to_none=True)
            accumulate_gradients(model, [batch], device, autocast, 0.1)
            optimizer.step()

        for _ in range(3):
            step()
        with torch.autograd.profiler.profile() as prof:
            step()
        operations = sum(event.name.startswith("aten::") for event in prof.function_events)
        calls, c_calls = python_calls(step)
        runs = []
        for _ in range(5):
            start = time.thread_time()
            for _ in range(args.steps):
                step()
            runs.append((time.thread_time() - start) / args.steps * 1000)
        print(f"{name:8s} {operations:5d} aten operations, {calls:5d} Python calls, {c_calls:5d} C calls per "
              f"training step ({args.precision}), {statistics.median(runs):.2f} ms CPU/step (1 thread)")


if __name__ == "__main__":
    main()
