"""Benchmark: training step time of each syntax switch vs vanilla (same weights, same batches, one run).

    python benchmarks/bench_train.py [--data out/multi30k-en-de/train] [--preset tiny] [--pascal-heads 2]
                                     [--switches pascal,directed,...] [--steps 20] [--rounds 3]
                                     [--max-tokens 4096] [--threads 0] [--attention auto|math|flex]
                                     [--precision auto|fp32|bf16|fp16] [--attention-dropout X] [--peak-tflops P]
                                     [--shape-ladder auto|on|off] [--compile] [--ladder-compare]

Batches come from real shards when --data exists (default: the Multi30k recipe's train split; the features
a switch needs must be in them), else random ids with random trees. Rounds interleave the models (vanilla,
pascal, directed, ..., vanilla, ...) so load from other processes hits all alike; the per-model time is the
best round. Targets: Pascal / vanilla <= 1.10, each other switch <= 1.15. A step is
forward + auxiliary losses + backward + Adam, as in training (`syntrain.train.accumulate_gradients`). Dropout
and parent ignoring are on.

Tree decoding (linearized, parent, gcn, bitran, bitran-approx): those models train on the target
transitions (`tgt_transitions`, with the generated graph), the others on sub-words; every model gets batches
of the same `max_tokens` from the same pairs, so a step holds fewer pairs when the targets are transitions
(about 1.7x longer than the sub-words): the pairs/s column shows that cost. Target: <= 1.3 x vanilla's step
time for linearized, PARENT and GCN; BiTran's exact mode re-encodes every prefix (O(T) decoder passes per
step: reported, no target); `bitran-approx` samples 4 prefixes per sentence.
Runs on CUDA when available (bf16 autocast and
the FlexAttention kernel for the Pascal heads under the `auto` defaults; FlexAttention needs
--attention-dropout 0, the fairseq default), else on the CPU.

Shapes and the GPU (docs/syntrain.md, "Shapes and compilation"): batches are padded to the shape ladder as
`--shape-ladder` says (auto: on CUDA, off on the CPU, as in training); `--compile` steps torch.compile'd models
(static shapes; round 1 then includes the compilation of the shapes the warm-up did not see: the best round
counts). The last lines are the speed section: distinct batch shapes, host time per step (CPU time of the
thread that runs the steps; on CUDA also the GPU's kernel time per step, from one profiled pass of vanilla's
batches), and on CUDA the model FLOPs utilisation of every model (MFU column; vanilla's also in the last line: matmul
FLOPs of the batches before ladder padding / time / peak; the peak from --peak-tflops, else a known bf16 peak for
the device's name). Target on an H100/H200: base vanilla >= 35% of 989 TFLOP/s.
`--ladder-compare`: vanilla on the same batches (the same rows) padded without and with the ladder, alternating
rounds, and the ratio of target tokens/s (what the ladder's padding costs or buys on this device).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from synprep.features import to_transitions, tree_distances
from synprep.trees import lift_projective
from syntrain.batch import Batch
from syntrain.dataset import ParallelData, read_split
from syntrain.model import build_model
from syntrain.precision import autocast_context, grad_scaler
from syntrain.shapes import LADDER_TEXT, compile_model, ladder_in_use
from syntrain.switches import declared, target_column
from syntrain.switches.label_embedding import label_vocabulary
from syntrain.switches.tree_decoding import arc_label_vocabulary, graph_rows
from syntrain.train import accumulate_gradients
from syntrain.vocab import PAD_ID, Vocab

ROOT = Path(__file__).resolve().parents[1]
# switch -> model options (the Multi30k recipes' settings)
SWITCHES = {
    "directed": dict(directed_heads=[0, 2, 0]),
    "directed-double": dict(directed_heads=[0, 2, 0], double_context=True),
    "dbsa": dict(dbsa_encoder=True, dbsa_decoder=True),
    "syncattn": dict(dbsa_encoder=True, dbsa_decoder=True, sync_lambda=0.5),
    "lisa": dict(lisa_layer=1),
    "sh": dict(label_embedding=10),
}
# tree decoding: model options; these train on the target transitions
TREE_SWITCHES = {
    "linearized": dict(decoder_target="transitions"),
    "parent": dict(decoder_target="transitions", parent_layers=[1]),
    "gcn": dict(decoder_target="transitions", gcn_layer_count=2),
    "bitran": dict(decoder_target="transitions", bidirectional=True),
    "bitran-approx": dict(decoder_target="transitions", bidirectional=True, bidirectional_prefixes=4),
}
ALL_COLUMNS = {declared(name): "bench" for name in ("src_parent_mid", "distances", "src_labels", "src_parent_first",
                                                   "tgt_parent_first")}
# dense bf16 peak TFLOP/s by device name (model FLOPs utilisation when --peak-tflops is not given)
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}


def collated(data: ParallelData, rows: list[np.ndarray], ladder: bool) -> list[Batch]:
    """The batches of `rows`, padded to the shape ladder or not."""
    data.ladder = ladder
    return [data.collate(r) for r in rows]


def batches_from(args, tree: bool = False):
    """(vocabulary size, source labels, arc labels, {"text": batches, "transitions": batches}, source)."""
    if os.path.isdir(args.data):
        table = read_split(args.data)[0]
        vocab = Vocab.build([table], decoder_target=target_column("transitions") if tree else None)
        labels = label_vocabulary(table)
        arcs = arc_label_vocabulary(vocab)
        data = ParallelData(args.data, vocab, 256, batch_columns=ALL_COLUMNS,
                            data_options={"source_labels": labels})
        data.ladder = args.ladder
        rows = data.batches(args.max_tokens, seed=0)[: args.steps]
        out = {"text": collated(data, rows, args.ladder)}
        if args.ladder_compare:  # vanilla's batches (the same rows) padded the other way
            out["other ladder"] = collated(data, rows, not args.ladder)
        if tree:
            gcn = build_model("tiny", vocab_size=4 + len(arcs), arc_labels=arcs, **TREE_SWITCHES["gcn"])
            trans = ParallelData(args.data, vocab, 256, batch_columns={**ALL_COLUMNS, declared("graph"): "bench"},
                                 skip_null=True, decoder_target=gcn.switches.decoder_target,
                                 data_options={**gcn.switches.data_options(), "source_labels": labels})  # read on load
            trans.ladder = args.ladder
            out["transitions"] = collated(trans, trans.batches(args.max_tokens, seed=0)[: args.steps], args.ladder)
        return len(vocab), labels, arcs, out, f"shards {args.data}"
    return random_batches(args, tree)


def random_batches(args, tree: bool):
    """Random ids with random trees (sub-word targets; with `tree` also their transitions: random projective
    trees, 1-2 pieces per word)."""
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    arcs = ["nsubj", "obj", "det", "amod", "obl", "case", "punct", "advmod", "conj", "cc"]
    out = []
    for _ in range(args.steps):
        n, s = args.max_tokens // 24, 24
        src, tgt = torch.randint(4, 8000, (n, s), generator=g), torch.randint(4, 8000, (n, s + 1), generator=g)
        parent = torch.randint(0, s - 1, (n, s), generator=g).float()
        heads = [[0] + [int(torch.randint(1, k + 1, (1,), generator=g)) for k in range(1, s)] for _ in range(n)]
        distances = torch.from_numpy(np.stack([tree_distances(h) for h in heads]))
        src_head = torch.tensor([[max(h - 1, 0) for h in row] for row in heads])
        tgt_head = torch.minimum(torch.randint(0, s, (n, s), generator=g), torch.arange(s))
        labels = torch.randint(1, 40, (n, s), generator=g)
        inputs = {"src_parent_mid": parent, "distances": distances, "src_labels": labels,
                  **{f"src_{rule}": src_head for rule in ("parent_first", "dbsa_head")},
                  **{f"tgt_{rule}": tgt_head for rule in ("parent_first", "dbsa_head")}}
        out.append(Batch(src, tgt[:, :-1], tgt[:, 1:], None, inputs, supervision=("tgt_parent_first", "tgt_dbsa_head")))
    batches = {"text": out}
    if tree:  # the same token budget: fewer, longer target rows
        label_ids = {label: i + 2 for i, label in enumerate(arcs)}
        batches["transitions"] = []
        for batch in out:
            sequences = []
            for row in batch.tgt_out.tolist()[: max(1, args.max_tokens // 40)]:
                words = 16
                heads = lift_projective([0] + [int(rng.integers(1, k + 1)) for k in range(1, words)])
                pieces = [[f"{row[k]}@@", f"{row[k + 1]}"] if rng.random() < 0.3 else [f"{row[k]}"]
                          for k in range(words)]
                labels = [arcs[int(rng.integers(len(arcs)))] for _ in range(words)]
                sequences.append(to_transitions(heads, labels, pieces))
            t = max(map(len, sequences)) + 1
            ids = torch.full((len(sequences), t + 1), PAD_ID)
            for b, sequence in enumerate(sequences):
                ids[b, 0] = 1
                ids[b, 1 : len(sequence) + 1] = torch.tensor([int(x.split(":")[0].rstrip("@")) if x[0].isdigit()
                                                              else 4 + arcs.index(x.split(":", 1)[1])
                                                              for x in sequence])
                ids[b, len(sequence) + 1] = 2
            graph = torch.from_numpy(graph_rows(sequences, label_ids))
            batches["transitions"].append(Batch(batch.src[: len(sequences)], ids[:, :-1], ids[:, 1:], None,
                                                {"src_parent_mid": batch.inputs["src_parent_mid"][: len(sequences)],
                                                 "graph": graph}, supervision=("graph",)))
    return 8000, [str(i) for i in range(38)], arcs, batches, "random batches (no shards found)"


def run_steps(model, optimizer, batches, device, autocast, host: list | None = None) -> tuple[float, int, int]:
    """(seconds, target tokens, pairs) of one update per batch; `host` gets the CPU seconds of this thread."""
    tokens = sum(int((b.tgt_out != PAD_ID).sum()) for b in batches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start, start_cpu = time.perf_counter(), time.thread_time()
    scaler = optimizer.scaler  # fp16: loss scaling, as in training (a no-op otherwise)
    for b in batches:
        optimizer.zero_grad(set_to_none=True)
        accumulate_gradients(model, [b], device, autocast, 0.1, scaler=scaler)
        scaler.step(optimizer)
        scaler.update()
    if host is not None:
        host.append(time.thread_time() - start_cpu)  # before the wait for the GPU: launching only
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, tokens, sum(len(b.src) for b in batches)


def kernel_seconds(model, optimizer, batches, device, autocast) -> float:
    """GPU kernel time of one pass over `batches` (torch.profiler; user annotations left out)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_steps(model, optimizer, batches, device, autocast)
    return sum(event.self_device_time_total for event in prof.events()
               if event.device_type == torch.autograd.DeviceType.CUDA and not event.is_user_annotation) / 1e6


def unpadded_shape(batch: Batch) -> tuple[int, int, int]:
    """(rows, longest source, longest target) of a batch: its shape without the ladder's padding."""
    return len(batch.src), int((batch.src != PAD_ID).sum(1).max()), int((batch.tgt_out != PAD_ID).sum(1).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(ROOT / "out" / "multi30k-en-de" / "train"))
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--pascal-heads", type=int, default=2)
    parser.add_argument("--switches", default="pascal," + ",".join(SWITCHES),
                        help="comma-separated, from: pascal, " + ", ".join([*SWITCHES, *TREE_SWITCHES]))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--attention", default="auto", choices=["auto", "math", "flex"])
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    parser.add_argument("--attention-dropout", type=float, default=None, help="default: the preset's dropout")
    parser.add_argument("--peak-tflops", type=float, default=0.0,
                        help="also print vanilla's model FLOPs utilisation against this peak (H100 SXM bf16: 989)")
    parser.add_argument("--no-cudnn-attention", action="store_true",
                        help="CUDA: keep scaled_dot_product_attention off its cuDNN backend (flash/efficient instead)")
    parser.add_argument("--shape-ladder", default="auto", choices=["auto", "on", "off"],
                        help="pad batch lengths to the shape ladder (auto: on CUDA or with --compile)")
    parser.add_argument("--compile", action="store_true", help="step torch.compile'd models (static shapes)")
    parser.add_argument("--ladder-compare", action="store_true",
                        help="also time vanilla on the same batches padded the other way (ladder on/off)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    args.ladder = ladder_in_use(args.shape_ladder, device, args.compile)
    if args.no_cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    chosen = [s.strip() for s in args.switches.split(",") if s.strip()]
    vocab_size, labels, arcs, all_batches, source = batches_from(args, any(s in TREE_SWITCHES for s in chosen))
    all_batches = {kind: [b.to(device) for b in batches] for kind, batches in all_batches.items()}
    torch.manual_seed(0)
    options = dict(vocab_size=vocab_size, attention_dropout=args.attention_dropout)
    vanilla = build_model(args.preset, **options).to(device)
    models = {"vanilla": vanilla}
    switches = {"pascal": dict(pascal_heads=[args.pascal_heads], parent_ignore=0.3), **SWITCHES, **TREE_SWITCHES}
    for name in chosen:
        if name not in switches:
            parser.error(f"unknown switch {name!r}; choose from {', '.join(switches)}")
        extra = dict(switches[name], source_labels=labels) if name == "sh" else switches[name]
        if name in TREE_SWITCHES:
            extra = dict(extra, arc_labels=arcs)
        model = build_model(args.preset, **options, **extra).to(device)
        model.load_state_dict(vanilla.state_dict(), strict=False)  # shared weights equal; its own stay
        model.set_attention_kernel(args.attention)
        models[name] = model
    autocast = autocast_context(args.precision, device)
    batches = {name: all_batches["transitions" if model.switches.decoder_target_name == "transitions" else "text"]
               for name, model in models.items()}
    other = "vanilla, ladder " + ("off" if args.ladder else "on")
    if args.ladder_compare:
        if "other ladder" not in all_batches:
            parser.error("--ladder-compare needs shards (--data): random batches have one shape")
        models[other] = build_model(args.preset, **options).to(device)
        models[other].load_state_dict(vanilla.state_dict())
        batches[other] = all_batches["other ladder"]
    optimizers = {k: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)  # as training
                  for k, m in models.items()}
    for optimizer in optimizers.values():
        optimizer.scaler = grad_scaler(args.precision, device)
    shapes = {tuple(b.src.shape) + (b.tgt_in.shape[1],) for name, kind in batches.items() if name != other
              for b in kind}
    steppers = {name: compile_model(model, device, args.ladder, len(shapes)) if args.compile else model
                for name, model in models.items()}
    for name, model in models.items():  # warm-up (allocator, kernels)
        model.train()
        run_steps(steppers[name], optimizers[name], batches[name][:2], device, autocast)
    best = {name: (float("inf"), 0, 0) for name in models}
    host: dict[str, list] = {name: [] for name in models}
    for round_ in range(args.rounds):
        for name in models:
            seconds, tokens, pairs = run_steps(steppers[name], optimizers[name], batches[name], device, autocast,
                                               host[name])
            if seconds < best[name][0]:
                best[name] = (seconds, tokens, pairs)
        print(f"round {round_ + 1}: " + ", ".join(f"{name} {1000 * seconds / len(batches[name]):.0f}"
                                                  for name, (seconds, _, _) in best.items()) + " ms/step (best so far)",
              flush=True)
    print(f"{source}; preset {args.preset}, {args.steps} steps x {args.rounds} rounds, max_tokens {args.max_tokens}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    kernel = "flex" if "pascal" in models and models["pascal"].encoder[0].attn.uses_flex(device) else "math"
    print(f"device {device} ({torch.cuda.get_device_name() if device.type == 'cuda' else 'CPU'}), precision "
          f"{args.precision}, Pascal kernel {kernel}, attention dropout {vanilla.cfg.dropouts.attn_dropout}")
    base = best["vanilla"][0] / len(batches["vanilla"])
    peak = peak_tflops(args, device)
    for name, (seconds, tokens, pairs) in best.items():
        ratio = seconds / len(batches[name]) / base
        target = {"pascal": 1.10, "linearized": 1.3, "parent": 1.3, "gcn": 1.3}.get(name, 1.15)
        verdict = "" if name == "vanilla" else f"  x{ratio:.3f} vs vanilla (target <= {target:.2f}: " \
            f"{'met' if ratio <= target else 'NOT met'})"
        if name.startswith("bitran"):
            verdict = f"  x{ratio:.3f} vs vanilla (no target: O(T) decoder passes per step)"
        if name == other:
            verdict = "  (other batches: see the shape ladder line)"
        mfu = ""
        if peak:  # the model FLOPs of this model's own batches (tree decoding: the transitions)
            flops = sum(training_flops(models[name].cfg.sizes, unpadded_shape(b)) for b in batches[name])
            mfu = f"  MFU {100 * flops / seconds / 1e12 / peak:5.1f}%"
        print(f"{name:16s} {1000 * seconds / len(batches[name]):8.1f} ms/step  {tokens / seconds:9.0f} target "
              f"tokens/s {pairs / seconds:7.1f} pairs/s{mfu}{verdict}")
    if args.ladder_compare:
        on, off = ("vanilla", other) if args.ladder else (other, "vanilla")
        speed = {name: best[name][1] / best[name][0] for name in (on, off)}
        print(f"shape ladder: vanilla {speed[on]:.0f} target tokens/s with it, {speed[off]:.0f} without: "
              f"x{speed[on] / speed[off]:.3f} (the same batches, alternating rounds, best of {args.rounds})")
    speed_section(args, device, vanilla, steppers["vanilla"], optimizers["vanilla"], batches["vanilla"], autocast,
                  best["vanilla"][0], host["vanilla"], shapes)


def speed_section(args, device, vanilla, stepper, optimizer, batches, autocast, seconds, host, shapes) -> None:
    """The GPU speed lines: distinct shapes, host time per step, model FLOPs utilisation (CUDA)."""
    ladder = LADDER_TEXT if args.ladder else "off"
    print(f"shapes: {len(shapes)} distinct batch shapes (rows x source x target) over all models' batches "
          f"(shape ladder: {ladder}{', compiled' if args.compile else ''})")
    steps = len(batches)
    wall = 1000 * seconds / steps
    cpu = 1000 * min(host) / steps
    if device.type == "cuda":
        kernels = 1000 * kernel_seconds(stepper, optimizer, batches, device, autocast) / steps
        print(f"host: vanilla {cpu:.1f} ms/step CPU time launching, GPU kernels {kernels:.1f} ms/step, wall "
              f"{wall:.1f} ms/step ({'host' if cpu > kernels else 'GPU'}-bound; kernels from one profiled pass)")
    else:
        print(f"host: vanilla {cpu:.1f} ms/step CPU time of the stepping thread, wall {wall:.1f} ms/step (on the "
              "CPU this thread also computes: launch overhead is not separable)")
    peak = peak_tflops(args, device)
    if not peak:
        print("MFU: measured on CUDA (model FLOPs / time / the GPU's peak; --peak-tflops P on an unknown GPU)")
        return
    flops = sum(training_flops(vanilla.cfg.sizes, shape) for shape in map(unpadded_shape, batches))
    achieved = flops / seconds / 1e12
    print(f"MFU: vanilla {achieved:.1f} TFLOP/s = {100 * achieved / peak:.1f}% of {peak:g} (matmul FLOPs of the "
          "batches before ladder padding, backward = 2 x forward)")


def peak_tflops(args, device: torch.device) -> float:
    """The dense bf16 peak that MFU is measured against: --peak-tflops, else the device's known peak (0: none)."""
    return args.peak_tflops or next((value for name, value in BF16_PEAK_TFLOPS.items()
                                     if device.type == "cuda" and name in torch.cuda.get_device_name()), 0.0)


def training_flops(cfg, shape: tuple[int, int, int]) -> float:  # cfg: the model's ModelSizes
    """Matmul FLOPs of one training step on a batch of `shape` (rows, source length, target length): 3 x
    forward (backward = 2 x forward)."""
    b, s, t = shape
    d, ff = cfg.d_model, cfg.d_ff
    linear = cfg.enc_layers * (4 * d * d + 2 * d * ff) * b * s + cfg.dec_layers * (8 * d * d + 2 * d * ff) * b * t
    output = d * cfg.vocab_size * b * t
    attention = 2 * d * (cfg.enc_layers * b * s * s + cfg.dec_layers * (b * t * t + b * t * s))  # QK^T and AV
    return 3 * 2 * (linear + output + attention)


if __name__ == "__main__":
    main()
