"""`python -m syntrain ...` (also what `torchrun -m syntrain run ...` starts in every process)."""

from .cli import main

main()
