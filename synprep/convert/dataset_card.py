"""What a finished `synprep convert` output offers readers besides the split folders: `OUT/data/`, links to
the shards under the names Hugging Face `datasets` looks for (`load_dataset("arrow", data_dir=OUT)` gives the
splits, and nothing else of the folder), and `OUT/README.md`, a dataset card (languages, sizes, pipeline,
parsers, sub-words, how to load it). Both are made again at the end of every run from the split manifests.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Any

from ..shards import load_manifest
from ..subwords import registry
from ..textio import atomic_write

HF_DATA = "data"  # OUT/data/<split>-00000-of-00003.arrow: the Hub's sharded-split naming
CARD = "README.md"
HF_SPLIT_NAMES = {"valid": "validation", "dev": "validation"}  # the names `datasets` gives its splits


def hf_split_name(split: str) -> str:
    """The name a split has in `datasets` (`valid` -> `validation`; other characters than letters, digits and
    `_` become `_`)."""
    return HF_SPLIT_NAMES.get(split, re.sub(r"\W", "_", split))


def write_hf_links(out: str, splits: list[str]) -> None:
    """OUT/data/: one relative symbolic link per shard, `<hf split>-<i>-of-<n>.arrow` -> `../<split>/part-*.arrow`
    (made in a temporary folder, then put in place)."""
    target = os.path.join(out, HF_DATA)
    for left in glob.glob(glob.escape(target) + ".tmp-*"):  # what an interrupted run was building
        shutil.rmtree(left, ignore_errors=True)
    building = f"{target}.tmp-{os.getpid()}"
    os.makedirs(building)
    for split in splits:
        shards = [shard["file"] for shard in load_manifest(os.path.join(out, split)).shards]
        for i, shard in enumerate(shards):
            name = f"{hf_split_name(split)}-{i:05d}-of-{len(shards):05d}.arrow"
            os.symlink(os.path.join("..", split, shard), os.path.join(building, name))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(building, target)


def _parser_line(side: str, lang: str, parser: dict[str, Any] | str | None) -> str:
    if not isinstance(parser, dict):  # the signature's "pre-parsed CoNLL-U"
        return f"- {side} ({lang}): {parser or 'pre-parsed CoNLL-U'} (not parsed by synprep)"
    model = parser.get("model") or parser.get("model_dir") or ""
    digest = f", sha256 `{parser['sha256'][:16]}...`" if parser.get("sha256") else ""
    return f"- {side} ({lang}): {parser.get('backend')} `{model}`{digest}"


def _subword_line(configuration: dict[str, Any], signature: dict[str, Any]) -> str:
    bpe = configuration.get("bpe") or {}
    if not bpe.get("enabled", True):
        return "none: sub-words are the parser's tokens"
    return registry.of(configuration).card_line(bpe, signature)


def _pieces(configuration: dict[str, Any]) -> str:
    """What the dataset's pieces are ("BPE sub-words", "SentencePiece pieces"), as its scheme names them."""
    return registry.of(configuration).pieces


def card_text(out: str, splits: list[str]) -> str:
    """The dataset card of the output folder `out` from its split manifests."""
    manifests = {split: load_manifest(os.path.join(out, split)) for split in splits}
    first = manifests[splits[0]]
    configuration, signature = first.configuration, first.signature
    src, tgt = configuration["src_lang"], configuration["tgt_lang"]
    name = configuration.get("name") or os.path.basename(os.path.abspath(out))
    yaml = ["---", f"pretty_name: {json.dumps(name)}", f"language: [{src}, {tgt}]", "task_categories: [translation]",
            "configs:", "- config_name: default", "  data_files:"]
    for split in splits:
        yaml += [f"  - split: {hf_split_name(split)}", f"    path: {HF_DATA}/{hf_split_name(split)}-*.arrow"]
    yaml.append("---")
    sizes = ["| split | input pairs | rows | rejected | shards |", "|---|---|---|---|---|"]
    for split, manifest in manifests.items():
        sizes.append(f"| {split} | {manifest.input_lines} | {manifest.rows} | {sum(manifest.rejected.values())} "
                     f"| {len(manifest.shards)} |")
    parsers = signature.get("parsers") or {}
    features = configuration.get("features") or {}
    split = "train" if "train" in manifests else splits[0]
    valid = next((name for name in splits if hf_split_name(name) == "validation"), None)
    train_command = f"syntrain run --data OUT/{split}" + (f" --valid OUT/{valid}" if valid else "")
    lines = [
        *yaml, "", f"# {name}", "",
        f"A parallel corpus {src} -> {tgt} with dependency trees aligned with {_pieces(configuration)}, written by "
        f"synprep {signature.get('synprep', '')} (`synprep convert`): Arrow IPC stream shards, format version "
        f"{first.schema_version} (each shard's schema metadata names it too).",
        "", f"Source: {configuration.get('source') or 'not given'}", "", "## Sizes", "", *sizes, "",
        "Input pairs = rows + rejected; `<split>/rejected.tsv` lists the rejected pairs and their reasons, "
        "`<split>/manifest.json` the configuration, signature and counts.", "",
        "## Pipeline", "",
        *(_parser_line(side, lang, parsers.get(key)) for key, side, lang in (("src", "source", src),
                                                                              ("tgt", "target", tgt))),
        f"- sub-words: {_subword_line(configuration, signature)}",
        f"- features: source {', '.join(features.get('src', []))}; target {', '.join(features.get('tgt', []))}",
        f"- filter: {json.dumps(configuration.get('filter'))}", "",
        "## Loading", "", "`OUT` is this folder.", "",
        "```python",
        "import datasets                                    # Hugging Face datasets: train / validation / test",
        'splits = datasets.load_dataset("arrow", data_dir="OUT")',
        "",
        "import synprep                                     # one split, its shards checked (docs/python-api.md)",
        f'dataset = synprep.load_dataset("OUT/{split}")',
        "",
        "import pyarrow as pa, glob                         # plain pyarrow",
        f'table = pa.concat_tables(pa.ipc.open_stream(pa.memory_map(p)).read_all() for p in '
        f'sorted(glob.glob("OUT/{split}/part-*.arrow")))',
        "",
        "import polars as pl                                # polars",
        f'frame = pl.concat([pl.read_ipc_stream(p) for p in sorted(glob.glob("OUT/{split}/part-*.arrow"))])',
        "```", "",
        f"Train on it: `{train_command}`. Export "
        f"for the papers' trainers: `synprep export OUT/{split} -o EXPORT`. `OUT/{HF_DATA}/` holds links to the "
        "shards under the names `datasets` reads.", "",
    ]
    return "\n".join(lines)


def write_dataset_card(out: str, splits: list[str]) -> None:
    """OUT/README.md (written under a temporary name, then renamed)."""
    atomic_write(os.path.join(out, CARD), card_text(out, splits).encode("utf-8"))
