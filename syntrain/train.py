"""Training loop: label-smoothed cross-entropy, Adam (0.9, 0.98), inverse-sqrt warm-up, checkpoints, DDP.

One process per device; under `torchrun` (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel
(NCCL on CUDA, gloo on CPU) and rank r takes batches r, r + world, ... of the same seeded order.
Progress goes to stderr and every logged value to OUT/metrics.jsonl. Checkpoints (OUT/last.pt, OUT/best.pt)
hold model, optimizer, scheduler, step, epoch position, RNG states, vocabulary, configs and the synprep
signature of the training shards, so `--resume` continues exactly where the run stopped.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from synprep.shards import open_split
from synprep.tables import config_from_dict, option
from synprep.textio import atomic_write

from .checkpoints import clear_run, default_run_dir, existing_run_files, prune_step_checkpoints, save_checkpoint
from .data import PAD_ID, Batch, ParallelData, Vocab, arc_label_vocabulary, prefetch
from .decode import score, translate, tree_scores
from .model import PRESETS, ModelConfig, Transformer
from .shapes import LADDER_CHOICES, LADDER_TEXT, choose_attention, compile_model, ladder_in_use, shape_summary


@dataclass
class TrainConfig:
    """Everything a run needs besides the model sizes (`model`: preset overrides, e.g. pascal_heads)."""

    data: str = ""  # training split directory (synprep convert output, e.g. out/x/train)
    valid: str = ""  # validation split ('' = none)
    test: str = ""  # test split, scored with best.pt at the end ('' = none)
    out: str = ""  # run folder ('' = runs/<data folder name>-<timestamp>); an earlier run there is refused
    overwrite: bool = False  # delete an earlier run's files in `out` first
    name: str = ""  # names the default run folder (the CLI passes the recipe's file name; else the data folder's)
    preset: str = "tiny"
    model: dict[str, Any] = field(default_factory=dict)
    max_tokens: int = 4096  # per batch and process: sentences x longest side (padding included)
    max_len: int = 256  # longer training pairs are skipped
    max_steps: int = 20000
    max_minutes: float = 0.0  # stop after this much training time (0: no limit)
    lr: float = 7e-4  # peak learning rate, reached at the end of warm-up
    warmup: int = 4000
    adam_betas: tuple[float, float] = (0.9, 0.98)
    label_smoothing: float = 0.1
    clip_norm: float = 0.0  # 0: no clipping
    accum_steps: int = 1  # batches per optimizer step (fairseq --update-freq): update = accum x max_tokens x procs
    eval_interval: int = 1000  # steps between validation (loss + BLEU) and checkpoints
    eval_sentences: int = 0  # validation sentences decoded for BLEU (0: all)
    eval_beam: int = 1  # 1: greedy during training; the final test uses `test_beam`
    test_beam: int = 4
    length_penalty: float = 0.6
    log_interval: int = 100
    seed: int = 1
    threads: int = 0  # torch CPU threads (0: torch's default)
    device: str = "auto"  # auto (CUDA when available, else CPU), cuda, cpu
    attention: str = "auto"  # kernel of the Pascal heads: auto (= math), math, flex (see attention.py)
    precision: str = "auto"  # auto (bf16 autocast on CUDA with bf16 support, else fp32), fp32, bf16
    resume: bool = False
    keep_last: int = 0  # also keep the N most recent OUT/checkpoint_<step>.pt (0: only last.pt and best.pt)
    patience: int = 0  # stop after this many validations without improvement of `best_metric` (0: never)
    best_metric: str = "bleu"  # validation metric for best.pt and patience: bleu (higher) or loss (lower)
    tensorboard: bool = False  # also log every metric to OUT/tensorboard (needs the `tensorboard` package)
    verify_shards: bool = True  # compare every shard's sha256 with its manifest before training
    shape_ladder: str = option("auto", choices=LADDER_CHOICES,
                               help="pad batch lengths to the shape ladder (syntrain.shapes): auto = on CUDA and "
                               "with compile, off for the eager CPU")
    compile: bool = option(False, help="torch.compile the model for training (static shapes, one graph per "
                           "batch shape; CUDA graphs on CUDA when the shape ladder is on)")

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        """Build from a dict, rejecting unknown keys and values of the wrong type with their names."""
        return config_from_dict(cls, values, "training")


def inverse_sqrt(warmup: int):  # noqa: ANN201 (returns the LambdaLR multiplier function)
    """Linear warm-up to 1 over `warmup` steps, then decay as sqrt(warmup / step)."""
    return lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def resolve_precision(precision: str, device: torch.device) -> str:
    """`precision` (auto, fp32, bf16) -> what runs on `device`: fp32 or bf16."""
    if precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"unknown precision {precision!r}; choose from auto, fp32, bf16")
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    return precision


def autocast_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast or nothing, for `precision` (auto, fp32, bf16) on `device`."""
    if resolve_precision(precision, device) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def format_eta(step: int, first_step: int, elapsed: float, max_steps: int, max_minutes: float = 0.0) -> str:
    """Time left as H:MM:SS: to `max_steps` at the pace of this session's steps, or to `max_minutes` if sooner."""
    left = (max_steps - step) * elapsed / (step - first_step) if step > first_step else math.inf
    if max_minutes:
        left = min(left, max(max_minutes * 60 - elapsed, 0.0))
    if math.isinf(left):
        return "?"
    seconds = round(left)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _kernel_in_use(model: Transformer, device: torch.device) -> str:
    layers = [layer.attn for layer in model.encoder if layer.attn.pascal_heads]
    if not layers:
        return "none (no Pascal heads)"
    return "flex" if layers[0].uses_flex(device) else "math"


def _prepare_run_dir(cfg: TrainConfig, rank: int, world: int) -> TrainConfig:
    """Name the run folder when none is given; refuse an earlier run there unless resuming or overwriting."""
    if cfg.resume and cfg.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    if not cfg.out:
        name = [default_run_dir(cfg.name or os.path.basename(os.path.dirname(os.path.abspath(cfg.data))) or "run")]
        if world > 1:  # one name for all ranks
            dist.broadcast_object_list(name, src=0)
        cfg = replace(cfg, out=name[0])
    earlier = existing_run_files(cfg.out)
    if earlier and not cfg.resume:
        if not cfg.overwrite:
            raise ValueError(f"{cfg.out}: holds an earlier run ({', '.join(earlier)}); --resume continues it, "
                             "--overwrite deletes it, or choose another --out")
        if rank == 0:
            clear_run(cfg.out)
        if world > 1:
            dist.barrier()
    os.makedirs(cfg.out, exist_ok=True)
    return cfg


def _log(message: str, rank: int) -> None:
    if rank == 0:
        print(message, file=sys.stderr, flush=True)


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def accumulate_gradients(model: torch.nn.Module, batches: list[Batch], device: torch.device,
                         autocast: contextlib.AbstractContextManager, label_smoothing: float,
                         aux_totals: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, int]:
    """Forward and backward over `batches` (one optimizer update): the gradients of the label-smoothed loss
    plus lambda x each auxiliary syntax loss, summed over the batches / their target tokens, as for one batch
    holding them all. Returns (the mean translation loss as a 0-d tensor, target tokens); `aux_totals` gets
    each auxiliary loss (unweighted, per target token) added. Under DDP, gradients sync on the last batch only."""
    tokens = sum(batch.tokens() for batch in batches)  # counted on the CPU: no device sync
    total = torch.zeros((), device=device)
    raw = getattr(model, "module", model)
    weights = raw.cfg.loss_weights()
    for i, batch in enumerate(batches):
        batch = batch.to(device)
        last = i == len(batches) - 1
        no_sync = model.no_sync() if hasattr(model, "no_sync") and not last else contextlib.nullcontext()
        with no_sync:
            with autocast:
                logits = model(batch.src, batch.tgt_in, batch.parent, batch.distances, batch.labels, batch.graph)
            target, weight = batch.tgt_out, 1.0
            if raw.sampled_positions is not None:  # BiTran approximation: the sampled prefixes, scaled to all
                target = target.masked_fill(~raw.sampled_positions, PAD_ID)
                weight = batch.tokens() / (target != PAD_ID).sum().clamp(min=1)  # on the device: no sync
            loss = weight * F.cross_entropy(logits.float().flatten(0, 1), target.flatten(), ignore_index=PAD_ID,
                                            label_smoothing=label_smoothing, reduction="sum") / tokens
            objective = loss
            for name, value in raw.syntax_losses(batch.src_head, batch.tgt_head, batch.tgt_in).items():
                objective = objective + weights[name] * value / tokens
                if aux_totals is not None:
                    aux_totals[name] = aux_totals.get(name, 0.0) + value.detach() / tokens
            objective.backward()
        total += loss.detach()
    return total, tokens


def collate_group(start: int, data: ParallelData, batches: list[np.ndarray], accum: int, device: torch.device
                  ) -> list[Batch]:
    """The batches of the optimizer update that begins at batch `start`; on CUDA already on their way to the
    GPU (pinned memory, non-blocking copies)."""
    group = [data.collate(rows) for rows in batches[start : start + accum]]
    if device.type == "cuda":
        group = [batch.pin_memory().to(device, non_blocking=True) for batch in group]
    return group


def sample_batches(data: ParallelData, batches: list[np.ndarray], device: torch.device, count: int = 2
                   ) -> list[Batch]:
    """`count` batches spread over the padded sizes of `batches` (the largest first), on `device`: what the
    attention backend is timed on."""
    sizes = [data.shape(rows) for rows in batches]
    order = sorted(range(len(batches)), key=lambda i: -sizes[i][0] * max(sizes[i][1:]))
    picked = {order[round(k * (len(order) - 1) / max(count - 1, 1))] for k in range(count)}
    return [data.collate(batches[i]).to(device) for i in sorted(picked)]


def prepare_steps(cfg: TrainConfig, model: torch.nn.Module, raw_model: Transformer, data: ParallelData,
                  batches: list[np.ndarray], device: torch.device, autocast: contextlib.AbstractContextManager,
                  rank: int) -> tuple[torch.nn.Module, contextlib.AbstractContextManager, bool]:
    """Once per session, with the first epoch's batches: log the distinct batch shapes; on CUDA choose the
    attention backend by timing the candidates (syntrain.shapes); compile the model when asked. Returns (the
    model to step, the forward context, whether steps run as CUDA graphs)."""
    shapes = [data.shape(rows) for rows in batches]
    distinct = len(set(shapes))
    _log(f"  shapes: {shape_summary(shapes)} (shape ladder: {LADDER_TEXT if data.ladder else 'off'})", rank)
    if device.type == "cuda":
        samples = sample_batches(data, batches[rank::max(int(os.environ.get("WORLD_SIZE", "1")), 1)], device)
        flex = cfg.attention == "auto" and any(raw_model.cfg.pascal_heads) and raw_model.cfg.attn_dropout == 0 \
            and raw_model.cfg.d_model // raw_model.cfg.n_heads >= 16

        def step(context: contextlib.AbstractContextManager) -> None:
            accumulate_gradients(raw_model, samples, device, context, cfg.label_smoothing)

        autocast, chosen, timings = choose_attention(raw_model, step, autocast, device, flex)
        measured = ", ".join(f"{name} {1000 * seconds:.1f} ms" for name, seconds in timings.items())
        _log(f"  attention: {chosen} (forward + backward of {len(samples)} sample batches: {measured})", rank)
    else:
        _log("  attention: torch's scaled_dot_product_attention dispatch on the CPU (not timed)", rank)
    graphs = False
    if cfg.compile:
        graphs = device.type == "cuda" and data.ladder
        model = compile_model(model, device, graphs, distinct)
        _log(f"  compile: torch.compile, static shapes (about {distinct} graphs this epoch)"
             f"{', CUDA graphs' if graphs else ''}", rank)
    return model, autocast, graphs


def read_checkpoint(path: str, device: str | torch.device = "cpu") -> dict:
    """A checkpoint file as its dict; an unreadable or foreign file is a ValueError naming it."""
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as error:  # pickle/zip errors of all kinds
        raise ValueError(f"{path}: not a readable checkpoint ({type(error).__name__}: {error})") from None
    missing = [key for key in ("model", "model_config", "vocab") if not isinstance(ckpt, dict) or key not in ckpt]
    if missing:
        raise ValueError(f"{path}: not a syntrain checkpoint (no {', '.join(missing)})")
    return ckpt


TREE_KEYS = ("valid_trees", "exact_outputs", "exact_uas", "exact_las")


def tree_text(result: dict) -> str:
    """The tree measure of a tree-decoding model's scores, for a log line ('' for other models)."""
    if "valid_trees" not in result:
        return ""
    uas, las = result["exact_uas"], result["exact_las"]
    exact = f", UAS {uas:.2f} / LAS {las:.2f} on them" if uas is not None else ""
    return f" | valid trees {result['valid_trees']:.1f}% | outputs = reference {result['exact_outputs']:.1f}%{exact}"


def data_options(cfg: ModelConfig) -> dict[str, Any]:
    """ParallelData options a model needs: its target, and the graph's label ids for PARENT/GCN."""
    return {"target": cfg.target, "arc_labels": list(cfg.arc_labels) if cfg.uses_graph else None}


def load_checkpoint(path: str, device: str | torch.device = "cpu") -> tuple[Transformer, Vocab, dict]:
    """A checkpoint -> (model in eval mode, vocabulary, the whole checkpoint dict)."""
    ckpt = read_checkpoint(path, device)
    model = Transformer(ModelConfig.from_dict(ckpt["model_config"])).to(device)  # new keys: their defaults
    model.load_state_dict(ckpt["model"])
    return model.eval(), Vocab(ckpt["vocab"]), ckpt


def evaluate(model: Transformer, data: ParallelData, vocab: Vocab, cfg: TrainConfig, device: torch.device,
             beam: int, sentences: int = 0) -> dict:
    """Validation loss (label-smoothed, per target token) and BLEU/chrF of `sentences` decoded rows."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for rows in data.batches(cfg.max_tokens, shuffle=False, rows=data.loss_rows):
            batch = data.collate(rows).to(device)
            logits = model(batch.src, batch.tgt_in, batch.parent, batch.distances, batch.labels, batch.graph)
            total += F.cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID,
                                     label_smoothing=cfg.label_smoothing, reduction="sum").item()
            tokens += batch.tokens()
    rows = data.keep[:sentences] if sentences else data.keep
    pieces: list[list[str]] = []
    hyps = translate(model, data, vocab, beam, cfg.length_penalty, cfg.max_tokens, rows, device, pieces=pieces)
    metrics = {"loss": round(total / max(tokens, 1), 4), **score(hyps, data.references(rows))}
    if model.cfg.target == "transitions":
        metrics.update(tree_scores(pieces, data.reference_transitions(rows), model.cfg.transition_root))
    model.train()
    return metrics


def _truncate_metrics(path: str, step: int) -> None:
    """Keep the metrics.jsonl records of steps <= `step` (and any unreadable line is dropped)."""
    if not os.path.isfile(path):
        return
    kept = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("step", 0) <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
    atomic_write(path, "".join(kept).encode("utf-8"))


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig
                   ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Adam (betas from `cfg`, eps 1e-9; the fused kernel: one pass over all parameters, CPU and CUDA) with the
    inverse square-root schedule."""
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas, eps=1e-9, fused=True)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(cfg.warmup))


def training_device(choice: str, local_rank: int = 0) -> torch.device:
    """The device of process `local_rank` for `choice` (auto, cuda, cpu): one GPU per process."""
    if choice not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be auto, cuda or cpu, got {choice!r}")
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError("device = cuda but torch sees no CUDA GPU (use device auto or cpu)")
    if local_rank >= torch.cuda.device_count():
        raise ValueError(f"process {local_rank} of this node has no GPU of its own ({torch.cuda.device_count()} "
                         f"visible): start at most one process per GPU, or train with device = cpu")
    return torch.device("cuda", local_rank)


def train(cfg: TrainConfig) -> Transformer:
    """Run (or resume) training as configured; returns the trained model (unwrapped)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    own_group = world > 1 and not dist.is_initialized()
    device = training_device(cfg.device, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if own_group:
        # rank 0 validates (decoding) while the others wait in the checkpoint collective: a long timeout
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=datetime.timedelta(hours=2))
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.accum_steps < 1:
        raise ValueError(f"accum_steps must be >= 1, got {cfg.accum_steps}")
    if cfg.max_tokens < 1 or cfg.max_len < 0:
        raise ValueError(f"max_tokens must be >= 1 and max_len >= 0, got {cfg.max_tokens} and {cfg.max_len}")
    if cfg.preset not in PRESETS:
        raise ValueError(f"unknown preset {cfg.preset!r}; choose from {', '.join(PRESETS)}")
    if cfg.best_metric not in ("bleu", "loss"):
        raise ValueError(f"best_metric must be bleu or loss, got {cfg.best_metric!r}")
    cfg = _prepare_run_dir(cfg, rank, world)
    last_path, best_path = os.path.join(cfg.out, "last.pt"), os.path.join(cfg.out, "best.pt")
    resume = cfg.resume and os.path.isfile(last_path)
    if cfg.resume and not resume:
        _log(f"--resume: no {last_path} yet, starting from scratch", rank)

    if cfg.verify_shards:
        for split in (cfg.data, cfg.valid, cfg.test):
            problems = open_split(split).verify_hashes() if split else []
            if problems:
                raise ValueError(f"{problems[0]} (synprep validate {split} lists all; --no-verify-shards skips "
                                 "this check)")
    ckpt = read_checkpoint(last_path) if resume else None
    torch.manual_seed(cfg.seed)
    if ckpt:
        vocab = Vocab(ckpt["vocab"])
    else:
        from .data import read_split

        vocab = Vocab.build([read_split(cfg.data)[0]], transitions=cfg.model.get("target") == "transitions")
        if rank == 0:
            vocab.save(os.path.join(cfg.out, "vocab.json"))
    mcfg = ModelConfig.from_dict(ckpt["model_config"]) if ckpt else \
        ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model, "vocab_size": len(vocab)})
    if mcfg.label_embedding and not mcfg.source_labels:
        from .data import label_vocabulary, read_split

        mcfg.source_labels = label_vocabulary(read_split(cfg.data)[0])
    tree = data_options(mcfg)
    train_data = ParallelData(cfg.data, vocab, cfg.max_len, features=mcfg.batch_features(training=True),
                              labels=mcfg.source_labels, skip_null=True, **tree)
    if mcfg.target == "transitions" and not ckpt:
        mcfg.transition_root = train_data.root
        mcfg.arc_labels = arc_label_vocabulary(vocab)
        tree = data_options(mcfg)
        train_data.arc_labels = {label: i + 2 for i, label in enumerate(mcfg.arc_labels)} if mcfg.uses_graph \
            else None
    longest = train_data.longest()
    if longest > cfg.max_tokens:
        raise ValueError(f"max_tokens {cfg.max_tokens} is below the longest training sentence ({longest} tokens with "
                         "BOS/EOS): raise max_tokens or lower max_len")
    valid_data = ParallelData(cfg.valid, vocab, features=mcfg.batch_features(training=False),
                              labels=mcfg.source_labels, **tree) if cfg.valid else None
    ladder = ladder_in_use(cfg.shape_ladder, device, cfg.compile)
    for data in (train_data, valid_data):
        if data is not None:
            data.ladder, data.ladder_limit = ladder, mcfg.max_len
    model = Transformer(mcfg).to(device)
    model.set_attention_kernel(cfg.attention)
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError("attention = 'flex' trains on CUDA only (PyTorch has no FlexAttention backward on CPU); "
                         "use 'auto' or 'math'")
    if cfg.attention == "flex" and mcfg.attn_dropout > 0:
        raise ValueError(f"attention = 'flex' has no attention dropout: set [model] attention_dropout = 0 "
                         f"(now {mcfg.attn_dropout})")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    if mcfg.pascal_heads and any(mcfg.pascal_heads) and not train_data.has_parents:
        raise ValueError(f"{cfg.data}: Pascal heads need src_parent_mid (convert with [features] src = "
                         "[\"parents\"])")
    optimizer, scheduler = make_optimizer(model, cfg)
    step, epoch, position, best, bad_evals = 0, 0, 0, None, 0
    if ckpt:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        step, epoch, position, best = ckpt["step"], ckpt["epoch"], ckpt["position"], ckpt["best"]
        bad_evals = ckpt.get("bad_evals", 0)
        _set_rng_state(ckpt["rng"][rank] if isinstance(ckpt["rng"], list) else ckpt["rng"])
        _log(f"resumed from {last_path} at step {step}", rank)
    raw_model = model
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda"
                                                          else None)
    autocast = autocast_context(cfg.precision, device)
    n_params = sum(p.numel() for p in raw_model.parameters())
    _log(f"syntrain: {len(train_data)} training pairs, vocabulary {len(vocab)}, {n_params / 1e6:.1f}M parameters, "
         f"device {device}, {world} process(es), "
         f"precision {resolve_precision(cfg.precision, device)}, attention kernel {_kernel_in_use(raw_model, device)}"
         f", out {cfg.out}\n  syntax switches: {mcfg.switches()}", rank)
    if mcfg.target == "transitions":
        _log(f"  target transitions: {train_data.skipped_null} training pair(s) without transitions skipped "
             f"(null: not encodable under the pipeline's non_projective policy), {len(mcfg.arc_labels)} arc labels, "
             f"root {mcfg.transition_root}", rank)
    record_header = {"step": 0, "skipped_null_transitions": train_data.skipped_null,
                     "arc_labels": len(mcfg.arc_labels)} if mcfg.target == "transitions" and not ckpt else None
    metrics_path = os.path.join(cfg.out, "metrics.jsonl")
    if rank == 0 and ckpt:
        _truncate_metrics(metrics_path, ckpt["step"])  # a resumed run redoes the steps after its checkpoint
    metrics_file = open(metrics_path, "a", encoding="utf-8") if rank == 0 else None
    if metrics_file and record_header:
        metrics_file.write(json.dumps(record_header) + "\n")
    writer = None
    if cfg.tensorboard and rank == 0:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise ValueError("--tensorboard needs the tensorboard package (pip install tensorboard)") from None
        writer = SummaryWriter(os.path.join(cfg.out, "tensorboard"))

    def record(values: dict) -> None:
        if metrics_file:
            metrics_file.write(json.dumps(values) + "\n")
            metrics_file.flush()
        if writer:
            for key, value in values.items():
                if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                    writer.add_scalar(key, value, values["step"])

    def save(also_best: bool) -> None:
        """last.pt (and best.pt); a collective under DDP: every rank calls it, rank 0 writes."""
        rng = _rng_state()
        if world > 1:  # every rank's RNG, so each continues its own dropout stream
            gathered: list = [None] * world
            dist.all_gather_object(gathered, rng)
            rng = gathered
        if rank == 0:
            state = {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                     "scheduler": scheduler.state_dict(), "step": step, "epoch": epoch, "position": position,
                     "best": best, "bad_evals": bad_evals, "rng": rng, "vocab": vocab.itos,
                     "model_config": mcfg.to_dict(),
                     "train_config": asdict(cfg), "signature": train_data.signature,
                     "pipeline": train_data.configuration,
                     "dataset": os.path.dirname(os.path.abspath(cfg.data))}
            for path in (last_path, best_path) if also_best else (last_path,):
                save_checkpoint(state, path)
            if cfg.keep_last:
                shutil.copyfile(last_path, os.path.join(cfg.out, f"checkpoint_{step}.pt"))
                prune_step_checkpoints(cfg.out, cfg.keep_last)

    model.train()
    started = window_start = time.time()
    first_step = step
    window_loss, window_tokens, window_aux = 0.0, 0, {}
    stop = step >= cfg.max_steps  # a resumed run that is already complete only re-scores
    prepared, cuda_graphs = False, False
    while not stop:
        batches = train_data.batches(cfg.max_tokens, cfg.seed, epoch)
        if not prepared:
            model, autocast, cuda_graphs = prepare_steps(cfg, model, raw_model, train_data, batches, device,
                                                         autocast, rank)
            prepared = True
        per_rank = len(batches) // world
        if per_rank == 0:
            raise ValueError(f"{cfg.data}: fewer batches ({len(batches)}) than processes ({world})")
        batches = batches[rank::world][:per_rank]
        make_group = functools.partial(collate_group, data=train_data, batches=batches, accum=cfg.accum_steps,
                                       device=device)  # on the prefetch thread, while the previous step runs
        groups = prefetch(range(position, per_rank, cfg.accum_steps), make_group)
        for group in groups:
            aux: dict[str, torch.Tensor] = {}
            if cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()
            loss, tokens = accumulate_gradients(model, group, device, autocast, cfg.label_smoothing, aux)
            if cfg.clip_norm:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step, position = step + 1, position + len(group)
            window_loss, window_tokens = window_loss + loss.detach() * tokens, window_tokens + tokens
            for name, value in aux.items():
                window_aux[name] = window_aux.get(name, 0.0) + value * tokens
            out_of_time = cfg.max_minutes and (time.time() - started) / 60 >= cfg.max_minutes
            log_step = step % cfg.log_interval == 0 or step == 1
            if world > 1 and cfg.max_minutes:  # all ranks stop at the same step, agreed at log steps (a sync)
                flag = torch.tensor([float(bool(out_of_time))], device=device) if log_step else None
                if flag is not None:
                    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                out_of_time = flag is not None and bool(flag.item())
            stop = step >= cfg.max_steps or bool(out_of_time)
            if log_step or stop:  # the first and the last step always
                seconds = max(time.time() - window_start, 1e-9)
                elapsed = time.time() - started
                values = {"step": step, "epoch": epoch, "loss": round(window_loss.item() / window_tokens, 4),
                          "lr": scheduler.get_last_lr()[0], "tokens": window_tokens * world,
                          "tokens_per_s": round(window_tokens * world / seconds),
                          "elapsed_s": round(elapsed, 1)}
                values.update({f"loss_{name}": round(value.item() / window_tokens, 4)
                               for name, value in window_aux.items()})  # per target token, unweighted
                aux_text = "".join(f" | {name} {values[f'loss_{name}']:.3f}" for name in window_aux)
                eta = format_eta(step, first_step, elapsed, cfg.max_steps, cfg.max_minutes)
                _log(f"step {step} | loss {values['loss']:.3f}{aux_text} | lr {values['lr']:.2e} | "
                     f"{values['tokens_per_s']} tok/s | ETA {eta}", rank)
                record(values)
                window_loss, window_tokens, window_aux, window_start = 0.0, 0, {}, time.time()
            if step % cfg.eval_interval == 0 or stop:
                if valid_data is not None and rank == 0:
                    result = evaluate(raw_model, valid_data, vocab, cfg, device, cfg.eval_beam, cfg.eval_sentences)
                    _log(f"step {step} | valid loss {result['loss']:.3f} | BLEU {result['bleu']:.2f} | "
                         f"chrF {result['chrf']:.2f}{tree_text(result)}", rank)
                    record({"step": step, "valid_loss": result["loss"], "valid_bleu": result["bleu"],
                            "valid_chrf": result["chrf"], **{f"valid_{key}": result[key] for key in TREE_KEYS
                                                             if key in result}})
                    value = result["bleu"] if cfg.best_metric == "bleu" else result["loss"]
                    improved = best is None or (value > best if cfg.best_metric == "bleu" else value < best)
                    best, bad_evals = (value, 0) if improved else (best, bad_evals + 1)
                else:
                    improved = valid_data is None  # no validation: best = last
                save(improved)
                window_start = time.time()  # evaluation time is not training throughput
                if cfg.patience and valid_data is not None and not stop:
                    patience_over = torch.tensor([float(bad_evals >= cfg.patience)])
                    if world > 1:  # rank 0 validated: its decision holds for all
                        patience_over = patience_over.to(device)
                        dist.broadcast(patience_over, src=0)
                    if patience_over.item():
                        _log(f"early stopping at step {step}: {bad_evals} validations without a better "
                             f"{cfg.best_metric} (patience {cfg.patience})", rank)
                        stop = True
            if stop:
                groups.close()  # the prefetch thread finishes the batches it has started
                break
        if position >= per_rank:
            epoch, position = epoch + 1, 0
    if cfg.test and rank == 0:
        model_best, _, _ = load_checkpoint(best_path, device)
        test_data = ParallelData(cfg.test, vocab, features=mcfg.batch_features(training=False),
                                 labels=mcfg.source_labels, **tree)
        result = evaluate(model_best, test_data, vocab, cfg, device, cfg.test_beam)
        _log(f"test ({cfg.test}, best.pt, beam {cfg.test_beam}): BLEU {result['bleu']:.2f} chrF {result['chrf']:.2f}"
             f"{tree_text(result)}"
             f"\n  BLEU signature: {result['bleu_signature']}\n  chrF signature: {result['chrf_signature']}", rank)
        record({"step": step, "test": cfg.test, **{f"test_{k}": v for k, v in result.items()}})
    if metrics_file:
        metrics_file.close()
    if writer:
        writer.close()
    if own_group:
        dist.destroy_process_group()
    return raw_model
