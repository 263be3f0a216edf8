"""A target-side auxiliary loss from the decoder states: the state of the decoder layer `example_guess_layer` at
each input position predicts the dependency label of the piece the decoder outputs there (the next piece's,
read from the shared batch column `tgt_labels`); the loss is its cross-entropy, weighted `example_guess_lambda`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc
import torch
import torch.nn.functional as F
from torch import nn

from syntrain.columns import LABEL_NONE
from syntrain.config import option
from syntrain.switches import Inputs, ModelOptions, Outputs, Switch, register


@dataclass
class GuessConfig:
    example_guess_lambda: float = option(0.0, ge=0, help="weight of the label-guess loss (0: off)")
    example_guess_layer: int = option(1, ge=1, help="1-based decoder layer whose states guess the labels")
    example_guess_labels: list[str] = option(default_factory=list, filled=True,
                                             help="the target label vocabulary (from the training split)")


class LabelGuess(Switch[GuessConfig], name="example_guess", config=GuessConfig,
                 switched_by=("example_guess_lambda",)):
    """Guesses each output piece's dependency label from a decoder layer's states (an auxiliary loss)."""

    example = {"example_guess_lambda": 0.5, "example_guess_layer": 2}

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        cls.check_layers(cfg, "example_guess_layer", "decoder")

    @classmethod
    def filled_values(cls, cfg: ModelOptions, table: Any, manifest: Any, vocab: Any) -> dict[str, Any]:
        labels = pc.unique(pc.list_flatten(table.column("tgt_labels"))).to_pylist()
        return {"example_guess_labels": sorted(label for label in labels if label is not None)}

    def reads(self, training: bool) -> dict[str, str]:
        return {"tgt_labels": "the label guess"} if training else {}

    def data_options(self) -> dict[str, Any]:
        return {"target_labels": self.options.example_guess_labels}

    def decoder_modules(self) -> dict[str, nn.Module]:  # label ids: 0 none, 1 unseen, 2... the vocabulary
        return {"example_guess_out": nn.Linear(self.cfg.sizes.d_model, len(self.options.example_guess_labels) + 2)}

    def state_layers(self) -> tuple[int, ...]:
        return (self.options.example_guess_layer,)

    loss_names = ("example_guess",)  # logged as loss_example_guess (docs/switches.md lists it)

    def loss_weights(self) -> dict[str, float]:
        return {"example_guess": self.options.example_guess_lambda}

    def losses(self, model: nn.Module, outputs: Outputs, inputs: Inputs) -> dict[str, torch.Tensor]:
        states = outputs.layer_states[self.options.example_guess_layer][:, :-1]  # (B, T - 1, C)
        gold = inputs["tgt_labels"][:, 1:]  # the label of the piece output at each position (0: none)
        logits = model.example_guess_out(states).float()
        return {"example_guess": F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=LABEL_NONE,
                                                 reduction="sum")}


register(LabelGuess)
