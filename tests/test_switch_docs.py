"""A new switch is its file and its test: the switch table, the switch sections and the loss list of
docs/switches.md, the switch modules of docs/switches-api.md, README's switch list (and the fields of
docs/recipe-fields.md, tests/test_syntrain_cli.py) are generated from the registry, each switch's row from
its class docstring's first paragraph and its declarations, its section from its whole class docstring; a stale page
fails here."""

from __future__ import annotations

from dataclasses import dataclass

from syntrain.config import option
from syntrain.config.docs import (
    PAGES,
    SECTIONS_BEGIN,
    SWITCHES_BEGIN,
    docs_page,
    switch_sections_markdown,
    switches_markdown,
)
from syntrain.switches import Switch, register, unregister

from .conftest import REPO


def test_the_switch_table_and_sections_are_generated_from_the_registry():
    text = (REPO / "docs" / "switches.md").read_text(encoding="utf-8")
    assert SWITCHES_BEGIN in text and SECTIONS_BEGIN in text
    for page, parts in PAGES.items():
        text = (REPO / page).read_text(encoding="utf-8")
        assert all(begin in text and end in text for begin, end, _ in parts), page
        assert docs_page(text, page) == text, f"{page} is stale: run python -m syntrain.config"


def test_every_logged_loss_is_declared():
    """The loss list of docs/switches.md comes from `loss_names`: each switch's losses are among them."""
    from syntrain.config.model import ModelConfig
    from syntrain.config.pins import filled_placeholders
    from syntrain.switches import registered

    for switch in registered():
        weights = switch(ModelConfig(**switch.example, **filled_placeholders())).loss_weights()
        assert set(weights) <= set(switch.loss_names), (switch.name, sorted(weights))
    assert "Logged auxiliary losses: `loss_dep_src` (parse_head)" in (REPO / "docs" / "switches.md").read_text()


@dataclass
class MarksConfig:
    example_marks: bool = option(False, help="a switch registered by a test")


class Marks(Switch[MarksConfig], name="example_marks", config=MarksConfig, switched_by=("example_marks",)):
    """Reads the target heads for a test.

    (Not in the table: only the first paragraph is.)

    - a list item, indented as markdown reads it"""

    example = {"example_marks": True}

    def reads(self, training: bool) -> dict[str, str]:
        return {"tgt_parent_first": "a test"} if training else {}


def test_a_registered_switch_gets_its_row_from_its_docstring_and_declarations():
    register(Marks)
    try:
        row = next(line for line in switches_markdown().splitlines() if line.startswith("| example_marks |"))
        section = switch_sections_markdown().split("## example_marks\n\n")[1]
        text = (REPO / "docs" / "switches.md").read_text(encoding="utf-8")
        assert docs_page(text, "docs/switches.md") != text  # the page is stale now: the test above would fail
    finally:
        unregister(Marks.name)
    assert row == ("| example_marks | Reads the target heads for a test. | `example_marks = false` | "
                   "`tgt_parent_first` (tgt (B, T) int64, pad -1, shifted 1 (BOS), BOS -1; shard column "
                   "`tgt_parent_first`, tgt `parents`) | nothing |")
    assert section == ("Reads the target heads for a test.\n\n(Not in the table: only the first paragraph is.)\n\n"
                       "- a list item, indented as markdown reads it\n")  # the last section: nothing follows
    assert set(PAGES) == {"docs/recipe-fields.md", "docs/switches.md", "docs/switches-api.md", "README.md"}
