"""Tree decoding (Choshen & Abend): the decoder produces arc-standard transitions, optionally reading the graph
it has generated so far.

`decoder_target = "transitions"` alone = Linearized (the decoder reads `[BOS] + tgt_transitions`). On top:
`parent_layers` (a PARENT head, head 0 of those decoder layers' self-attention, attends only to itself and its
parents in the generated graph: a mask, no parameters), `gcn_layer_count` (a labeled, gated graph convolution over
the generated graph above the decoder embeddings; ablations `gcn_labeled`, `gcn_gated`), `bidirectional`
(BiTran: every generated token attends to every generated token; teacher forcing re-encodes every prefix, or
`bidirectional_prefixes` = k sampled prefixes per sentence in training).

The generated graph comes as the batch feature "graph", (E, 5) edge rows (batch row, parent, child, label id,
step) in decoder input positions (`syntrain.dataset`); a position p sees the edges with step <= limit[p]: p
itself (one causal pass) or the prefix end (BiTran). `transition_root` and `arc_labels` are derived from the
training split and its vocabulary. Decoding is constrained to valid trees (`TreeConstraint`); what the outputs
are beyond their text (the tree measure, the trees as CoNLL-U, the `syntrain compare` column) is in `tree_output`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from synprep.features import (
    BOUNDARY_KINDS,
    BPE_SEPARATOR,
    LEFT_ARC,
    RIGHT_ARC,
    TransitionState,
    joins_token,
    transition_edges,
)
from synprep.options import ROOT_POLICIES
from synprep.subwords.load import dataset_marker

from ..columns import LABEL_UNKNOWN, BatchColumn, TargetColumn
from ..config import option
from ..dataset import EncodedSplit
from ..vocab import EOS_ID, PAD_ID, SPECIALS, Vocab
from .base import AttentionHook, DecoderStates, Heads, HeadView, Inputs, ModelOptions, Switch
from .registry import register
from .tree_output import (
    TGT_TRANSITIONS,
    TreeOutputs,
    is_arc,
)

# the decoder target of tree decoding: the arc-standard transitions (sub-words as SHIFT), of which the arc
# tokens join the vocabulary
TRANSITIONS_TARGET = TargetColumn("transitions", TGT_TRANSITIONS, "transitions", counted=is_arc)


def arc_label_vocabulary(vocab: Vocab) -> list[str]:
    """The sorted labels of the vocabulary's transition tokens (graph label ids 2... in this order)."""
    return sorted({item.split(":", 1)[1] for item in vocab.itos if is_arc(item)})


def graph_rows(sequences: Sequence[Sequence[str]], label_ids: dict[str, int], root: str = "drop",
               boundary: tuple[str, str] = (BPE_SEPARATOR, "end")) -> np.ndarray:
    """The generated graphs of several transition sequences (prefixes allowed) as one (E, 5) int64 array of
    (batch row, parent, child, label id, step) in decoder input positions (+ 1: BOS); sub-words read by the
    pieces' (marker, marker kind) `boundary`."""
    parts = []
    for b, sequence in enumerate(sequences):
        edges, labels = transition_edges(sequence, root, *boundary)
        if len(edges):
            ids = np.array([label_ids.get(label, LABEL_UNKNOWN) for label in labels], dtype=np.int64)
            parts.append(np.column_stack([np.full(len(edges), b), edges[:, :2] + 1, ids, edges[:, 2] + 1]))
    return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)


class GraphColumn(BatchColumn):
    """`graph` (E, 5) int64 rows (batch row, parent, child, label id, step): the edges of the graph the target
    transitions generate (`synprep.features.TransitionState`) in decoder *input* positions (item position + 1,
    BOS shift), step = the input position of the arc that added the edge: the graph seen after reading input
    position p = the rows with step <= p. Label ids: 0 = self (GCN), 1 = a label unseen in training, 2...
    `arc_labels`. Made from the split's target ids once (rows with null transitions: no edges)."""

    def missing(self, names: Sequence[str]) -> bool:
        return False  # made from the decoder targets (a split without transitions fails as the decoder target)

    def load(self, data: EncodedSplit) -> tuple[np.ndarray, np.ndarray]:
        itos = np.array(data.vocab.itos, dtype=object)
        sequences = [[] if data.null[row] else itos[data.tgt_ids[data.tgt_off[row] : data.tgt_off[row + 1]]].tolist()
                     for row in range(len(data.tgt_off) - 1)]
        labels = {label: i + 2 for i, label in enumerate(data.data_options.get("arc_labels") or [])}
        root = data.configuration.get("inputs", {}).get("root", "drop")  # the pipeline's root policy
        boundary = (data.data_options.get("transition_marker", BPE_SEPARATOR),
                    data.data_options.get("transition_marker_kind", "end"))
        edges = [graph_rows([sequence], labels, root, boundary)[:, 1:] for sequence in sequences]
        offsets = np.concatenate([[0], np.cumsum([len(e) for e in edges])]).astype(np.int64)
        return (np.concatenate(edges) if edges else np.zeros((0, 4), np.int64)), offsets

    def collate(self, loaded: tuple[np.ndarray, np.ndarray], rows: Sequence[int], s: int, t: int, shift: int
                ) -> np.ndarray:
        edges, offsets = loaded
        parts = [edges[offsets[row] : offsets[row + 1]] for row in rows]
        batch = np.repeat(np.arange(len(parts)), [len(part) for part in parts])
        return np.column_stack([batch, np.concatenate(parts)]) if parts else np.zeros((0, 5), np.int64)


# token kinds for the constraints (`TransitionState.allowed`): a sub-word of the first class of
# `synprep.features.joins_token` (subword-nmt: ends in '@@'; '▁' pieces: lacks it; WordPiece: begins with '##'), any
# other sub-word, LEFT-ARC, RIGHT-ARC, the end (EOS), never (PAD, BOS, UNK)
CONTINUES, ENDS, LEFT, RIGHT, END, NEVER = range(6)


def token_kinds(vocab: Vocab, marker: str = BPE_SEPARATOR, kind: str = "end") -> np.ndarray:
    """(V,) the kind of every vocabulary entry (CONTINUES ... NEVER) under the pieces' (marker, marker kind)."""
    kinds = np.full(len(vocab), ENDS, dtype=np.int64)
    for i, item in enumerate(vocab.itos):
        if i < len(SPECIALS):  # <unk> too: the tree could not be read back from the text
            kinds[i] = END if i == EOS_ID else NEVER
        elif item.startswith(LEFT_ARC):
            kinds[i] = LEFT
        elif item.startswith(RIGHT_ARC):
            kinds[i] = RIGHT
        elif joins_token(item, marker, kind):
            kinds[i] = CONTINUES
    return kinds


class TreeConstraint:
    """The transition states of a batch of hypotheses: the allowed next tokens, and the graph so far."""

    def __init__(self, vocab: Vocab, root: str, rows: int, label_ids: dict[str, int] | None = None,
                 boundary: tuple[str, str] = (BPE_SEPARATOR, "end")) -> None:
        self.vocab, self.root, self.boundary = vocab, root, boundary
        self.kinds = torch.from_numpy(token_kinds(vocab, *boundary))
        self.states = [TransitionState(root, *boundary) for _ in range(rows)]
        self.items: list[list[str]] = [[] for _ in range(rows)]
        self.label_ids = label_ids

    def mask(self, steps_left: int, device: torch.device) -> torch.Tensor:
        """(rows, V) True = allowed; a finished or stuck row may only end."""
        allowed = torch.tensor([list(state.allowed(steps_left)) + [False] for state in self.states])
        allowed[~allowed.any(1), END] = True
        return allowed[:, self.kinds].to(device)

    def push(self, tokens: Sequence[int]) -> None:
        """Append one token per row (EOS and PAD leave the state as it is)."""
        for state, items, token in zip(self.states, self.items, tokens):
            if token not in (EOS_ID, PAD_ID):
                state.push(self.vocab.itos[token])
                items.append(self.vocab.itos[token])

    def reorder(self, rows: Sequence[int]) -> None:
        """Keep rows `rows` (beam search)."""
        self.states = [self.states[r].copy() for r in rows]
        self.items = [list(self.items[r]) for r in rows]

    def graph(self, device: torch.device) -> torch.Tensor | None:
        """(E, 5) the generated graph of every row so far (decoder input positions)."""
        if self.label_ids is None:
            return None
        return torch.from_numpy(graph_rows(self.items, self.label_ids, self.root, self.boundary)).to(device)

    def inputs(self, device: torch.device) -> Inputs:
        """The model inputs of a decoder pass over the prefixes: "graph" when the model reads it."""
        graph = self.graph(device)
        return {} if graph is None else {"graph": graph}


class GatedGCN(nn.Module):
    """Labeled, gated graph convolution layers with residual connections (Choshen & Abend, section 4):
    h_v <- h_v + ReLU(sum over u in N(v) of g_uv (W_dir(u,v) h_u + b_lab(u,v))),
    g_uv = sigmoid(h_u . w_dir(u,v) + b'_lab(u,v)); directions self (u = v), from a parent (u -> v) and from a
    child (v -> u); weights per direction, biases per label (0 = self, 1 = unseen, 2... the arc labels).
    `labeled` False: one bias for every arc label; `gated` False: g = 1. An edge is used by node v when its
    step <= limit[v] (the graph generated so far)."""

    def __init__(self, d_model: int, n_labels: int, layers: int, labeled: bool = True, gated: bool = True
                 ) -> None:
        super().__init__()
        self.labeled, self.gated, self.d_model = labeled, gated, d_model
        self.weight = nn.ModuleList(nn.Linear(d_model, 3 * d_model, bias=False) for _ in range(layers))
        self.bias = nn.ModuleList(nn.Embedding(n_labels, d_model) for _ in range(layers))
        if gated:
            self.gate = nn.ModuleList(nn.Linear(d_model, 3, bias=False) for _ in range(layers))
            self.gate_bias = nn.ModuleList(nn.Embedding(n_labels, 1) for _ in range(layers))

    def forward(self, h: torch.Tensor, graph: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
        """h (B, T, C), graph (E, 5) (batch, parent, child, label, step), limit (B, T) -> (B, T, C)."""
        b, t, c = h.shape
        batch, parent, child, label, step = graph.unbind(1)
        if not self.labeled:
            label = torch.ones_like(label)
        # each edge sends a message parent -> child (direction 1) and child -> parent (direction 2)
        rows = torch.cat([batch, batch])
        source, target = torch.cat([parent, child]), torch.cat([child, parent])
        direction = torch.cat([torch.ones_like(parent), torch.full_like(child, 2)])
        labels = torch.cat([label, label])
        visible = (torch.cat([step, step]) <= limit[rows, target]).to(h.dtype)
        self_label = torch.zeros((b, t), dtype=torch.long, device=h.device)
        for i, weight in enumerate(self.weight):
            projected = weight(h).view(b, t, 3, c)
            if self.gated:
                gates = self.gate[i](h)  # (B, T, 3)
                self_gate = torch.sigmoid(gates[..., 0] + self.gate_bias[i](self_label)[..., 0])[..., None]
                edge_gate = torch.sigmoid(gates[rows, source, direction] + self.gate_bias[i](labels)[:, 0])[:, None]
            else:
                self_gate, edge_gate = 1.0, 1.0
            total = self_gate * (projected[:, :, 0] + self.bias[i](self_label))
            messages = edge_gate * (projected[rows, source, direction] + self.bias[i](labels)) * visible[:, None]
            total = total.index_put((rows, target), messages.to(total.dtype), accumulate=True)
            h = h + torch.relu(total)
        return h


def parent_mask(graph: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
    """PARENT head: (B, T, T) True where query t may attend to key j: j = t, or j is a parent of t in the
    graph generated so far (an edge j -> t with step <= limit[t])."""
    b, t = limit.shape
    batch, parent, child, _, step = graph.unbind(1)
    visible = step <= limit[batch, child]
    mask = torch.zeros((b, t, t), dtype=torch.bool, device=limit.device)
    mask[batch[visible], child[visible], parent[visible]] = True
    return mask | torch.eye(t, dtype=torch.bool, device=limit.device)[None]


class ParentHead(AttentionHook):
    """Head 0 of a decoder self-attention attends to itself and its parents (model input "parent_mask"): a
    "head_mask", replacing the layer's mask for that head."""

    heads = Heads.of(0)
    ops = ("head_mask",)
    name = "PARENT head"

    def operations(self, attn: nn.Module, view: HeadView) -> dict[str, torch.Tensor]:
        parents = view.inputs.get("parent_mask")
        if parents is None:
            raise ValueError("a PARENT head needs the generated graph (parent_mask)")
        return {"head_mask": parents[:, None]}


def prefix_passes(model: nn.Module, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                  inputs: Inputs, records: dict, prefixes: int, uses_graph: bool, layers: tuple[int, ...] = ()
                  ) -> DecoderStates:
    """BiTran's teacher forcing: the decoder states (B, T, C) at input position p come from a pass over the
    prefix 0..p alone (its own graph when `uses_graph`, bidirectional attention), one pass per prefix, batched as
    B x T rows (cost O(T) passes); the output of the 1-based decoder `layers` likewise. With `prefixes` = k
    (training, `bidirectional_prefixes`), only k sampled prefixes per sentence are computed (the approximation);
    `positions` (B, T) then marks them (the others: zero states, so zero logits)."""
    b, t = tgt_in.shape
    valid = chosen = tgt_in != PAD_ID
    if prefixes:
        noise = torch.rand((b, t), device=tgt_in.device).masked_fill(~valid, 2.0)
        rank = noise.argsort(1).argsort(1)
        chosen = valid & (rank < prefixes)
    rows_b, rows_p = chosen.nonzero(as_tuple=True)
    positions = torch.arange(t, device=tgt_in.device)
    row_tgt = tgt_in[rows_b].masked_fill(positions[None] > rows_p[:, None], PAD_ID)
    row_inputs = {name: value[rows_b] for name, value in inputs.items() if name != "graph"}
    graph = inputs.get("graph")
    if graph is not None and uses_graph:
        pairs = (graph[:, 0:1] == rows_b[None]) & (graph[:, 4:5] <= rows_p[None])
        edge, row = pairs.nonzero(as_tuple=True)
        row_graph = graph[edge].clone()
        row_graph[:, 0] = row
        row_inputs["graph"] = row_graph
    row_layers: dict[int, torch.Tensor] = {}
    hidden = model.decode_hidden(row_tgt, memory[rows_b], src_mask[rows_b], row_inputs, records, layers, row_layers)
    rows = torch.arange(len(rows_b), device=hidden.device)

    def at_own_prefix(states: torch.Tensor) -> torch.Tensor:  # row r's state at its position rows_p[r] -> (B, T, C)
        last = states[rows, rows_p]
        return torch.zeros((b, t, last.shape[-1]), dtype=last.dtype, device=last.device).index_put((rows_b, rows_p),
                                                                                                   last)

    return DecoderStates(at_own_prefix(hidden), {layer: at_own_prefix(states) for layer, states in row_layers.items()},
                         chosen if prefixes else None)


@dataclass
class TreeConfig:
    """[model] options of tree decoding."""

    parent_layers: list[int] = option(default_factory=list, ge=1,
                                      help="1-based decoder layers with a PARENT head (head 0)")
    gcn_layer_count: int = option(0, ge=0, help="gated GCN layers over the generated graph (paper: 2)")
    gcn_labeled: bool = option(True, requires={"gcn_layer_count": None},
                               help="False: the unlabeled ablation (one bias for every arc label)")
    gcn_gated: bool = option(True, requires={"gcn_layer_count": None},
                             help="False: the ungated ablation (gate = 1)")
    bidirectional: bool = option(False, help="BiTran: generated tokens attend to all generated tokens")
    bidirectional_prefixes: int = option(0, ge=0, requires={"bidirectional": True},
                                         help="training: 0 = every prefix, k = k sampled prefixes")
    transition_root: str = option("drop", choices=ROOT_POLICIES, filled=True,
                                  help="root policy of the training transitions (from the training split)")
    arc_labels: list[str] = option(default_factory=list, filled=True,
                                   help="labels of the arc tokens (from the vocabulary)")
    transition_marker: str = option(BPE_SEPARATOR, filled=True,
                                    help="marker of the target pieces (from the dataset's sub-word scheme)")
    transition_marker_kind: str = option("end", choices=BOUNDARY_KINDS, filled=True,
                                         help="where the marker sits: end (subword-nmt), start ('▁'), continue "
                                              "('##'); from the dataset")

    @property
    def boundary(self) -> tuple[str, str]:
        """How the target transitions' sub-words show token bounds (`synprep.features.TransitionState`)."""
        return self.transition_marker, self.transition_marker_kind

    @property
    def uses_graph(self) -> bool:
        """The decoder reads the generated graph (PARENT, GCN)."""
        return bool(self.parent_layers or self.gcn_layer_count)


class ParentAttention:
    """PARENT attention (`parent_layers`): head 0 of those decoder layers' self-attention attends only to itself and
    its parents in the generated graph (`ParentHead`, reading the model input "parent_mask")."""

    def __init__(self, options: TreeConfig) -> None:
        self.options = options

    def hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        """The PARENT head of one attention module (0-based `layer`), if it has one."""
        on = (stack, kind) == ("decoder", "self") and layer + 1 in self.options.parent_layers
        return [ParentHead()] if on else []

    def inputs(self, inputs: Inputs, graph: torch.Tensor, limit: torch.Tensor) -> Inputs:
        """The model inputs with "parent_mask" of the generated `graph` added (when any layer has the head)."""
        return {**inputs, "parent_mask": parent_mask(graph, limit)} if self.options.parent_layers else inputs

    def describe(self) -> str:
        layers = self.options.parent_layers
        return f"PARENT head in decoder layers {layers}" if layers else ""


class GraphConvolution:
    """The gated GCN over the generated graph (`gcn_layer_count` layers; the ablations `gcn_labeled`,
    `gcn_gated`): the decoder module "gcn" (`GatedGCN`), applied to the decoder's embeddings."""

    def __init__(self, options: TreeConfig) -> None:
        self.options = options

    def modules(self, d_model: int) -> dict[str, nn.Module]:
        """The decoder module "gcn", when on (label ids: 0 = self, 1 = unseen, 2... `arc_labels`)."""
        options = self.options
        if not options.gcn_layer_count:
            return {}
        return {"gcn": GatedGCN(d_model, len(options.arc_labels) + 2, options.gcn_layer_count, options.gcn_labeled,
                                options.gcn_gated)}

    def apply(self, model: nn.Module, x: torch.Tensor, graph: torch.Tensor, limit: torch.Tensor) -> torch.Tensor:
        """The decoder embeddings `x` through the model's GCN (unchanged when off)."""
        return model.gcn(x, graph, limit) if self.options.gcn_layer_count else x

    def describe(self) -> str:
        options = self.options
        if not options.gcn_layer_count:
            return ""
        kind = ("" if options.gcn_labeled else "unlabeled ") + ("gated" if options.gcn_gated else "ungated")
        return f"GCN {options.gcn_layer_count} layers ({kind})"


class BiTran:
    """BiTran (`bidirectional`): every generated token attends to every generated token (the decoder's
    self-attention mask M_bi), so teacher forcing re-encodes every prefix (`prefix_passes`), or
    `bidirectional_prefixes` = k sampled prefixes per sentence in training."""

    def __init__(self, options: TreeConfig) -> None:
        self.options = options

    def self_mask(self, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """M_bi: every generated token sees every generated token (the non-pad prefix), with the graph limit of
        each position (the prefix end); None when off."""
        if not self.options.bidirectional:
            return None
        return valid[:, None, None, :], (valid.sum(1) - 1)[:, None].expand(*valid.shape)

    def teacher_forcing(self, model: nn.Module, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                        inputs: Inputs, records: dict, layers: tuple[int, ...]) -> DecoderStates | None:
        """The decoder states of one pass per prefix (`prefix_passes`); None when off."""
        options = self.options
        if not options.bidirectional:
            return None
        prefixes = options.bidirectional_prefixes if model.training else 0
        return prefix_passes(model, tgt_in, memory, src_mask, inputs, records, prefixes, options.uses_graph, layers)

    def describe(self) -> str:
        options = self.options
        if not options.bidirectional:
            return ""
        return "BiTran " + (f"(approximation: {options.bidirectional_prefixes} sampled prefixes)"
                            if options.bidirectional_prefixes else "(exact: every prefix)")


class TreeDecoding(Switch[TreeConfig], name="tree_decoding", priority=70, config=TreeConfig):
    """Tree decoding (docs/tree-decoding.md): the decoder produces target transitions (Linearized), with PARENT
    heads, a gated GCN over the generated graph, BiTran.

    Its own page: [tree-decoding.md](tree-decoding.md): the decoder targets and their vocabulary, the generated
    graph, PARENT heads, the gated GCN, BiTran, constrained decoding, the tree measure and the recipes."""

    # `*_layers` options name layers (gcn_layer_count counts them); "target" alone is the target side
    renamed = {"gcn_layers": "gcn_layer_count", "target": "decoder_target"}

    example = {"decoder_target": "transitions", "parent_layers": [2], "gcn_layer_count": 1, "bidirectional": True}

    decoder_targets = (TRANSITIONS_TARGET,)
    output_length_factor = 3.0  # sub-words + one arc per word
    Decoded = TreeOutputs  # the tree measure, --trees, RUN/test.trans, the `trees` compare column

    def __init__(self, cfg: ModelOptions) -> None:
        super().__init__(cfg)
        self.parent_attention = ParentAttention(self.options)
        self.graph_convolution = GraphConvolution(self.options)
        self.bitran = BiTran(self.options)

    def mechanisms(self) -> tuple[ParentAttention, GraphConvolution, BiTran]:
        """What the decoder adds to the linearized transitions, one object per mechanism (each off unless its
        options say)."""
        return self.parent_attention, self.graph_convolution, self.bitran

    @property
    def recomputes_prefix(self) -> bool:  # decoding re-reads the graph, or attends bidirectionally
        return bool(self.options.uses_graph or self.options.bidirectional)

    def constraint(self, vocab: Any, rows: int) -> Any:
        """Decoding constrained to valid trees (TreeConstraint)."""
        if vocab is None:
            raise ValueError("decoding transitions needs the vocabulary (the constraints read the token strings)")
        options = self.options
        labels = {label: i + 2 for i, label in enumerate(options.arc_labels)} if options.uses_graph else None
        return TreeConstraint(vocab, options.transition_root, rows, labels, options.boundary)

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        options = cls.section(cfg)
        if (options.parent_layers or options.gcn_layer_count or options.bidirectional) and \
                cfg.output.decoder_target != TRANSITIONS_TARGET.name:
            raise ValueError("parent_layers, gcn_layer_count and bidirectional decode trees: set "
                             "decoder_target = \"transitions\"")
        cls.check_layers(cfg, "parent_layers", "decoder")

    @classmethod
    def filled_values(cls, cfg: ModelOptions, table: Any, manifest: Any, vocab: Any) -> dict[str, Any]:
        root = manifest.configuration.get("inputs", {}).get("root", "drop") if manifest is not None else "drop"
        marker, kind = dataset_marker(manifest.configuration, manifest.signature, "tgt") if manifest is not None \
            else (BPE_SEPARATOR, "end")
        return {"transition_root": root, "arc_labels": arc_label_vocabulary(vocab), "transition_marker": marker,
                "transition_marker_kind": kind}

    def describe(self) -> str:
        options = self.options
        target = f"target transitions (root {options.transition_root}, {len(options.arc_labels)} arc labels)"
        mechanisms = [part for part in (mechanism.describe() for mechanism in self.mechanisms()) if part]
        return ", ".join([target, *(mechanisms or ["linearized"])])

    def training_report(self, data: Any) -> tuple[str, dict[str, Any]]:
        options = self.options
        return (f"target transitions: {data.skipped_null} training pair(s) without transitions skipped (null: not "
                f"encodable under the pipeline's non_projective policy), {len(options.arc_labels)} arc labels, root "
                f"{options.transition_root}", {"skipped_null_transitions": data.skipped_null,
                                           "arc_labels": len(options.arc_labels)})

    # the decoder side: PARENT heads, the gated GCN over the generated graph (both read the graph), BiTran's
    # mask and prefix passes, each done by its mechanism (`mechanisms`)

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        return self.parent_attention.hooks(stack, layer, kind)

    def decoder_modules(self) -> dict[str, nn.Module]:
        return self.graph_convolution.modules(self.cfg.sizes.d_model)

    def decoder_self_mask(self, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        return self.bitran.self_mask(valid)

    def decoder_input(self, model: nn.Module, x: torch.Tensor, inputs: Inputs, limit: torch.Tensor
                      ) -> tuple[torch.Tensor, Inputs]:
        if not self.options.uses_graph:
            return x, inputs
        graph = inputs.get("graph")
        if graph is None:
            raise ValueError("PARENT heads and the GCN need the generated graph of the target transitions")
        return self.graph_convolution.apply(model, x, graph, limit), self.parent_attention.inputs(inputs, graph, limit)

    @property
    def changes_teacher_forcing(self) -> bool:  # BiTran: one pass per prefix
        return self.options.bidirectional

    changes_decoder_mask = changes_teacher_forcing  # BiTran: M_bi

    def teacher_forcing(self, model: nn.Module, tgt_in: torch.Tensor, memory: torch.Tensor,
                        src_mask: torch.Tensor, inputs: Inputs, records: dict, layers: tuple[int, ...]
                        ) -> DecoderStates | None:
        return self.bitran.teacher_forcing(model, tgt_in, memory, src_mask, inputs, records, layers)

    # made from the target ids
    columns = (GraphColumn("graph", "", "tgt", "transitions", shape="edges", supervision=True),)

    def reads(self, training: bool) -> dict[str, str]:
        return {"graph": "the generated graph (PARENT, GCN)"} if self.options.uses_graph else {}

    def data_options(self) -> dict[str, Any]:
        options = self.options
        return {"arc_labels": list(options.arc_labels), "transition_marker": options.transition_marker,
                "transition_marker_kind": options.transition_marker_kind} if options.uses_graph else {}


register(TreeDecoding)
