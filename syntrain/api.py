"""syntrain's Python API (docs/python-api.md): `train`, `Translator`, `evaluate`, with the command line's defaults
and checks (`syntrain run` and `syntrain eval` call these). Bad values raise ValueError (`ConfigError` for the
configuration) with the message the command line prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from synprep.results import Printed

from .train import run as train
from .translate import Translator, default_device

if TYPE_CHECKING:
    from .dataset import ParallelData
    from .model import Transformer
    from .vocab import Vocab

__all__ = ["AverageResult", "EnvResult", "Translator", "average", "env", "evaluate", "score_hypotheses",
           "scored_split", "train"]


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


def evaluate(checkpoint: str | None, data: str, *, beam: int | None = None, length_penalty: float | None = None,
             max_tokens: int | None = None, threads: int | None = None, bleu_tokenize: str = "auto",
             normalize_refs: Sequence[str] = (), device: str | None = None, progress: bool = False,
             pretrained: str | None = None, src_lang_code: str = "", tgt_lang_code: str = "") -> dict[str, Any]:
    """`syntrain eval`: translate the split folder `data` with `checkpoint` and score it, decoding as the run's
    final test did (its beam, length penalty, max_tokens and threads, each replaced by a value given): the same
    hypotheses as the run's test.hyp, `syntrain eval` and `syntrain compare`; or (`checkpoint` None) the
    Hugging Face model folder `pretrained` as it is (a multilingual one with its `src_lang_code` and
    `tgt_lang_code`), with the declared [train] defaults. Returns {"bleu",
    "bleu_signature", "chrf", "chrf_signature", "loss", the switches' measures, "hypotheses", the decoding
    settings, "normalize_refs", "key": what the scores depend on, as `syntrain compare` records it
    (`compare.decoding_key`: the checkpoint, the split's path and content, the decoding settings)}."""
    from .arguments import check_decoding, syntrain_arguments
    from .config.recipe import stored_train_config
    from .config.train import TrainConfig
    from .decode import decode_split, run_settings
    from .pretrained import load_pretrained
    from .runfolder.checkpoints import load_checkpoint
    from .switches import decoded
    from .validation import split_loss

    checked = syntrain_arguments("syntrain eval", checkpoint=checkpoint, data=data, normalize_refs=normalize_refs,
                                 device=device, progress=progress, pretrained=pretrained,
                                 src_lang_code=src_lang_code, tgt_lang_code=tgt_lang_code)
    check_decoding("syntrain eval", beam=beam, length_penalty=length_penalty, max_tokens=max_tokens, threads=threads,
                   bleu_tokenize=bleu_tokenize)
    checkpoint, data, pretrained = checked["checkpoint"], checked["data"], checked["pretrained"]
    if (checkpoint is None) == (pretrained is None):
        raise ValueError("evaluate: give a checkpoint or pretrained=FOLDER (one)")
    device = device or default_device()
    if checkpoint:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        stored = stored_train_config(ckpt, checkpoint)
    else:
        codes = {"src_lang_code": src_lang_code, "tgt_lang_code": tgt_lang_code}
        (model, vocab, _), stored = load_pretrained(pretrained or "", device, **codes), TrainConfig()
    split = scored_split(model, vocab, data)
    settings = run_settings(stored, beam, length_penalty, max_tokens, threads)
    pieces: list[list[str]] = []
    hyps = decode_split(model, split, vocab, settings, device=device,
                        progress="eval: translating" if progress else False, pieces=pieces)
    result, _ = score_hypotheses(hyps, split, normalize_refs, bleu_tokenize)
    result["loss"] = round(split_loss(model, split, settings.max_tokens, device), 4)
    for outputs in decoded(model.switches):
        result.update(outputs.scores(pieces, split, split.keep))
    from .compare import decoding_key

    key = decoding_key(checkpoint or pretrained or "", data, settings.key(device))  # as RUN/test.hyp.json's
    return {**result, "hypotheses": hyps, **settings.key(device), "normalize_refs": list(normalize_refs), "key": key}


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
