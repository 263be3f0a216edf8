"""The training options (`TrainConfig`): every option of a run besides the model's, with its type, allowed values,
default and help, declared once; the keys of a recipe's [data] and [train] tables; the learning-rate schedule the
warm-up option shapes."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from synprep.options import BLEU_TOKENIZERS
from synprep.tables import check_together, config_from_dict, option

from .core import PRESETS
from .values import ConfigError, check_field

PRESET_NAMES = tuple(PRESETS)
MAX_BEAM = 256  # the largest beam (eval_beam, test_beam, --beam); a beam is also at most the target vocabulary
DATA_KEYS = {"train": "data", "valid": "valid", "test": "test"}  # [data] key -> TrainConfig field
LANGUAGE_KEYS = ("src_lang_code", "tgt_lang_code")  # a multilingual pretrained model's language codes
MODEL_TABLE_KEYS = ("preset", "pretrained", *LANGUAGE_KEYS)  # [train] fields a recipe sets in its [model] table
NOT_IN_TRAIN = ("data", "valid", "test", *MODEL_TABLE_KEYS, "model", "resume")  # [data], [model] or a flag only
CONFIG_FILE, LOG_FILE = "config.toml", "train.log"  # a run folder's resolved configuration and its log


@dataclass
class TrainConfig:
    """Everything a run needs besides the model's options (`model`: the [model] table over the preset)."""

    data: str = option("", help="training split folder (synprep convert output, e.g. out/x/train)")
    valid: str = option("", help="validation split folder ('': no validation)")
    test: str = option("", help="test split, scored with best.pt (beam search) at the end ('': none)")
    out: str = option("", help="run folder ('': runs/<recipe or data folder name>-<YYYYmmdd-HHMMSS>); an earlier "
                      "run there is refused unless resume or overwrite")
    overwrite: bool = option(False, help="delete an earlier run's files in the run folder first")
    name: str = option("", help="names the default run folder ('': the recipe's file name, else the data folder's)")
    preset: str = option("tiny", choices=PRESET_NAMES, help="model size preset: cpu (d_model 64, 4 heads, 2+2 "
                         "layers, d_ff 256), tiny (256, 4, 3+3, 1024) or base (512, 8, 6+6, 2048)")
    pretrained: str = option("", help="a Hugging Face model folder (Marian/OPUS-MT, M2M100/NLLB) the run starts "
                             "from: its sizes and weights, no preset or size option (docs/pretrained.md)")
    src_lang_code: str = option("", help="a multilingual pretrained model's source language code as its tokenizer "
                                "spells it (M2M100: en, NLLB: eng_Latn): every source begins with it ('': a model "
                                "without codes)")
    tgt_lang_code: str = option("", help="a multilingual pretrained model's target language code: the decoder "
                                "input begins with it after the start token, forced in decoding ('': a model "
                                "without codes)")
    model: dict[str, Any] = option(default_factory=dict, help="model options over the preset (the [model] table)")
    max_tokens: int = option(4096, ge=1, help="tokens per batch and process: sentences x longest side (padding "
                             "included)")
    max_len: int = option(256, ge=0, help="training pairs with a longer side (sub-words) are skipped (0: none; "
                                          "capped by the model's max_len)")
    max_steps: int = option(20000, ge=1, help="optimizer steps of the run (its last step, across resumes)")
    max_minutes: float = option(0.0, ge=0, help="stop after this much training time, counted over every session of "
                                "the run (resumes included; 0: no limit)")
    lr: float = option(7e-4, gt=0, help="peak learning rate, reached at the end of warm-up")
    warmup: int = option(4000, ge=1, help="warm-up steps: lr rises linearly to its peak, then decays as "
                         "1/sqrt(step)")
    adam_betas: tuple[float, float] = option((0.9, 0.98), ge=0, lt=1, help="Adam's beta1 and beta2")
    label_smoothing: float = option(0.1, ge=0, lt=1, help="label smoothing of the cross-entropy")
    clip_norm: float = option(0.0, ge=0, help="clip the gradient norm to this (0: no clipping)")
    accum_steps: int = option(1, ge=1, help="batches per optimizer step (gradient accumulation): an update is "
                              "accum_steps x max_tokens x processes")
    eval_interval: int = option(1000, ge=1, help="steps between validations (loss + BLEU) and checkpoints")
    eval_sentences: int = option(0, ge=0, help="validation sentences decoded for BLEU (0: all)")
    eval_beam: int = option(1, ge=1, le=MAX_BEAM, help="beam of the validation decoding (1: greedy)")
    test_beam: int = option(4, ge=1, le=MAX_BEAM, help="beam of the final test decoding")
    length_penalty: float = option(0.6, ge=0, help="length penalty (alpha) of beam search")
    bleu_tokenize: str = option("auto", choices=BLEU_TOKENIZERS, help="sacrebleu tokenizer of validation and test "
                                "BLEU; auto: from the data's target language (ja-mecab for ja, zh for zh, else 13a)")
    vocabulary: str = option("model", choices=("model", "seen"), help="a dataset cut by a sentencepiece or "
                             "hf-tokenizer model (a pretrained model's tokenizer): model: every piece of that model "
                             "is the vocabulary; seen: only the pieces of the training split (and the specials)")
    log_interval: int = option(100, ge=1, help="steps between progress lines (the first and the last step always)")
    seed: int = option(1, ge=0, help="random seed (initialization, batch order, dropout)")
    threads: int = option(0, ge=0, help="torch CPU threads (0: torch's default)")
    device: str = option("auto", choices=("auto", "cuda", "cpu"), help="auto: CUDA when available, else CPU")
    attention: str = option("auto", choices=("auto", "math", "flex"), help="kernel of the Pascal heads: auto (= "
                            "math), math, flex (FlexAttention: CUDA training, compiled per shape)")
    precision: str = option("auto", choices=("auto", "fp32", "bf16", "fp16"), help="auto: bf16 autocast on CUDA "
                            "with bf16 support, fp16 (autocast with loss scaling) on other CUDA GPUs, else fp32")
    resume: bool = option(False, conflicts=("overwrite",), help="continue the run in the run folder from its "
                          "last.pt (or newest complete checkpoint); the data, model and optimization settings must "
                          "be the run's")
    bundle: bool = option(False, help="also copy the source parser model into OUT/source/ (with the BPE codes "
                          "always there): the run folder then translates raw text on any machine")
    keep_last: int = option(0, ge=0, help="also keep the N most recent OUT/checkpoint_<step>.pt (0: only last.pt "
                            "and best.pt)")
    patience: int = option(0, ge=0, help="stop after this many validations without improvement (0: never)")
    best_metric: str = option("bleu", choices=("bleu", "loss"), help="validation metric for best.pt and patience")
    tensorboard: bool = option(True, help="also log every metric to OUT/tensorboard where the tensorboard package "
                               "is installed (--no-tensorboard: not)")
    wandb_project: str = option("", help="also log every metric and the configuration to this Weights & Biases "
                                "project ('': none; needs wandb: pip install 'synprep[wandb]'; WANDB_MODE=offline "
                                "logs without network)")
    verify_shards: bool = option(True, help="compare every shard's sha256 with its manifest before training")
    shape_ladder: str = option("auto", choices=("auto", "on", "off"), help="pad batch lengths to the shape ladder "
                               "(multiples of 8 up to 64, then of 64): auto = on CUDA and with compile, off for the "
                               "eager CPU")
    compile: bool = option(False, help="compile the model with torch.compile for training (static shapes, one "
                           "graph per batch shape; CUDA graphs on CUDA with the shape ladder)")

    def language_codes(self) -> dict[str, str]:
        """The pretrained model's language codes given (`PretrainedSource.model_config` keywords)."""
        return {key: getattr(self, key) for key in LANGUAGE_KEYS}

    def __post_init__(self) -> None:  # built in Python too, every value is checked against its declaration
        for spec in fields(self):
            if spec.name != "model":
                setattr(self, spec.name, check_field(type(self), spec.name, getattr(self, spec.name),
                                                     f"[train] {spec.name}"))
        try:
            check_together(type(self), {spec.name: getattr(self, spec.name) for spec in fields(self)}, "[train]")
        except ValueError as err:
            raise ConfigError(str(err)) from None

    @classmethod
    def from_dict(cls, values: dict, what: str = "training") -> TrainConfig:
        """Build from a dict, checked against the declarations (unknown keys are errors too)."""
        return config_from_dict(cls, values, what)


def inverse_sqrt(warmup: int):  # noqa: ANN201 (returns the LambdaLR multiplier function)
    """Linear warm-up to 1 over `warmup` steps, then decay as sqrt(warmup / step)."""
    return lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


def train_keys() -> list[str]:
    """The keys of a recipe's [train] table."""
    return [f.name for f in fields(TrainConfig) if f.name not in NOT_IN_TRAIN]
