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
