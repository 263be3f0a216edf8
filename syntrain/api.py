"""syntrain's Python API (docs/python-api.md): `train`, `Translator`, `evaluate`, with the command line's defaults
and checks (`syntrain run` and `syntrain eval` call these). Bad values raise ValueError (`ConfigError` for the
configuration) with the message the command line prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .train import run as train
from .translate import Translator, default_device

if TYPE_CHECKING:
    from .dataset import ParallelData
    from .model import Transformer
    from .vocab import Vocab

__all__ = ["Translator", "evaluate", "score_hypotheses", "scored_split", "train"]


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
             pretrained: str | None = None) -> dict[str, Any]:
    """`syntrain eval`: translate the split folder `data` with `checkpoint` and score it, decoding as the run's
    final test did (its beam, length penalty, max_tokens and threads, each replaced by a value given): the same
    hypotheses as the run's test.hyp, `syntrain eval` and `syntrain compare`; or (`checkpoint` None) the
    Hugging Face model folder `pretrained` as it is, with the declared [train] defaults. Returns {"bleu",
    "bleu_signature", "chrf", "chrf_signature", "loss", the switches' measures, "hypotheses", the decoding
    settings}."""
    from .config.recipe import stored_train_config
    from .config.train import TrainConfig
    from .decode import decode_split, run_settings
    from .pretrained import load_pretrained
    from .runfolder.checkpoints import load_checkpoint
    from .switches import decoded
    from .validation import split_loss

    if (checkpoint is None) == (pretrained is None):
        raise ValueError("evaluate: give a checkpoint or pretrained=FOLDER (one)")
    device = device or default_device()
    if checkpoint:
        model, vocab, ckpt = load_checkpoint(checkpoint, device)
        stored = stored_train_config(ckpt, checkpoint)
    else:
        (model, vocab, _), stored = load_pretrained(pretrained or "", device), TrainConfig()
    split = scored_split(model, vocab, data)
    settings = run_settings(stored, beam, length_penalty, max_tokens, threads)
    pieces: list[list[str]] = []
    hyps = decode_split(model, split, vocab, settings, device=device,
                        progress="eval: translating" if progress else False, pieces=pieces)
    result, _ = score_hypotheses(hyps, split, normalize_refs, bleu_tokenize)
    result["loss"] = round(split_loss(model, split, settings.max_tokens, device), 4)
    for outputs in decoded(model.switches):
        result.update(outputs.scores(pieces, split, split.keep))
    return {**result, "hypotheses": hyps, **settings.key(device)}
