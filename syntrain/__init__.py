"""syntrain: a lightweight Transformer trainer over synprep Arrow shards.

The Python API (docs/python-api.md) is imported on first use, so `import syntrain` does not import torch:
`syntrain.train`, `syntrain.Translator`, `syntrain.evaluate`, `syntrain.compare`, `syntrain.average`,
`syntrain.env`, `syntrain.export_hf` (one per command).
"""

from __future__ import annotations

from typing import Any

from synprep.logs import default_handler

__version__ = "0.1.0"
default_handler("syntrain")  # messages: logging.getLogger("syntrain") (synprep/logs.py)

__all__ = ["__version__", "train", "Translator", "evaluate", "compare", "average", "env", "export_hf"]


def __getattr__(name: str) -> Any:  # noqa: ANN401 (the API's functions and classes, imported on first use)
    if name in ("train", "compare", "export_hf"):  # callable modules: syntrain.train(...) is syntrain.train.run(...)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in ("evaluate", "average", "env"):
        from . import api

        return getattr(api, name)
    if name == "Translator":
        from .translate import Translator

        return Translator
    raise AttributeError(f"module 'syntrain' has no attribute {name!r}")
