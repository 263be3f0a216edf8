"""The registry of the sub-word schemes, which the generic code loops over (never branching on a scheme's name):
the schemes by name in their declared order (`Scheme.order`, then name; the modules of `synprep.subwords` are
imported by the package). docs/subwords-api.md: how to write one."""

from __future__ import annotations

from ..errors import InputError
from .base import Scheme

DEFAULT = "subword-nmt"  # the scheme of a [bpe] table without `scheme` (and of every manifest before schemes)
_REGISTRY: dict[str, Scheme] = {}


def register(scheme: type[Scheme]) -> type[Scheme]:
    """Add a scheme (its one instance is what `get` returns); usable as a class decorator. A module of
    `synprep.subwords` is imported by the package; a scheme defined elsewhere calls this."""
    if not scheme.name or scheme.name in _REGISTRY:
        raise ValueError(f"a sub-word scheme needs a new name, got {scheme.name!r}")
    if scheme.bpe_codes and any(other.bpe_codes for other in _REGISTRY.values()):
        raise ValueError(f"sub-word scheme {scheme.name!r}: only one scheme cuts with BPE codes")
    _REGISTRY[scheme.name] = scheme()
    return scheme


def unregister(name: str) -> None:
    """Remove a registered scheme (tests, examples)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered schemes' names in their declared order (`Scheme.order`, then name)."""
    return tuple(sorted(_REGISTRY, key=lambda name: (_REGISTRY[name].order, name)))


def schemes() -> list[Scheme]:
    """The registered schemes, in the order of `names`."""
    return [_REGISTRY[name] for name in names()]


def get(name: str | None) -> Scheme:
    """The scheme of a name (None: the default); an unknown name is a one-line InputError listing them."""
    scheme = _REGISTRY.get(name or DEFAULT)
    if scheme is None:
        raise InputError(f"unknown sub-word scheme {name!r} (choose from {', '.join(names())})")
    return scheme


def of(configuration: dict) -> Scheme:
    """The scheme of a manifest's configuration (its [bpe] table)."""
    return get((configuration.get("bpe") or {}).get("scheme"))
