"""syntrain: a lightweight Transformer trainer over synprep Arrow shards."""

__version__ = "0.1.0"
