#!/usr/bin/env python3
"""Lint: no private name crosses a module. A name that starts with ``_`` belongs to the module
that defines it; another module of the package neither imports it (``from m import _x``) nor
reaches into it (``m._x`` where ``m`` is an imported iosweep module). What another module
needs is that module's interface: name it without the underscore.

    python tools/check_private.py        # exit 1 and one line per crossing
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "iosweep"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def crossings(path: Path) -> list[str]:
    """The private names ``path`` takes from other iosweep modules, as ``file:line: name``."""
    tree = ast.parse(path.read_text(), str(path))
    modules: set[str] = set()  # local names bound to iosweep modules
    found = []
    rel = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iosweep"):
            for a in node.names:
                if _private(a.name):
                    found.append(f"{rel}:{node.lineno}: imports {node.module}.{a.name}")
                else:
                    modules.add(a.asname or a.name)  # may be a module: checked on use
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("iosweep"):
                    modules.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_module(node.value.id, tree)
        ):
            found.append(f"{rel}:{node.lineno}: reaches into {node.value.id}.{node.attr}")
    return found


def _is_module(name: str, tree: ast.Module) -> bool:
    """Whether ``name`` is bound by an import of an iosweep module (not a class or function
    imported from one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("iosweep"):
            for a in node.names:
                if (a.asname or a.name) == name:
                    target = PACKAGE.parent / (node.module or "").replace(".", "/") / a.name
                    return target.with_suffix(".py").exists() or target.is_dir()
        elif isinstance(node, ast.Import):
            for a in node.names:
                if (a.asname or a.name.split(".")[0]) == name and a.name.startswith("iosweep"):
                    return True
    return False


def main() -> int:
    found = [c for f in sorted(PACKAGE.rglob("*.py")) for c in crossings(f)]
    for c in found:
        print(c)
    if found:
        print(f"{len(found)} private name(s) cross a module: make them the module's interface")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
