"""Transformer encoder-decoder (Vaswani et al., 2017) with the syntax switches of `syntrain.switches`
(docs/switches.md, docs/tree-decoding.md; writing one: docs/switches-api.md).

The model is generic: each switch that is on (see `ModelConfig.active_switches`) adds its attention hooks to the
layers it names, its modules (embeddings, graph layers) to the model, and its steps to the embedding and the
decoder input; `forward` returns `Outputs` (logits plus the tensors the switches' losses need), and
`auxiliary_losses` computes those losses from them. All switches are off by default.

Pre-norm residual blocks (LayerNorm before each sub-layer, a final LayerNorm per stack: the tensor2tensor /
fairseq `--*-normalize-before` variant, which trains without tuning on small data), sinusoidal positions,
embeddings scaled by sqrt(d_model), optionally one embedding matrix shared by source, target and output
(the vocabulary is joint; with a source vocabulary of its own, `src_vocab_size`, only target and output share).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, fields
from typing import Any, TypeVar, overload

import torch
from torch import nn

from synprep.tables import config_from_dict

from .attention import KeyValueCache, MultiHeadAttention, check_hooks, check_kernel
from .columns import TEXT, BatchColumn
from .layers import Decoder, Encoder, sinusoids
from .sizes import ModelSizes
from .switches import (
    AttentionHook,
    DecoderStates,
    Inputs,
    Outputs,
    Switch,
    current_names,
    declared,
    merge_inputs,
    registered,
    reserve,
    target_column,
)
from .vocab import PAD_ID

# A switch option must not take a core name: [model] keys are one flat namespace (syntrain.config reserves the
# [train] names the same way).
reserve("the model sizes ([model])", [spec.name for spec in fields(ModelSizes)] + ["preset"])


def config_parts() -> dict[str, type]:
    """Part name -> its config dataclass: the sizes, then each registered switch's section."""
    return {"sizes": ModelSizes, **{switch.name: switch.Config for switch in registered()}}


C = TypeVar("C")


class ModelConfig:
    """The model options: typed parts read and written under flat option names, and what the switches that are
    on ask of the generic code.

    The parts: `sizes` (ModelSizes, what the generic model reads) and one section per registered switch (its
    `Config` dataclass: `cfg.section(Pascal)`, or `self.options` inside the switch); recipes' `[model]` keys and
    checkpoints' `model_config` name their fields flat. What the switches ask (`active_switches`, their attention
    hooks, batch columns, data options, decoder target, loss weights) is read by the model, the data layer and
    the trainer.

    Built once per run: from the recipe's values (or a checkpoint's), then, for a new run, `fill` sets the
    data-derived values (vocab_size, the switches' `prepare`) once, before the model is built; nothing is set
    after that."""

    sizes: ModelSizes

    def __init__(self, **values: Any) -> None:
        values = current_names(values)  # old spellings (`Switch.renamed`) still read
        parts, owner = config_parts(), {}
        for part, cls in parts.items():
            owner.update({spec.name: part for spec in fields(cls)})
        unknown = set(values) - set(owner)
        if unknown:
            raise ValueError(f"unknown model option(s): {', '.join(sorted(unknown))}")
        built = {part: config_from_dict(cls, {k: v for k, v in values.items() if owner[k] == part}, "model")
                 for part, cls in parts.items()}
        object.__setattr__(self, "sizes", built.pop("sizes"))
        object.__setattr__(self, "_sections", built)
        object.__setattr__(self, "_filled", self.sizes.vocab_size > 0)  # e.g. a checkpoint's: filled already

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """Build from a dict: unknown keys, values of the wrong type or out of range, and options that do not
        fit together (every check that needs no data) are a ValueError naming the option."""
        cfg = cls(**values)
        cfg.check()
        return cfg

    def replace(self, **changes: Any) -> ModelConfig:
        """A new config with some values changed (checked like from_dict)."""
        return ModelConfig.from_dict({**self.to_dict(), **changes})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ModelConfig is built once (from_dict); {name} cannot be set afterwards")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"

    @overload
    def section(self, switch: type[Switch[C]]) -> C: ...

    @overload
    def section(self, switch: str) -> Any: ...

    def section(self, switch: type[Switch] | str) -> Any:
        """The typed options of one registered switch (its `Config` instance), by class or name."""
        name = switch if isinstance(switch, str) else switch.name
        try:
            return self._sections[name]
        except KeyError:
            raise KeyError(f"no registered switch {name!r}") from None

    def parts(self) -> dict[str, Any]:
        """Part name ("sizes", then each switch's name) -> its dataclass instance."""
        return {"sizes": self.sizes, **self._sections}

    def to_dict(self) -> dict:
        """Plain values under their flat names (stored in checkpoints)."""
        return {name: value for part in self.parts().values() for name, value in asdict(part).items()}

    def fill(self, table: Any, manifest: Any, vocab: Any) -> None:
        """Set what comes from the training split, once, before the model is built: vocab_size (and
        src_vocab_size), then each switch's `prepare` (only fields declared `option(filled=True)`)."""
        if self._filled:
            raise ValueError("ModelConfig.fill: the data-derived values are set once (vocab_size is set already)")
        object.__setattr__(self, "_filled", True)
        self._set(self.sizes, {"vocab_size": len(vocab), **({"src_vocab_size": len(vocab.source)}
                                                             if vocab.source else {})})
        for switch in registered():
            if switch.active(self):
                self._set(self.section(switch), switch.prepare(self, table, manifest, vocab))
        self.check()

    def _set(self, part: Any, values: dict[str, Any]) -> None:
        """Data-derived values on one part, each checked against its declaration."""
        declared = {spec.name: spec for spec in fields(part)}
        for name, value in values.items():
            if name not in declared or not declared[name].metadata.get("filled"):
                raise ValueError(f"{name} is not a data-derived option of {type(part).__name__}")
            checked = config_from_dict(type(part), {**asdict(part), name: value}, "model")
            setattr(part, name, getattr(checked, name))

    def check(self) -> None:
        """ValueError naming the option when the switches do not fit the model or each other."""
        sizes = self.sizes
        if sizes.d_model % sizes.n_heads:
            raise ValueError(f"d_model {sizes.d_model} is not a multiple of n_heads {sizes.n_heads}")
        for switch in registered():
            switch.check(self)
        active = self.active_switches()
        for what, changes in (("teacher forcing", "changes_teacher_forcing"), ("the decoder self-attention mask",
                                                                                "changes_decoder_mask")):
            changing = [switch.name for switch in active if getattr(switch, changes)]
            if len(changing) > 1:
                raise ValueError(f"switches {' and '.join(changing)} each change {what}; only one may be on")
        for switch in active:
            outside = [layer for layer in switch.state_layers() if not 1 <= layer <= sizes.dec_layers]
            if outside:
                raise ValueError(f"switch {switch.name!r} reads the states of decoder layer {outside[0]}: the "
                                 f"decoder layers are 1..{sizes.dec_layers}")
        for stack, layers, kinds in (("encoder", sizes.enc_layers, ("self",)),
                                     ("decoder", sizes.dec_layers, ("self", "cross"))):
            for layer in range(layers):
                for kind in kinds:
                    check_hooks(self.attention_hooks(stack, layer, kind), sizes.n_heads)

    def idle_options(self, given: dict[str, Any]) -> list[str]:
        """The options in `given` (a recipe's [model] keys) set to other than their default on a switch that is
        off: they would do nothing (`parent_ignore` without `pascal_heads`). One line per option."""
        idle = []
        for switch in registered():
            if switch.active(self) or not switch.switched_by:
                continue
            defaults = switch.Config()
            for spec in fields(switch.Config):
                if spec.name in given and spec.name not in switch.switched_by \
                        and getattr(self.section(switch), spec.name) != getattr(defaults, spec.name):
                    idle.append(f"{spec.name} = {given[spec.name]!r} does nothing without "
                                f"{' or '.join(switch.switched_by)} (the {switch.name} switch is off)")
        return idle

    # What the switches that are on ask of the generic code.

    def active_switches(self) -> list[Switch]:
        """The switches that are on, in registration order."""
        return [switch(self) for switch in registered() if switch.active(self)]

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        """The switches' hooks of one attention module (see Switch.attention_hooks)."""
        return [hook for switch in self.active_switches() for hook in switch.attention_hooks(stack, layer, kind)]

    def describe_switches(self) -> str:
        """The syntax switches that are on, in one line (run header, `syntrain env --checkpoint`)."""
        return "; ".join(filter(None, (switch.describe() for switch in self.active_switches()))) or "none (vanilla)"

    def batch_columns(self, training: bool) -> dict[BatchColumn, str]:
        """The batch columns the switches read (their `batch_columns`, as declared) -> the switch that needs each;
        `training` adds the supervision of the auxiliary losses."""
        return {declared(name): why for switch in self.active_switches()
                for name, why in switch.reads(training).items()}

    def dataset_options(self) -> dict[str, Any]:
        """ParallelData options the model needs: its decoder target (declared; None: the target sub-words) and
        `data_options`."""
        return {"decoder_target": target_column(self.decoder_target), "data_options": self.data_options()}

    def data_options(self) -> dict[str, Any]:
        """What the switches' batch columns read of the run (their `data_options`: label vocabularies)."""
        return {name: value for switch in self.active_switches() for name, value in switch.data_options().items()}

    @property
    def decoder_target(self) -> str:
        """What the decoder produces: TEXT (the target sub-words), or the target an active switch declares
        (`Switch.decoder_targets`)."""
        return next((declared.name for switch in self.active_switches() for declared in switch.decoder_targets), TEXT)

    def loss_weights(self) -> dict[str, float]:
        """Auxiliary loss name -> its lambda (names as `Transformer.auxiliary_losses` returns them)."""
        return {name: weight for switch in self.active_switches() for name, weight in switch.loss_weights().items()}

    @property
    def recomputes_prefix(self) -> bool:
        """Decoding re-runs the decoder over the whole prefix at each step (no incremental cache)."""
        return any(switch.recomputes_prefix for switch in self.active_switches())


PRESETS: dict[str, dict] = {
    "cpu": dict(d_model=64, n_heads=4, d_ff=256, enc_layers=2, dec_layers=2, dropout=0.1),  # 2 CPU cores, minutes
    "tiny": dict(d_model=256, n_heads=4, d_ff=1024, enc_layers=3, dec_layers=3, dropout=0.1),  # CPU
    "base": dict(d_model=512, n_heads=8, d_ff=2048, enc_layers=6, dec_layers=6, dropout=0.1),  # Vaswani base
}


def init_weights(module: nn.Module, d_model: int) -> None:
    """The initialisation of a `Transformer`'s linear layers and embeddings."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=d_model ** -0.5)
        nn.init.zeros_(module.weight[PAD_ID])  # PAD_ID = 0 = also a label embedding's "none"


class Transformer(nn.Module):
    """Encoder-decoder; `forward` returns `Outputs` (logits (B, T, V) and what the auxiliary losses need).

    The decoder runs over all positions at once (`decode`, teacher forcing and decoding that re-reads the
    prefix) or one step at a time with a cache (`decode_step`, incremental decoding)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        sizes = cfg.sizes
        if sizes.vocab_size <= 0:
            raise ValueError("ModelConfig.vocab_size must be set (the size of the joint vocabulary)")
        cfg.check()
        self.cfg = cfg
        self.switches = cfg.active_switches()
        # the 1-based decoder layers whose output the switches' losses read (Outputs.layer_states)
        self.state_layers = tuple(sorted({layer for switch in self.switches for layer in switch.state_layers()}))
        self.src_embed = nn.Embedding(sizes.src_vocab_size or sizes.vocab_size, sizes.d_model, padding_idx=PAD_ID)
        # separate vocabularies (src_vocab_size set): never one source/target matrix; the output may share the target's
        shared = sizes.share_embeddings and not sizes.src_vocab_size
        self.tgt_embed = self.src_embed if shared else nn.Embedding(sizes.vocab_size, sizes.d_model, padding_idx=PAD_ID)
        self._add_modules("source_modules")
        self.register_buffer("positions", sinusoids(sizes.max_len, sizes.d_model), persistent=False)
        self.drop = nn.Dropout(sizes.dropout)
        self.encoder, self.decoder = Encoder(cfg), Decoder(cfg)
        self._add_modules("decoder_modules")
        self.enc_norm, self.dec_norm = nn.LayerNorm(sizes.d_model), nn.LayerNorm(sizes.d_model)
        self.output = nn.Linear(sizes.d_model, sizes.vocab_size, bias=False)
        self.apply(functools.partial(init_weights, d_model=sizes.d_model))
        if sizes.share_embeddings:
            self.output.weight = self.tgt_embed.weight

    def _add_modules(self, kind: str) -> None:
        for switch in self.switches:
            for name, module in getattr(switch, kind)().items():
                self.add_module(name, module)

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, start: int = 0, inputs: Inputs | None = None
               ) -> torch.Tensor:
        end = start + ids.shape[1]
        if end > self.cfg.sizes.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len {self.cfg.sizes.max_len}")
        x = table(ids)
        if inputs is not None:  # the source: the switches' embedding steps
            for switch in self.switches:
                x = switch.embed_source(self, x, inputs)
        return self.drop(x * math.sqrt(self.cfg.sizes.d_model) + self.positions[start:end])

    def encode(self, src: torch.Tensor, inputs: Inputs | None = None, records: dict | None = None,
               **named: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids and the model inputs (or by name) -> (memory
        (B, S, C), source mask (B, 1, 1, S)); `records` gets what the hooks keep for the losses."""
        inputs = merge_inputs(inputs, named)
        src_mask = (src != PAD_ID)[:, None, None, :]
        x = self.encoder(self._embed(self.src_embed, src, inputs=inputs), src_mask, inputs, records)
        return self.enc_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               inputs: Inputs | None = None, records: dict | None = None, **named: torch.Tensor | None
               ) -> torch.Tensor:
        """tgt_in (B, T) ids -> logits (B, T, V) of one decoder pass (inputs: e.g. distances, graph)."""
        return self.output(self.decode_hidden(tgt_in, memory, src_mask, merge_inputs(inputs, named), records))

    def decode_hidden(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                      inputs: Inputs | None = None, records: dict | None = None, layers: tuple[int, ...] = (),
                      layer_states: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """The decoder's normalized output states (B, T, C) (see `decode`); the output of each 1-based decoder
        layer in `layers` goes into `layer_states`."""
        inputs = inputs or {}
        valid = tgt_in != PAD_ID
        masks = [mask for switch in self.switches if (mask := switch.decoder_self_mask(valid)) is not None]
        if masks:  # one at most (ModelConfig.check)
            self_mask, limit = masks[0]
        else:
            b, t = tgt_in.shape
            causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()
            self_mask = causal[None, None] & valid[:, None, None, :]
            limit = torch.arange(t, device=tgt_in.device)[None].expand(b, t)
        x = self._embed(self.tgt_embed, tgt_in)
        for switch in self.switches:
            x, inputs = switch.decoder_input(self, x, inputs, limit)
        return self.dec_norm(self.decoder(x, memory, self_mask, src_mask, inputs, records, layers, layer_states))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, inputs: Inputs | None = None,
                **named: torch.Tensor | None) -> Outputs:
        """Teacher forcing: `Outputs` with the logits (B, T, V), the encoder and decoder states and the records
        the auxiliary losses read (`auxiliary_losses`); one switch may compute the decoder states its own way
        (BiTran: one pass per prefix)."""
        inputs, records = merge_inputs(inputs, named), {}
        memory, src_mask = self.encode(src, inputs, records)
        layers = self.state_layers
        states = next((states for switch in self.switches if switch.changes_teacher_forcing
                       and (states := switch.teacher_forcing(self, tgt_in, memory, src_mask, inputs, records,
                                                             layers)) is not None), None)
        if states is None:  # one causal pass
            kept: dict[int, torch.Tensor] = {}
            states = DecoderStates(self.decode_hidden(tgt_in, memory, src_mask, inputs, records, layers, kept), kept)
        return Outputs(self.output(states.final), records, tgt_in != PAD_ID, states.positions, memory,
                       src_mask[:, 0, 0], states.final, states.layers)

    def auxiliary_losses(self, outputs: Outputs, inputs: Inputs | None = None, **named: torch.Tensor | None
                         ) -> dict[str, torch.Tensor]:
        """The switches' auxiliary losses of a forward's `outputs`, unweighted sums over the batch (names as in
        `ModelConfig.loss_weights`); `inputs`: the model inputs."""
        inputs = merge_inputs(inputs, named)
        return {name: value for switch in self.switches
                for name, value in switch.losses(self, outputs, inputs).items()}

    def new_cache(self) -> list[dict[str, KeyValueCache]]:
        """An empty incremental-decoding cache (per decoder layer: self-attention keys/values so far,
        cross-attention keys/values of the memory)."""
        return [{"self": KeyValueCache(), "cross": KeyValueCache()} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: list[dict[str, KeyValueCache]], rows: torch.Tensor) -> None:
        """Keep cache rows `rows` (beam search: the hypotheses that continue). Cross-attention entries stay:
        a sentence's beam rows share one memory."""
        for layer in cache:
            layer["self"].reorder(rows)

    def decode_step(self, last: torch.Tensor, step: int, memory: torch.Tensor, src_mask: torch.Tensor,
                    cache: list[dict[str, KeyValueCache]], inputs: Inputs | None = None) -> torch.Tensor:
        """Incremental decoding: the token ids `last` (B, 1) at target position `step`, earlier positions read
        from `cache` -> logits (B, V) for the next token. Equals decode()'s last row (tested)."""
        x = self._embed(self.tgt_embed, last, start=step)
        for layer, layer_cache in zip(self.decoder, cache):
            x = layer(x, memory, None, src_mask, layer_cache, inputs)
        return self.output(self.dec_norm(x))[:, -1]

    def attention_modules(self) -> list[MultiHeadAttention]:
        """Every attention module of the model."""
        return [module for module in self.modules() if isinstance(module, MultiHeadAttention)]

    def set_attention_kernel(self, kernel: str) -> None:
        """'auto', 'math' or 'flex' for the layers whose hooks can run on FlexAttention (see attention.py)."""
        check_kernel(kernel)
        for attn in self.attention_modules():
            attn.kernel = kernel

    def kernel_in_use(self, device: torch.device) -> str:
        """The attention kernel of the layers that have a choice (flex or math), for the run header."""
        layers = [attn for attn in self.attention_modules() if attn.layout.flex]
        if not layers:
            return "none (no layer with attention operations)"
        return "flex" if layers[0].uses_flex(device) else "math"


def build_model(preset: str = "tiny", **overrides: object) -> Transformer:
    """A Transformer from a preset name and ModelConfig overrides (vocab_size is required)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return Transformer(ModelConfig.from_dict({**PRESETS[preset], **overrides}))
