"""`python -m synprep ...`: the `synprep` command line."""

from .cli import main

main()
