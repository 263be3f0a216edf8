"""Profile syntrain training steps (torch.profiler): where a step's time goes, on the CPU or a GPU.

    python benchmarks/profile_train.py [--data out/multi30k-en-de/train] [--steps 8] [--threads 2] [--top 25]
                                       [--pascal-heads 0] [--device cpu|cuda] [--preset tiny|base]

On CUDA (bf16 autocast, as training) it also prints the GPU's busy share: kernel time / wall time of the
profiled steps (what is left is launch overhead, Python and waiting for data).

The step is the trainer's own: `ParallelData.collate` of the next batch, `accumulate_gradients`
(forward, label-smoothed loss, auxiliary losses, backward), the trainer's optimizer step and scheduler.
Batches come from the Multi30k recipe's shards (vanilla recipe model: tiny, dropout 0.3). Prints the top
operators by self CPU time and the share of collation, forward+backward and the optimizer in the step.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from syntrain.config.train import inverse_sqrt
from syntrain.dataset import ParallelData, read_split
from syntrain.model import build_model
from syntrain.precision import autocast_context
from syntrain.train import TrainConfig, accumulate_gradients
from syntrain.vocab import Vocab

try:
    from syntrain.train import make_optimizer
except ImportError:  # checkouts before make_optimizer (for before/after profiles): their plain Adam
    def make_optimizer(model, cfg):
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas, eps=1e-9)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(cfg.warmup))

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT / "out" / "multi30k-en-de" / "train"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--pascal-heads", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--preset", default="tiny")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    vocab = Vocab.build([read_split(args.data)[0]])
    data = ParallelData(args.data, vocab, 256)
    cfg = TrainConfig(data=args.data, max_tokens=4096, lr=1e-3, warmup=400)
    heads = [args.pascal_heads] if args.pascal_heads else []
    device = torch.device(args.device)
    model = build_model(args.preset, vocab_size=len(vocab), dropout=0.3, pascal_heads=heads).train().to(device)
    optimizer, scheduler = make_optimizer(model, cfg)
    rows = data.batches(cfg.max_tokens, seed=0)[: args.steps + 2]
    autocast = autocast_context("auto", device)

    def step(batch_rows) -> None:
        with record_function("collate"):
            batch = data.collate(batch_rows).to(device)
        with record_function("forward+backward"):
            accumulate_gradients(model, [batch], device, autocast, cfg.label_smoothing)
        with record_function("optimizer"):
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)

    for r in rows[:2]:  # warm-up
        step(r)
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for r in rows[2:]:
            step(r)
        if cuda:
            torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    averages = prof.key_averages()
    print(averages.table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total", row_limit=args.top))
    if cuda:
        kernels = sum(e.self_device_time_total for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA and not e.is_user_annotation) / 1e6
        print(f"GPU busy {kernels:.3f} s of {seconds:.3f} s wall = {100 * kernels / seconds:.0f}% "
              f"({torch.cuda.get_device_name()}, {args.preset}, bf16 autocast)")
    total = sum(e.cpu_time_total for e in averages if e.key in ("collate", "forward+backward", "optimizer"))
    for key in ("collate", "forward+backward", "optimizer"):
        event = next(e for e in averages if e.key == key)
        share = 100 * event.cpu_time_total / total
        print(f"{key:18s} {event.cpu_time_total / 1e3 / args.steps:8.1f} ms/step  {share:5.1f}%")
    print(f"{args.steps} steps in {seconds:.2f} s (profiler on), {args.threads} threads, torch {torch.__version__}, "
          f"{args.device}")


if __name__ == "__main__":
    main()
