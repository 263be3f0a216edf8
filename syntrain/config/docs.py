"""The generated parts of the docs, from the declarations: the recipe-field tables of docs/recipe-fields.md
(`fields_markdown`) and the switch table of docs/switches.md (`switches_markdown`, from the registry).
`python -m syntrain.config [PAGE ...]` rewrites them."""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import MISSING

from synprep.tables import describe_option

from .core import PRESETS, TEXT, DecoderOutput
from .sections import declaration, model_keys, trainer_filled
from .train import DATA_KEYS, train_keys


def default_words(section: str, name: str) -> str:
    """A field's default as the docs and --help show it ('4000', '"auto"', 'the preset's: tiny 256, base 512')."""
    if section == "model":
        by_preset = [f"{preset} {values[name]}" for preset, values in PRESETS.items() if name in values]
        if by_preset:
            return "the preset's: " + ", ".join(by_preset)
    cls, spec, _ = declaration(section, name)  # type: ignore[misc]
    default = spec.default if spec.default is not MISSING else spec.default_factory()  # type: ignore[misc]
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, str):
        return f'"{default}"'
    if isinstance(default, tuple):
        return str(list(default))
    return str(default)


def fields_markdown() -> str:
    """The tables of docs/recipe-fields.md: every recipe field with its type and allowed values, default and help,
    from the declarations (TrainConfig, ModelConfig)."""
    def row(key: str, section: str, name: str) -> str:
        cls, spec, _ = declaration(section, name)  # type: ignore[misc]
        allowed = describe_option(cls, name).replace("|", "\\|")
        if cls is DecoderOutput:  # its choices are the registered decoder targets, checked when a config is built
            from ..switches import declared_targets

            allowed = "one of " + ", ".join([TEXT, *declared_targets()])
        return f"| `{key}` | {allowed} | {default_words(section, name)} | {spec.metadata.get('help', '')} |"

    header = ["| field | allowed values | default | meaning |", "|---|---|---|---|"]
    lines = ["### [data]", "", "Paths relative to the recipe's folder.", "", *header]
    lines += [row(key, "train", name) for key, name in DATA_KEYS.items()]
    filled = [f"`{name}`" + (" (a source vocabulary of its own: data with BPE per side)" if name == "src_vocab_size"
                             else "") for name in trainer_filled()]
    lines += ["", "### [model]", "", f"Sizes default to the preset's; {', '.join(filled[:-1])} and {filled[-1]} are "
              "set by the trainer from the data.", "", *header, row("preset", "train", "preset"),
              row("pretrained", "train", "pretrained")]
    lines += [row(name, "model", name) for name in model_keys()]
    lines += ["", "### [train]", "", "A relative `out` resolves against the recipe's folder.", "", *header]
    lines += [row(name, "train", name) for name in train_keys()]
    return "\n".join(lines) + "\n"


def switches_markdown() -> str:
    """The switch table of docs/switches.md, from the registry in its order: each switch's name and docstring (its
    first paragraph), its `[model]` keys with their defaults, the batch columns it reads in training (from its
    `example`: name, layout, shard column and feature group) and those decoding reads."""
    from ..switches import declared, option_names, registered
    from .model import ModelConfig

    def cell(text: str) -> str:
        return " ".join(text.split()).replace("|", "\\|")

    lines = ["| switch | what it does | `[model]` keys (defaults) | batch columns it reads in training | "
             "decoding reads |", "|---|---|---|---|---|"]
    for switch in registered():
        summary = (switch.__doc__ or "").strip().split("\n\n")[0]
        keys = ", ".join([*(f"`decoder_target = \"{target.name}\"` (turns it on)" for target in switch.decoder_targets),
                          *(f"`{name} = {default_words('model', name)}`" for name in option_names(switch)
                            if not declaration("model", name)[1].metadata.get("filled"))])  # type: ignore[index]
        cfg = ModelConfig(**switch.example)
        instance = switch(cfg)
        reads = [declared(name) for name in {**instance.reads(True)}]
        columns = "; ".join(f"`{column.name}` ({column.layout()}" + (
            f"; shard column `{column.column}`, {column.side} `{column.group}`" if column.column else "") + (
            f"; made from {', '.join(f'`{name}`' for name in column.made_from)} when absent" if column.made_from
            else "") + ")" for column in reads)
        columns += "".join(f"{'; ' if columns else ''}decoder target `{produced.name}` (shard column "
                           f"`{produced.column}`, tgt `{produced.group}`)" for produced in switch.decoder_targets)
        decoding = [f"`{name}`" for name in instance.reads(False) if not declared(name).supervision]
        lines.append(f"| {switch.name} | {cell(summary)} | {keys or 'none'} | {columns or 'none'} | "
                     f"{', '.join(decoding) or 'nothing'} |")
    return "\n".join(lines) + "\n"


def switch_sections_markdown() -> str:
    """The switches' sections of docs/switches.md, from the registry in its order: per switch a heading (its name)
    and its class docstring, markdown (the first paragraph is also its row of the switch table)."""
    from ..switches import registered

    return "\n".join(f"## {switch.name}\n\n{inspect.cleandoc(switch.__doc__ or '')}\n" for switch in registered())


BEGIN, END = "<!-- fields: generated by `python -m syntrain.config` -->", "<!-- end of the generated fields -->"
SWITCHES_BEGIN = "<!-- switches: generated by `python -m syntrain.config` from the registry -->"
SWITCHES_END = "<!-- end of the generated switches -->"
SECTIONS_BEGIN = "<!-- switch sections: generated by `python -m syntrain.config` from the switches' docstrings -->"
SECTIONS_END = "<!-- end of the generated switch sections -->"
PAGES = {"docs/recipe-fields.md": ((BEGIN, END, fields_markdown),),
         "docs/switches.md": ((SWITCHES_BEGIN, SWITCHES_END, switches_markdown),
                              (SECTIONS_BEGIN, SECTIONS_END, switch_sections_markdown))}


def docs_page(text: str, page: str = "docs/recipe-fields.md") -> str:
    """`text` (the generated page `page`: docs/recipe-fields.md, docs/switches.md) with each generated part replaced
    by the current one (`fields_markdown()`; `switches_markdown()` and `switch_sections_markdown()`)."""
    for begin, end, make in PAGES[page]:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n\n{make()}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> None:
    """`python -m syntrain.config [PAGE ...]`: rewrite the generated tables of each PAGE (default: every generated
    page, docs/recipe-fields.md and docs/switches.md; relative to the current folder)."""
    for page in (argv if argv is not None else sys.argv[1:]) or list(PAGES):
        key = next((known for known in PAGES if os.path.normpath(page).endswith(os.path.normpath(known))), None)
        if key is None:
            raise SystemExit(f"{page}: not a generated page (one of {', '.join(PAGES)})")
        with open(page, encoding="utf-8") as handle:
            text = handle.read()
        with open(page, "w", encoding="utf-8") as handle:
            handle.write(docs_page(text, key))

