"""Benchmark: training step time of Pascal vs vanilla attention (same weights, same batches, one run).

    python benchmarks/bench_train.py [--data out/multi30k-en-de/train] [--preset tiny] [--pascal-heads 2]
                                     [--steps 20] [--rounds 3] [--max-tokens 4096] [--threads 0]
                                     [--attention auto|math|flex] [--precision auto|fp32|bf16]
                                     [--attention-dropout X]

Batches come from real shards when --data exists (default: the Multi30k recipe's train split), else random
ids with random parents. Rounds interleave the two models (vanilla, Pascal, vanilla, ...) so load from
other processes hits both alike; the per-model time is the best round. Target (issue 7): Pascal / vanilla
<= 1.10. Dropout and parent ignoring are on, as in training. Runs on CUDA when available (bf16 autocast and
the FlexAttention kernel for the Pascal heads under the `auto` defaults; FlexAttention needs
--attention-dropout 0, the fairseq default), else on the CPU.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from syntrain.data import PAD_ID, ParallelData, Vocab, read_split
from syntrain.model import build_model
from syntrain.train import autocast_context

ROOT = Path(__file__).resolve().parents[1]


def batches_from(args):
    if os.path.isdir(args.data):
        vocab = Vocab.build([read_split(args.data)[0]])
        data = ParallelData(args.data, vocab, 256)
        rows = data.batches(args.max_tokens, seed=0)[: args.steps]
        return len(vocab), [data.collate(r) for r in rows], f"shards {args.data}"
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(args.steps):
        n, s = args.max_tokens // 24, 24
        src, tgt = torch.randint(4, 8000, (n, s), generator=g), torch.randint(4, 8000, (n, s + 1), generator=g)
        parent = torch.randint(0, s - 1, (n, s), generator=g).float()
        out.append(type("B", (), dict(src=src, parent=parent, tgt_in=tgt[:, :-1], tgt_out=tgt[:, 1:]))())
    return 8000, out, "random batches (no shards found)"


def run_steps(model, optimizer, batches, device, autocast) -> tuple[float, int]:
    tokens = sum(int((b.tgt_out != PAD_ID).sum()) for b in batches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for b in batches:
        with autocast:
            logits = model(b.src, b.tgt_in, b.parent)
        loss = F.cross_entropy(logits.float().flatten(0, 1), b.tgt_out.flatten(), ignore_index=PAD_ID,
                               label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT / "out" / "multi30k-en-de" / "train"))
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--pascal-heads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--attention", default="auto", choices=["auto", "math", "flex"])
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    parser.add_argument("--attention-dropout", type=float, default=None, help="default: the preset's dropout")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    vocab_size, batches, source = batches_from(args)
    batches = [type("B", (), dict(src=b.src.to(device), parent=b.parent.to(device), tgt_in=b.tgt_in.to(device),
                                  tgt_out=b.tgt_out.to(device)))() for b in batches]
    torch.manual_seed(0)
    options = dict(vocab_size=vocab_size, attention_dropout=args.attention_dropout)
    vanilla = build_model(args.preset, **options).to(device)
    pascal = build_model(args.preset, **options, pascal_heads=[args.pascal_heads], parent_ignore=0.3).to(device)
    pascal.load_state_dict(vanilla.state_dict())
    pascal.set_attention_kernel(args.attention)
    autocast = autocast_context(args.precision, device)
    models = {"vanilla": vanilla, "pascal": pascal}
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98)) for k, m in models.items()}
    for name, model in models.items():  # warm-up (allocator, kernels)
        model.train()
        run_steps(model, optimizers[name], batches[:2], device, autocast)
    best = {name: (float("inf"), 0) for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            seconds, tokens = run_steps(model, optimizers[name], batches, device, autocast)
            if seconds < best[name][0]:
                best[name] = (seconds, tokens)
    print(f"{source}; preset {args.preset}, {args.steps} steps x {args.rounds} rounds, max_tokens {args.max_tokens}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    kernel = "flex" if pascal.encoder[0].attn.uses_flex(device) else "math"
    print(f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}), precision "
          f"{args.precision}, Pascal kernel {kernel}, attention dropout {pascal.cfg.attn_dropout}")
    for name, (seconds, tokens) in best.items():
        print(f"{name:8s} {1000 * seconds / args.steps:8.1f} ms/step  {tokens / seconds:9.0f} target tokens/s")
    ratio = best["pascal"][0] / best["vanilla"][0]
    print(f"Pascal / vanilla step time: {ratio:.3f} (target <= 1.10: {'met' if ratio <= 1.10 else 'NOT met'})")


if __name__ == "__main__":
    main()
