"""`python -m syntrain.config [PAGE ...]`: rewrite the generated tables of the docs (syntrain.config.docs)."""

from .docs import main

main()
