"""syntrain's Python API (docs/python-api.md): `train`, `Translator`, `evaluate`, with the command line's defaults
and checks (`syntrain run` and `syntrain eval` call these). Bad values raise ValueError (`ConfigError` for the
configuration) with the message the command line prints."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from synprep.results import Printed

from .train import run as train
from .translate import Translator, default_device

if TYPE_CHECKING:
    from .dataset import ParallelData
    from .decode import DecodeSettings
    from .model import Transformer
    from .vocab import Vocab

__all__ = ["AverageResult", "EnvResult", "Translator", "average", "env", "evaluate", "score_hypotheses",
           "scored_split", "train"]

log = logging.getLogger(__name__)


def scored_split(model: Transformer, vocab: Vocab, path: str) -> ParallelData:
    """A split to score `model` on (its target text checked readable), with the model's vocabulary."""
    from synprep.shards import open_split

    from .dataset import ParallelData, check_scored_split, readable_target

    check_scored_split(path)
    arguments = model.switches.parallel_data_arguments(training=False)
    arguments["decoder_target"] = readable_target(arguments["decoder_target"], list(open_split(path).columns))
    return ParallelData(path, vocab, **arguments)


def score_hypotheses(hypotheses: Sequence[str], data: ParallelData, normalize_refs: Sequence[str] = (),
                     bleu_tokenize: str = "auto") -> tuple[dict[str, Any], list[str]]:
    """sacrebleu BLEU and chrF (with their signatures) of `hypotheses` against the split's raw target text
    (normalized first by `normalize_refs`, in order); returns (scores, references)."""
    from synprep.normalize import normalizer

    from .scoring import score

    normalize = normalizer(tuple(normalize_refs))
    references = [normalize(ref) for ref in data.references(data.keep)]
    return score(hypotheses, references, data.tgt_lang, bleu_tokenize), references


@dataclass
class Evaluation:
    """A model and a split made ready to be scored (`evaluation`), then scored (`run`): the one body of
    `syntrain eval` and `evaluate` (which checks its arguments as the command line does, then calls these)."""

    model: Transformer
    vocab: Vocab
    split: ParallelData
    settings: DecodeSettings
    device: str
    scored: str  # the checkpoint, or the pretrained model folder
    pretrained: bool
    hypotheses: list[str] = field(default_factory=list)
    pieces: list[list[str]] = field(default_factory=list)  # each hypothesis's pieces (the switches' outputs)
    references: list[str] = field(default_factory=list)  # normalized as scored

    def run(self, normalize_refs: Sequence[str] = (), bleu_tokenize: str = "auto",
            progress: bool = False) -> dict[str, Any]:
        """Decode the split, score it and return the record `syntrain eval --json` writes: {"bleu",
        "bleu_signature", "chrf", "chrf_signature", "loss", the switches' measures, "checkpoint" or "pretrained",
        "data", "pairs", the decoding settings, "normalize_refs", "key": what the scores depend on, as
        RUN/test.hyp.json records it (`compare.decoding_key`)}."""
        from .compare import decoding_key
        from .decode import decode_split, settings_text
        from .switches import decoded
        from .validation import split_loss

        self.hypotheses = decode_split(self.model, self.split, self.vocab, self.settings, device=self.device,
                                       progress="eval: translating" if progress else False, pieces=self.pieces)
        settings = self.settings.key(self.device)
        log.info(f"eval: {settings_text(settings)}")
        result, self.references = score_hypotheses(self.hypotheses, self.split, normalize_refs, bleu_tokenize)
        result["loss"] = round(split_loss(self.model, self.split, self.settings.max_tokens, self.device), 4)
        for outputs in decoded(self.model.switches):
            result.update(outputs.scores(self.pieces, self.split, self.split.keep))
        return {**result, ("pretrained" if self.pretrained else "checkpoint"): os.path.abspath(self.scored),
                "data": os.path.abspath(self.split.path), "pairs": len(self.hypotheses), **settings,
                "normalize_refs": list(normalize_refs), "key": decoding_key(self.scored, self.split.path, settings)}


def warn_signature(ckpt: dict, split: ParallelData) -> None:
    """Log a warning where the split's shards were not made as the checkpoint's training data (synprep
    signatures: the parser, the sub-words)."""
    from .config.resolve import signature_differences

    differ = signature_differences(ckpt.get("signature", {}), split.signature)
    if differ:
        log.warning(f"warning: the shards were not made with the {' and '.join(differ)} of the training data "
                    "(synprep signatures differ)")


def evaluation(checkpoint: str | None, data: str, *, beam: int | None = None, length_penalty: float | None = None,
               max_tokens: int | None = None, threads: int | None = None, device: str | None = None,
               pretrained: str | None = None, src_lang_code: str = "", tgt_lang_code: str = "") -> Evaluation:
    """The model (`checkpoint`, or the Hugging Face folder `pretrained` with its language codes) and the split
    folder `data` loaded and checked, the decoding settings chosen (the run's final test's, or the declared [train]
    defaults for a pretrained model, each replaced by a value given); logs a warning where the split's shards
    were not made as the training data's, or hold pieces the pretrained model lacks."""
    from .config.recipe import stored_train_config
    from .config.train import TrainConfig
    from .decode import run_settings
    from .pretrained import load_pretrained, missing_pieces
    from .runfolder.checkpoints import load_checkpoint

    if (checkpoint is None) == (pretrained is None):
        raise ValueError("give the model to score: a checkpoint or a pretrained model folder (one)")
    device = device or default_device()
    if checkpoint:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        stored = stored_train_config(ckpt, checkpoint)
    else:
        codes = {"src_lang_code": src_lang_code, "tgt_lang_code": tgt_lang_code}
        (model, vocab, _), stored, ckpt = load_pretrained(pretrained or "", device, **codes), TrainConfig(), {}
    split = scored_split(model, vocab, data)
    if checkpoint:
        warn_signature(ckpt, split)
    elif note := missing_pieces(split.table, vocab, f"the split {split.path}"):
        log.warning(note)
    settings = run_settings(stored, beam, length_penalty, max_tokens, threads)
    return Evaluation(model, vocab, split, settings, device, checkpoint or pretrained or "", checkpoint is None)


def evaluate(checkpoint: str | None, data: str, *, beam: int | None = None, length_penalty: float | None = None,
             max_tokens: int | None = None, threads: int | None = None, bleu_tokenize: str = "auto",
             normalize_refs: Sequence[str] = (), device: str | None = None, progress: bool = False,
             pretrained: str | None = None, src_lang_code: str = "", tgt_lang_code: str = "") -> dict[str, Any]:
    """`syntrain eval`: translate the split folder `data` with `checkpoint` and score it, decoding as the run's
    final test did (its beam, length penalty, max_tokens and threads, each replaced by a value given): the same
    hypotheses as the run's test.hyp, `syntrain eval` and `syntrain compare`; or (`checkpoint` None) the
    Hugging Face model folder `pretrained` as it is (a multilingual one with its `src_lang_code` and
    `tgt_lang_code`), with the declared [train] defaults. Returns what `syntrain eval --json` writes
    (`Evaluation.run`: the scores, the loss, the switches' measures, what was scored, the decoding settings and
    the "key" the scores depend on) and "hypotheses"."""
    from .arguments import check_decoding, syntrain_arguments

    checked = syntrain_arguments("syntrain eval", checkpoint=checkpoint, data=data, normalize_refs=normalize_refs,
                                 device=device, progress=progress, pretrained=pretrained,
                                 src_lang_code=src_lang_code, tgt_lang_code=tgt_lang_code)
    check_decoding("syntrain eval", beam=beam, length_penalty=length_penalty, max_tokens=max_tokens, threads=threads,
                   bleu_tokenize=bleu_tokenize)
    scoring = evaluation(checked["checkpoint"], checked["data"], beam=beam, length_penalty=length_penalty,
                         max_tokens=max_tokens, threads=threads, device=device, pretrained=checked["pretrained"],
                         src_lang_code=src_lang_code, tgt_lang_code=tgt_lang_code)
    record = scoring.run(normalize_refs, bleu_tokenize, progress)
    return {**record, "hypotheses": scoring.hypotheses}


@dataclass(frozen=True, repr=False)
class AverageResult(Printed):
    """`syntrain.average`: the averaged checkpoint written and how many were averaged."""

    output: str
    count: int
    text: str


def average(checkpoints: Sequence[str], output: str, *, force: bool = False) -> AverageResult:
    """`syntrain average CHECKPOINTS -o OUTPUT`: the mean of the weights of checkpoints of one run (`force`: of
    different runs too), usable by translate and eval (no optimizer state)."""

    from synprep.errors import InputError
    from synprep.outputs import check_outputs

    from .arguments import check_folders, syntrain_arguments
    from .runfolder.checkpoints import average_checkpoints, save_checkpoint

    checked = syntrain_arguments("syntrain average", checkpoints=checkpoints, output=output, force=force)
    paths, output = checked["checkpoints"], checked["output"]
    try:
        check_folders([output])
        check_outputs({"-o": output}, {f"the checkpoint {path} it averages": path for path in paths}, runs=True)
        averaged = average_checkpoints(list(paths), checked["force"])
    except InputError as err:
        raise ValueError(str(err)) from None
    save_checkpoint(averaged, output)
    return AverageResult(output, len(paths), f"wrote {output}: the mean of {len(paths)} checkpoint(s)")


@dataclass(frozen=True, repr=False)
class EnvResult(Printed):
    """`syntrain.env`: torch's version, the device training would use, what `auto` picks there, the syntax
    switches ([model] keys per switch) and, with a checkpoint, the switches it was trained with."""

    torch: str
    device: str
    precision: str
    flex: bool
    switches: dict[str, list[str]]
    checkpoint: str | None
    text: str


def env(checkpoint: str | None = None) -> EnvResult:
    """`syntrain env`: what this machine would train with (device, precision, attention kernels) and the syntax
    switches; with `checkpoint`, also the switches it was trained with."""
    from dataclasses import fields

    import torch

    from . import __version__
    from .arguments import syntrain_arguments
    from .config.core import CORE_PARTS
    from .config.model import config_parts
    from .precision import resolve_precision
    from .transformer_layers import flex_available

    cuda = torch.cuda.is_available()
    device = f"cuda ({torch.cuda.get_device_name()})" if cuda else "cpu"
    precision = resolve_precision("auto", torch.device("cuda" if cuda else "cpu"))
    flex = flex_available()
    switches = {name: [f.name for f in fields(cls) if not f.metadata.get("filled")]
                for name, cls in config_parts().items() if name not in CORE_PARTS}
    lines = [f"syntrain {__version__}, torch {torch.__version__}, device {device}; auto: precision {precision}, "
             f"Pascal attention kernel math (flex on request: {'available' if flex else 'not in this torch'})",
             "syntax switches ([model] keys, all off by default): "
             + "; ".join(f"{name}: {', '.join(keys)}" for name, keys in switches.items())]
    described = None
    if checkpoint is not None:
        from .runfolder.checkpoints import load_checkpoint

        model, _, _ = load_checkpoint(syntrain_arguments("syntrain env", checkpoint=checkpoint)["checkpoint"])
        described = model.switches.describe()
        lines.append(f"{checkpoint}: {described}")
    return EnvResult(torch.__version__, device, precision, flex, switches, described, "\n".join(lines))
