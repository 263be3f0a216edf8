"""A training run, set-up to end: the data and the model set up (or restored from the checkpoint resumed), the
loop of optimizer updates (label-smoothed cross-entropy plus the switches' losses: `syntrain.loss`; Adam (0.9,
0.98), inverse-sqrt warm-up), validation and checkpoints every eval_interval steps, the test score at the end.

Its collaborators: the processes and devices (`syntrain.distributed`: under `torchrun` the model is wrapped in
DistributedDataParallel and rank r takes batches r, r + world, ... of the same seeded order), the precision
(`syntrain.precision`), where the run stands (`syntrain.run_state`), validation and early stopping
(`syntrain.validation`), and the run folder (`syntrain.runfolder`: config.toml, train.log, metrics.jsonl and the
checkpoints, which hold model, optimizer, scheduler, step, epoch position, RNG states, vocabulary, configs and
the synprep signature of the training shards, so `--resume` continues exactly where the run stopped).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from synprep.callables import make_callable
from synprep.shards import open_split

from .batch import Batch
from .config.core import PRESETS
from .config.fill import fill_from_data
from .config.model import ModelConfig
from .config.recipe import stored_model_config
from .config.train import TrainConfig, inverse_sqrt
from .dataset import ParallelData, data_columns, prefetch, read_split
from .decode import run_settings, settings_text
from .distributed import Processes, peer_faults, processes
from .loss import objective
from .model import Transformer
from .precision import autocast_context, grad_scaler, resolve_precision
from .pretrained import PretrainedSource, language_note, load_into, missing_pieces, start_model_config
from .run_state import RunState, format_eta, rng_state, set_rng_state, trained_text
from .runfolder.checkpoints import (
    check_finite,
    checkpoint_vocab,
    load_checkpoint,
    load_weights,
    nonfinite_weight,
    read_checkpoint,
    save_checkpoint,
    write_run_checkpoints,
)
from .runfolder.files import BEST, LAST
from .runfolder.metrics_file import MetricsLog, open_metrics_log
from .runfolder.resume import (
    Resumed,
    check_resume,
    data_fingerprint,
    finished_reason,
    lost_best,
    restore_file,
    resume_point,
)
from .runfolder.source import SOURCE_DIR, write_source_files
from .runfolder.start import named_run, prepare_run_dir, remove_unstarted_run, run_folder_lock, start_run_folder
from .scoring import bleu_metric
from .shapes import LADDER_TEXT, choose_attention, chosen_attention, compile_model, ladder_in_use, shape_summary
from .stop_request import StopRequest, stop_requests
from .switches.active import ActiveSwitches
from .transformer_layers import flex_available
from .validation import EarlyStopping, evaluate, scores_text, valid_metrics
from .vocab import Vocab, check_subword_models, scheme_vocab, separate_bpe

log = logging.getLogger(__name__)


# the parts of a run

@dataclass(frozen=True)
class RunData:
    """What a run reads: the vocabulary, the model config (built once per run), the training split and the
    validation and test splits (None when not given), and the training split's `data_fingerprint`."""

    vocab: Vocab
    mcfg: ModelConfig
    train: ParallelData
    valid: ParallelData | None
    test: ParallelData | None  # read (copied) at the start, scored at the end
    fingerprint: str
    pretrained: PretrainedSource | None = None  # the model the run started from ([model] pretrained)
    notes: tuple[str, ...] = ()  # header lines about the vocabulary (its size and origin, pieces it lacks)


@dataclass
class Trainer:
    """The model under training and what updates it: the optimizer and its schedule, the precision's autocast
    and loss scaler. `model` is what the steps call (DDP-wrapped under torchrun, compiled when asked), `raw_model`
    the Transformer itself (validated, saved)."""

    model: torch.nn.Module
    raw_model: Transformer
    device: torch.device
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    autocast: contextlib.AbstractContextManager
    scaler: torch.amp.GradScaler  # fp16's loss scaling (disabled for the other precisions)
    attention_kernels: dict[str, str] | None = None  # chosen on CUDA (`shapes.chosen_attention`)

    def update(self, group: list[Batch], cfg: TrainConfig
               ) -> tuple[torch.Tensor, int, dict[str, torch.Tensor], torch.Tensor]:
        """One optimizer update over the batches of `group`: (mean translation loss, target tokens, each
        auxiliary loss per target token, whether its gradients were finite: a 0-d tensor, no device sync; fp16
        skips the update when they are not, so a weighted auxiliary loss that overflows skips every one while
        the losses stay finite)."""
        aux: dict[str, torch.Tensor] = {}
        loss, tokens = accumulate_gradients(self.model, group, self.device, self.autocast, cfg.label_smoothing, aux,
                                            self.scaler)
        self.scaler.unscale_(self.optimizer)  # fp16: the true gradients before clipping (a no-op otherwise)
        grads = [param.grad for param in self.model.parameters() if param.grad is not None]
        norm = (torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm) if cfg.clip_norm
                else torch.nn.utils.get_total_norm(grads))
        self.scaler.step(self.optimizer)  # fp16: skipped when a gradient overflowed (the scale is lowered)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, tokens, aux, torch.isfinite(norm)

    def checkpoint_fields(self) -> dict:
        return {"model": self.raw_model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "attention_kernels": self.attention_kernels}


@dataclass(frozen=True)
class Run:
    """The parts of one training run, each with its own job: the configuration, the processes, the checkpoint
    resumed from (None: a new run), the data, the trainer, where the run stands, early stopping, the metrics."""

    cfg: TrainConfig
    procs: Processes
    resumed: Resumed | None
    data: RunData
    trainer: Trainer
    state: RunState
    stopping: EarlyStopping
    metrics: MetricsLog

    @property
    def last_path(self) -> str:
        return os.path.join(self.cfg.out, LAST)

    @property
    def best_path(self) -> str:
        return os.path.join(self.cfg.out, BEST)

    def log(self, message: str) -> None:
        """A progress line on stderr (rank 0)."""
        self.procs.log(message)

    def checkpoint(self, rng: dict | list) -> dict:
        """The checkpoint of the run as it stands, with the RNG states `rng` (every rank's under DDP)."""
        cfg, data, stopping = self.cfg, self.data, self.stopping
        scaler = self.trainer.scaler
        return {**self.trainer.checkpoint_fields(), "step": self.state.step, "epoch": self.state.epoch,
                "position": self.state.position, **stopping.checkpoint_fields(),
                "rng": rng, "precision": resolve_precision(cfg.precision, self.procs.device),
                "scaler": scaler.state_dict() if scaler.is_enabled() else None,
                **data.vocab.checkpoint_fields(), "model_config": data.mcfg.to_dict(), "train_config": asdict(cfg),
                "signature": data.train.signature, "pipeline": data.train.configuration,
                "dataset": os.path.dirname(os.path.abspath(cfg.data)), "data_fingerprint": data.fingerprint,
                "elapsed_s": round(self.state.clock.seconds(), 3),
                "valid_s": round(self.state.clock.valid_seconds(), 3), "stopped_early": stopping.stopped_early,
                **({"pretrained": data.pretrained.record()} if data.pretrained else {})}

    def close(self) -> None:
        """Close the metrics and TensorBoard files and the process group this run opened."""
        self.metrics.close()
        self.procs.close()


# one optimizer update

def accumulate_gradients(model: torch.nn.Module, batches: list[Batch], device: torch.device,
                         autocast: contextlib.AbstractContextManager, label_smoothing: float,
                         aux_totals: dict[str, torch.Tensor] | None = None,
                         scaler: torch.amp.GradScaler | None = None) -> tuple[torch.Tensor, int]:
    """Forward and backward over `batches` (one optimizer update): the gradients of the label-smoothed loss
    plus lambda x each auxiliary syntax loss, summed over the batches / their target tokens, as for one batch
    holding them all. Returns (the mean translation loss as a 0-d tensor, target tokens); `aux_totals` gets
    each auxiliary loss (unweighted, per target token) added. Under DDP, gradients sync on the last batch only.
    `scaler` (fp16): the gradients are of the scaled objective, unscaled by the optimizer step."""
    tokens = sum(batch.tokens() for batch in batches)  # counted on the CPU: no device sync
    total = torch.zeros((), device=device)
    raw = getattr(model, "module", model)
    for i, batch in enumerate(batches):
        batch = batch.to(device)
        inputs = batch.inputs
        last = i == len(batches) - 1
        no_sync = model.no_sync() if hasattr(model, "no_sync") and not last else contextlib.nullcontext()
        with no_sync:
            with autocast:
                outputs = model(batch.src, batch.tgt_in, inputs)
            loss, total_objective = objective(raw, outputs, batch, tokens, label_smoothing, aux_totals)
            (scaler.scale(total_objective) if scaler is not None else total_objective).backward()
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


def set_up_steps(run: Run, batches: list[np.ndarray]) -> bool:
    """Once per session, with the first epoch's batches: log the distinct batch shapes; on CUDA choose the
    attention backend by timing the candidates (syntrain.shapes: the trainer's `autocast` then also forces it);
    compile the trainer's `model` when asked. Returns whether the steps run as CUDA graphs."""
    cfg, data, trainer, procs = run.cfg, run.data.train, run.trainer, run.procs
    device, raw = procs.device, trainer.raw_model
    shapes = [data.shape(rows) for rows in batches]
    distinct = len(set(shapes))
    run.log(f"  shapes: {shape_summary(shapes)} (shape ladder: {LADDER_TEXT if data.ladder else 'off'})")
    if device.type == "cuda":
        samples = sample_batches(data, batches[procs.rank :: procs.world], device)
        sizes, dropouts = raw.cfg.sizes, raw.cfg.dropouts  # a choice of kernel, flex allowed:
        flex = cfg.attention == "auto" and raw.kernel_in_use(device) == "math" and dropouts.attn_dropout == 0 \
            and sizes.d_model // sizes.n_heads >= 16 and flex_available()

        def step(context: contextlib.AbstractContextManager) -> None:
            accumulate_gradients(raw, samples, device, context, cfg.label_smoothing)

        recorded = run.resumed.ckpt.get("attention_kernels") if run.resumed else None
        trainer.autocast, chosen, timings = choose_attention(raw, step, trainer.autocast, device, flex, recorded)
        trainer.attention_kernels = chosen_attention(chosen)
        measured = ", ".join(f"{name} {1000 * seconds:.1f} ms" for name, seconds in timings.items())
        run.log(f"  attention: {chosen} " + (f"(forward + backward of {len(samples)} sample batches: {measured})"
                                             if timings else "(the choice of the run resumed)"))
    else:
        run.log("  attention: torch's scaled_dot_product_attention dispatch on the CPU (not timed)")
    graphs = False
    if cfg.compile:
        graphs = device.type == "cuda" and data.ladder
        trainer.model = compile_model(trainer.model, device, graphs, distinct)
        run.log(f"  compile: torch.compile, static shapes (about {distinct} graphs this epoch)"
                f"{', CUDA graphs' if graphs else ''}")
    return graphs


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig
                   ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Adam (betas from `cfg`, eps 1e-9; the fused kernel: one pass over all parameters, CPU and CUDA) with the
    inverse square-root schedule."""
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=cfg.adam_betas, eps=1e-9, fused=True)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(cfg.warmup))


# set-up

def set_up(cfg: TrainConfig, procs: Processes, stack: contextlib.ExitStack) -> tuple[TrainConfig, Resumed | None]:
    """The run folder (named, locked), the checkpoint to resume from (checked against the run's configuration;
    a lost best.pt copied back from the run's file that holds its weights), the shards' hashes."""
    cfg = prepare_run_dir(cfg, procs.rank, procs.world, stack)
    point = resume_point(cfg.out) if cfg.resume else None
    if cfg.resume and point is None:
        procs.log(f"--resume: no run in {cfg.out} yet, starting it")
    notes = check_resume(cfg, *point) if point is not None else []
    if cfg.verify_shards:
        for split in (cfg.data, cfg.valid, cfg.test):
            problems = open_split(split).verify_hashes() if split else []
            if problems:
                raise ValueError(f"{problems[0]} (synprep validate {split} lists all; --no-verify-shards skips "
                                 "this check)")
    resumed = None
    if point is not None:
        ckpt = read_checkpoint(point[0])
        lost = lost_best(cfg.out, point[0], ckpt) if procs.rank == 0 else None
        resumed = Resumed(point[0], ckpt, tuple(notes), lost)
        if lost and lost[1]:  # the best weights are in another file of the run: copied back before anything
            restore_file(lost[1], os.path.join(cfg.out, BEST))
            procs.log(f"syntrain: {lost[0]}: re-created from {lost[1]}")
    procs.wait_for_rank0()
    return cfg, resumed


def load_data(cfg: TrainConfig, resumed: Resumed | None, device: torch.device) -> RunData:
    """The training split read once (only the columns training uses; the shard pages read are given back
    as each column is copied out): vocabulary, the model config (built once per run: from the checkpoint
    resumed, else from the recipe, then filled with what it derives from the data), the training and
    validation data."""
    if resumed:
        mcfg = stored_model_config(resumed.ckpt, resumed.path)
    else:
        mcfg = ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model})
    switches = ActiveSwitches(mcfg)
    decoder_target = switches.decoder_target
    split = read_split(cfg.data, data_columns(switches.batch_columns(training=True), decoder_target, references=False))
    source, notes, origin = None, (), "the checkpoint resumed"
    check_subword_models(cfg.data, split[1].signature)  # resumed or fresh: source/ copies them
    if resumed:
        vocab = checkpoint_vocab(resumed.ckpt, mcfg, resumed.path)
        source = PretrainedSource.from_record(resumed.ckpt["pretrained"]) if resumed.ckpt.get("pretrained") else None
    elif cfg.pretrained:  # the model's sizes, architecture and vocabulary
        mcfg, vocab, source = start_model_config(cfg.pretrained, cfg.model, *split, **cfg.language_codes())
        notes = tuple(filter(None, [missing_pieces(split[0], vocab), language_note(mcfg, vocab)]))
        origin = f"the pretrained model {source.folder}"
    else:  # one vocabulary per side when the dataset's BPE is per side
        joint = not separate_bpe(split[1].configuration)
        whole = decoder_target is None and cfg.vocabulary == "model" and scheme_vocab(split[1].configuration, cfg.data)
        vocab = whole or Vocab.build([split[0]], decoder_target=decoder_target, joint=joint)
        origin = ("the dataset's sub-word model (every piece)" if whole else "the training split (the pieces it "
                  "holds)")
        fill_from_data(mcfg, *split, vocab)
    train_data = ParallelData(cfg.data, vocab, training_max_len(cfg, mcfg), skip_null=True, split=split,
                              **ActiveSwitches(mcfg).parallel_data_arguments(training=True))
    longest = train_data.longest()
    if longest > cfg.max_tokens:
        raise ValueError(f"max_tokens {cfg.max_tokens} is below the longest training sentence ({longest} tokens with "
                         "BOS/EOS): raise max_tokens or lower max_len")
    valid_data = eval_data(cfg.valid, vocab, mcfg) if cfg.valid else None
    test_data = eval_data(cfg.test, vocab, mcfg) if cfg.test else None  # as checked: no later rewrite
    for data in (valid_data, test_data):  # a loss over no pair would read as 0.0: refused before training
        if data is not None and len(data.loss_rows) and not len(data.fitting(data.loss_rows, mcfg.sizes.max_len)):
            raise ValueError(f"{data.path}: none of its {len(data.loss_rows)} pairs fits the model's "
                             f"{mcfg.sizes.max_len} positions: raise [model] max_len")
    if cfg.valid or cfg.test:  # a BLEU tokenizer whose packages are missing: an error now, not after training
        bleu_metric(train_data.tgt_lang, cfg.bleu_tokenize)
    ladder = ladder_in_use(cfg.shape_ladder, device, cfg.compile)
    for data in (train_data, valid_data):
        if data is not None:
            data.ladder, data.ladder_limit = ladder, mcfg.sizes.max_len
    return RunData(vocab, mcfg, train_data, valid_data, test_data, data_fingerprint(cfg.data), source,
                   (f"  vocabulary: {len(vocab)} pieces from {origin}", *notes))


def training_max_len(cfg: TrainConfig, mcfg: ModelConfig) -> int:
    """The most positions a side of a training pair may take: `[train] max_len`, at most the model's positions
    (`[model] max_len`, which a forward pass cannot exceed); `[train] max_len = 0` (no limit): the positions."""
    positions = mcfg.sizes.max_len
    return min(cfg.max_len, positions) if cfg.max_len else positions


def eval_data(path: str, vocab: Vocab, mcfg: ModelConfig) -> ParallelData:
    """A validation or test split with what the model reads."""
    return ParallelData(path, vocab, copy=True, **ActiveSwitches(mcfg).parallel_data_arguments(training=False))


def new_model(cfg: TrainConfig, mcfg: ModelConfig, device: torch.device) -> Transformer:
    """The model (seeded: the run's first weights), its attention kernel checked against the device."""
    torch.manual_seed(cfg.seed)
    model = Transformer(mcfg).to(device)
    model.set_attention_kernel(cfg.attention)
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError("attention = 'flex' trains on CUDA only (PyTorch has no FlexAttention backward on CPU); "
                         "use 'auto' or 'math'")
    if cfg.attention == "flex" and mcfg.dropouts.attn_dropout > 0:
        raise ValueError(f"attention = 'flex' has no attention dropout: set [model] attention_dropout = 0 "
                         f"(now {mcfg.dropouts.attn_dropout})")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    return model


def make_run(cfg: TrainConfig, procs: Processes, resumed: Resumed | None, data: RunData, ddp: bool = True) -> Run:
    """The run's parts: the model (seeded), the optimizer, the resumed state (weights, optimizer, where the run
    stood, RNG); DDP (`ddp`: a collective; False for rank 0's work alone); the run header. Its metrics are
    opened by `open_metrics`, after the checks."""
    device = procs.device
    model = new_model(cfg, data.mcfg, device)
    if data.pretrained and not resumed:
        load_into(model, data.pretrained)
    optimizer, scheduler = make_optimizer(model, cfg)
    ckpt = resumed.ckpt if resumed else None
    state, stopping = RunState.from_checkpoint(ckpt), EarlyStopping.from_checkpoint(cfg, ckpt)
    if resumed:
        load_weights(model, ckpt["model"], resumed.path)
        check_finite(ckpt["optimizer"].get("state", {}), resumed.path, "optimizer state holds")
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        rng = ckpt["rng"] if isinstance(ckpt["rng"], list) else [ckpt["rng"]]
        set_rng_state(rng[procs.rank % len(rng)])  # a rank the checkpoint's run had not: another's stream
        procs.log(f"resumed from {resumed.path} at step {state.step} ({trained_text(state.clock)} before)")
        for note in resumed.notes:
            procs.log(note)
    stepped = model
    if procs.world > 1 and ddp:
        stepped = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    scaler = grad_scaler(cfg.precision, device)
    if ckpt and ckpt.get("scaler") and scaler.is_enabled():
        scaler.load_state_dict(ckpt["scaler"])
    trainer = Trainer(stepped, model, device, optimizer, scheduler, autocast_context(cfg.precision, device), scaler)
    log_header(cfg, procs, data, model)
    return Run(cfg, procs, resumed, data, trainer, state, stopping, MetricsLog())


def log_header(cfg: TrainConfig, procs: Processes, data: RunData, model: Transformer) -> None:
    """The run's first lines: data, vocabulary, parameters, device, processes, precision, kernel, switches."""
    device, vocab = procs.device, data.vocab
    n_params = sum(p.numel() for p in model.parameters())
    precision = resolve_precision(cfg.precision, device)
    sizes = f"target {len(vocab)}, source {len(vocab.source)}" if vocab.source else len(vocab)
    skipped = data.train.skipped_long
    limit = training_max_len(cfg, model.cfg)
    within = f"max_len {limit}" if limit == cfg.max_len else f"the model's {limit} positions"
    long = f" ({skipped} longer than {within} skipped)" if skipped else ""
    procs.log(f"syntrain: {len(data.train)} training pairs{long}, vocabulary {sizes}, {n_params / 1e6:.1f}M "
              f"parameters, device {device}, {procs.world} process(es), precision {precision}"
              f", {attention_words(model.kernel_in_use(device))}, out {cfg.out}\n"
              f"  syntax switches: {model.switches.describe()}")
    for note in data.notes:  # a warning shows under --quiet too
        if note.startswith("warning:") and procs.rank == 0:
            log.warning(note)
        else:
            procs.log(note)


def open_metrics(run: Run) -> MetricsLog:
    """The run folder's first write (config.toml, vocab.json, train.log; source/), then OUT/metrics.jsonl (a
    resumed run drops the lines after its checkpoint) starting with the switches' data report, and the trackers."""
    cfg, data, procs, resumed = run.cfg, run.data, run.procs, run.resumed
    header = {}
    for switch in run.trainer.raw_model.switches:
        text, values = switch.training_report(data.train)
        if text:
            run.log(f"  {text}")
        header.update(values)
    start_run_folder(cfg, data.mcfg.to_dict(), data.train.signature, None if resumed else data.vocab, procs.rank,
                     procs.world)  # the run folder's first write, after every check
    if procs.rank == 0 and (not resumed or cfg.bundle or not os.path.isdir(os.path.join(cfg.out, SOURCE_DIR))):
        # what raw-text translation needs, next to the checkpoints (an older run folder gets it on --resume)
        write_source_files(cfg.out, data.train.configuration, data.train.signature,
                           os.path.dirname(os.path.abspath(cfg.data)), cfg.bundle, fresh=not resumed)
    metrics = open_metrics_log(cfg.out, procs.rank, resumed.ckpt["step"] if resumed else None, header,
                               cfg.tensorboard, cfg.wandb_project, cfg.name or os.path.basename(cfg.out))
    procs.wait_for_rank0()
    return metrics


# checkpoints and validation

def diverged(run: Run, what: str) -> ValueError:
    """The one line of a run that diverged at its step (`what` says how it shows): it learns nothing from there
    (fp16 skips every update, fp32 trains on in NaN), so it stops (exit 2); no checkpoint of it is written (`save`
    refuses non-finite weights), the earlier ones stay."""
    last = os.path.join(run.cfg.out, LAST)
    kept = f"{last} holds the last checkpoint written before" if os.path.exists(last) else "no checkpoint was written"
    return ValueError(f"{what} at step {run.state.step}: the run diverged (lower --lr, raise --warmup, set "
                      f"--clip-norm or train in fp32); {kept}")


def finite_validation(run: Run, result: dict) -> dict:
    """A validation's `result`, refused as the run's divergence when its loss or BLEU is NaN or infinite: weights
    that fp16 kept finite by skipping updates can still score NaN, and a NaN best is never beaten (every later
    validation compares false), so best.pt would stay that model for the rest of the run."""
    if not all(math.isfinite(result[key]) for key in ("loss", "bleu")):
        raise diverged(run, f"the validation loss is NaN or infinite ({result['loss']})")
    return result


def save(run: Run, also_best: bool, step_copy: bool = True) -> None:
    """last.pt (and best.pt, and with keep_last and `step_copy` a checkpoint_<step>.pt); a collective under DDP:
    every rank calls it, rank 0 writes, the others wait (for rank 0's validation before it too)."""
    rng: dict | list = rng_state()
    if (name := nonfinite_weight(run.trainer.raw_model.state_dict())) is not None:  # never saved: same on all ranks
        raise diverged(run, f"the weights hold NaN or infinite values ({name})")
    if (name := nonfinite_weight(run.trainer.optimizer.state_dict()["state"])) is not None:  # the next step's NaN
        raise diverged(run, f"the optimizer state holds NaN or infinite values ({name})")
    run.procs.wait_for_rank0()
    if run.procs.world > 1:  # every rank's RNG, so each continues its own dropout stream
        gathered: list = [None] * run.procs.world
        dist.all_gather_object(gathered, rng)
        rng = gathered
    if run.procs.rank == 0:
        write_run_checkpoints(run.cfg.out, run.checkpoint(rng), also_best, run.cfg.keep_last if step_copy else 0)
    run.procs.wait_for_rank0()


def validate_and_save(run: Run, stop: bool) -> bool:
    """Validation (rank 0), best.pt by `best_metric`, the checkpoints, patience; returns whether to stop. Its
    time is not trained time (`TrainedClock`)."""
    with run.state.clock.pause():
        return _validate_and_save(run, stop)


def _validate_and_save(run: Run, stop: bool) -> bool:
    cfg, data, procs, state, stopping = run.cfg, run.data, run.procs, run.state, run.stopping
    if data.valid is not None and procs.rank == 0:
        started = time.time()
        model = run.trainer.raw_model
        result = evaluate(model, data.valid, data.vocab, cfg, procs.device, cfg.eval_beam, cfg.eval_sentences)
        run.log(f"step {state.step} | valid loss {result['loss']:.3f} | BLEU {result['bleu']:.2f} | "
                f"chrF {result['chrf']:.2f}{scores_text(model, result)}")
        finite_validation(run, result)
        run.metrics.write({**valid_metrics(state.step, result), "elapsed_s": round(state.clock.seconds(), 1),
                           "valid_s": round(time.time() - started, 3)})
        improved = stopping.judge(result)
    else:
        improved = data.valid is None  # no validation: best = last
    stopping.best_step = state.step if improved and procs.rank == 0 else stopping.best_step
    save(run, improved)
    if cfg.patience and data.valid is not None and not stop:
        patience_over = torch.tensor([float(stopping.patience_over())])
        if procs.world > 1:  # rank 0 validated: its decision holds for all
            patience_over = patience_over.to(procs.device)
            dist.broadcast(patience_over, src=0)
        if patience_over.item():
            stopping.stopped_early = f"patience {cfg.patience}"
            save(run, False)  # the checkpoint says so: a resume of this run has nothing left to do
            run.log(f"early stopping at step {state.step}: {stopping.bad_evals} validations without a better "
                    f"{cfg.best_metric} (patience {cfg.patience})")
            return True
    return stop


def save_on_request(run: Run, request: StopRequest) -> None:
    """A stop asked from outside (`syntrain.stop_request`): last.pt of the run as it stands, without a validation
    (best.pt too when the run has no validation split, whose best is its last), then `Interrupted`: one line
    naming how to resume."""
    from synprep.errors import Interrupted

    state = run.state
    with state.clock.pause():
        if run.data.valid is None and run.procs.rank == 0:
            run.stopping.best_step = state.step
        save(run, run.data.valid is None, step_copy=False)
    raise Interrupted(f"stopped by {request.name} at step {state.step}: {os.path.join(run.cfg.out, LAST)} holds it "
                      f"(not validated); syntrain run --resume --out {run.cfg.out} continues the run",
                      request.exit_code)


def revalidate_best(run: Run) -> None:
    """A resumed run whose best.pt is lost with its weights in no other file: the resumed weights, validated
    now, are the best from here on (best.pt written), so the run still ends with a best.pt and a test score."""
    resumed = run.resumed
    if not resumed or not resumed.lost or resumed.lost[1] or run.procs.rank != 0:
        return
    cfg, data, stopping, step = run.cfg, run.data, run.stopping, run.state.step
    if data.valid is None:
        raise ValueError(f"{resumed.lost[0]}, and the run has no validation split to choose another best from: "
                         f"give --valid, or copy {resumed.path} to {run.best_path}")
    result = finite_validation(run, evaluate(run.trainer.raw_model, data.valid, data.vocab, cfg, run.procs.device,
                                             cfg.eval_beam, cfg.eval_sentences))
    stopping.best, stopping.best_step, stopping.bad_evals = stopping.value(result), step, 0
    save_checkpoint({**resumed.ckpt, "best": stopping.best, "best_step": step, "bad_evals": 0}, run.best_path)
    run.log(f"syntrain: {resumed.lost[0]}: its weights are in no other file; {resumed.path} (step {step}) "
            f"re-validated ({cfg.best_metric} {stopping.best:.3f}) is the best from here on, written to "
            f"{run.best_path}")


# the loop

STALLED = 32  # updates in a row with non-finite gradients that stop a run: fp16's loss scale (from 2^16) finds its
# value in at most 16 skipped updates; after 32 the gradients overflow at a scale below 2^-16, the run is broken


class Window:
    """Training loss, auxiliary losses and tokens since the last log line; `stalled`: the updates in a row, across
    windows, whose gradients were not finite."""

    stalled: torch.Tensor | int = 0

    def __init__(self) -> None:
        self.loss, self.tokens, self.aux, self.start = 0.0, 0, {}, time.time()
        self.updates, self.finite = 0, 0  # `finite`: a tensor once a loss is added (no device sync per update)

    def add(self, loss: torch.Tensor, tokens: int, aux: dict[str, torch.Tensor], finite_grads: torch.Tensor) -> None:
        self.loss, self.tokens = self.loss + loss.detach() * tokens, self.tokens + tokens
        self.updates, self.finite = self.updates + 1, self.finite + torch.isfinite(loss.detach()).int()
        self.stalled = (self.stalled + 1) * (~finite_grads).int()  # updates in a row with non-finite gradients
        for name, value in aux.items():
            self.aux[name] = self.aux.get(name, 0.0) + value * tokens

    def report(self, run: Run, first_step: int) -> None:
        """The log line and metrics.jsonl line of the window (then a new window starts); `elapsed_s`: the
        trained time (`TrainedClock`)."""
        cfg, tokens, state, world = run.cfg, self.tokens, run.state, run.procs.world
        if self.updates and not int(self.finite):
            raise diverged(run, f"the training loss is NaN or infinite in every update of the log window "
                                f"({self.updates})")
        if int(self.stalled) >= STALLED:
            raise diverged(run, f"the gradients are NaN or infinite in each of the last {int(self.stalled)} updates "
                                f"(fp16 skips such an update: the run learns nothing, its losses finite)")
        seconds, elapsed = max(time.time() - self.start, 1e-9), time.time() - state.clock.start
        values = {"step": state.step, "epoch": state.epoch, "loss": round(self.loss.item() / tokens, 4),
                  "lr": run.trainer.scheduler.get_last_lr()[0], "tokens": tokens * world,
                  "tokens_per_s": round(tokens * world / seconds), "elapsed_s": round(state.clock.seconds(), 1)}
        values.update({f"loss_{name}": round(value.item() / tokens, 4)
                       for name, value in self.aux.items()})  # per target token, unweighted
        aux_text = "".join(f" | {name} {values[f'loss_{name}']:.3f}" for name in self.aux)
        eta = format_eta(state.step, first_step, elapsed, cfg.max_steps, cfg.max_minutes,
                         trained=state.clock.seconds())
        run.log(f"step {state.step} | loss {values['loss']:.3f}{aux_text} | lr {values['lr']:.2e} | "
                f"{values['tokens_per_s']} tok/s | ETA {eta}")
        run.metrics.write(values)
        self.__init__()


def _ending(run: Run, log_step: bool, request: StopRequest) -> tuple[bool, int]:
    """(out of max_minutes, the signal of a stop request or 0) after an update; under DDP all ranks agree, at log
    steps (a sync), so that they stop at the same step."""
    cfg, procs = run.cfg, run.procs
    out_of_time = bool(cfg.max_minutes) and run.state.clock.seconds() / 60 >= cfg.max_minutes
    signum = request.signum
    if procs.world > 1:
        if not log_step:
            return False, 0
        flags = torch.tensor([float(out_of_time), float(signum)], device=procs.device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        out_of_time, signum = bool(flags[0].item()), int(flags[1].item())
        request.signum = request.signum or signum  # a rank the signal did not reach stops with the others
    return out_of_time, signum


def training_loop(run: Run) -> None:
    """Epochs of seeded batches (this rank's share, collated ahead on a thread) until max_steps, max_minutes,
    patience or a stop request (SIGTERM, SIGHUP, Ctrl-C: `save_on_request`); logs every log_interval steps,
    validates and saves every eval_interval steps."""
    with stop_requests() as request:
        _train_epochs(run, request)


def _train_epochs(run: Run, request: StopRequest) -> None:
    cfg, state, procs, data = run.cfg, run.state, run.procs, run.data.train
    run.trainer.model.train()
    first_step, window = state.step, Window()
    stop = state.step >= cfg.max_steps
    prepared, cuda_graphs = False, False
    while not stop:
        batches = data.batches(cfg.max_tokens, cfg.seed, state.epoch)
        if not prepared:
            cuda_graphs, prepared = set_up_steps(run, batches), True
        per_rank = len(batches) // procs.world
        if per_rank == 0:
            raise ValueError(f"{cfg.data}: fewer batches ({len(batches)}) than processes ({procs.world})")
        batches = batches[procs.rank :: procs.world][:per_rank]
        make_group = functools.partial(collate_group, data=data, batches=batches, accum=cfg.accum_steps,
                                       device=procs.device)  # on the prefetch thread, while the previous step runs
        groups = prefetch(range(state.position, per_rank, cfg.accum_steps), make_group)
        for group in groups:
            if cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()
            window.add(*run.trainer.update(group, cfg))
            state.advance(len(group))
            log_step = state.step % cfg.log_interval == 0 or state.step == 1
            out_of_time, signum = _ending(run, log_step, request)
            stop = state.step >= cfg.max_steps or out_of_time
            if log_step or stop or signum:  # the first and the last step always
                window.report(run, first_step)
            if signum:
                groups.close()  # the prefetch thread finishes the batches it has started
                save_on_request(run, request)  # (at an epoch's end as a stop's checkpoint: resume goes on from it)
            if state.step % cfg.eval_interval == 0 or stop:
                stop = validate_and_save(run, stop)
                window.start = time.time()  # evaluation time is not training throughput
            if stop:
                groups.close()
                break
        if state.position >= per_rank:
            state.next_epoch()


# the end, and the entry points

def score_test_split(run: Run) -> None:
    """The test split scored with best.pt (rank 0); Ctrl-C while it decodes is `Interrupted` (exit 130), naming
    the `syntrain eval` command that scores best.pt, which is complete."""
    import shlex

    from synprep.errors import Interrupted
    from synprep.processes import Terminated

    cfg, data, device = run.cfg, run.data, run.procs.device
    if not cfg.test or run.procs.rank != 0:
        return
    try:
        model_best, _, _ = load_checkpoint(run.best_path, device, data.mcfg)  # this run's config, built once
        hyps: list[str] = []
        pieces: list[list[str]] = []
        result = evaluate(model_best, data.test, data.vocab, cfg, device, cfg.test_beam,
                          progress="test: translating", hyps=hyps, pieces=pieces, label_smoothing=0.0)
    except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM/SIGHUP (`Terminated`: its name and exit code)
        command = ["syntrain", "eval", "--checkpoint", run.best_path, "--data", cfg.test, "--beam",
                   str(cfg.test_beam), "--length-penalty", f"{cfg.length_penalty:g}"]
        if cfg.bleu_tokenize != "auto":
            command += ["--bleu-tokenize", cfg.bleu_tokenize]
        how = f"stopped by {err}" if isinstance(err, Terminated) else "interrupted"
        raise Interrupted(f"{how} while scoring the test split; training is done and {run.best_path} is intact: "
                          f"score it with {shlex.join(command)}", getattr(err, "exit_code", 130)) from None
    from .compare import decoding_key, write_hypotheses  # compare reuses them while its key is this one

    key = decoding_key(run.best_path, cfg.test, run_settings(cfg).key(device))  # what the scores depend on
    run.log(f"test ({cfg.test}, best.pt, {settings_text(key)}): BLEU {result['bleu']:.2f} chrF {result['chrf']:.2f}"
            f"{scores_text(model_best, result)}"
            f"\n  BLEU signature: {result['bleu_signature']}\n  chrF signature: {result['chrf_signature']}")
    run.metrics.write({"step": run.state.step, "test": cfg.test, **{f"test_{k}": v for k, v in result.items()},
                       "test_key": key})
    write_hypotheses(cfg.out, model_best, hyps, pieces, key)


def train(cfg: TrainConfig) -> Transformer:
    """Run (or resume) training as configured; returns the trained model (unwrapped). A resume of a run that
    has nothing left to do under its budget (counted over the whole run) says so and returns its last model."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(peer_faults(*processes()))
        procs = Processes.start(cfg.device, cfg.threads)
        cfg, resumed = set_up(cfg, procs, stack)
        if resumed and (reason := finished_reason(cfg, resumed.ckpt)):
            if resumed.lost and not resumed.lost[1]:  # best.pt lost (rank 0 finds it): re-validated before the end
                run = make_run(cfg, procs, resumed, load_data(cfg, resumed, procs.device), ddp=False)  # rank 0 alone
                revalidate_best(run)
            procs.log(f"syntrain: {cfg.out} is complete ({reason}): nothing to train. The budget counts over the "
                      "whole run: raise --max-steps or --max-minutes to go on; syntrain eval --checkpoint "
                      f"{os.path.join(cfg.out, BEST)} --data TEST scores it again")
            procs.close()
            return load_checkpoint(resumed.path)[0]
        run = make_run(cfg, procs, resumed, load_data(cfg, resumed, procs.device))
        revalidate_best(run)
        procs.wait_for_rank0()
        run = replace(run, metrics=open_metrics(run))
        run.state.clock.restart()
        training_loop(run)
        run.log(f"trained to step {run.state.step}: {trained_text(run.state.clock)}")
        score_test_split(run)
        run.close()
        return run.trainer.raw_model


def _model_fields(flags: bool = False) -> set[str]:
    """The [model] fields (`flags`: those that are `syntrain run` flags too)."""
    from .config.model import config_parts

    return {spec.name for part in config_parts().values() for spec in dataclass_fields(part)
            if spec.metadata.get("flag") or not flags}


def attention_words(kernel: str) -> str:
    """The run header's words for the attention kernel in use ("none": plain attention, no kernel to choose)."""
    return "plain attention" if kernel == "none" else f"attention kernel {kernel}"


def check_api_arguments(recipe: Any, sets: Any, model: Any, fields: dict[str, Any]) -> str | None:  # noqa: ANN401
    """`run`'s arguments of the wrong type, refused with the command line's message (`Invalid value for
    '--max-steps': '2' is not an integer (see 'syntrain run --help')`: each [train] field, and each [model] field
    that is a flag, by its declaration, as its `syntrain run` flag is checked); the recipe path."""
    from .arguments import check_field_option, syntrain_arguments
    from .config.values import ConfigError

    recipe = syntrain_arguments("syntrain run", recipe=recipe)["recipe"]  # a recipe file that is there
    if isinstance(sets, str | bytes) or not isinstance(sets, Sequence) or not all(isinstance(i, str) for i in sets):
        raise ConfigError(f"--set must be a list of 'SECTION.FIELD=VALUE' strings, got {sets!r}")
    if model is not None and not isinstance(model, dict):
        raise ConfigError(f"model must be a table of [model] fields, got {model!r}")
    train_fields = {spec.name for spec in dataclass_fields(TrainConfig)}
    flags = _model_fields(flags=True) if set(fields) - train_fields else set()  # [model] fields given by name
    for name, value in fields.items():
        if (name in train_fields or name in flags) and value is not None:
            fields[name] = check_field_option("syntrain run", "train" if name in train_fields else "model", name,
                                              os.fspath(value) if isinstance(value, os.PathLike) else value,
                                              "--" + name.replace("_", "-"))
    return recipe


def run(recipe: str | None = None, *, sets: Sequence[str] = (), model: dict[str, Any] | None = None,
          **fields: Any) -> str:  # noqa: ANN401 (TOML values)
    """`syntrain run`: train (or resume) from a TOML recipe and/or fields (recipe < `sets` ("model.d_model=512")
    < `fields`; docs/recipe-fields.md), every value checked before anything is read or written. Fields of
    [model] may be given by name too (`pascal_heads=2`) or in `model`. Returns the run folder (`out`, or the
    folder named runs/<name>-<time>), which holds best.pt, last.pt, config.toml, train.log and metrics.jsonl."""
    from synprep.errors import Interrupted
    from synprep.processes import Terminated, received_signal

    from .config.resolve import check_run, resolve_run
    from .runfolder.train_log import logged_run

    recipe = check_api_arguments(recipe, sets, model, fields)
    model_values = dict(model or {})
    others = [name for name in fields if name not in {spec.name for spec in dataclass_fields(TrainConfig)}]
    if others:  # [model] fields by name (reading their declarations imports torch)
        in_model = _model_fields()
        model_values.update({name: fields.pop(name) for name in others if name in in_model})
    world, rank = processes()
    with logged_run() as run_log, contextlib.ExitStack() as stack:
        cfg, notes, model_label = resolve_run(recipe, fields, model_values, tuple(sets))
        if world == 1:
            cfg = named_run(cfg)  # torchrun: rank 0 names it and tells the others (train)
        made = bool(cfg.out) and not os.path.exists(cfg.out)
        if cfg.out and rank == 0:
            stack.enter_context(run_folder_lock(cfg.out))  # before the folder is looked at: one writer
        try:
            point = resume_point(cfg.out) if cfg.resume else None
            if point is not None and rank == 0:
                origin = "" if os.path.basename(point[0]) == LAST else \
                    f" (from {os.path.basename(point[0])}: last.pt is missing or damaged)"
                log.info(f"syntrain: resuming {cfg.out} at step {int(point[1]['step'])}{origin}")
            notes += check_run(cfg, model_label)
            for note in notes:
                run_log.hold(note)  # printed when the run starts, after the checks that need the data
            train(cfg)
        except BaseException as err:  # Ctrl-C, or SIGTERM/SIGHUP (`Terminated`) before the loop
            signum = received_signal()  # (its Terminated may have become another error, raised in an import)
            if isinstance(err, Interrupted) or (not isinstance(err, KeyboardInterrupt) and not signum):
                raise  # (an Interrupted says what is kept and how to go on: the final test's, the loop's)
            if cfg.out and rank == 0 and not cfg.resume:
                remove_unstarted_run(cfg.out, made)  # a new run without a checkpoint: gone, as if never started
            if isinstance(err, KeyboardInterrupt):
                raise
            raise Terminated(signum) from None
    return cfg.out


make_callable(__name__, run)  # syntrain.train(...) is syntrain.train.run(...) (docs/python-api.md)
