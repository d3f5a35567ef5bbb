"""The package's layers, checked on every module's imports (their AST, so imports inside
functions and ``TYPE_CHECKING`` blocks count too).

A package is ``seglog.records``, ``seglog.protocol``, ``seglog.storage``, ``seglog.client``,
``seglog.coordinator``, ``seglog.cluster``, ``seglog.broker``, ``seglog.spark``,
``seglog.tools``, ``seglog.demo``, or the top level (the modules directly in
``seglog/``: ``errors``, ``config``, ``partitioner``, ``cli``, ...).

1. No module imports a ``_``-prefixed module or name of another package: what a layer
   offers others is public (exported by its ``__init__``, or a public module).
2. No module imports a layer above its own. The layers, bottom to top, as
   docs/architecture.md draws them:

   0. ``errors``, ``common``, ``config``, ``partitioner``: imported by everyone, importing
      nothing of seglog but each other;
   1. ``records``, ``protocol``: the sans-IO formats (bytes in, values out);
   2. ``storage``: the log engine, on records; ``client``: connections to brokers, on
      protocol's sans-IO connection;
   3. ``coordinator`` (the coordinators' state, on storage's logs and records),
      ``cluster`` (ZooKeeper and the controller, on storage), and the top-level
      ``seglog`` package itself (``seglog.open``: a front door to storage);
   4. ``broker`` and ``spark``: storage served over the wire, or to Spark; the
      broker will host the coordinators and a controller;
   5. ``tools``, ``cli``, ``__main__``, ``demo``: the command line and the demo.

   Packages on one layer may import each other (none does today).

   The broker, the tools and Spark reach other brokers through ``client``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import seglog

SRC = Path(seglog.__file__).parent

LAYERS = {
    "errors": 0,
    "common": 0,
    "config": 0,
    "partitioner": 0,
    "_partitioner": 0,  # partitioner.py's C
    "records": 1,
    "protocol": 1,
    "storage": 2,
    "client": 2,
    "coordinator": 3,
    "cluster": 3,
    "seglog": 3,  # seglog/__init__.py
    "broker": 4,
    "spark": 4,
    "tools": 5,
    "cli": 5,
    "__main__": 5,
    "demo": 5,
}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(root: Path, module: str) -> bool:
    """Whether ``module`` (dotted, from the root package) is a module or package under
    ``root``: a directory, a .py file, or a C extension (a .c source beside it)."""
    path = root.parent.joinpath(*module.split("."))
    return path.is_dir() or path.with_suffix(".py").exists() or path.with_suffix(".c").exists()


def _package(root: Path, module: str) -> str:
    """The package a module belongs to: its first component below the root package when
    that is a directory, else the root package itself."""
    parts = module.split(".")
    if len(parts) > 1 and (root / parts[1]).is_dir():
        return parts[1]
    return parts[0]


def _unit(root: Path, module: str) -> str:
    """A module's layer name: its package, or a top-level module's own name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _private(names: list[str]) -> bool:
    return any(n.startswith("_") and not (n.startswith("__") and n.endswith("__")) for n in names)


def _imports(root: Path, path: Path, module: str):
    """(target module, imported name or None, line) of every seglog import in ``path``."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root.name:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != root.name:
                continue
            for alias in node.names:
                # "from seglog.records import layout": a module imported by name
                if _exists(root, f"{target}.{alias.name}"):
                    yield f"{target}.{alias.name}", None, node.lineno
                else:
                    yield target, alias.name, node.lineno


def violations(root: Path) -> list[str]:
    """Every import under ``root`` (a package directory) that breaks one of the two rules."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        own_package, own_layer = _package(root, module), LAYERS[_unit(root, module)]
        where = f"{path.relative_to(root.parent)}"
        for target, name, line in _imports(root, path, module):
            other = _package(root, target)
            components = target.split(".")[1:] + ([name] if name else [])
            if other != own_package and _private(components):
                shown = f"{target}.{name}" if name else target
                found.append(f"{where}:{line}: private {shown} of package {other}")
            layer = LAYERS[_unit(root, target)]
            if layer > own_layer:
                found.append(
                    f"{where}:{line}: {_unit(root, module)} (layer {own_layer}) imports "
                    f"{_unit(root, target)} (layer {layer}), a layer above it"
                )
    return found


def test_no_module_imports_private_names_of_another_package_or_a_layer_above():
    assert violations(SRC) == []


def test_every_module_is_on_a_layer():
    units = {_unit(SRC, _module_name(SRC, p)) for p in SRC.rglob("*.py")}
    assert units <= set(LAYERS), units - set(LAYERS)


def test_the_check_finds_what_it_forbids(tmp_path):
    root = tmp_path / "seglog"
    for package in ("records", "storage", "spark"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "errors.py").write_text("")
    (root / "records" / "_codec.c").write_text("")
    (root / "records" / "batch.py").write_text("from . import _codec\nfrom ..errors import _private\n")
    (root / "storage" / "_scan.c").write_text("")
    (root / "storage" / "log.py").write_text(
        "from ..records import _codec\n"  # a private module of records
        "from ..records.batch import _helper\n"  # a private name
        "import seglog.records._codec\n"
        "from . import _scan\n"  # its own: fine
        "from .. import records as _alias\n"  # a public package, whatever its alias: fine
        "def f():\n    from ..spark import arrow\n"  # upward, inside a function
    )
    assert [v.split(": ", 1)[1] for v in violations(root)] == [
        "private seglog.errors._private of package seglog",
        "private seglog.records._codec of package records",
        "private seglog.records.batch._helper of package records",
        "private seglog.records._codec of package records",
        "storage (layer 2) imports spark (layer 4), a layer above it",
    ]
