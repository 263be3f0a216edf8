"""synprep: dependency trees aligned with BPE sub-words for syntax-aware NMT.

The Python API (docs/python-api.md) is imported on first use, so `import synprep` stays light: one function
per command (`synprep.convert`, `synprep.validate`, `synprep.parser_train`, ..., `__all__`), `synprep.load_dataset`,
`synprep.load_bpe`, `synprep.ConvertResult`, `synprep.InputError`.
"""

from __future__ import annotations

from typing import Any

from .logs import default_handler

__version__ = "0.1.0"
default_handler("synprep")  # messages: logging.getLogger("synprep") (synprep/logs.py)

CALLABLE_MODULES = ("convert", "parse", "align", "filter", "synth", "inspect", "challenge", "validate", "export")
_API = ("load_dataset", "learn_bpe", "apply_bpe", "load_bpe", "ConvertResult", "parser_train", "parser_eval",
        "cache_info", "cache_verify", "cache_prune")
__all__ = ["__version__", "InputError", *(name for name in CALLABLE_MODULES if name not in ("filter", "inspect")),
           *_API]  # `from synprep import *` must not hide the built-in filter or the inspect module


def __getattr__(name: str) -> Any:  # noqa: ANN401 (the API's functions and classes, imported on first use)
    if name in CALLABLE_MODULES:  # callable modules: synprep.convert(...) is synprep.convert.convert(...)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name in _API:
        from . import api

        return getattr(api, name)
    if name == "InputError":
        from .errors import InputError

        return InputError
    raise AttributeError(f"module 'synprep' has no attribute {name!r}")
