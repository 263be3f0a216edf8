"""Training loop: label-smoothed cross-entropy, Adam (0.9, 0.98), inverse-sqrt warm-up, checkpoints, DDP.

One process per device; under `torchrun` (WORLD_SIZE > 1) the model is wrapped in DistributedDataParallel
(NCCL on CUDA, gloo on CPU) and rank r takes batches r, r + world, ... of the same seeded order. Every rank runs
the same collectives in the same order; a rank that fails ends the others in one line (`peer_faults`), and a
collective of the training steps waits at most `STEP_TIMEOUT` for the other ranks: only the waits for rank 0's
work alone (validation, checkpoint files: `wait_for_rank0`) have a long limit.
Progress goes to stderr and every logged value to OUT/metrics.jsonl. Checkpoints (OUT/last.pt, OUT/best.pt)
hold model, optimizer, scheduler, step, epoch position, RNG states, vocabulary, configs and the synprep
signature of the training shards, so `--resume` continues exactly where the run stopped.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import math
import os
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from synprep.callables import make_callable
from synprep.shards import open_split
from synprep.textio import atomic_write

from .attention import flex_available
from .batch import Batch
from .checkpoints import checkpoint_vocab, load_checkpoint, load_weights, read_checkpoint, save_checkpoint
from .config import TrainConfig, inverse_sqrt, stored_model_config
from .dataset import ParallelData, data_columns, prefetch, read_split
from .decode import DecodeSettings, decode_split, run_settings
from .loss import objective, translation_loss
from .model import PRESETS, ModelConfig, Transformer
from .runfiles import default_run_dir, existing_run_files, prune_step_checkpoints
from .runfolder import check_resume, data_fingerprint, finished_reason, resume_point, run_folder_lock, start_run_folder
from .scoring import bleu_metric, score
from .shapes import LADDER_TEXT, choose_attention, compile_model, ladder_in_use, shape_summary
from .switches import decoded, target_column
from .trackers import Trackers
from .travel import SOURCE_DIR, write_source_files
from .vocab import PAD_ID, Vocab, scheme_vocab, separate_bpe

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTOCAST_TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """`precision` (auto, fp32, bf16, fp16) -> what runs on `device`: auto is bf16 on a CUDA GPU that supports
    it, fp16 (mixed precision with loss scaling) on another CUDA GPU (V100, T4), else fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if precision == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision


def autocast_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 or fp16 autocast, or nothing, for `precision` (auto, fp32, bf16, fp16) on `device`."""
    resolved = resolve_precision(precision, device)
    if resolved == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AUTOCAST_TYPES[resolved])


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """The loss scaler of a run: enabled for fp16 (whose small gradients would underflow), a no-op otherwise."""
    return torch.amp.GradScaler(device.type, enabled=resolve_precision(precision, device) == "fp16")


def format_eta(step: int, first_step: int, elapsed: float, max_steps: int, max_minutes: float = 0.0,
               before: float = 0.0, trained: float | None = None) -> str:
    """Time left as H:MM:SS: to `max_steps` at the pace of this session's steps (`elapsed` seconds), or to
    `max_minutes` if sooner (the budget of the whole run: `trained` seconds so far, by default `before` seconds
    trained in earlier sessions + `elapsed`)."""
    left = (max_steps - step) * elapsed / (step - first_step) if step > first_step else math.inf
    if max_minutes:
        left = min(left, max(max_minutes * 60 - (before + elapsed if trained is None else trained), 0.0))
    if math.isinf(left):
        return "?"
    seconds = round(left)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


STEP_TIMEOUT = datetime.timedelta(minutes=10)  # the collectives of ranks working side by side (the steps)
RANK0_TIMEOUT = datetime.timedelta(hours=2)  # the others waiting while rank 0 validates or writes checkpoints


def named_run(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with its run folder named where none is given: runs/<name, or the data's folder>-<YYYYmmdd-HHMMSS>."""
    if cfg.out:
        return cfg
    return replace(cfg, out=default_run_dir(cfg.name or os.path.basename(os.path.dirname(os.path.abspath(cfg.data)))
                                            or "run"))


def _prepare_run_dir(cfg: TrainConfig, rank: int, world: int, stack: contextlib.ExitStack) -> TrainConfig:
    """Name the run folder when none is given; take its writer lock (rank 0, for the whole run); refuse an
    earlier run there unless resuming or overwriting."""
    if cfg.resume and cfg.overwrite:
        raise ValueError("--resume and --overwrite exclude each other")
    if not cfg.out:
        name = [named_run(cfg).out]
        if world > 1:  # one name for all ranks
            dist.broadcast_object_list(name, src=0)
        cfg = replace(cfg, out=name[0])
    if rank == 0:
        stack.enter_context(run_folder_lock(cfg.out))
    earlier = existing_run_files(cfg.out)
    if earlier and not cfg.resume:
        if not cfg.overwrite:
            raise ValueError(f"{cfg.out}: holds an earlier run ({', '.join(earlier)}); --resume continues it, "
                             "--overwrite deletes it, or choose another --out")
    return cfg  # the folder is made (and an earlier run deleted) by start_run_folder, after every check


def _log(message: str, rank: int) -> None:
    if rank == 0:
        log.info(message)


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
            loss = translation_loss(outputs, batch, tokens, label_smoothing)
            total_objective = objective(raw, outputs, inputs, loss, tokens, aux_totals)
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


def prepare_steps(run: Run, batches: list[np.ndarray]) -> bool:
    """Once per session, with the first epoch's batches: log the distinct batch shapes; on CUDA choose the
    attention backend by timing the candidates (syntrain.shapes: `run.autocast` then also forces it); compile
    `run.model` when asked. Returns whether the steps run as CUDA graphs."""
    cfg, data, device, raw = run.cfg, run.train_data, run.device, run.raw_model
    shapes = [data.shape(rows) for rows in batches]
    distinct = len(set(shapes))
    run.log(f"  shapes: {shape_summary(shapes)} (shape ladder: {LADDER_TEXT if data.ladder else 'off'})")
    if device.type == "cuda":
        samples = sample_batches(data, batches[run.rank :: run.world], device)
        sizes = raw.cfg.sizes  # a choice of kernel, flex allowed:
        flex = cfg.attention == "auto" and raw.kernel_in_use(device) == "math" and sizes.attn_dropout == 0 \
            and sizes.d_model // sizes.n_heads >= 16 and flex_available()

        def step(context: contextlib.AbstractContextManager) -> None:
            accumulate_gradients(raw, samples, device, context, cfg.label_smoothing)

        run.autocast, chosen, timings = choose_attention(raw, step, run.autocast, device, flex)
        measured = ", ".join(f"{name} {1000 * seconds:.1f} ms" for name, seconds in timings.items())
        run.log(f"  attention: {chosen} (forward + backward of {len(samples)} sample batches: {measured})")
    else:
        run.log("  attention: torch's scaled_dot_product_attention dispatch on the CPU (not timed)")
    graphs = False
    if cfg.compile:
        graphs = device.type == "cuda" and data.ladder
        run.model = compile_model(run.model, device, graphs, distinct)
        run.log(f"  compile: torch.compile, static shapes (about {distinct} graphs this epoch)"
                f"{', CUDA graphs' if graphs else ''}")
    return graphs


SCORE_KEYS = ("loss", "bleu", "chrf", "bleu_signature", "chrf_signature")  # `evaluate`'s own; the rest: switches'


def scores_text(model: Transformer, result: dict) -> str:
    """The switches' measures in an evaluation's `result`, for a log line ('' when none)."""
    return "".join(outputs.scores_text(result) for outputs in decoded(model.switches))


def evaluate(model: Transformer, data: ParallelData, vocab: Vocab, cfg: TrainConfig, device: torch.device,
             beam: int, sentences: int = 0, progress: bool | str = False, hyps: list[str] | None = None,
             pieces: list[list[str]] | None = None) -> dict:
    """Validation loss (label-smoothed, per target token) and BLEU/chrF of `sentences` decoded rows (with the
    run's `max_tokens`, `length_penalty` and `threads`: `decode.decode_split`); `progress`: the decoding's progress
    (`decode.translate`); `hyps` and `pieces` (lists) get the hypotheses and their pieces."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for rows in data.batches(cfg.max_tokens, shuffle=False, rows=data.loss_rows):
            batch = data.collate(rows).to(device)
            logits = model(batch.src, batch.tgt_in, batch.inputs).logits
            total += F.cross_entropy(logits.float().flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID,
                                     label_smoothing=cfg.label_smoothing, reduction="sum").item()
            tokens += batch.tokens()
    rows = data.keep[:sentences] if sentences else data.keep
    pieces = [] if pieces is None else pieces
    settings = DecodeSettings(beam, cfg.length_penalty, cfg.max_tokens, cfg.threads)
    decoded_hyps = decode_split(model, data, vocab, settings, rows, device, progress, pieces)
    if hyps is not None:
        hyps[:] = decoded_hyps
    metrics = {"loss": round(total / max(tokens, 1), 4),
               **score(decoded_hyps, data.references(rows), data.tgt_lang, cfg.bleu_tokenize)}
    for outputs in decoded(model.switches):  # measures of the outputs beyond their text
        metrics.update(outputs.scores(pieces, data, rows))
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


class TrainedClock:
    """A run's trained time: the seconds of its training steps over all its sessions; validation and checkpoint
    writing (`paused`) are not counted, they are kept apart (`valid_seconds`). The one definition that
    `max_minutes` budgets and that the checkpoint's `elapsed_s`, metrics.jsonl's `elapsed_s`, train.log and
    --resume report. Set-up (data, model) and the final test scoring are outside it."""

    def __init__(self, before: float = 0.0, valid_before: float = 0.0) -> None:
        self.before, self.valid_before = before, valid_before  # seconds of the earlier sessions
        self.restart()

    def restart(self) -> None:
        """This session's clock starts now."""
        self.start, self.paused, self.paused_at = time.time(), 0.0, None

    def seconds(self) -> float:
        """Trained seconds of the whole run so far."""
        now = self.paused_at if self.paused_at is not None else time.time()
        return self.before + now - self.start - self.paused

    def valid_seconds(self) -> float:
        """Seconds of validation and checkpoint writing of the whole run so far."""
        return self.valid_before + self.paused + (time.time() - self.paused_at if self.paused_at is not None else 0.0)

    @contextlib.contextmanager
    def pause(self) -> Any:
        """Time spent inside is not trained time."""
        self.paused_at = time.time()
        try:
            yield
        finally:
            self.paused, self.paused_at = self.paused + time.time() - self.paused_at, None


@dataclass
class Run:
    """The state of one training run, passed through the steps of `train`."""

    cfg: TrainConfig
    rank: int
    world: int
    device: torch.device
    own_group: bool
    rank0_group: Any = None  # gloo, RANK0_TIMEOUT: what `wait_for_rank0` waits on (world > 1)
    ckpt: dict | None = None  # the checkpoint resumed from
    resume_path: str = ""  # its file
    vocab: Vocab | None = None
    mcfg: ModelConfig | None = None
    train_data: ParallelData | None = None
    valid_data: ParallelData | None = None
    test_data: ParallelData | None = None  # read (copied) at the start, scored at the end
    model: torch.nn.Module | None = None  # DDP-wrapped under torchrun
    raw_model: Transformer | None = None
    optimizer: torch.optim.Optimizer | None = None
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
    autocast: contextlib.AbstractContextManager | None = None
    scaler: torch.amp.GradScaler | None = None  # fp16's loss scaling (disabled for the other precisions)
    step: int = 0
    epoch: int = 0
    position: int = 0
    best: float | None = None
    best_step: int | None = None  # the step best.pt holds (recorded in every checkpoint)
    lost: tuple[str, str | None] | None = None  # a resumed run's best.pt lost: (what, the file holding it or None)
    bad_evals: int = 0
    clock: TrainedClock = field(default_factory=TrainedClock)  # trained time (the max_minutes budget: the run's)
    stopped_early: str = ""
    notes: list[str] = field(default_factory=list)  # what a resume changes
    fingerprint: str = ""  # data_fingerprint of the training split
    metrics_file: Any = None
    writer: Any = None

    @property
    def last_path(self) -> str:
        return os.path.join(self.cfg.out, "last.pt")

    @property
    def best_path(self) -> str:
        return os.path.join(self.cfg.out, "best.pt")

    def log(self, message: str) -> None:
        """A progress line on stderr (rank 0)."""
        _log(message, self.rank)

    def record(self, values: dict) -> None:
        """One metrics.jsonl record (and TensorBoard scalars), rank 0."""
        if self.metrics_file:
            try:
                self.metrics_file.write(json.dumps(values) + "\n")
                self.metrics_file.flush()
            except OSError as err:  # a full disk: one line naming the file, not "<output>"
                from synprep.errors import InputError

                raise InputError(f"cannot write: {err.strerror or err}", self.metrics_file.name) from None
        if self.writer:
            self.writer.log(values)


def processes() -> tuple[int, int]:
    """(world size, rank) of this process: (1, 0) unless started by torchrun (or with its variables set)."""
    return int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))


def set_up(cfg: TrainConfig, stack: contextlib.ExitStack) -> Run:
    """Processes and device, the run folder (locked), the checkpoint to resume from (checked against the run's
    configuration), the shards' hashes."""
    world, rank = processes()
    own_group = world > 1 and not dist.is_initialized()
    device = training_device(cfg.device, int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if own_group:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=STEP_TIMEOUT)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    rank0_group = dist.new_group(backend="gloo", timeout=RANK0_TIMEOUT) if world > 1 else None
    run = Run(_prepare_run_dir(cfg, rank, world, stack), rank, world, device, own_group, rank0_group)
    point = resume_point(run.cfg.out) if cfg.resume else None
    if cfg.resume and point is None:
        run.log(f"--resume: no run in {run.cfg.out} yet, starting it")
    if point is not None:
        run.resume_path = point[0]
        run.notes = check_resume(run.cfg, *point)
    if cfg.verify_shards:
        for split in (cfg.data, cfg.valid, cfg.test):
            problems = open_split(split).verify_hashes() if split else []
            if problems:
                raise ValueError(f"{problems[0]} (synprep validate {split} lists all; --no-verify-shards skips "
                                 "this check)")
    run.ckpt = read_checkpoint(run.resume_path) if run.resume_path else None
    from .runfolder import lost_best, restore_file

    run.lost = lost_best(run.cfg.out, run.resume_path, run.ckpt) if run.ckpt and rank == 0 else None
    if run.lost and run.lost[1]:  # the best weights are in another file of the run: copied back before anything
        restore_file(run.lost[1], run.best_path)
        run.log(f"syntrain: {run.lost[0]}: re-created from {run.lost[1]}")
    wait_for_rank0(run)
    return run


def wait_for_rank0(run: Run) -> None:
    """Under DDP, every rank waits here until rank 0 has done its work alone (validation, checkpoint and run
    files): on a group whose time limit is RANK0_TIMEOUT, so that the step collectives keep STEP_TIMEOUT."""
    if run.world > 1:
        dist.barrier(group=run.rank0_group)


@contextlib.contextmanager
def peer_faults(world: int, rank: int) -> Iterator[None]:
    """Under DDP, a collective that fails because another rank ended (its own error says why) or did not
    answer within the time limit ends this rank in one line (ValueError) instead of a traceback."""
    try:
        yield
    except RuntimeError as err:  # gloo raises RuntimeError, NCCL torch.distributed.DistError (a subclass)
        text = str(err)
        if world == 1 or not (isinstance(err, dist.DistError) or "/gloo/" in text):
            raise
        detail = text.split("] ", 1)[-1].split(". This is", 1)[0].splitlines()[0]
        if "imed out" in detail:
            reason = "no answer from the other processes in time (one of them stopped or hangs)"
        elif any(words in detail for words in ("closed by peer", "reset by peer", "Broken pipe")):
            reason = "another process of the run ended (its error is the cause)"
        else:
            reason = "a collective of the processes failed"
        raise ValueError(f"process {rank} of {world}: {reason}: {detail}") from None


def load_data(run: Run) -> None:
    """The training split read once (only the columns training uses; the shard pages read are given back
    as each column is copied out): vocabulary, the model config (built once per run: from the checkpoint
    resumed, else from the recipe, then filled with what it derives from the data), the training and
    validation data."""
    cfg, ckpt = run.cfg, run.ckpt
    if ckpt:
        run.mcfg = stored_model_config(ckpt, run.resume_path)
    else:
        run.mcfg = ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model})
    decoder_target = target_column(run.mcfg.decoder_target)
    split = read_split(cfg.data, data_columns(run.mcfg.batch_columns(training=True), decoder_target,
                                              references=False))
    if ckpt:
        run.vocab = checkpoint_vocab(ckpt, run.mcfg, run.resume_path)
    else:  # one vocabulary per side when the dataset's BPE is per side
        joint = not separate_bpe(split[1].configuration)
        run.vocab = ((decoder_target is None and scheme_vocab(split[1].configuration, cfg.data))
                     or Vocab.build([split[0]], decoder_target=decoder_target, joint=joint))
        run.mcfg.fill(*split, run.vocab)
    run.train_data = ParallelData(cfg.data, run.vocab, cfg.max_len, batch_columns=run.mcfg.batch_columns(training=True),
                                  skip_null=True, split=split, **run.mcfg.dataset_options())
    longest = run.train_data.longest()
    if longest > cfg.max_tokens:
        raise ValueError(f"max_tokens {cfg.max_tokens} is below the longest training sentence ({longest} tokens with "
                         "BOS/EOS): raise max_tokens or lower max_len")
    run.valid_data = eval_data(cfg.valid, run.vocab, run.mcfg) if cfg.valid else None
    run.test_data = eval_data(cfg.test, run.vocab, run.mcfg) if cfg.test else None  # as checked: no later rewrite
    if cfg.valid or cfg.test:  # a BLEU tokenizer whose packages are missing: an error now, not after training
        bleu_metric(run.train_data.tgt_lang, cfg.bleu_tokenize)
    ladder = ladder_in_use(cfg.shape_ladder, run.device, cfg.compile)
    for data in (run.train_data, run.valid_data):
        if data is not None:
            data.ladder, data.ladder_limit = ladder, run.mcfg.sizes.max_len


def eval_data(path: str, vocab: Vocab, mcfg: ModelConfig) -> ParallelData:
    """A validation or test split with what the model reads."""
    return ParallelData(path, vocab, batch_columns=mcfg.batch_columns(training=False), copy=True,
                        **mcfg.dataset_options())


def make_model(run: Run, ddp: bool = True) -> None:
    """The model (seeded), the attention kernel, the optimizer; the resumed state; DDP (`ddp`: a collective;
    False for rank 0's work alone); the run header."""
    cfg, mcfg, device = run.cfg, run.mcfg, run.device
    torch.manual_seed(cfg.seed)
    model = Transformer(mcfg).to(device)
    model.set_attention_kernel(cfg.attention)
    if cfg.attention == "flex" and device.type != "cuda":
        raise ValueError("attention = 'flex' trains on CUDA only (PyTorch has no FlexAttention backward on CPU); "
                         "use 'auto' or 'math'")
    if cfg.attention == "flex" and mcfg.sizes.attn_dropout > 0:
        raise ValueError(f"attention = 'flex' has no attention dropout: set [model] attention_dropout = 0 "
                         f"(now {mcfg.sizes.attn_dropout})")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    run.optimizer, run.scheduler = make_optimizer(model, cfg)
    if run.ckpt:
        ckpt = run.ckpt
        load_weights(model, ckpt["model"], run.resume_path)
        run.optimizer.load_state_dict(ckpt["optimizer"])
        run.scheduler.load_state_dict(ckpt["scheduler"])
        run.step, run.epoch, run.position, run.best = ckpt["step"], ckpt["epoch"], ckpt["position"], ckpt["best"]
        run.bad_evals = ckpt.get("bad_evals", 0)
        run.clock = TrainedClock(float(ckpt.get("elapsed_s", 0.0)), float(ckpt.get("valid_s", 0.0)))
        run.best_step = ckpt.get("best_step")
        rng = ckpt["rng"] if isinstance(ckpt["rng"], list) else [ckpt["rng"]]
        _set_rng_state(rng[run.rank % len(rng)])  # a rank the checkpoint's run had not: another's stream
        run.log(f"resumed from {run.resume_path} at step {run.step} ({trained_text(run.clock)} before)")
        for note in run.notes:
            run.log(note)
    run.raw_model = run.model = model
    if run.world > 1 and ddp:
        run.model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    run.autocast = autocast_context(cfg.precision, device)
    run.scaler = grad_scaler(cfg.precision, device)
    if run.ckpt and run.ckpt.get("scaler") and run.scaler.is_enabled():
        run.scaler.load_state_dict(run.ckpt["scaler"])
    n_params = sum(p.numel() for p in model.parameters())
    precision = resolve_precision(cfg.precision, device)
    sizes = f"target {len(run.vocab)}, source {len(run.vocab.source)}" if run.vocab.source else len(run.vocab)
    skipped = run.train_data.skipped_long
    long = f" ({skipped} longer than max_len {cfg.max_len} skipped)" if skipped else ""
    run.log(f"syntrain: {len(run.train_data)} training pairs{long}, vocabulary {sizes}, {n_params / 1e6:.1f}M "
            f"parameters, device {device}, {run.world} process(es), precision {precision}"
            f", attention kernel {model.kernel_in_use(device)}, out {cfg.out}\n"
            f"  syntax switches: {mcfg.describe_switches()}")


def open_metrics(run: Run) -> None:
    """OUT/metrics.jsonl (a resumed run drops the records after its checkpoint), the switches' data report,
    TensorBoard."""
    cfg, header = run.cfg, {}
    for switch in run.raw_model.switches:
        text, values = switch.training_report(run.train_data)
        if text:
            run.log(f"  {text}")
        header.update(values)
    start_run_folder(cfg, run.mcfg.to_dict(), run.train_data.signature, None if run.ckpt else run.vocab, run.rank,
                     run.world)  # the run folder's first write, after every check
    if run.rank == 0 and (not run.ckpt or cfg.bundle or not os.path.isdir(os.path.join(cfg.out, SOURCE_DIR))):
        # what raw-text translation needs, next to the checkpoints (an older run folder gets it on --resume)
        write_source_files(cfg.out, run.train_data.configuration, run.train_data.signature,
                           os.path.dirname(os.path.abspath(cfg.data)), cfg.bundle, fresh=not run.ckpt)
    metrics_path = os.path.join(cfg.out, "metrics.jsonl")
    if run.rank == 0 and run.ckpt:
        _truncate_metrics(metrics_path, run.ckpt["step"])  # a resumed run redoes the steps after its checkpoint
    run.metrics_file = open(metrics_path, "a", encoding="utf-8") if run.rank == 0 else None
    if run.metrics_file and header and not run.ckpt:
        run.metrics_file.write(json.dumps({"step": 0, **header}) + "\n")
    if run.rank == 0:
        run.writer = Trackers(cfg.out, cfg.tensorboard, cfg.wandb_project, cfg.name or os.path.basename(cfg.out),
                              resumed=bool(run.ckpt))
    wait_for_rank0(run)


def save(run: Run, also_best: bool) -> None:
    """last.pt (and best.pt); a collective under DDP: every rank calls it, rank 0 writes, the others wait (for
    rank 0's validation before it too)."""
    rng = _rng_state()
    wait_for_rank0(run)
    if run.world > 1:  # every rank's RNG, so each continues its own dropout stream
        gathered: list = [None] * run.world
        dist.all_gather_object(gathered, rng)
        rng = gathered
    if run.rank == 0:
        _write_checkpoints(run, rng, also_best)
    wait_for_rank0(run)


def _write_checkpoints(run: Run, rng: dict | list, also_best: bool) -> None:
    cfg = run.cfg
    state = {"model": run.raw_model.state_dict(), "optimizer": run.optimizer.state_dict(),
             "scheduler": run.scheduler.state_dict(), "step": run.step, "epoch": run.epoch,
             "position": run.position, "best": run.best, "best_step": run.best_step, "bad_evals": run.bad_evals,
             "rng": rng, "precision": resolve_precision(cfg.precision, run.device),
             "scaler": run.scaler.state_dict() if run.scaler is not None and run.scaler.is_enabled() else None,
             **run.vocab.checkpoint_fields(), "model_config": run.mcfg.to_dict(), "train_config": asdict(cfg),
             "signature": run.train_data.signature, "pipeline": run.train_data.configuration,
             "dataset": os.path.dirname(os.path.abspath(cfg.data)), "data_fingerprint": run.fingerprint,
             "elapsed_s": round(run.clock.seconds(), 3), "valid_s": round(run.clock.valid_seconds(), 3),
             "stopped_early": run.stopped_early}
    for path in (run.last_path, run.best_path) if also_best else (run.last_path,):
        save_checkpoint(state, path)
    if cfg.keep_last:
        from .runfolder import restore_file

        restore_file(run.last_path, os.path.join(cfg.out, f"checkpoint_{run.step}.pt"))  # whole or none, named
        prune_step_checkpoints(cfg.out, cfg.keep_last)


def validate_and_save(run: Run, stop: bool) -> bool:
    """Validation (rank 0), best.pt by `best_metric`, the checkpoints, patience; returns whether to stop. Its
    time is not trained time (`TrainedClock`)."""
    with run.clock.pause():
        return _validate_and_save(run, stop)


def _validate_and_save(run: Run, stop: bool) -> bool:
    cfg = run.cfg
    if run.valid_data is not None and run.rank == 0:
        started = time.time()
        result = evaluate(run.raw_model, run.valid_data, run.vocab, cfg, run.device, cfg.eval_beam,
                          cfg.eval_sentences)
        run.log(f"step {run.step} | valid loss {result['loss']:.3f} | BLEU {result['bleu']:.2f} | "
                f"chrF {result['chrf']:.2f}{scores_text(run.raw_model, result)}")
        run.record({"step": run.step, "valid_loss": result["loss"], "valid_bleu": result["bleu"],
                    "valid_chrf": result["chrf"], **{f"valid_{key}": value for key, value in result.items()
                                                     if key not in SCORE_KEYS},
                    "elapsed_s": round(run.clock.seconds(), 1), "valid_s": round(time.time() - started, 3)})
        value = result["bleu"] if cfg.best_metric == "bleu" else result["loss"]
        improved = run.best is None or (value > run.best if cfg.best_metric == "bleu" else value < run.best)
        run.best, run.bad_evals = (value, 0) if improved else (run.best, run.bad_evals + 1)
    else:
        improved = run.valid_data is None  # no validation: best = last
    run.best_step = run.step if improved and run.rank == 0 else run.best_step
    save(run, improved)
    if cfg.patience and run.valid_data is not None and not stop:
        patience_over = torch.tensor([float(run.bad_evals >= cfg.patience)])
        if run.world > 1:  # rank 0 validated: its decision holds for all
            patience_over = patience_over.to(run.device)
            dist.broadcast(patience_over, src=0)
        if patience_over.item():
            run.stopped_early = f"patience {cfg.patience}"
            save(run, False)  # the checkpoint says so: a resume of this run has nothing left to do
            run.log(f"early stopping at step {run.step}: {run.bad_evals} validations without a better "
                    f"{cfg.best_metric} (patience {cfg.patience})")
            return True
    return stop


def revalidate_best(run: Run) -> None:
    """A resumed run whose best.pt is lost with its weights in no other file: the resumed weights, validated
    now, are the best from here on (best.pt written), so the run still ends with a best.pt and a test score."""
    if not run.lost or run.lost[1] or run.rank != 0:
        return
    cfg = run.cfg
    if run.valid_data is None:
        raise ValueError(f"{run.lost[0]}, and the run has no validation split to choose another best from: give "
                         f"--valid, or copy {run.resume_path} to {run.best_path}")
    result = evaluate(run.raw_model, run.valid_data, run.vocab, cfg, run.device, cfg.eval_beam, cfg.eval_sentences)
    run.best = result["bleu"] if cfg.best_metric == "bleu" else result["loss"]
    run.best_step, run.bad_evals = run.step, 0
    save_checkpoint({**run.ckpt, "best": run.best, "best_step": run.step, "bad_evals": 0}, run.best_path)
    run.log(f"syntrain: {run.lost[0]}: its weights are in no other file; {run.resume_path} (step {run.step}) "
            f"re-validated ({cfg.best_metric} {run.best:.3f}) is the best from here on, written to {run.best_path}")


class Window:
    """Training loss, auxiliary losses and tokens since the last log line."""

    def __init__(self) -> None:
        self.loss, self.tokens, self.aux, self.start = 0.0, 0, {}, time.time()

    def add(self, loss: torch.Tensor, tokens: int, aux: dict[str, torch.Tensor]) -> None:
        self.loss, self.tokens = self.loss + loss.detach() * tokens, self.tokens + tokens
        for name, value in aux.items():
            self.aux[name] = self.aux.get(name, 0.0) + value * tokens

    def report(self, run: Run, first_step: int) -> None:
        """The log line and metrics record of the window (then a new window starts); `elapsed_s`: the trained
        time (`TrainedClock`)."""
        cfg, tokens = run.cfg, self.tokens
        seconds, elapsed = max(time.time() - self.start, 1e-9), time.time() - run.clock.start
        values = {"step": run.step, "epoch": run.epoch, "loss": round(self.loss.item() / tokens, 4),
                  "lr": run.scheduler.get_last_lr()[0], "tokens": tokens * run.world,
                  "tokens_per_s": round(tokens * run.world / seconds), "elapsed_s": round(run.clock.seconds(), 1)}
        values.update({f"loss_{name}": round(value.item() / tokens, 4)
                       for name, value in self.aux.items()})  # per target token, unweighted
        aux_text = "".join(f" | {name} {values[f'loss_{name}']:.3f}" for name in self.aux)
        eta = format_eta(run.step, first_step, elapsed, cfg.max_steps, cfg.max_minutes, trained=run.clock.seconds())
        run.log(f"step {run.step} | loss {values['loss']:.3f}{aux_text} | lr {values['lr']:.2e} | "
                f"{values['tokens_per_s']} tok/s | ETA {eta}")
        run.record(values)
        self.__init__()


def optimizer_step(run: Run, group: list[Batch], window: Window) -> None:
    """One update over the batches of `group`."""
    aux: dict[str, torch.Tensor] = {}
    loss, tokens = accumulate_gradients(run.model, group, run.device, run.autocast, run.cfg.label_smoothing, aux,
                                        run.scaler)
    run.scaler.unscale_(run.optimizer)  # fp16: the true gradients before clipping (a no-op otherwise)
    if run.cfg.clip_norm:
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.clip_norm)
    run.scaler.step(run.optimizer)  # fp16: skipped when a gradient overflowed (the scale is lowered)
    run.scaler.update()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    run.step, run.position = run.step + 1, run.position + len(group)
    window.add(loss, tokens, aux)


def _out_of_time(run: Run, log_step: bool) -> bool:
    out_of_time = bool(run.cfg.max_minutes) and run.clock.seconds() / 60 >= run.cfg.max_minutes
    if run.world > 1 and run.cfg.max_minutes:  # all ranks stop at the same step, agreed at log steps (a sync)
        if not log_step:
            return False
        flag = torch.tensor([float(out_of_time)], device=run.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        out_of_time = bool(flag.item())
    return out_of_time


def training_loop(run: Run) -> None:
    """Epochs of seeded batches (this rank's share, collated ahead on a thread) until max_steps, max_minutes
    or patience; logs every log_interval steps, validates and saves every eval_interval steps."""
    cfg = run.cfg
    run.model.train()
    first_step, window = run.step, Window()
    stop = run.step >= cfg.max_steps
    prepared, cuda_graphs = False, False
    while not stop:
        batches = run.train_data.batches(cfg.max_tokens, cfg.seed, run.epoch)
        if not prepared:
            cuda_graphs, prepared = prepare_steps(run, batches), True
        per_rank = len(batches) // run.world
        if per_rank == 0:
            raise ValueError(f"{cfg.data}: fewer batches ({len(batches)}) than processes ({run.world})")
        batches = batches[run.rank :: run.world][:per_rank]
        make_group = functools.partial(collate_group, data=run.train_data, batches=batches, accum=cfg.accum_steps,
                                       device=run.device)  # on the prefetch thread, while the previous step runs
        groups = prefetch(range(run.position, per_rank, cfg.accum_steps), make_group)
        for group in groups:
            if cuda_graphs:
                torch.compiler.cudagraph_mark_step_begin()
            optimizer_step(run, group, window)
            log_step = run.step % cfg.log_interval == 0 or run.step == 1
            stop = run.step >= cfg.max_steps or _out_of_time(run, log_step)
            if log_step or stop:  # the first and the last step always
                window.report(run, first_step)
            if run.step % cfg.eval_interval == 0 or stop:
                stop = validate_and_save(run, stop)
                window.start = time.time()  # evaluation time is not training throughput
            if stop:
                groups.close()  # the prefetch thread finishes the batches it has started
                break
        if run.position >= per_rank:
            run.epoch, run.position = run.epoch + 1, 0


def trained_text(clock: TrainedClock) -> str:
    """The trained time of a run for its log lines, saying that validation is not in it."""
    return (f"{clock.seconds() / 60:.1f} min trained (what max_minutes counts; validation and checkpoints: "
            f"{clock.valid_seconds() / 60:.1f} min more)")


def score_test_split(run: Run) -> None:
    """The test split scored with best.pt (rank 0); Ctrl-C while it decodes is `Interrupted` (exit 130), naming
    the `syntrain eval` command that scores best.pt, which is complete."""
    import shlex

    from synprep.errors import Interrupted

    cfg = run.cfg
    if not cfg.test or run.rank != 0:
        return
    try:
        model_best, _, _ = load_checkpoint(run.best_path, run.device, run.mcfg)  # this run's config, built once
        hyps: list[str] = []
        pieces: list[list[str]] = []
        result = evaluate(model_best, run.test_data, run.vocab, cfg, run.device, cfg.test_beam,
                          progress="test: translating", hyps=hyps, pieces=pieces)
    except KeyboardInterrupt:
        command = ["syntrain", "eval", "--checkpoint", run.best_path, "--data", cfg.test, "--beam",
                   str(cfg.test_beam), "--length-penalty", f"{cfg.length_penalty:g}"]
        if cfg.bleu_tokenize != "auto":
            command += ["--bleu-tokenize", cfg.bleu_tokenize]
        raise Interrupted(f"interrupted while scoring the test split; training is done and {run.best_path} is "
                          f"intact: score it with {shlex.join(command)}") from None
    run.log(f"test ({cfg.test}, best.pt, beam {cfg.test_beam}): BLEU {result['bleu']:.2f} chrF {result['chrf']:.2f}"
            f"{scores_text(model_best, result)}"
            f"\n  BLEU signature: {result['bleu_signature']}\n  chrF signature: {result['chrf_signature']}")
    run.record({"step": run.step, "test": cfg.test, **{f"test_{k}": v for k, v in result.items()}})
    from .compare import decoding_key, write_hypotheses  # compare reuses them while its key is this one

    write_hypotheses(cfg.out, model_best, hyps, pieces,
                     decoding_key(run.best_path, cfg.test, run_settings(cfg).key(run.device)))


def close(run: Run) -> None:
    """Close the metrics and TensorBoard files and the process group this run opened."""
    if run.metrics_file:
        run.metrics_file.close()
    if run.writer:
        run.writer.close()
    if run.own_group:
        dist.destroy_process_group()
    elif run.rank0_group is not None:
        dist.destroy_process_group(run.rank0_group)


def train(cfg: TrainConfig) -> Transformer:
    """Run (or resume) training as configured; returns the trained model (unwrapped). A resume of a run that
    has nothing left to do under its budget (counted over the whole run) says so and returns its last model."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(peer_faults(*processes()))
        run = set_up(cfg, stack)
        if run.ckpt and (reason := finished_reason(run.cfg, run.ckpt)):
            if run.lost and not run.lost[1]:  # best.pt lost (rank 0 finds it): re-validated before the run ends
                load_data(run)
                make_model(run, ddp=False)  # rank 0 alone: no collective
                revalidate_best(run)
            run.log(f"syntrain: {run.cfg.out} is complete ({reason}): nothing to train. The budget counts over the "
                    "whole run: raise --max-steps or --max-minutes to go on; syntrain eval --checkpoint "
                    f"{run.best_path} --data TEST scores it again")
            close(run)
            return load_checkpoint(run.resume_path)[0]
        load_data(run)
        run.fingerprint = data_fingerprint(run.cfg.data)
        make_model(run)
        revalidate_best(run)
        wait_for_rank0(run)
        open_metrics(run)
        run.clock.restart()
        training_loop(run)
        run.log(f"trained to step {run.step}: {trained_text(run.clock)}")
        score_test_split(run)
        close(run)
        return run.raw_model


def _model_fields() -> set[str]:
    from .model import config_parts

    return {spec.name for part in config_parts().values() for spec in dataclass_fields(part)}


def run(recipe: str | None = None, *, sets: Sequence[str] = (), model: dict[str, Any] | None = None,
          **fields: Any) -> str:  # noqa: ANN401 (TOML values)
    """`syntrain run`: train (or resume) from a TOML recipe and/or fields (recipe < `sets` ("model.d_model=512")
    < `fields`; docs/recipe-fields.md), every value checked before anything is read or written. Fields of
    [model] may be given by name too (`pascal_heads=2`) or in `model`. Returns the run folder (`out`, or the
    folder named runs/<name>-<time>), which holds best.pt, last.pt, config.toml, train.log and metrics.jsonl."""
    from .config import check_run, resolve_run
    from .runfolder import logged_run

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
        if cfg.out and rank == 0:
            stack.enter_context(run_folder_lock(cfg.out))  # before the folder is looked at: one writer
        point = resume_point(cfg.out) if cfg.resume else None
        if point is not None and rank == 0:
            origin = "" if os.path.basename(point[0]) == "last.pt" else \
                f" (from {os.path.basename(point[0])}: last.pt is missing or damaged)"
            log.info(f"syntrain: resuming {cfg.out} at step {int(point[1]['step'])}{origin}")
        notes += check_run(cfg, model_label)
        for note in notes:
            run_log.hold(note)  # printed when the run starts, after the checks that need the data
        train(cfg)
    return cfg.out


make_callable(__name__, run)  # syntrain.train(...) is syntrain.train.run(...) (docs/python-api.md)
