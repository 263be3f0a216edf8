"""The generated parts of the docs, from the declarations: the recipe-field tables of docs/recipe-fields.md
(`fields_markdown`), and from the registry the switch table, sections and loss list of docs/switches.md
(`switches_markdown`, `switch_sections_markdown`, `loss_list_markdown`), the switch modules of
docs/switches-api.md's module map (`module_map_markdown`) and README's switch list (`switch_list_markdown`).
`python -m syntrain.config [PAGE ...]` rewrites them (and, with no PAGE, writes the pin file of a new switch:
`syntrain.config.pins`)."""

from __future__ import annotations

import inspect
import os
import sys
from dataclasses import MISSING

from synprep.tables import describe_option

from .core import PRESETS, TEXT, DecoderOutput
from .pins import PINS, pin_path, write_missing_pins
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
              row("pretrained", "train", "pretrained"), row("src_lang_code", "train", "src_lang_code"),
              row("tgt_lang_code", "train", "tgt_lang_code")]
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

    lines = ["| switch | what it does | `[model]` keys (defaults) | batch columns it reads in training | "
             "decoding reads |", "|---|---|---|---|---|"]
    for switch in registered():
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
        lines.append(f"| {switch.name} | {cell(summary(switch))} | {keys or 'none'} | {columns or 'none'} | "
                     f"{', '.join(decoding) or 'nothing'} |")
    return "\n".join(lines) + "\n"


def switch_sections_markdown() -> str:
    """The switches' sections of docs/switches.md, from the registry in its order: per switch a heading (its name)
    and its class docstring, markdown (the first paragraph is also its row of the switch table)."""
    from ..switches import registered

    return "\n".join(f"## {switch.name}\n\n{inspect.cleandoc(switch.__doc__ or '')}\n" for switch in registered())


def cell(text: str) -> str:
    """`text` on one line, as a markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def summary(switch: type) -> str:
    """A switch's class docstring's first paragraph (its row of the switch table), on one line."""
    return " ".join((switch.__doc__ or "").strip().split("\n\n")[0].split())


def switch_list_markdown() -> str:
    """README's list of the switches, from the registry in its order: name and module."""
    from ..switches import registered

    items = [f"- `{switch.name}` ({switch.__module__.replace('.', '/')}.py)\n" for switch in registered()]
    return "The syntax switches, in their order (one module each; what each does: docs/switches.md):\n\n" + \
        "".join(items)


def module_map_markdown() -> str:
    """The switches' rows of docs/switches-api.md's module map, from the registry in its order: module and what
    it holds (the first paragraph of the switch's docstring)."""
    from ..switches import registered

    lines = ["| switch module | what it holds |", "| --- | --- |"]
    lines += [f"| `{switch.__module__.replace('.', '/')}.py` | `{switch.name}`: {cell(summary(switch))} |"
              for switch in registered()]
    return "\n".join(lines) + "\n"


def loss_list_markdown() -> str:
    """docs/switches.md's list of the logged auxiliary losses, from the switches' declared `loss_names`."""
    from ..switches import registered

    items = [f"`loss_{name}` ({switch.name})" for switch in registered() for name in switch.loss_names]
    return "Logged auxiliary losses: " + (", ".join(items) or "none") + ".\n"


def generated(what: str) -> tuple[str, str]:
    """The begin and end markers of a generated part of a page."""
    return (f"<!-- {what}: generated by `python -m syntrain.config` from the registry -->",
            f"<!-- end of the generated {what} -->")


BEGIN, END = "<!-- fields: generated by `python -m syntrain.config` -->", "<!-- end of the generated fields -->"
SWITCHES_BEGIN = "<!-- switches: generated by `python -m syntrain.config` from the registry -->"
SWITCHES_END = "<!-- end of the generated switches -->"
SECTIONS_BEGIN = "<!-- switch sections: generated by `python -m syntrain.config` from the switches' docstrings -->"
SECTIONS_END = "<!-- end of the generated switch sections -->"
PAGES = {"docs/recipe-fields.md": ((BEGIN, END, fields_markdown),),
         "docs/switches.md": ((*generated("loss list"), loss_list_markdown),
                              (SWITCHES_BEGIN, SWITCHES_END, switches_markdown),
                              (SECTIONS_BEGIN, SECTIONS_END, switch_sections_markdown)),
         "docs/switches-api.md": ((*generated("switch modules"), module_map_markdown),),
         "README.md": ((*generated("switch list"), switch_list_markdown),)}


def docs_page(text: str, page: str = "docs/recipe-fields.md") -> str:
    """`text` (the generated page `page`: docs/recipe-fields.md, docs/switches.md) with each generated part replaced
    by the current one (`fields_markdown()`; `switches_markdown()` and `switch_sections_markdown()`)."""
    for begin, end, make in PAGES[page]:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n\n{make()}\n{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> None:
    """`python -m syntrain.config [PAGE ...]`: rewrite the generated parts of each PAGE (default: every generated
    page, `PAGES`, and the pin file of each switch that has none, `syntrain.config.pins`; relative to the
    current folder: a checkout)."""
    pages = argv if argv is not None else sys.argv[1:]
    if not pages and os.path.isdir(PINS):
        for name in write_missing_pins():
            print(f"{pin_path(name)}: pinned (a new switch)", file=sys.stderr)
    for page in pages or list(PAGES):
        key = next((known for known in PAGES if os.path.normpath(page).endswith(os.path.normpath(known))), None)
        if key is None:
            raise SystemExit(f"{page}: not a generated page (one of {', '.join(PAGES)})")
        with open(page, encoding="utf-8") as handle:
            text = handle.read()
        with open(page, "w", encoding="utf-8") as handle:
            handle.write(docs_page(text, key))

