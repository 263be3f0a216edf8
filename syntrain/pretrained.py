"""Pretrained translation models: a local Hugging Face checkpoint folder (config.json, model.safetensors or
pytorch_model.bin, and its vocabulary: vocab.json or tokenizer.json; nothing is ever downloaded) of a family
syntrain can represent (`FAMILIES`: Marian, as OPUS-MT; M2M100, as NLLB) read into syntrain's own Transformer
with its weights mapped exactly, and back (`hf_weights`, for `syntrain export-hf`).

The family fixes the model's `[model] architecture` options (`Family.architecture`); the sizes come from the
config. syntrain's fixed special ids (pad 0, start 1, end 2, unknown 3: syntrain.vocab) are met by permuting the
embedding rows: `PretrainedSource.order[i]` is the Hugging Face id of syntrain id i. A decoder start token equal
to the model's pad (Marian) or end (M2M100) keeps syntrain's start id, so that it is never masked as padding,
but reads the row of that token (`[model] start_row`) and its own column is left out of the loss's softmax
(`[model] output_start`): the vocabulary is one entry longer than the model's, and every probability equal.
A family or a setting syntrain cannot represent is refused in one line naming the config key. Reading the
weights needs `safetensors` (the `pretrained` extra) for a .safetensors file.

A multilingual model's language codes (`PretrainedSource.codes`) are read where its tokenizer finds them: an
M2M100 model's (`__en__`) after vocab.json, numbered as M2M100Tokenizer numbers them (`m2m100_codes`, transformers'
list), an NLLB model's (`eng_Latn`) among tokenizer.json's added tokens. The run's codes (`[model]
src_lang_code`, `tgt_lang_code`) become the model's `source_prefix` and `target_prefix` (`PretrainedSource.prefixes`):
each source begins with its code and the decoder input with the target's after the start token, as the tokenizer
encodes them and `generate()` forces them (syntrain.dataset, syntrain.search).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import torch

from .config.core import TEXT
from .config.model import ModelConfig
from .config.train import LANGUAGE_KEYS
from .model import Transformer
from .vocab import BOS_ID, SPECIALS, Vocab

CONFIG, VOCAB_JSON, TOKENIZER_JSON = "config.json", "vocab.json", "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
NOT_CODES = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # a tokenizer.json's added special tokens besides its codes
SAFETENSORS, SAFETENSORS_INDEX, TORCH_BIN = "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"


@dataclass(frozen=True)
class Family:
    """What a model family fixes: the architecture options, whether it has final norms per stack, and the
    config keys that must hold a given value for syntrain to represent it."""

    architecture: dict[str, Any]
    required: dict[str, Any]


FAMILIES: dict[str, Family] = {
    "marian": Family({"norm_placement": "post", "positions": "halves", "encoder_final_norm": False,
                      "decoder_final_norm": False, "output_bias": True, "output_start": False},
                     {"share_encoder_decoder_embeddings": True}),
    "m2m_100": Family({"norm_placement": "pre", "positions": "fairseq", "encoder_final_norm": True,
                      "decoder_final_norm": True, "output_bias": False, "output_start": False}, {}),
}
ACTIVATION_NAMES = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu": "gelu"}
# the parameters of a linear layer and of a norm, by name: ("weight", "bias")
PARAMETER_KINDS = tuple(name for name, _ in torch.nn.Linear(1, 1).named_parameters())
SIZE_KEYS = ("vocab_size", "src_vocab_size", "d_model", "n_heads", "d_ff", "enc_layers", "dec_layers", "max_len")


def refuse(folder: str, key: str, value: Any, why: str) -> ValueError:
    """The one-line error of a setting syntrain cannot represent, naming the config key."""
    return ValueError(f"{os.path.join(folder, CONFIG)}: {key} = {json.dumps(value)}: {why}")


def read_json(path: str, kind: type = dict) -> Any:  # noqa: ANN401
    """A JSON file of the model folder, a `kind` (dict: an object); unreadable, not JSON (bad bytes, cut short)
    or of another kind: one line naming it."""
    from synprep.errors import InputError
    from synprep.textio import read_json as read_file

    try:
        value = read_file(path, "a JSON file of a Hugging Face model folder")
    except InputError as err:
        raise ValueError(str(err)) from None
    if not isinstance(value, kind):
        raise ValueError(f"{path}: not a JSON {'object' if kind is dict else kind.__name__}")
    return value


def read_config(folder: str) -> dict:
    """The folder's config.json as a dict (a missing or unreadable one: one line naming it)."""
    path = os.path.join(folder, CONFIG)
    if not os.path.isfile(path):
        raise ValueError(f"{folder}: not a Hugging Face model folder (no {CONFIG})")
    return read_json(path)


def family_of(config: dict, folder: str) -> Family:
    """The config's family, or the refusal naming model_type and the families syntrain loads."""
    kind = config.get("model_type")
    if kind not in FAMILIES:
        raise refuse(folder, "model_type", kind, f"not a family syntrain can load ({', '.join(FAMILIES)})")
    family = FAMILIES[kind]
    for key, wanted in family.required.items():
        if config.get(key, wanted) != wanted:
            raise refuse(folder, key, config[key], f"syntrain represents only {json.dumps(wanted)} for {kind}")
    return family


def _same(config: dict, folder: str, pairs: tuple[tuple[str, str], ...]) -> None:
    for first, second in pairs:
        if config.get(second, config.get(first)) != config.get(first):
            raise refuse(folder, second, config[second], f"differs from {first} = {config.get(first)} (syntrain "
                                                         "has one value for both stacks)")


def model_values(config: dict, folder: str, order: tuple[int, ...]) -> dict[str, Any]:
    """The syntrain [model] values of a Hugging Face config (sizes, dropouts, architecture, sharing); `order`:
    the Hugging Face id of each syntrain id (`PretrainedSource.order`)."""
    family = family_of(config, folder)
    _same(config, folder, (("encoder_attention_heads", "decoder_attention_heads"),
                           ("encoder_ffn_dim", "decoder_ffn_dim")))
    if config.get("decoder_vocab_size") not in (None, config.get("vocab_size")):
        raise refuse(folder, "decoder_vocab_size", config["decoder_vocab_size"], "syntrain loads one shared vocabulary")
    activation = config.get("activation_function", "relu")
    if activation not in ACTIVATION_NAMES:
        raise refuse(folder, "activation_function", activation,
                     f"syntrain's activations are {', '.join(ACTIVATION_NAMES)}")
    arch = {**family.architecture, "start_row": start_row(order)}
    if arch["positions"] == "fairseq":
        arch["position_offset"] = int(config["pad_token_id"]) + 1
    return {"vocab_size": len(order), "d_model": config["d_model"], "n_heads": config["encoder_attention_heads"],
            "d_ff": config["encoder_ffn_dim"], "enc_layers": config["encoder_layers"],
            "dec_layers": config["decoder_layers"], "max_len": config.get("max_position_embeddings", 1024),
            "dropout": config.get("dropout", 0.1), "attention_dropout": config.get("attention_dropout", 0.0),
            "activation_dropout": config.get("activation_dropout", 0.0), "share_embeddings": True,
            "tie_output": bool(config.get("tie_word_embeddings", True)), "activation": ACTIVATION_NAMES[activation],
            "scale_embeddings": bool(config.get("scale_embedding", False)), **arch}


def start_row(order: tuple[int, ...]) -> int:
    """The syntrain row the decoder's start token reads: the row of the model token it is (pad for Marian, end
    for M2M100), so that one row serves both as the model's own does; its own row (1) when it is no other."""
    start = order[BOS_ID]
    return next((i for i, hf_id in enumerate(order) if hf_id == start and i != BOS_ID), BOS_ID)


def hf_pieces(folder: str, config: dict) -> tuple[list[str], dict[str, int]]:
    """(the model's pieces in id order, vocab_size of them; its language codes -> their ids): the pieces from
    vocab.json (Marian, M2M100), else tokenizer.json with its added tokens (NLLB); an id no file names gets the
    placeholder `<hf:ID>`. The codes as its tokenizer's src_lang / tgt_lang spell them: M2M100's after vocab.json
    (`m2m100_codes`, named `__en__` among the pieces), NLLB's the added special tokens of tokenizer.json."""
    size = int(config["vocab_size"])
    ids: dict[str, int] = {}
    vocab_json, tokenizer_json = os.path.join(folder, VOCAB_JSON), os.path.join(folder, TOKENIZER_JSON)
    if os.path.isfile(vocab_json):
        ids = read_json(vocab_json)
        codes = {code: len(ids) + i for i, code in enumerate(m2m100_codes(folder, config, len(ids)))}
        ids.update({f"__{code}__": i for code, i in codes.items()})  # not in vocab.json: M2M100Tokenizer's ids
    elif os.path.isfile(tokenizer_json):
        added = read_json(tokenizer_json).get("added_tokens") or []
        from tokenizers import Tokenizer

        ids = Tokenizer.from_file(tokenizer_json).get_vocab(with_added_tokens=True)
        codes = {token["content"]: token["id"] for token in added
                 if token.get("special") and token["content"] not in NOT_CODES}
    else:
        raise ValueError(f"{folder}: no {VOCAB_JSON} or {TOKENIZER_JSON}: the model's vocabulary is unknown")
    pieces = [f"<hf:{i}>" for i in range(size)]
    for piece, i in ids.items():
        if 0 <= i < size:
            pieces[i] = piece
    return pieces, {code: i for code, i in codes.items() if 0 <= i < size}


def m2m100_codes(folder: str, config: dict, pieces: int) -> list[str]:
    """An M2M100 model's language codes in its tokenizer's order (transformers' FAIRSEQ_LANGUAGE_CODES of the
    folder's tokenizer_config.json `language_codes`, m2m100 by default): M2M100Tokenizer gives code i the id
    len(vocab.json) + i. None for a model whose vocab_size leaves no room for them (Marian; an M2M100 model
    without codes). Naming them needs transformers (the `pretrained` extra)."""
    if config.get("model_type") != "m2m_100" or int(config["vocab_size"]) <= pieces:
        return []
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    path = os.path.join(folder, TOKENIZER_CONFIG)
    kind = "m2m100"
    if os.path.isfile(path):
        kind = read_json(path).get("language_codes") or kind
    if kind not in FAIRSEQ_LANGUAGE_CODES:
        raise ValueError(f"{path}: language_codes = {json.dumps(kind)}: not one of M2M100's code lists "
                         f"({', '.join(FAIRSEQ_LANGUAGE_CODES)})")
    return list(FAIRSEQ_LANGUAGE_CODES[kind])


# the files of a model folder that are not its weights or config: its tokenizer and generation settings (export-hf
# copies them; a run records their sha256, `PretrainedSource.files`)
TOKENIZER_FILES = ("vocab.json", "source.spm", "target.spm", "spm.model", "sentencepiece.bpe.model", "tokenizer.json",
                   "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "generation_config.json")


@dataclass(frozen=True)
class PretrainedSource:
    """Where a model came from and how its ids map: `order[i]` the Hugging Face id of syntrain id i, `pieces`
    syntrain's vocabulary (the specials, then the model's other pieces in id order), `config` the Hugging Face
    config (stored in checkpoints: export-hf writes it back), `codes` its language codes (a multilingual M2M100 /
    NLLB model's, as its tokenizer's src_lang / tgt_lang spell them: en, eng_Latn) -> their Hugging Face ids."""

    folder: str
    config: dict
    order: tuple[int, ...]
    pieces: tuple[str, ...]
    codes: dict[str, int] = field(default_factory=dict)
    files: dict[str, str] | None = None  # TOKENIZER_FILES the folder held, each with its sha256 (None: not recorded)

    @classmethod
    def read(cls, folder: str) -> PretrainedSource:
        """The folder's config and vocabulary (checked: the family and its settings, the special ids)."""
        config = read_config(folder)
        family_of(config, folder)
        size = int(config["vocab_size"])
        pieces, codes = hf_pieces(folder, config)
        unk = config.get("unk_token_id", pieces.index("<unk>") if "<unk>" in pieces else None)
        roles = {"pad_token_id": config.get("pad_token_id"), "decoder_start_token_id":
                 config.get("decoder_start_token_id"), "eos_token_id": config.get("eos_token_id"), "unk_token_id": unk}
        for key, value in roles.items():
            if not isinstance(value, int) or not 0 <= value < size:
                raise refuse(folder, key, value, f"a special id syntrain needs (an id below vocab_size {size})")
        specials = list(roles.values())
        rest = [i for i in range(size) if i not in specials]
        names = [f"{pieces[i]}#{i}" if pieces[i] in SPECIALS else pieces[i] for i in rest]
        from synprep.textio import file_sha256

        files = {name: file_sha256(os.path.join(folder, name)) for name in TOKENIZER_FILES
                 if os.path.isfile(os.path.join(folder, name))}
        return cls(os.path.abspath(folder), config, tuple(specials + rest), (*SPECIALS, *names), codes, files)

    def record(self) -> dict:
        """What a checkpoint stores of it (`from_record` reads it back)."""
        return {"folder": self.folder, "config": self.config, "order": list(self.order), "pieces": list(self.pieces),
                "codes": self.codes, "files": self.files}

    @classmethod
    def from_record(cls, record: dict) -> PretrainedSource:
        return cls(record["folder"], record["config"], tuple(record["order"]), tuple(record["pieces"]),
                   dict(record.get("codes") or {}), record.get("files"))

    def tokenizer_files(self) -> list[str]:
        """The TOKENIZER_FILES of the folder, each compared by content with the sha256 recorded when the run read
        it: one changed or gone since (another model's tokenizer under the same name) is one ValueError naming
        it. A record from before digests were kept: the files the folder holds now."""
        from synprep.textio import file_sha256

        if self.files is None:
            return [name for name in TOKENIZER_FILES if os.path.isfile(os.path.join(self.folder, name))]
        for name, recorded in sorted(self.files.items()):
            path = os.path.join(self.folder, name)
            found = file_sha256(path) if os.path.isfile(path) else None
            if found != recorded:
                raise ValueError(f"{path}: not the file of the pretrained model the run started from ("
                                 f"{'gone' if found is None else f'its sha256 is {found[:16]}...'}, the run recorded "
                                 f"{str(recorded)[:16]}...): restore it")
        return sorted(self.files)

    def prefixes(self, src_lang_code: str = "", tgt_lang_code: str = "") -> dict[str, list[int]]:
        """The [model] source_prefix and target_prefix (syntrain ids) of the language codes: a multilingual
        model's source begins with its source code and its decoder input with the target code after the start
        token, as M2M100Tokenizer and NllbTokenizer (non-legacy) encode them; none for a model without codes. A
        code missing for a multilingual model, given to one without codes, or not the model's: one line naming
        the option."""
        given = dict(zip(LANGUAGE_KEYS, (src_lang_code, tgt_lang_code)))
        if not self.codes:
            key = next((key for key, code in given.items() if code), None)
            if key:
                raise ValueError(f"{key} = {json.dumps(given[key])}: the pretrained model {self.folder} has no "
                                 f"language codes (one language pair): leave {key} out")
            return {}
        shown = ", ".join(list(self.codes)[:6]) + (", ..." if len(self.codes) > 6 else "")
        for key, code in given.items():
            side = "source" if key.startswith("src") else "target"
            if not code:
                raise ValueError(f"{key}: the pretrained model {self.folder} is multilingual (language codes {shown}): "
                                 f"give its {side} language code")
            if code not in self.codes:
                raise ValueError(f"{key} = {json.dumps(code)}: not a language code of the pretrained model "
                                 f"{self.folder} ({shown})")
        row = {hf_id: i for i, hf_id in enumerate(self.order)}
        return {"source_prefix": [row[self.codes[src_lang_code]]], "target_prefix": [row[self.codes[tgt_lang_code]]]}

    def model_config(self, src_lang_code: str = "", tgt_lang_code: str = "", **changes: Any) -> ModelConfig:
        """syntrain's model config of this model, with its language codes' prefixes (`prefixes`) and `changes`
        (switches, dropouts) on top. A decoder target other than text (tree decoding's transitions) is refused:
        the model's vocabulary has no such tokens."""
        cfg = ModelConfig.from_dict({**model_values(self.config, self.folder, self.order),
                                     **self.prefixes(src_lang_code, tgt_lang_code), **changes})
        if cfg.output.decoder_target != TEXT:
            raise ValueError(f"decoder_target = {cfg.output.decoder_target!r} cannot start from the pretrained model "
                             f"{self.folder}: its vocabulary has no {cfg.output.decoder_target} tokens and its "
                             "decoder predicts text")
        return cfg

    def vocab(self) -> Vocab:
        return Vocab(list(self.pieces))


def read_weights(folder: str) -> dict[str, torch.Tensor]:
    """The folder's weights (model.safetensors, its sharded index, or pytorch_model.bin), names without the
    `model.` prefix."""
    index, single = os.path.join(folder, SAFETENSORS_INDEX), os.path.join(folder, SAFETENSORS)
    if os.path.isfile(single) or os.path.isfile(index):
        from safetensors.torch import load_file

        files = [single] if os.path.isfile(single) else sorted(
            {os.path.join(folder, name) for name in read_json(index).get("weight_map", {}).values()})
        weights = {name: tensor for path in files for name, tensor in load_file(path).items()}
    elif os.path.isfile(os.path.join(folder, TORCH_BIN)):
        weights = torch.load(os.path.join(folder, TORCH_BIN), map_location="cpu", weights_only=True)
    else:
        raise ValueError(f"{folder}: no {SAFETENSORS} or {TORCH_BIN}")
    return {name.removeprefix("model."): tensor.float() for name, tensor in weights.items()}


def _first(weights: dict[str, torch.Tensor], folder: str, *names: str) -> torch.Tensor:
    for name in names:
        if name in weights:
            return weights[name]
    raise ValueError(f"{folder}: the weights have no {names[0]}")


# (syntrain name in a layer, Hugging Face name in a layer) of the linear layers and norms each stack has
ENCODER_NAMES = (("attn.query", "self_attn.q_proj"), ("attn.out", "self_attn.out_proj"),
                 ("norm1", "self_attn_layer_norm"), ("ff.0", "fc1"), ("ff.3", "fc2"), ("norm2", "final_layer_norm"))
DECODER_NAMES = (("self_attn.query", "self_attn.q_proj"), ("self_attn.out", "self_attn.out_proj"),
                 ("norm1", "self_attn_layer_norm"), ("cross_attn.query", "encoder_attn.q_proj"),
                 ("cross_attn.out", "encoder_attn.out_proj"), ("norm2", "encoder_attn_layer_norm"),
                 ("ff.0", "fc1"), ("ff.3", "fc2"), ("norm3", "final_layer_norm"))
KEY_VALUES = {"encoder": (("attn", "self_attn"),),
              "decoder": (("self_attn", "self_attn"), ("cross_attn", "encoder_attn"))}


def layer_pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(syntrain parameter name, Hugging Face name) of every per-layer linear layer and norm (weights and biases)
    and of the final norms; key/value projections are `key_value_pairs`."""
    pairs = []
    for stack, names, layers in (("encoder", ENCODER_NAMES, cfg.sizes.enc_layers),
                                 ("decoder", DECODER_NAMES, cfg.sizes.dec_layers)):
        for i in range(layers):
            pairs += [(f"{stack}.{i}.{ours}.{kind}", f"{stack}.layers.{i}.{theirs}.{kind}")
                      for ours, theirs in names for kind in PARAMETER_KINDS]
    for ours, theirs, on in (("enc_norm", "encoder.layer_norm", cfg.architecture.encoder_final_norm),
                             ("dec_norm", "decoder.layer_norm", cfg.architecture.decoder_final_norm)):
        pairs += [(f"{ours}.{kind}", f"{theirs}.{kind}") for kind in PARAMETER_KINDS] if on else []
    return pairs


def key_value_pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(syntrain key_value prefix, Hugging Face attention prefix): syntrain's key_value is k_proj over v_proj."""
    return [(f"{stack}.{i}.{ours}.key_value", f"{stack}.layers.{i}.{theirs}")
            for stack, layers in (("encoder", cfg.sizes.enc_layers), ("decoder", cfg.sizes.dec_layers))
            for i in range(layers) for ours, theirs in KEY_VALUES[stack]]


def syntrain_weights(weights: dict[str, torch.Tensor], cfg: ModelConfig, source: PretrainedSource
                     ) -> dict[str, torch.Tensor]:
    """Hugging Face weights (`read_weights`) -> the matching entries of syntrain's state dict."""
    folder, order = source.folder, torch.tensor(source.order)
    embedding = _first(weights, folder, "shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
    out = {"src_embed.weight": embedding[order], "tgt_embed.weight": embedding[order]}
    if cfg.sharing.output_tied:
        out["output.weight"] = out["tgt_embed.weight"]
    else:
        out["output.weight"] = _first(weights, folder, "lm_head.weight")[order]
    if cfg.architecture.output_bias:
        out["output.bias"] = weights.get("final_logits_bias", torch.zeros(1, len(embedding)))[0, order]
    for ours, theirs in layer_pairs(cfg):
        out[ours] = _first(weights, folder, theirs)
    for ours, theirs in key_value_pairs(cfg):
        for kind in PARAMETER_KINDS:
            out[f"{ours}.{kind}"] = torch.cat([_first(weights, folder, f"{theirs}.k_proj.{kind}"),
                                               _first(weights, folder, f"{theirs}.v_proj.{kind}")])
    return out


def load_pretrained(folder: str, device: str | torch.device = "cpu", **changes: Any
                    ) -> tuple[Transformer, Vocab, PretrainedSource]:
    """A Hugging Face model folder -> (syntrain Transformer with its weights, in eval mode; its vocabulary; the
    source record). `changes`: the language codes (src_lang_code, tgt_lang_code: a multilingual model's) and
    [model] options on top (switches, dropouts), started as `load_into` starts them."""
    source = PretrainedSource.read(folder)
    model = Transformer(source.model_config(**changes))
    load_into(model, source)
    return model.to(device).eval(), source.vocab(), source


def load_mapped(model: Transformer, mapped: dict[str, torch.Tensor], folder: str) -> None:
    """Copy the mapped weights into the model; a shape that differs is one line naming the tensor."""
    own = model.state_dict()
    for name, tensor in mapped.items():
        if name in own and own[name].shape != tensor.shape:
            raise ValueError(f"{folder}: {name} has shape {tuple(tensor.shape)} where the config gives "
                             f"{tuple(own[name].shape)}")
    unknown = [name for name in mapped if name not in own]
    if unknown:
        raise ValueError(f"{folder}: syntrain's model has no {unknown[0]}")
    with torch.no_grad():
        for name, tensor in mapped.items():
            own[name].copy_(tensor)


def missing_pieces(table: Any, vocab: Vocab, split: str = "the training split", shown: int = 10) -> str:
    """The pieces of a split (`table`: its src_subwords and tgt_subwords; `split`: how the line names it) that
    the model's vocabulary lacks, counted and named (read as <unk>, never mapped to another piece); "" when there
    is none."""
    from .arrow import count_strings
    from .columns import SRC_SUBWORDS, TGT_SUBWORDS

    counts: dict[str, int] = {}
    for column in (SRC_SUBWORDS, TGT_SUBWORDS):
        for piece, count in count_strings(table.column(column), lambda piece: piece not in vocab.stoi).items():
            counts[piece] = counts.get(piece, 0) + count
    if not counts:
        return ""
    names = sorted(counts, key=lambda piece: (-counts[piece], piece))
    listed = ", ".join(repr(piece) for piece in names[:shown]) + (", ..." if len(names) > shown else "")
    return (f"warning: {sum(counts.values())} piece(s) of {split} ({len(names)} distinct) are not in the "
            f"pretrained model's vocabulary and are read as <unk>: {listed}")


def language_note(cfg: ModelConfig, vocab: Vocab) -> str:
    """The run header's line on a multilingual model's language codes (its prefixes); "" without."""
    source, target = cfg.architecture.source_prefix, cfg.architecture.target_prefix
    if not (source or target):
        return ""
    return (f"language codes: each source begins with {' '.join(vocab.itos[i] for i in source)}, the decoder input "
            f"with {' '.join(vocab.itos[i] for i in target)} after its start token (forced in decoding, no loss)")


def start_model_config(folder: str, options: dict[str, Any], table: Any, manifest: Any, **codes: str
                       ) -> tuple[ModelConfig, Vocab, PretrainedSource]:
    """A new run from a pretrained model: its model config (the model's sizes and architecture, its language
    `codes`' prefixes, `options` on top, then what the switches derive from the training split), its vocabulary
    and the source record."""
    from .config.fill import fill_from_data

    source = PretrainedSource.read(folder)
    mcfg = source.model_config(**codes, **options, vocab_size=0)
    vocab = source.vocab()
    fill_from_data(mcfg, table, manifest, vocab)
    return mcfg, vocab, source


def load_into(model: Transformer, source: PretrainedSource) -> None:
    """The pretrained weights into a model built from `source.model_config`; then each switch sets its own
    parameters so that the output equals the pretrained model's where it can (`Switch.start_from_pretrained`: an
    added embedding at zeros; a switch that changes attention without parameters changes it from step 0)."""
    load_mapped(model, syntrain_weights(read_weights(source.folder), model.cfg, source), source.folder)
    for switch in model.switches:
        switch.start_from_pretrained(model)
