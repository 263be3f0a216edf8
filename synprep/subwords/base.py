"""The interface of a sub-word scheme (docs/subwords-api.md shows how to write one): what a scheme declares, which
the generic code (pipeline checks, convert's learning phase, the CLI, validate, align, export, the dataset card,
syntrain's vocabulary) reads through `synprep.subwords.registry` instead of branching on a scheme's name.

A scheme is a class with class attributes (its declarations) and methods with defaults for a scheme without a
model file; `registry.register` adds it, and the generic code uses the one registered instance."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..errors import InputError

Marker = tuple[str, str]  # (marker, marker kind): see `synprep.subwords` (end, start, continue, none)


class Scheme:
    """A sub-word scheme: how the tokens of a tree are cut into pieces.

    Declarations (class attributes):
    - `name`: the `[bpe] scheme` value and `--scheme` choice; `order`: its place in choice lists and help.
    - `files`: the model's file name(s) in a dataset folder, `{side}` standing for "" (joint) or ".src" / ".tgt";
      the first is the file the cutter loads (`load`), the others travel with it (copied, their digests in the
      signature's `subword_files_sha256`, checked by validate and syntrain); () for a scheme without a model.
    - `per_side`: its model, named once (`[bpe] model = FILE OR FOLDER`), cuts each side with a file of its own
      (a pretrained model's source.spm and target.spm): the pipeline records it as joint = false.
    - `marker`, `marker_kind`: the marker of its pieces when it does not depend on the model (`marker_of`).
    - `package`: the optional library it needs (the extra `subwords`), or None.
    - `keys`: the `[bpe]` keys it takes besides scheme, joint and enabled (declared with their checks and help on
      `synprep.convert.pipeline.BpeConfig`); `learn_keys`: those only for learning a model (refused with `model`).
    - `learns`: it learns a model on the train tokens when none is given; `needs_model`: a model must be given.
    - `bpe_codes`: its model is subword-nmt BPE codes ([bpe] symbols / codes, `--codes`; synprep.bpe).
    - `own_vocabulary`: syntrain takes the model's pieces as the vocabulary (else counted from the shards).
    - `cuts`: the `[bpe] cut` values it allows ("token": each token on its own; "raw": the sentence's text).
    - `pieces`: how the dataset card names its pieces ("trees aligned with <pieces>").
    - `model_help`: what `--model` is for it (CLI help); `keys_help`: what it takes (pipeline messages);
      `unmarked_help`: why its pieces may carry no marker (the transitions check's message).
    - `learn_options`: click options of `synprep bpe learn` for it, as (param_decls, attrs) pairs, in help order.
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100
    files: ClassVar[tuple[str, ...]] = ()
    per_side: ClassVar[bool] = False
    marker: ClassVar[str] = ""
    marker_kind: ClassVar[str] = "none"
    package: ClassVar[str | None] = None
    keys: ClassVar[tuple[str, ...]] = ()
    learn_keys: ClassVar[tuple[str, ...]] = ()
    learns: ClassVar[bool] = False
    needs_model: ClassVar[bool] = False
    bpe_codes: ClassVar[bool] = False
    own_vocabulary: ClassVar[bool] = False
    cuts: ClassVar[tuple[str, ...]] = ("token",)
    pieces: ClassVar[str] = "sub-word pieces"
    model_help: ClassVar[str] = ""
    keys_help: ClassVar[str] = "no other key"
    unmarked_help: ClassVar[str] = ""
    learn_options: ClassVar[tuple[tuple[tuple[str, ...], dict[str, Any]], ...]] = ()

    # ---------------------------------------------------------------- model files
    def model_file(self, side: str | None = None) -> str | None:
        """The (first) model file's name in a dataset folder (joint: `side` None); None without a model."""
        return self.files[0].format(side=f".{side}" if side else "") if self.files else None

    def further_files(self, joint: bool) -> list[str]:
        """The names in a dataset folder of its declared files beyond each side's first (the one `load` reads,
        whose digest is `subword_model_sha256[_side]`): those `subword_files_sha256` covers."""
        sides = [None] if joint else ["src", "tgt"]
        names = [name.format(side=f".{side}" if side else "") for side in sides for name in self.files[1:]]
        return sorted(set(names) - {self.model_file(side) for side in sides})

    def stored_files(self, given: str, side: str | None) -> list[tuple[str, str]]:
        """(file, its name in the dataset folder) of each file of a given model (`[bpe] model`: a file or a
        folder) that convert stores: by default the one file `model_path` finds, under `model_file(side)`; a
        scheme of several files returns them all, the one `load` reads first."""
        return [(self.model_path(given), self.model_file(side) or "")]

    def model_path(self, path: str) -> str:
        """The model file a pipeline or `--model` names (a scheme may accept a folder holding it)."""
        if not os.path.isfile(path):
            raise InputError(f"no {self.name} model file here", path)
        return path

    # ---------------------------------------------------------------- cutting
    def load(self, path: str | None, vocabulary: set[str] | None = None) -> Any:
        """The cutter of a model file (None: a scheme without a model): `segment_word`, `pieces_of`, `marker`,
        `marker_kind`, `path` (a `synprep.subwords.TokenCutter`, or subword-nmt's `synprep.bpe.Bpe`)."""
        raise NotImplementedError

    def marker_of(self, path: str | None) -> Marker:
        """(marker, marker kind) of the pieces of the model `path` (the declared one unless overridden)."""
        return self.marker, self.marker_kind

    def fixed_marker(self) -> Marker | None:
        """The declared (marker, marker kind) when it does not depend on the model (`marker_of` not overridden)."""
        return (self.marker, self.marker_kind) if type(self).marker_of is Scheme.marker_of else None

    # ---------------------------------------------------------------- learning
    def learn(self, counts: list[Mapping[str, int]], model: str, settings: Any) -> None:
        """Learn a model on token counts (one counter per side learned from) into the file `model`; `settings`:
        the `[bpe]` configuration (`BpeConfig`). Only for a scheme that `learns`; runs in a process of its own."""
        raise NotImplementedError(f"the {self.name} scheme learns nothing")

    def learn_message(self, settings: Any, which: str) -> str:
        """The line convert says before learning (`which`: "both sides'" or "the src" / "the tgt")."""
        return f"learn a {self.name} model on {which} train tokens"

    def learn_files(self, inputs: list[str], output: str, options: dict[str, Any]) -> str:
        """`synprep bpe learn --scheme NAME`: a model learned on tokenized text files into `output` (`options`:
        the values of `learn_options`); returns the line said after."""
        raise NotImplementedError(f"the {self.name} scheme learns nothing")

    # ---------------------------------------------------------------- what others say of it
    def card_line(self, bpe: dict[str, Any], signature: dict[str, Any]) -> str:
        """The dataset card's "Sub-words" line (`bpe`: the manifest's [bpe], `signature`: its signature)."""
        sides = "one model per side" if bpe.get("joint") is False else "one model for both sides"
        if not self.files:
            return f"{self.name} (no model; each parser token cut on its own)"
        made = "given model" if bpe.get("model") else f"{bpe.get('model_type')} model of {bpe.get('vocab_size')} pieces"
        digest = signature.get("subword_model_sha256") or signature.get("subword_model_sha256_src")
        return f"{self.name} ({made}, {sides}; each parser token cut on its own), model sha256 `{str(digest)[:16]}...`"

    def model_what(self) -> str:
        """What messages call its model file ("the dataset's sentencepiece model is missing")."""
        return f"{self.name} model"

    def export_what(self) -> str:
        """What an export README calls the files that cut the pieces."""
        return f"{self.model_what()} (it cut each token on its own)"

    def fairseq_pieces(self, configuration: dict[str, Any], flag: str) -> str | None:
        """fairseq's options that join decoded pieces back into tokens (`flag`: `--remove-bpe` or
        `--post-process`); None when fairseq cannot: the export's scoring line joins them by the marker."""
        return None


Factory = Callable[[], Scheme]
