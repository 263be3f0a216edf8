"""The interface of a syntax switch (its registry, which the generic model, config and trainer loop over, is
`syntrain.switches.registry`).

A switch is one module: a `Switch` subclass, `class MySwitch(Switch[MyConfig], name=..., config=MyConfig,
switched_by=(...))`, with its config slice (a dataclass whose fields are declared with `syntrain.config.option`;
the names are flat `[model]` keys, `switched_by` the ones that turn it on) and the hooks it needs, then one line
`register(MySwitch)` (`syntrain.switches.registry`); its place among the switches is a class keyword too
(`priority=` or `after=` / `before=`). That module, its test and one run of `python -m syntrain.config` (its pin
file tests/data/switches/<name>.json and the generated doc parts) are the whole of a new switch. Hooks (all
optional; the defaults do nothing):

- `check(cfg)`: cross-field checks that need no data (ValueError naming the field);
- `describe()`: its part of the run header's "syntax switches" line;
- `columns`: the batch columns it declares (`syntrain.columns.BatchColumn`: the shard column read, how it is
  padded and collated; the data layer collates only what switches declare); `reads(training)`: the
  names of those it reads in this run -> who needs them;
- `decoder_targets`: the decoder targets it declares (`syntrain.columns.TargetColumn`: a target shard column the decoder
  produces instead of the target sub-words; the model's target is the one its active switches declare);
- `data_options()`: what its batch columns read of the run (label vocabularies), under the names the columns
  read them by (name its options otherwise: docs/switches-api.md, "Config"); `filled_values(cfg, table, manifest,
  vocab)` (classmethod): the values of its `option(filled=True)` options derived from the training data, set once
  (`syntrain.config.fill.fill_from_data`) before the model is built;
- `attention_hooks(stack, layer, kind)`: `AttentionHook`s for one attention module (operations on the
  attention logits of some heads: own query, scale, bias, masks, recorded weights; an output term);
- `source_modules()` + `embed_source(...)`: extra embedding of the source; `decoder_modules()` +
  `decoder_input(...)`: what runs on the decoder input (graph layers, masks for the attention hooks);
  `decoder_self_mask(...)`: another decoder self-attention mask; `teacher_forcing(...)`: another way to compute
  the teacher-forced decoder states (one switch at a time: `changes_teacher_forcing`, `changes_decoder_mask`);
- `training_report(data)`: the run-header line about the training data;
- `constraint(vocab, rows)`, `output_length_factor`, `recomputes_prefix`: decoding (constrained tokens and the
  inputs they add, the length limit, no incremental cache);
- `Decoded`: what its decoded outputs are beyond their text, a `DecodedOutputs` subclass built from its options
  (`decoded(switches)`): `text(pieces)` (the pieces that are text, before de-BPE); `scores(pieces, data, rows)`
  + `scores_text(result, line)` (evaluation measures and their text in the trainer's log lines and `syntrain
  eval`); `files` + `file_text(name, pieces, rows)` (`syntrain eval --NAME PATH` files); `run_files(pieces)`,
  `describe_run()`, `compare_header` + `compare_column(run, data_path, described)` (what `syntrain compare`
  keeps in a run folder and shows in its table);
- `loss_names`: the names of the auxiliary losses it may give (the generated loss list of docs/switches.md);
- `start_from_pretrained(model)`: its parameters set so that the model's output equals the pretrained model's
  it was loaded from (`syntrain.pretrained`; a switch that cannot start so refuses in one line);
- `losses(model, outputs, inputs)`: its auxiliary losses, computed only from what forward returned (`Outputs`:
  logits, records, the encoder and decoder states; `state_layers()` names the decoder layers whose states it
  reads), the model inputs and the modules it added to the model; `loss_weights()` their lambdas.

Forward never keeps state on a module: the attention hooks write the tensors a loss needs into the `records`
dict of the current forward, which `Outputs` carries back to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import torch

from ..columns import BatchColumn, TargetColumn
from ..config.core import Architecture, DecoderOutput, DropoutRates, ModelSizes, WeightSharing

if TYPE_CHECKING:
    from torch import nn


class ModelOptions(Protocol):
    """What a switch sees of the model config (`syntrain.config.model.ModelConfig` is one): the generic model's
    parts (sizes, dropout rates, weight sharing, architecture, the decoder target), and any switch's typed section
    (`Switch.section` types it)."""

    sizes: ModelSizes
    dropouts: DropoutRates
    sharing: WeightSharing
    architecture: Architecture
    output: DecoderOutput

    def section(self, switch: Any) -> Any: ...  # noqa: ANN401 (a switch class or name -> its config section)

Inputs = dict[str, torch.Tensor]


def merge_inputs(inputs: Inputs | None, named: dict[str, torch.Tensor | None]) -> Inputs:
    """`inputs` plus inputs passed by name (None values dropped)."""
    return {name: value for name, value in {**(inputs or {}), **named}.items() if value is not None}


@dataclass
class Outputs:
    """What a teacher-forced forward returns: the logits and what the losses need.

    `records`: named tensors recorded by the attention hooks (e.g. a parse head's log-weights);
    `target_valid` (B, T) the non-pad decoder inputs; `loss_positions` (B, T) the positions whose prediction
    was computed (None: all; a sampled approximation leaves the others at zero logits and zero states);
    `encoder_states` (B, S, C) the encoder output (normalized) and `source_valid` (B, S) its non-pad positions;
    `decoder_states` (B, T, C) the decoder output (normalized) the logits are projected from; `layer_states`
    1-based decoder layer -> that layer's output (B, T, C), for the layers an active switch names in
    `state_layers()` (only those are kept)."""

    logits: torch.Tensor
    records: dict[str, torch.Tensor] = field(default_factory=dict)
    target_valid: torch.Tensor | None = None
    loss_positions: torch.Tensor | None = None
    encoder_states: torch.Tensor | None = None
    source_valid: torch.Tensor | None = None
    decoder_states: torch.Tensor | None = None
    layer_states: dict[int, torch.Tensor] = field(default_factory=dict)


@dataclass
class DecoderStates:
    """What one teacher-forced decoder pass computed: `final` (B, T, C) the normalized output states, `layers`
    1-based decoder layer -> its output (B, T, C) (the layers asked for), `positions` (B, T) the positions
    computed (None: all)."""

    final: torch.Tensor
    layers: dict[int, torch.Tensor] = field(default_factory=dict)
    positions: torch.Tensor | None = None


OPS = ("query", "scale", "bias", "mask", "head_mask", "record")  # an `AttentionHook`'s operations (`ops`)
QUERY, SCALE, BIAS, MASK, HEAD_MASK, RECORD = OPS


@dataclass(frozen=True)
class Heads:
    """Which heads of an attention module a hook acts on: `Heads.front(n)` (heads 0..n-1), `Heads.last()`,
    `Heads.every()` or `Heads.of(i, j, ...)`; `indices(n_heads)` resolves them for a module of `n_heads` heads."""

    kind: str  # "front", "last", "every", "of"
    members: tuple[int, ...] = ()  # front: (n,); of: the head indices

    @classmethod
    def front(cls, n: int) -> Heads:
        return cls("front", (n,))

    @classmethod
    def last(cls) -> Heads:
        return cls("last")

    @classmethod
    def every(cls) -> Heads:
        return cls("every")

    @classmethod
    def of(cls, *indices: int) -> Heads:
        return cls("of", tuple(sorted(set(indices))))

    def indices(self, n_heads: int) -> tuple[int, ...]:
        """The sorted head indices in a module of `n_heads` heads (ValueError when they are not its heads)."""
        if self.kind == "last":
            return (n_heads - 1,)
        if self.kind == "every":
            return tuple(range(n_heads))
        heads = tuple(range(self.members[0])) if self.kind == "front" else self.members
        if any(not 0 <= head < n_heads for head in heads):
            raise ValueError(f"{self} do not fit in {n_heads} heads")
        return heads

    def __str__(self) -> str:
        if self.kind == "front":
            return f"the front {self.members[0]} heads"
        return {"last": "the last head", "every": "every head"}.get(self.kind, f"heads {list(self.members)}")


@dataclass
class HeadView:
    """What a hook's operations read in one forward: the layer input x (B, T, C), its heads' queries, keys and
    values q (B, h, T, D), k, v (B, h, S, D) (h: the hook's heads), the layer's mask (True = may attend,
    broadcastable to (B, 1, T, S); None: none) and the model inputs."""

    x: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None
    inputs: Inputs

    @property
    def n_keys(self) -> int:
        return self.k.shape[2]


class AttentionHook:
    """One switch's part in one attention module: operations on the attention logits of the heads `heads`, which
    syntrain.transformer_layers composes in one order with the other hooks' operations on the same heads (its module
    docstring). `ops` names the operations (of OPS); `operations(attn, view)` gives their values in a forward, for
    its h heads (a tensor broadcastable to (B, h, T, S) unless said otherwise):

    - "query": (B, h, T, D), the heads' own query replacing view.q (one hook per head: the parse heads' Q U);
    - "scale": multiplies the scaled scores q.k / sqrt(d) (Pascal's prior);
    - "bias": added to the scores after the scaling (the released DBSA layer's k . b);
    - "mask": boolean, True = may attend, ANDed with the layer's mask (the syntax-directed window);
    - "head_mask": boolean, replaces the layer's mask for these heads (one hook per head: PARENT);
    - "record": no value; `record(attn, log_weights, records)` gets the heads' log-weights (B, h, T, S) before
      dropout and keeps what a loss needs in the forward's `records`.

    Besides: `extra(attn, view)`, a term (B, T, C) added to the output projection (None: nothing);
    `elementwise(attn, view)`, operations computed inside the FlexAttention kernel, each a function of (b, h, q_idx,
    kv_idx) with h the index among this hook's heads (the others: their tensors indexed). Parameters are registered
    on the attention module in `attach` (their names are the checkpoints' names). `view` is the forward's
    `HeadView` of the hook's heads."""

    heads = Heads.every()
    ops: tuple[str, ...] = ()
    name = "syntax"

    def attach(self, attn: nn.Module) -> None:
        """Register this hook's parameters on `attn` (after its query/key/value/output projections)."""

    def operations(self, attn: nn.Module, view: HeadView) -> dict[str, torch.Tensor]:
        """The value of each of `ops` but "record" in this forward (see the class docstring)."""
        return {}

    def record(self, attn: nn.Module, log_weights: torch.Tensor, records: dict[str, torch.Tensor]) -> None:
        """Keep what a loss needs from the heads' log-weights (B, h, T, S) ("record")."""

    def extra(self, attn: nn.Module, view: HeadView) -> torch.Tensor | None:
        """A term (B, T, C) added to the output projection, or None."""
        return None

    def elementwise(self, attn: nn.Module, view: HeadView) -> dict[str, Callable]:
        """Operations computed elementwise inside the FlexAttention kernel: op -> f(b, h, q_idx, kv_idx)."""
        return {}


C = TypeVar("C")  # a switch's config section (its `Config` dataclass)


class DecodedOutputs:
    """What a switch's decoded outputs are beyond their text, for the generic decoding, evaluation, `syntrain eval`
    and `syntrain compare` code; the defaults do nothing. A switch names its subclass (`Switch.Decoded`); one is
    built from the switch's options section (`decoded(switches)`). `files` and `compare_header`/`compare_column`
    are read from the class: `syntrain eval`'s options and `syntrain compare`'s columns come from every
    registered switch, also for models without it."""

    # files `syntrain eval --NAME PATH` writes from the decoded outputs: NAME -> (help, what the option needs,
    # for the error when no switch of the model writes it)
    files: ClassVar[dict[str, tuple[str, str]]] = {}
    compare_header: ClassVar[str] = ""  # the header of its column in `syntrain compare`'s table ('': none)

    def __init__(self, options: Any) -> None:  # noqa: ANN401 (the switch's config section)
        self.options = options

    def text(self, pieces: list[str]) -> list[str]:
        """The pieces of a decoded output that are its text (de-BPE'd and detokenized next); default all."""
        return pieces

    def scores(self, pieces: list[list[str]], data: Any, rows: Any) -> dict[str, Any]:
        """Extra evaluation measures of decoded outputs (`pieces` of `rows` of `data`); the trainer records each
        under its name (valid_NAME, test_NAME)."""
        return {}

    def scores_text(self, result: dict[str, Any], line: bool = False) -> str:
        """Its measures in `result` (an evaluation's scores) as text: appended to the trainer's log line
        ("" when absent), or with `line` a line of its own for `syntrain eval` ("": none)."""
        return ""

    def file_text(self, name: str, pieces: list[list[str]], rows: Any) -> str:
        """The text of output file `name` (one of `files`) for the decoded `pieces` of split rows `rows`."""
        raise NotImplementedError(name)

    def run_files(self, pieces: list[list[str]]) -> dict[str, list[str]]:
        """Files `syntrain compare` writes into a run folder beside RUN/test.hyp: name -> lines (one per pair)."""
        return {}

    def describe_run(self) -> dict[str, Any]:
        """Values `syntrain compare` keeps in RUN/describe.json for `compare_column` (JSON types)."""
        return {}

    @classmethod
    def compare_column(cls, run: str, data_path: str, described: dict[str, Any]) -> str:
        """Its cell of run folder `run` in `syntrain compare`'s table on split `data_path` (`described`: the run's
        RUN/describe.json; the run may hold no checkpoint and be of a model without this switch: '' then)."""
        return ""


@dataclass
class NoOptions:
    """The config section of a switch that declares no [model] options."""


class DataHooks:
    """What a switch reads of the data (part of `Switch`; the defaults read nothing): the batch columns and decoder
    targets it declares, which columns it reads in a run and what they read of the run, its run-header line."""

    columns: ClassVar[tuple[BatchColumn, ...]] = ()  # batch columns it declares (named in `reads`)
    decoder_targets: ClassVar[tuple[TargetColumn, ...]] = ()  # decoder targets it declares (the target while it is on)

    def reads(self, training: bool) -> dict[str, str]:
        """The names of the batch columns it reads in this run (its own `columns` or the shared ones of
        `syntrain.columns.SHARED`) -> who needs them (for the error when a split lacks one); `training` adds the
        supervision of its losses."""
        return {}

    def data_options(self) -> dict[str, Any]:
        """What its batch columns read of the run, by name (ParallelData's `data_options`: label
        vocabularies)."""
        return {}

    def training_report(self, data: Any) -> tuple[str, dict[str, Any]]:
        """(a line for the run header, values for the first metrics.jsonl line) about the training data."""
        return "", {}


class DecodingHooks:
    """How a switch changes decoding (part of `Switch`; the defaults change nothing): constrained tokens, the
    length limit, no incremental cache, and what its decoded outputs are beyond their text (`Decoded`)."""

    recomputes_prefix = False  # decoding re-runs the decoder over the whole prefix (no incremental cache)
    # what its decoded outputs are beyond their text (measures, files, a compare column): built from its options
    Decoded: ClassVar[type[DecodedOutputs]] = DecodedOutputs
    output_length_factor = 1.5  # decoding stops after this many output items per source sub-word (+ 10)

    def constraint(self, vocab: Any, rows: int) -> Any:
        """A constraint on the tokens decoding may choose for `rows` hypotheses, or None: an object with
        `mask(steps_left, device)` ((rows, V) True = allowed), `push(tokens)` (one chosen token per row),
        `reorder(rows)` (the rows beam search keeps) and `inputs(device)` (model inputs it adds to a decoder
        pass over the whole prefix); see syntrain.switches.tree_decoding.TreeConstraint."""
        return None


class ModelHooks:
    """What a switch adds to the model (part of `Switch`; the defaults add nothing): attention hooks, modules on
    the source and decoder inputs, another decoder mask or teacher forcing, auxiliary losses."""

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        """Hooks of the attention module `kind` ("self" / "cross") of 0-based layer `layer` of `stack`
        ("encoder" / "decoder")."""
        return []

    def source_modules(self) -> dict[str, nn.Module]:
        """Modules registered on the model right after the embeddings (by name)."""
        return {}

    def embed_source(self, model: nn.Module, x: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        """The source embeddings (B, S, C) before scaling and positions."""
        return x

    def decoder_modules(self) -> dict[str, nn.Module]:
        """Modules registered on the model after the decoder layers (by name)."""
        return {}

    def decoder_self_mask(self, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(decoder self-attention mask (B, 1, T, T), limit (B, T): the last input each position sees)."""
        return None

    def decoder_input(self, model: nn.Module, x: torch.Tensor, inputs: Inputs, limit: torch.Tensor
                      ) -> tuple[torch.Tensor, Inputs]:
        """The embedded decoder input and the inputs the decoder layers see."""
        return x, inputs

    @property
    def changes_teacher_forcing(self) -> bool:
        """Whether `teacher_forcing` computes the decoder states its own way in this run (BiTran); two switches
        that do are refused in one line (`check_model_config`)."""
        return False

    @property
    def changes_decoder_mask(self) -> bool:
        """Whether `decoder_self_mask` gives another mask in this run; two switches that do are refused."""
        return False

    def teacher_forcing(self, model: nn.Module, tgt_in: torch.Tensor, memory: torch.Tensor,
                        src_mask: torch.Tensor, inputs: Inputs, records: dict, layers: tuple[int, ...]
                        ) -> DecoderStates | None:
        """The teacher-forced decoder states computed another way than one causal decoder pass (None: the usual
        one), with the output of the 1-based decoder `layers`; only for a switch whose
        `changes_teacher_forcing` is True. The logits are projected from them by the model."""
        return None

    def state_layers(self) -> tuple[int, ...]:
        """The 1-based decoder layers whose output states its losses read (`Outputs.layer_states`); the final
        states (`Outputs.decoder_states`) and the encoder's (`Outputs.encoder_states`) are always there."""
        return ()

    # the names of the auxiliary losses it may give (`loss_weights`, `losses`; logged as loss_NAME): the loss list
    # of docs/switches.md is generated from them
    loss_names: ClassVar[tuple[str, ...]] = ()

    def loss_weights(self) -> dict[str, float]:
        """Auxiliary loss name -> its lambda (names among its `loss_names`)."""
        return {}

    def start_from_pretrained(self, model: nn.Module) -> None:
        """Set its parameters on `model` (just loaded from a pretrained model: syntrain.pretrained) so that the
        output equals the pretrained model's (an added embedding: zeros); ValueError naming the option when it
        cannot. The default: its parameters change no output at their initialisation (or it has none)."""

    def losses(self, model: nn.Module, outputs: Outputs, inputs: Inputs) -> dict[str, torch.Tensor]:
        """Its auxiliary losses (unweighted sums over the batch) from `outputs` (logits, records, the encoder
        and decoder states) and the model inputs; `model` holds the modules it added (`decoder_modules`)."""
        return {}


class Switch(DataHooks, DecodingHooks, ModelHooks, Generic[C]):
    """A syntax mechanism (see the module docstring). `class MySwitch(Switch[MyConfig], ..., config=MyConfig)`:
    an instance reads its own options through `self.options` (a `MyConfig`, typed), the model sizes through
    `self.cfg.sizes`; a classmethod hook gets the model config `cfg` and reads `cls.section(cfg)`. Another
    switch's options, where a mechanism needs them: `cfg.section(OtherSwitch)`. Its hooks by stage: `DataHooks`,
    `DecodingHooks`, `ModelHooks`; here: its identity, options and their checks.

    Its place among the switches, declared by the switch itself: a `priority` (a number; the built-in switches
    declare 10, 20, ..., 70), or by name, `after=("pascal",)` / `before=(...)`; a switch declaring neither comes
    after those with a priority, by name (`syntrain.switches.registered`). The order decides
    in which order the hooks of one attention module run and register their parameters (so parameter
    initialization draws from the random generator in that order: pinned first-step losses depend on it), the
    order in which auxiliary losses are summed and the run header lists the switches."""

    name: ClassVar[str] = ""
    Config: ClassVar[type] = NoOptions
    switched_by: ClassVar[tuple[str, ...]] = ()  # the options that turn it on (or override `active`)
    after: ClassVar[tuple[str, ...]] = ()  # names of the switches it comes after (see the class docstring)
    before: ClassVar[tuple[str, ...]] = ()  # names of the switches it comes before
    priority: ClassVar[int | None] = None  # its rank among the switches (lower first; None: after those that have one)
    example: ClassVar[dict[str, Any]] = {}  # [model] options that turn it on in a small model (docs, generic tests)
    # values of its options that a checkpoint stored before they existed was trained with (when not the default)
    stored_defaults: ClassVar[dict[str, Any]] = {}
    # old spellings of its options -> their names now: recipes, --set and checkpoints that use them still read
    # (`syntrain.switches.current_names`, with a note)
    renamed: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, name: str = "", config: type | None = None, switched_by: tuple[str, ...] = (),
                          after: tuple[str, ...] = (), before: tuple[str, ...] = (), priority: int | None = None,
                          **kwargs: Any) -> None:
        """`class MySwitch(Switch[MyConfig], name=..., config=MyConfig, switched_by=("my_option",),
        after=("pascal",))` (or `priority=75`)."""
        super().__init_subclass__(**kwargs)
        cls.name, cls.switched_by = name or cls.name, switched_by or cls.switched_by
        cls.after, cls.before = tuple(after) or cls.after, tuple(before) or cls.before
        if name:  # a named (registrable) class declares its own place; an abstract base passes none on
            cls.priority = priority
        if config is not None:
            cls.Config = config

    def __init__(self, cfg: ModelOptions) -> None:
        self.cfg = cfg  # the whole model config: `cfg.sizes`, hooks of the other switches
        self.options: C = cfg.section(type(self))

    @classmethod
    def section(cls, cfg: ModelOptions) -> C:
        """This switch's options in the model config `cfg` (for the classmethod hooks)."""
        return cfg.section(cls)

    @classmethod
    def active(cls, cfg: ModelOptions) -> bool:
        """Whether the switch is on in `cfg`: one of the `switched_by` options is set (a list: a non-zero item), or
        the model's `decoder_target` is one the switch declares (`decoder_targets`)."""
        options = cls.section(cfg)
        return any(any(value) if isinstance(value, list) else bool(value)
                   for value in (getattr(options, name) for name in cls.switched_by)) or \
            cfg.output.decoder_target in {target.name for target in cls.decoder_targets}

    @classmethod
    def check_layers(cls, cfg: ModelOptions, option: str, stack: str | tuple[str, ...],
                     per_layer_heads: bool = False) -> None:
        """The one layer/head checker (docs/switches-api.md, "Layers and heads"): ValueError naming `option` (of
        this switch's options) when it names a layer that `stack` ("encoder"/"decoder", or both: a tuple) lacks.
        The option is a 1-based layer number (0: the option's off or default value, as its help says) or a list
        of them; with `per_layer_heads`, a list of head counts from layer 1 on, each at most `n_heads`."""
        value, sizes = getattr(cls.section(cfg), option), cfg.sizes
        stacks = (stack,) if isinstance(stack, str) else stack
        layers = min(cls.layer_count(cfg, name) for name in stacks)
        where = " and ".join(stacks)
        if per_layer_heads:
            if len(value) > layers:
                raise ValueError(f"{option} lists {len(value)} layers, the {where} has {layers}")
            for layer, heads in enumerate(value, 1):
                if heads > sizes.n_heads:
                    raise ValueError(f"{option} {list(value)}: layer {layer} asks for {heads} heads, a layer has "
                                     f"{sizes.n_heads} (n_heads)")
        elif any(layer > layers for layer in (value if isinstance(value, list) else [value])):
            raise ValueError(f"{option} {value}: the {where} layers are 1..{layers}")

    @staticmethod
    def layer_count(cfg: ModelOptions, stack: str) -> int:
        """The layers of `stack` ("encoder"/"decoder")."""
        return cfg.sizes.enc_layers if stack == "encoder" else cfg.sizes.dec_layers

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        """ValueError naming the field when the options do not fit the model (no data needed)."""

    @classmethod
    def filled_values(cls, cfg: ModelOptions, table: Any, manifest: Any, vocab: Any) -> dict[str, Any]:
        """Values of its `option(filled=True)` fields derived from the training split (`table`, its `manifest`)
        and the vocabulary (`fill_from_data` sets them, once, before the model is built)."""
        return {}

    def describe(self) -> str:
        """Its part of the "syntax switches" line."""
        return self.name


def decoded(switches: Iterable[Switch]) -> list[DecodedOutputs]:
    """The decoded-outputs objects of switches that are on (instances, e.g. a model's `switches`), each built from
    its switch's options, in the switches' order."""
    return [switch.Decoded(switch.options) for switch in switches]
