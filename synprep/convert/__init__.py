"""`synprep convert`: whole parallel corpora -> Arrow shards, one module per part of the stage.

  pipeline.py      the pipeline file (TOML): reading, checking every key, resolving paths
  converter.py     the orchestration: `Converter` runs the phases in order (local workers or `ray_engine.py`)
  corpus.py        one side of a corpus read (text, SGML/XML, CoNLL-U, a TSV column)
  inputs.py        the inputs of each split checked, fingerprinted and read in pieces
  filter_parse.py  phase 1 in the workers: filter a piece, parse the lines the driver plans
  work.py          phase 1 in the driver: which lines each piece parses, the work folder's pieces
  treestore.py     where the tree of each distinct sentence lies (each is parsed once)
  parse_cache.py   the parse cache that converts share (`synprep cache`)
  stage_cache.py   the stage caches beside it: filter decisions, BPE codes, features, by their inputs' fingerprint
  bpe_codes.py     phase 2: BPE codes learned on the train words, in a process of its own
  write_shards.py  phase 3: the features of each piece -> one Arrow shard per shard of input
  accounting.py    statistics, progress, rejected.tsv, manifests and the summary
  output.py        the output folder: fresh, `--resume`, `--overwrite`

Importing the package imports none of its modules: a spawned process (the BPE learner, a worker) loads only
the module its function lives in and what that imports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..callables import make_callable

if TYPE_CHECKING:
    from .accounting import SplitStats


@dataclass(frozen=True)
class ConvertResult:
    """What `convert` wrote: the dataset folder, each split's folder, the counts per split and the summary
    table `synprep convert` prints."""

    output: str
    splits: dict[str, str]
    stats: dict[str, SplitStats]
    summary: str


def convert(pipeline: str, output: str | None = None, *, workers: int = 0, shard_size: int | None = None,
            engine: str = "local", ray_address: str | None = None, resume: bool = False, overwrite: bool = False,
            compression: str | None = None, keep_work: bool = False, dedupe: bool = True,
            parse_cache: str | None = None, cache: bool = True, progress: bool | None = None) -> ConvertResult:
    """`synprep convert PIPELINE`: filter, parse, BPE, features, Arrow shards (docs/synprep.md). `output`
    overrides the pipeline's; `workers` 0: all cores; `cache` False: neither the parse cache nor the stage
    caches (`--no-cache`); `progress` None: bars when stderr is a terminal."""
    given = dict(locals())  # every argument, as given
    from ..arguments import check_arguments

    arguments = check_arguments("synprep convert", **given)  # as the command checks them
    pipeline, output, parse_cache = arguments["pipeline"], arguments["output"], arguments["parse_cache"]
    from .accounting import format_summary
    from .converter import Converter, ConvertOptions
    from .pipeline import load_pipeline

    config = load_pipeline(pipeline, output, shard_size, compression)
    converter = Converter(config, ConvertOptions(workers, engine, resume, overwrite, ray_address, progress=progress,
                                                 keep_work=keep_work, dedupe=dedupe, parse_cache=parse_cache,
                                                 cache=cache))
    stats = converter.run()
    return ConvertResult(config.output, {name: os.path.join(config.output, name) for name in stats}, stats,
                         format_summary(config, stats))


make_callable(__name__, convert)  # synprep.convert(...) is synprep.convert.convert(...) (docs/python-api.md)

