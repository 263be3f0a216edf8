"""Checkpoint files: reading and loading one (model, vocabulary, the whole dict), writing one safely, a run's
checkpoints (last.pt, best.pt, the kept checkpoint_<step>.pt), averaging the checkpoints of a run. Which files
make a run folder is `files.py`.
"""

from __future__ import annotations

import math
import os

import torch

from ..config.model import ModelConfig
from ..config.recipe import stored_model_config
from ..model import Transformer
from ..vocab import Vocab
from .files import BEST, LAST, prune_step_checkpoints, step_checkpoint

_NUMBER, _NONE = (int, float), type(None)
# every field a checkpoint holds that a reader reads (--resume, eval, translate, compare, average, export-hf, env),
# with the types it may have: a field of another type or impossible (a count below 0, a number that is not finite
# but `best`, weights that are not tensors) is a damaged checkpoint, refused by every reader (`field_problem`)
CHECKPOINT_FIELDS: dict[str, tuple[type, ...]] = {
    "model": (dict,), "optimizer": (dict,), "scheduler": (dict,), "step": (int,), "epoch": (int,),
    "position": (int,), "rng": (dict, list), "vocab": (list,), "src_vocab": (list,), "model_config": (dict,),
    "best": (*_NUMBER, _NONE), "best_step": (int, _NONE), "bad_evals": (int,), "train_config": (dict,),
    "scaler": (dict, _NONE), "elapsed_s": _NUMBER, "valid_s": _NUMBER, "stopped_early": (str, _NONE),
    "signature": (dict, _NONE), "data_fingerprint": (str, _NONE), "precision": (str, _NONE),
    "pipeline": (dict, _NONE), "dataset": (str, _NONE), "pretrained": (dict, _NONE), "averaged_from": (list,)}
COUNTS = ("step", "epoch", "position", "bad_evals")


def field_problem(ckpt: dict) -> str | None:
    """What is wrong with the fields `ckpt` holds (`CHECKPOINT_FIELDS`: their types and ranges, the weights
    tensors), in words, or None; a field it lacks is the reader's to require."""
    for key, kinds in CHECKPOINT_FIELDS.items():
        value = ckpt.get(key)
        if key in ckpt and (not isinstance(value, kinds) or isinstance(value, bool)):
            return f"{key} is {type(value).__name__}, not {' or '.join(kind.__name__ for kind in kinds)}"
        if key in COUNTS and key in ckpt and value < 0:
            return f"{key} is {value}, below 0"
        if isinstance(value, float) and not math.isfinite(value) and key != "best":
            return f"{key} is {value}"
    weights = ckpt.get("model")
    if isinstance(weights, dict) and (wrong := next((name for name, value in weights.items()
                                                     if not torch.is_tensor(value)), None)) is not None:
        return f"model {wrong} is {type(weights[wrong]).__name__}, not a tensor"
    return None


def read_checkpoint(path: str, device: str | torch.device = "cpu") -> dict:
    """A checkpoint file as its dict; an unreadable or foreign file is a ValueError naming it."""
    from synprep.textio import regular_file

    regular_file(path, "the checkpoint")
    try:
        ckpt = torch.load(path, map_location=device, weights_only=False)
    except Exception as error:  # pickle/zip errors of all kinds
        raise ValueError(f"{path}: not a readable checkpoint ({type(error).__name__}: {error})") from None
    missing = [key for key in ("model", "model_config", "vocab") if not isinstance(ckpt, dict) or key not in ckpt]
    if missing:
        raise ValueError(f"{path}: not a syntrain checkpoint (no {', '.join(missing)})")
    if (problem := field_problem(ckpt)) is not None:
        raise ValueError(f"{path}: the checkpoint is damaged ({problem})")
    return ckpt


def load_checkpoint(path: str, device: str | torch.device = "cpu", mcfg: ModelConfig | None = None
                    ) -> tuple[Transformer, Vocab, dict]:
    """A checkpoint -> (model in eval mode, vocabulary, the whole checkpoint dict). `mcfg`: the model config
    when the caller has it already (a run scoring its own best.pt), else the checkpoint's is built."""
    ckpt = read_checkpoint(path, device)
    mcfg = mcfg or stored_model_config(ckpt, path)
    vocab = checkpoint_vocab(ckpt, mcfg, path)
    model = Transformer(mcfg).to(device)  # new keys: their defaults
    load_weights(model, ckpt["model"], path)
    return model.eval(), vocab, ckpt


def checkpoint_vocab(ckpt: dict, mcfg: ModelConfig, path: str) -> Vocab:
    """The checkpoint's vocabulary, checked against its recorded model configuration (one line naming the file
    when they disagree: a model would decode through another vocabulary than it was trained with)."""
    try:
        vocab = Vocab.from_checkpoint(ckpt)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: the stored vocabulary is damaged ({err})") from None
    if len(vocab) != mcfg.sizes.vocab_size:
        raise ValueError(f"{path}: the stored vocabulary has {len(vocab)} entries but the recorded model "
                         f"configuration {mcfg.sizes.vocab_size} (a checkpoint pieced together from two runs?)")
    if len(vocab.source or ()) != mcfg.sizes.src_vocab_size:
        raise ValueError(f"{path}: the stored source vocabulary has {len(vocab.source or ())} entries but the "
                         f"recorded model configuration {mcfg.sizes.src_vocab_size} (0: joint)")
    return vocab


def load_weights(model: torch.nn.Module, weights: dict, path: str) -> None:
    """model.load_state_dict, with a mismatch between the recorded configuration and the weights as one line
    naming the file and the first differing tensor (no traceback of every key)."""
    own = model.state_dict()
    if not isinstance(weights, dict):
        raise ValueError(f"{path}: the stored weights are damaged (not a table of tensors)")
    missing, extra = [k for k in own if k not in weights], [k for k in weights if k not in own]
    shapes = [f"{k} {tuple(weights[k].shape)} where the configuration gives {tuple(v.shape)}" for k, v in own.items()
              if k in weights and hasattr(weights[k], "shape") and tuple(weights[k].shape) != tuple(v.shape)]
    problem = (shapes[0] if shapes else f"no weights for {missing[0]}" if missing
               else f"weights {extra[0]} that the configuration has no place for" if extra else "")
    if problem:
        count = len(shapes) + len(missing) + len(extra)
        raise ValueError(f"{path}: the weights do not fit the recorded model configuration: {problem}"
                         f"{f' (and {count - 1} more)' if count > 1 else ''}")
    check_finite(weights, path)
    model.load_state_dict(weights)


def nonfinite_weight(weights: dict | list) -> str | None:
    """The name of the first tensor of `weights` (a table of tensors, or of tables and lists of them: an
    optimizer's state, named `3.exp_avg`) holding NaN or an infinity, or None."""
    for name, value in weights.items() if isinstance(weights, dict) else enumerate(weights):
        if isinstance(value, dict | list) and (inner := nonfinite_weight(value)) is not None:
            return f"{name}.{inner}"
        if torch.is_tensor(value) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return str(name)
    return None


def check_finite(weights: dict, path: str, what: str = "weights hold") -> None:
    """A ValueError naming the file and the first tensor holding NaN or an infinity: such a checkpoint (a run
    that diverged) decodes to empty lines, scores 0 and trains on in NaN, so it is refused wherever one is loaded
    (`what`: the part of it, "weights hold" or "optimizer state holds": a resumed run steps into NaN at once)."""
    if (name := nonfinite_weight(weights)) is not None:
        raise ValueError(f"{path}: the {what} NaN or infinite values ({name}): the run diverged before "
                         "this checkpoint was written; use an earlier checkpoint of the run")


def run_identity(ckpt: dict) -> dict:
    """What makes checkpoints steps of one run: its folder, training data (signature and shards) and seed."""
    stored = ckpt.get("train_config") or {}
    out = stored.get("out")
    return {"run folder": os.path.abspath(out) if isinstance(out, str) and out else None,
            "training data": (ckpt.get("signature"), ckpt.get("data_fingerprint"), ckpt.get("dataset")),
            "seed": stored.get("seed")}


def average_checkpoints(paths: list[str], force: bool = False) -> dict:
    """The checkpoint of the last path with its model weights replaced by the mean over all paths (as fairseq's
    average_checkpoints.py); the optimizer state is dropped. All must share model configuration and vocabulary,
    and (unless `force`) be checkpoints of one run: its folder, training data and seed."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    base: dict = {}
    for path in paths:
        ckpt = load_checkpoint(path)[2]  # every part checked: the configuration, vocabulary and weights
        if base and (ckpt["model_config"] != base["model_config"] or ckpt.get("vocab") != base.get("vocab")
                     or ckpt.get("src_vocab") != base.get("src_vocab")):
            raise ValueError(f"{path}: another model configuration or vocabulary than {paths[0]}")
        if base and not force:
            differ = [what for what, value in run_identity(ckpt).items() if value != run_identity(base)[what]]
            if differ:
                raise ValueError(f"{path}: a checkpoint of another run than {paths[0]} (its {' and '.join(differ)} "
                                 "differ): average the checkpoints of one run, or --force")
        for name, tensor in ckpt["model"].items():
            value = tensor.double() if tensor.is_floating_point() else tensor
            total[name] = total[name] + value if name in total and tensor.is_floating_point() else value
        base = ckpt
    model = {name: (value / len(paths)).to(base["model"][name].dtype) if value.is_floating_point() else value
             for name, value in total.items()}
    averaged = {key: value for key, value in base.items() if key not in ("optimizer", "scheduler", "rng")}
    return {**averaged, "model": model, "averaged_from": [os.path.abspath(p) for p in paths]}


def save_checkpoint(state: dict, path: str) -> None:
    """torch.save under a temporary name, then rename: a full disk or a kill leaves the previous file intact and
    no partial one; a write error is one line naming the file and the cause (a missing folder, a read-only file
    system, a full disk)."""
    from synprep.errors import InputError
    from synprep.textio import replaceable

    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"cannot write the checkpoint: the folder {folder} does not exist", path)
    tmp = path + ".tmp" if replaceable(path) else path  # a device (/dev/null) is written in place, never replaced
    try:
        with open(tmp, "wb") as out:  # our file object: the system's error (errno) reaches us, not torch's wrapper
            torch.save(state, out)
            out.flush()
            if tmp != path:
                os.fsync(out.fileno())
        if tmp != path:
            os.replace(tmp, path)
    except BaseException as err:  # a write error, or Ctrl-C / a signal while writing: no partial file left
        if tmp != path and os.path.exists(tmp):
            os.remove(tmp)
        if not isinstance(err, OSError | RuntimeError):  # torch reports a failed write of its zip writer so
            raise
        raise InputError(f"cannot write the checkpoint: {_write_error(err)}", path) from None


def write_run_checkpoints(out: str, state: dict, also_best: bool, keep_last: int) -> None:
    """A run's checkpoint of step `state["step"]`: OUT/last.pt (and best.pt); with `keep_last` also a copy as
    checkpoint_<step>.pt (whole or none), the older ones beyond the `keep_last` most recent deleted."""
    from synprep.textio import atomic_copy

    last = os.path.join(out, LAST)
    for path in (last, os.path.join(out, BEST)) if also_best else (last,):
        save_checkpoint(state, path)
    if keep_last:
        atomic_copy(last, os.path.join(out, step_checkpoint(state["step"])))
        prune_step_checkpoints(out, keep_last)


def _write_error(err: BaseException) -> str:
    """The cause of a failed write in words: the system's (errno) where one is known, else torch's message."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return " ".join(str(err).split()) or "the write failed"
