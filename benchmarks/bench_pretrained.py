"""Benchmark: a fine-tuning step of a pretrained Marian model, syntrain against a plain `transformers` loop.

    python benchmarks/bench_pretrained.py [--model FOLDER] [--d-model 256] [--layers 3] [--vocab 8000]
                                          [--sentences 16] [--length 24] [--steps 10] [--warmup 2]
                                          [--precision fp32|bf16] [--device auto|cpu|cuda] [--rounds 3]

The same model (a Hugging Face folder: --model, e.g. a local opus-mt-en-de; else a random Marian model of the
given sizes built from its config and saved to a temporary folder, nothing downloaded), the same batch (random
ids, `--sentences` x `--length` pieces a side) and the same precision on both sides. A step is forward, the
label-smoothed cross-entropy (0.1; transformers: the same `F.cross_entropy` over its logits), backward and an
Adam step, in training mode with the model's dropouts. syntrain loads the folder (`syntrain.pretrained`) and
steps as its trainer does (`syntrain.train.accumulate_gradients`); transformers steps
`AutoModelForSeq2SeqLM` with `model(input_ids, attention_mask, decoder_input_ids)`. Each side runs in its own
process (peak memory: the process's maximum resident set on the CPU, `torch.cuda.max_memory_allocated` on CUDA).
The sides alternate for `--rounds` rounds (so that load from other processes hits both alike); reported per side:
target tokens/s (the best round's mean over its timed steps, after `--warmup` steps) and peak memory, and the
ratio syntrain / transformers (target: >= 1.0x).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch


def build_marian(folder: Path, d_model: int, layers: int, vocab: int) -> Path:
    """A random Marian model of these sizes, saved with a vocab.json (ids as OPUS-MT lays them out)."""
    import transformers

    config = transformers.MarianConfig(vocab_size=vocab, d_model=d_model, encoder_layers=layers,
                                       decoder_layers=layers, encoder_attention_heads=max(1, d_model // 64),
                                       decoder_attention_heads=max(1, d_model // 64), encoder_ffn_dim=4 * d_model,
                                       decoder_ffn_dim=4 * d_model, pad_token_id=vocab - 1, eos_token_id=0,
                                       decoder_start_token_id=vocab - 1, activation_function="swish",
                                       scale_embedding=True, max_position_embeddings=512)
    torch.manual_seed(0)
    transformers.MarianMTModel(config).save_pretrained(folder)
    pieces = {"</s>": 0, "<unk>": 1, **{f"\u2581p{i}": i for i in range(2, vocab - 1)}, "<pad>": vocab - 1}
    (folder / "vocab.json").write_text(json.dumps(pieces), encoding="utf-8")
    return folder


def batch(vocab: int, sentences: int, length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """syntrain ids: sources (pieces + EOS), decoder inputs (BOS + pieces), targets (pieces + EOS)."""
    from syntrain.vocab import BOS_ID, EOS_ID

    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, vocab, (sentences, length + 1), generator=g)
    src[:, -1] = EOS_ID
    pieces = torch.randint(4, vocab, (sentences, length), generator=g)
    tgt_in = torch.cat([torch.full((sentences, 1), BOS_ID), pieces], 1)
    tgt_out = torch.cat([pieces, torch.full((sentences, 1), EOS_ID)], 1)
    return src, tgt_in, tgt_out


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def syntrain_steps(folder: str, device: torch.device, args: argparse.Namespace) -> list[float]:
    from syntrain.batch import Batch
    from syntrain.pretrained import load_pretrained
    from syntrain.train import accumulate_gradients

    model, vocab, _ = load_pretrained(folder, device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
    src, tgt_in, tgt_out = batch(len(vocab), args.sentences, args.length)
    data = Batch(src, tgt_in, tgt_out, None)
    return timed(lambda: accumulate_gradients(model, [data], device, autocast(args.precision, device), 0.1),
                 optimizer, device, args)


def transformers_steps(folder: str, device: torch.device, args: argparse.Namespace) -> list[float]:
    import torch.nn.functional as F
    import transformers

    from syntrain.pretrained import PretrainedSource
    from syntrain.vocab import PAD_ID

    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float32).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
    order = torch.tensor(PretrainedSource.read(folder).order)
    src, tgt_in, tgt_out = (order[ids].to(device) for ids in batch(len(order), args.sentences, args.length))
    mask = torch.ones_like(src)

    def backward() -> None:
        with autocast(args.precision, device):
            logits = model(input_ids=src, attention_mask=mask, decoder_input_ids=tgt_in).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), label_smoothing=0.1,
                               ignore_index=int(order[PAD_ID]), reduction="sum") / tgt_out.numel()
        loss.backward()

    return timed(backward, optimizer, device, args)


def timed(backward: Callable[[], object], optimizer: torch.optim.Optimizer, device: torch.device,
          args: argparse.Namespace) -> list[float]:
    """Seconds of each of `args.steps` updates (forward + backward by `backward`, then the optimizer step) after
    `args.warmup` untimed ones."""
    times = []
    for _ in range(args.warmup + args.steps):
        start = time.perf_counter()
        backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times[args.warmup:]


def one_side(side: str, folder: str, args: argparse.Namespace) -> dict:
    """Run one side in this process: tokens/s and peak memory."""
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          args.device if args.device != "auto" else "cpu")
    times = (syntrain_steps if side == "syntrain" else transformers_steps)(folder, device, args)
    tokens = args.sentences * (args.length + 1)
    peak = (torch.cuda.max_memory_allocated() if device.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"side": side, "device": device.type, "tokens_per_s": tokens * len(times) / sum(times),
            "step_ms": 1000 * sum(times) / len(times), "peak_mib": peak / 2 ** 20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a Hugging Face Marian or M2M100 folder (default: a random Marian)")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--sentences", type=int, default=16)
    parser.add_argument("--length", type=int, default=24)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", choices=("syntrain", "transformers"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:  # a child process: one side, its result as JSON
        print(json.dumps(one_side(args.side, args.model, args)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.model or str(build_marian(Path(tmp) / "marian", args.d_model, args.layers, args.vocab))
        rest = [arg for arg in sys.argv[1:] if arg != "--model" and arg != args.model]
        results: dict[str, dict] = {}
        for _ in range(args.rounds):
            for side in ("syntrain", "transformers"):
                done = subprocess.run([sys.executable, __file__, *rest, "--model", folder, "--side", side],
                                      capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if side not in results or result["tokens_per_s"] > results[side]["tokens_per_s"]:
                    results[side] = result
    for result in results.values():
        print(f"{result['side']:>12}: {result['tokens_per_s']:8.0f} target tokens/s, {result['step_ms']:7.1f} ms a "
              f"step, peak memory {result['peak_mib']:7.0f} MiB ({result['device']}, {args.precision})")
    ratio = results["syntrain"]["tokens_per_s"] / results["transformers"]["tokens_per_s"]
    print(f"syntrain / transformers: {ratio:.2f}x tokens/s (target >= 1.0x), peak memory "
          f"{results['syntrain']['peak_mib'] / results['transformers']['peak_mib']:.2f}x")


if __name__ == "__main__":
    main()
