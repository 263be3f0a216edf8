"""Modules callable as the API function of their name (`synprep.convert`, `synprep.parse`, `syntrain.train`)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


def make_callable(module: str, function: Callable[..., Any]) -> None:
    """Make the module `module` callable as `function`: an imported submodule is the attribute of its package,
    which a function of the same name cannot be, so `synprep.convert(...)` is the API function whether or not the
    package's modules were imported (and `import synprep.convert.converter` works as before)."""

    class CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:  # noqa: ANN401 (the function's own)
            return function(*args, **kwargs)

    CallableModule.__call__.__doc__ = function.__doc__
    CallableModule.__call__.__wrapped__ = function  # type: ignore[attr-defined] (inspect.signature: the function's)
    sys.modules[module].__class__ = CallableModule
