"""synprep: dependency trees aligned with BPE sub-words for syntax-aware NMT."""

__version__ = "0.1.0"
