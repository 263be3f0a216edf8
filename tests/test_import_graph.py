"""No import cycles between the modules of synprep and syntrain, counting function-local imports too (a local
import must not be what keeps a loop quiet). Importing a module imports its packages first, and
syntrain.switches imports every module of its package (pkgutil): both are edges here."""

from __future__ import annotations

import ast
from pathlib import Path

from .conftest import REPO

PACKAGES = ("synprep", "syntrain")
IMPORTS_ALL_ITS_MODULES = ("syntrain.switches", "synprep.subwords")


def _modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".")
    if node.level:
        base = base[: len(base) - node.level + (path.name == "__init__.py")]
    target = ".".join(base + ([node.module] if node.module else []))
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules importing it imports (any import statement, at any depth)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(module, path, node):
                    parts = target.split(".")
                    edges |= {name for k in range(2, len(parts) + 1) for name in [".".join(parts[:k])]
                              if name in modules and name != module and not module.startswith(name + ".")}
        if module in IMPORTS_ALL_ITS_MODULES:
            edges |= {name for name in modules if name.startswith(module + ".")}
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_the_check_sees_a_cycle_kept_quiet_by_a_local_import():
    graph = import_graph()
    assert "syntrain.dataset" in graph["syntrain.train"]
    graph["syntrain.dataset"].add("syntrain.train")  # as if dataset.py imported train inside a function
    assert any({"syntrain.dataset", "syntrain.train"} <= set(c) for c in cycles(graph))
