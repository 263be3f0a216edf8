"""Count the operations one training forward + backward dispatches, and time it: a check that a change of the
trainer's code launches no extra kernels (on a GPU every operation is a launch the host pays for).

    python benchmarks/count_ops.py [--steps 50]
    PYTHONPATH=/tmp/old python benchmarks/count_ops.py      # an older tree (git archive REV | tar -x -C /tmp/old)

A small model (d_model 64, 4 heads, 2 + 2 layers, vocabulary 100) on a random batch of 8 pairs, on the CPU with
one thread: vanilla and with Pascal heads; torch's profiler counts the aten operations of one step.
"""

from __future__ import annotations

import argparse
import time

import torch

from syntrain.model import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    for name, extra in (("vanilla", {}), ("pascal", {"pascal_heads": [2]})):
        model = build_model(vocab_size=100, d_model=64, n_heads=4, enc_layers=2, dec_layers=2, d_ff=128, **extra)
        src, tgt = torch.randint(4, 100, (8, 12)), torch.randint(4, 100, (8, 13))
        parent = torch.randint(0, 12, (8, 12)).float()

        def step(model: torch.nn.Module = model, src: torch.Tensor = src, tgt: torch.Tensor = tgt,
                 parent: torch.Tensor = parent) -> None:
            model(src, tgt, src_parent_mid=parent).logits.float().sum().backward()

        for _ in range(3):
            step()
        with torch.autograd.profiler.profile() as prof:
            step()
        operations = sum(event.name.startswith("aten::") for event in prof.function_events)
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        ms = (time.perf_counter() - start) / args.steps * 1000
        print(f"{name:8s} {operations:5d} aten operations per forward + backward, {ms:.2f} ms/step (CPU, 1 thread)")


if __name__ == "__main__":
    main()
