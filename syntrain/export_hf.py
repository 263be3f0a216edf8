"""`syntrain export-hf`: a checkpoint of a run from a pretrained model (`[model] pretrained`) written back as a
Hugging Face folder that `transformers.AutoModelForSeq2SeqLM.from_pretrained` loads with the same logits: the
model's config.json (its dropouts as the run trained them), model.safetensors (syntrain's weights mapped back:
`hf_weights`, the inverse of `syntrain.pretrained.syntrain_weights`) and the tokenizer files of the folder the run
started from, with a multilingual model's language codes (`language_settings`) in its generation and tokenizer
configs. A model whose switches change inference (`inference_switches`: Pascal heads, label or depth
embeddings, DBSA's bi-affine query, syntax-directed heads) is refused in one line naming them: their computation
is not in transformers' model; switches that only supervise or add a loss (LISA, SyncAttn) export.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

import torch

from synprep.callables import make_callable
from synprep.results import Printed
from synprep.textio import atomic_folder

from .config.model import ModelConfig
from .model import Transformer
from .pretrained import (
    CONFIG,
    PARAMETER_KINDS,
    SAFETENSORS,
    PretrainedSource,
    key_value_pairs,
    layer_pairs,
    read_json,
)
from .switches import Switch
from .switches.base import RECORD
from .vocab import BOS_ID


def changes_inference(switch: Switch, cfg: ModelConfig) -> bool:
    """Whether a switch takes part in inference: an attention operation other than recording, a module of its
    own, an input decoding reads, or another decoder mask (else it only supervises or adds a loss)."""
    sizes = cfg.sizes
    hooks = [hook for stack, layers, kinds in (("encoder", sizes.enc_layers, ("self",)),
                                               ("decoder", sizes.dec_layers, ("self", "cross")))
             for layer in range(layers) for kind in kinds for hook in switch.attention_hooks(stack, layer, kind)]
    return bool(any(set(hook.ops) - {RECORD} for hook in hooks) or switch.source_modules()
                or switch.decoder_modules() or switch.reads(training=False) or switch.changes_decoder_mask)


def inference_switches(model: Transformer) -> list[str]:
    """The switches of `model` that change inference, each as `name (its options that turn it on)`."""
    return [f"{switch.name} ({', '.join(switch.switched_by) or 'decoder_target'})" for switch in model.switches
            if changes_inference(switch, model.cfg)]


def hf_weights(state: dict[str, torch.Tensor], cfg: ModelConfig, source: PretrainedSource
               ) -> dict[str, torch.Tensor]:
    """syntrain's state dict -> the Hugging Face model's (names with their `model.` prefix), each model id's row
    from the syntrain row that plays its part (the start token's own row, a copy, is left: `start_row`)."""
    rows = [i for i in range(len(source.order)) if not (i == BOS_ID and cfg.architecture.start_row != BOS_ID)]
    hf_ids = torch.tensor([source.order[i] for i in rows])
    size = int(source.config["vocab_size"])

    def by_model_id(matrix: torch.Tensor) -> torch.Tensor:
        out = torch.zeros((size, *matrix.shape[1:]), dtype=matrix.dtype)
        out[hf_ids] = matrix[torch.tensor(rows)]
        return out

    embedding = by_model_id(state["tgt_embed.weight"])
    out = {"model.shared.weight": embedding, "model.encoder.embed_tokens.weight": embedding,
           "model.decoder.embed_tokens.weight": embedding, "lm_head.weight": by_model_id(state["output.weight"])}
    if cfg.architecture.output_bias:
        out["final_logits_bias"] = by_model_id(state["output.bias"])[None]
    for ours, theirs in layer_pairs(cfg):
        out[f"model.{theirs}"] = state[ours]
    for ours, theirs in key_value_pairs(cfg):
        for kind in PARAMETER_KINDS:
            key, value = state[f"{ours}.{kind}"].chunk(2)
            out[f"model.{theirs}.k_proj.{kind}"], out[f"model.{theirs}.v_proj.{kind}"] = key, value
    return {name: tensor.detach().float().contiguous().clone() for name, tensor in out.items()}


def write_hf_folder(checkpoint: str, folder: str) -> list[str]:
    """Write the Hugging Face folder of a checkpoint of a run from a pretrained model; returns the files written.
    ValueError (one line) for a checkpoint of a run from scratch, or one whose switches change inference."""

    from .runfolder.checkpoints import load_checkpoint

    model, _, ckpt = load_checkpoint(checkpoint)
    if not ckpt.get("pretrained"):
        raise ValueError(f"{checkpoint}: not a run from a pretrained model (no [model] pretrained): export-hf writes "
                         "back the Marian or M2M100 model a run started from")
    changing = inference_switches(model)
    if changing:
        raise ValueError(f"{checkpoint}: the switches {', '.join(changing)} change inference, and transformers' "
                         "model has no such computation: export-hf writes models whose switches only supervise or "
                         "add a loss")
    source = PretrainedSource.from_record(ckpt["pretrained"])
    if os.path.realpath(folder) == os.path.realpath(source.folder):
        raise ValueError(f"-o {folder}: the pretrained model the run started from: write the export elsewhere")
    tokenizer = source.tokenizer_files()  # checked by content against the run's record of them, before writing
    with atomic_folder(folder) as staging:  # whole or absent: a kill or a full disk leaves no half a model
        written = _write_files(model, source, tokenizer, staging)
    return [os.path.join(folder, name) for name in written]


def _write_files(model: Transformer, source: PretrainedSource, tokenizer: list[str], folder: str) -> list[str]:
    """The Hugging Face folder's files written into `folder` (`tokenizer`: the tokenizer files to copy from the
    pretrained folder); their names."""
    from safetensors.torch import save_file

    dropouts = model.cfg.dropouts
    config = {**source.config, "dropout": dropouts.dropout, "attention_dropout": dropouts.attn_dropout,
              "activation_dropout": dropouts.ff_dropout}
    with open(os.path.join(folder, CONFIG), "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2)
    save_file(hf_weights(model.state_dict(), model.cfg, source), os.path.join(folder, SAFETENSORS),
              metadata={"format": "pt"})
    written = [CONFIG, SAFETENSORS]
    for name in tokenizer:
        shutil.copy(os.path.join(source.folder, name), os.path.join(folder, name))
        written.append(name)
    for name, settings in language_settings(model.cfg, source).items():
        path = os.path.join(folder, name)
        stored = read_json(path) if os.path.isfile(path) else {}
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({**stored, **settings}, handle, indent=2)
        written += [] if name in written else [name]
    return written


def language_settings(cfg: ModelConfig, source: PretrainedSource) -> dict[str, dict]:
    """A multilingual model's language codes as its folder keeps them: the generation config forces the target
    code first (`forced_bos_token_id`, after the decoder start token) and the tokenizer config names both
    languages (`src_lang`, `tgt_lang`), so that transformers translates as the run decoded; none without codes."""
    prefixes = cfg.architecture.source_prefix, cfg.architecture.target_prefix
    if not any(prefixes):
        return {}
    names = {hf_id: code for code, hf_id in source.codes.items()}
    src, tgt = (names[source.order[prefix[0]]] for prefix in prefixes)
    config = source.config
    return {"generation_config.json": {"forced_bos_token_id": source.order[prefixes[1][0]],
                                       "decoder_start_token_id": config["decoder_start_token_id"],
                                       "eos_token_id": config["eos_token_id"], "pad_token_id": config["pad_token_id"]},
            "tokenizer_config.json": {"src_lang": src, "tgt_lang": tgt}}


@dataclass(frozen=True, repr=False)
class ExportHfResult(Printed):
    """`syntrain.export_hf`: the Hugging Face folder written and its files."""

    output: str
    files: list[str]
    text: str


def export_hf(checkpoint: str, output: str) -> ExportHfResult:
    """`syntrain export-hf CHECKPOINT -o OUTPUT`: a checkpoint of a run from a pretrained model written back as a
    Hugging Face folder (config.json, model.safetensors, the tokenizer files) that
    `transformers.AutoModelForSeq2SeqLM.from_pretrained` loads with the same logits (docs/pretrained.md);
    ValueError (one line) for a run from scratch or switches that change inference (named)."""
    from .arguments import syntrain_arguments

    checked = syntrain_arguments("syntrain export-hf", checkpoint=checkpoint, output=output)
    checkpoint, output = checked["checkpoint"], checked["output"]
    written = write_hf_folder(checkpoint, output)
    return ExportHfResult(output, written, f"wrote {', '.join(written)}")


make_callable(__name__, export_hf)  # syntrain.export_hf(...) is syntrain.export_hf.export_hf(...) (docs/python-api.md)
