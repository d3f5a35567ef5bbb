"""The package's layers, checked on every module's imports (their AST, so imports inside
functions and ``TYPE_CHECKING`` blocks count too).

A package is ``seglog.records``, ``seglog.protocol``, ``seglog.security``, ``seglog.storage``, ``seglog.client``,
``seglog.coordinator``, ``seglog.cluster``, ``seglog.broker``, ``seglog.spark``,
``seglog.tools``, ``seglog.demo``, ``seglog.console``, or the top level (the modules directly in
``seglog/``: ``errors``, ``config``, ``partitioner``, ``cli``, ...).

1. No module imports a ``_``-prefixed module or name of another package: what a layer
   offers others is public (exported by its ``__init__``, or a public module).
2. No module imports a layer above its own. The layers, bottom to top, as
   docs/architecture.md draws them:

   0. ``errors``, ``common``, ``config``, ``partitioner``, ``locks``, ``properties``: imported by everyone, importing
      nothing of seglog but each other;
   1. ``records``, ``protocol``: the sans-IO formats (bytes in, values out); ``security``:
      principals, SASL mechanisms and ACLs, sans-IO;
   2. ``storage``: the log engine, on records; ``client``: connections to brokers, on
      protocol's sans-IO connection;
   3. ``coordinator`` (the coordinators' state, on storage's logs and records),
      ``cluster`` (ZooKeeper and the controller, on storage), and the top-level
      ``seglog`` package itself (``seglog.open``: a front door to storage);
   4. ``broker`` and ``spark``: storage served over the wire, or to Spark; the
      broker will host the coordinators and a controller;
   5. ``tools``, ``cli``, ``__main__``, ``demo``, ``console``: the command line, the demo and the
      web console.

   Packages on one layer may import each other (none does today).

   The broker, the tools and Spark reach other brokers through ``client``.

3. No bare error-code integers: Kafka's error codes are named through ``seglog.errors.ErrorCode``,
   whose rows are the one place their numbers stand. An integer literal is refused where it stands
   for an error code: assigned to, compared with, or given as a name that holds one (``error_code``,
   ``partition_error_code``, ``error``, ``member_error``, ``err``, ``code``, but not ``exit_code``;
   ``errors[...]`` and ``codes[...]``; a dict's ``"error_code"`` key), as the default of such a
   parameter, as the argument of a function or class of the package whose parameter at that place
   is such a name, returned (first) by a function so named, passed to ``ErrorCode(...)``; and a
   constant named after a Kafka error, in a module (``UNSUPPORTED_VERSION = 35``) or a class other
   than the table (a second table; but ``NONE``, which other enums name too).

4. A record batch header's layout is ``seglog.records.layout``'s (and the legacy message's
   ``records.legacy``'s): outside ``records/`` no module says where a field lies. Refused are a
   constant restating a field's offset (an integer named ``*_AT``, ``*_OFFSET``, ``*_POS`` or
   ``*_POSITION`` equal to one of the header's offsets, ``MAGIC_AT = 16``); a literal offset of a
   field only v2 has (past the magic byte: 17 crc ... 61 records), bare or added to a position,
   that indexes or slices bytes or is given to ``unpack_from``/``pack_into`` (``b[at + 21]``);
   and a ``struct`` format that skips bytes (``x``): a header drawn again as a format.

5. Kafka's framing is ``protocol``'s sans-IO connection's: outside ``protocol/`` and
   ``client/`` (whose sockets run on it) no module takes the 4-byte size prefix off a stream:
   a read of exactly 4 bytes (``readexactly(4)``, ``recv(4)``), a frame cut out after its
   prefix (``buffer[4 : 4 + size]``), or a call of protocol's ``frame_size``.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import seglog
from seglog.errors import ErrorCode
from seglog.records import layout

SRC = Path(seglog.__file__).parent

LAYERS = {
    "errors": 0,
    "common": 0,
    "config": 0,
    "partitioner": 0,
    "_partitioner": 0,  # partitioner.py's C
    "locks": 0,
    "_locks": 0,  # locks.py's C
    "properties": 0,
    "records": 1,
    "protocol": 1,
    "security": 1,
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
    "console": 5,
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


# --- 3. no bare error-code integers ---------------------------------------------------------------

KAFKA_ERRORS = frozenset(ErrorCode.__members__)
_CODE = re.compile(r"^((.*_)?(error_code|error)|err|code)$", re.IGNORECASE)  # a name holding one code
_CODES = re.compile(r"(^|_)(errors|codes)$", re.IGNORECASE)  # a container of codes, by key


def _int(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def _ints(node: ast.AST) -> bool:
    """An integer literal, or a tuple, list or set of them (the right side of ``in``)."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_int(e) for e in node.elts)
    return _int(node)


def _holds_code(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return bool(_CODE.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(_CODE.search(node.attr))
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return bool(_CODE.search(key.value))
        container = node.value
        name = container.id if isinstance(container, ast.Name) else getattr(container, "attr", "")
        return bool(_CODES.search(name))
    return False


def _kafka_named(node: ast.AST, but: str) -> bool:
    """An assignment to a name of a Kafka error other than ``but``."""
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    names = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return any(isinstance(n, ast.Name) and n.id in KAFKA_ERRORS and n.id != but for n in names)


def _callee(node: ast.Call) -> str | None:
    return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)


def _pairs(target: ast.AST, value: ast.AST):
    """(target, value) of an assignment, unpacked tuple by tuple, each branch of a conditional."""
    if isinstance(value, ast.IfExp):
        yield from _pairs(target, value.body)
        yield from _pairs(target, value.orelse)
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        for t, v in zip(target.elts, value.elts, strict=True):
            yield from _pairs(t, v)
    else:
        yield target, value


def _parameters(root: Path) -> dict[str, list[list[str]]]:
    """Positional parameter names of every function and class of the package, by name (a
    class's: its ``__init__``'s, else its annotated fields, as a dataclass takes them)."""
    found: dict[str, list[list[str]]] = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                found.setdefault(node.name, []).append(names[1:] if names[:1] in (["self"], ["cls"]) else names)
            elif isinstance(node, ast.ClassDef):
                init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
                if init is not None:
                    names = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
                else:
                    names = [
                        s.target.id
                        for s in node.body
                        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                    ]
                found.setdefault(node.name, []).append(names)
    return found


def _bare_codes_in(tree: ast.Module, parameters: dict[str, list[list[str]]], table: set[int]):
    """(line, what) of each bare error code in one module; ``table``: the ids of the nodes of
    ``ErrorCode``'s own rows, where the numbers belong."""
    # where a constant named after a Kafka error restates its number: in the module, or in a class other
    # than the table (but NONE, which another enum may name too: Compression.NONE)
    restating = {id(n) for n in tree.body} | {
        id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body if _kafka_named(n, "NONE")
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
            if id(node) in table:
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for t, v in _pairs(target, node.value):
                    constant = id(node) in restating and isinstance(t, ast.Name) and t.id in KAFKA_ERRORS
                    if _int(v) and (_holds_code(t) or constant):
                        yield node.lineno, f"{ast.unparse(t)} = {ast.unparse(v)}"
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for a, b in itertools.pairwise(operands):
                if (_holds_code(a) and _ints(b)) or (_holds_code(b) and _ints(a)):
                    yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _CODE.search(k.value) and _int(v):
                    yield node.lineno, f"{k.value!r}: {ast.unparse(v)}"
        elif isinstance(node, ast.Call):
            callee = _callee(node)
            for kw in node.keywords:
                if kw.arg and _CODE.search(kw.arg) and _int(kw.value):
                    yield node.lineno, f"{ast.unparse(node.func)}({kw.arg}={ast.unparse(kw.value)})"
            for names in parameters.get(callee or "", []):
                for name, arg in zip(names, node.args, strict=False):
                    if _CODE.search(name) and _int(arg):
                        yield node.lineno, f"{callee}(..., {name}={ast.unparse(arg)}, ...)"
            if callee == "ErrorCode" and node.args and _int(node.args[0]):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.posonlyargs + node.args.args
            defaults = [*zip(args[len(args) - len(node.args.defaults) :], node.args.defaults, strict=True)]
            defaults += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True) if d]
            for a, d in defaults:
                if _CODE.search(a.arg) and _int(d):
                    yield node.lineno, f"def {node.name}({a.arg}={ast.unparse(d)})"
            if _CODE.search(node.name):
                for r in ast.walk(node):
                    value = r.value if isinstance(r, ast.Return) else None
                    first = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
                    if first is not None and _int(first):
                        yield r.lineno, f"{node.name} returns {ast.unparse(first)}"


def bare_error_codes(root: Path) -> list[str]:
    """Every integer under ``root`` (a package directory) that stands for a Kafka error code."""
    parameters = _parameters(root)
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        table = {
            id(row)
            for c in tree.body
            if isinstance(c, ast.ClassDef) and c.name == "ErrorCode" and path.name == "errors.py"
            for row in c.body
        }
        where = path.relative_to(root.parent)
        found += [f"{where}:{line}: {what}" for line, what in _bare_codes_in(tree, parameters, table)]
    return sorted(set(found), key=lambda f: (f.split(":")[0], int(f.split(":")[1]), f))


def test_no_bare_error_code_integers():
    assert bare_error_codes(SRC) == []


def test_the_bare_code_check_finds_what_it_forbids(tmp_path):
    root = tmp_path / "seglog"
    root.mkdir()
    (root / "errors.py").write_text(
        "class ErrorCode(IntEnum):\n    UNKNOWN_SERVER_ERROR = -1\n    NONE = 0\n"  # the table: where they stand
    )
    (root / "apis.py").write_text(
        "UNSUPPORTED_VERSION = 35\n"
        "LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 5, 6\n"
        "NONE = ErrorCode.NONE\n"  # the table's, by another name: fine
        "class Compression(IntEnum):\n    NONE = 0\n"  # not an error code
        "class Codes:\n    UNKNOWN_SERVER_ERROR = -1\n    LEADER_NOT_AVAILABLE = 5\n"  # a second table
        "@dataclass\nclass Result:\n    error_code: int = 0\n    offset: int = -1\n"
        "def answer(code: int, why: str, error_code=-1) -> dict:\n"
        "    if r.error_code == 0 or p['error_code'] != 0 or code in (3, 6):\n"
        "        errors[tp] = 124\n"
        "    error, message = (0, None) if ok else (ErrorCode.X, 'no')\n"
        "    entry.update(error_code=3)\n"
        "    Result(0, 5)\n"
        "    ErrorCode(42)\n"
        "    exit_code = 2\n"  # an exit code, a count, an offset: not error codes
        "    errors = 0\n"
        "    offset = -1\n"
        "    return {'error_code': 0, 'offset': -1}\n"
        "def _error(e):\n"
        "    return -1, str(e)\n"
    )
    assert [v.split(": ", 1)[1] for v in bare_error_codes(root)] == [
        "UNSUPPORTED_VERSION = 35",
        "LEADER_NOT_AVAILABLE = 5",
        "NOT_LEADER_OR_FOLLOWER = 6",
        "UNKNOWN_SERVER_ERROR = -1",
        "LEADER_NOT_AVAILABLE = 5",
        "error_code = 0",
        "def answer(error_code=-1)",
        "code in (3, 6)",
        "p['error_code'] != 0",
        "r.error_code == 0",
        "errors[tp] = 124",
        "error = 0",
        "entry.update(error_code=3)",
        "Result(..., error_code=0, ...)",
        "ErrorCode(42)",
        "'error_code': 0",
        "_error returns -1",
    ]


# --- 4. batch header offsets only in records/ -----------------------------------------------------

# every field's offset in a v2 batch header, and the header's size, as records.layout states them
# (baseOffset's 0 aside: a start, not a field's place)
HEADER_OFFSETS = frozenset(
    v for k, v in vars(layout).items() if (k.endswith("_OFFSET") or k == "HEADER_SIZE") and type(v) is int and v
)
# past the magic byte the fields are v2's own: their offsets, as literals, read a v2 header
V2_ONLY_OFFSETS = frozenset(v for v in HEADER_OFFSETS if v > layout.MAGIC_OFFSET)
_AT_NAME = re.compile(r"(_AT|_OFFSET|_POS|_POSITION)$")
_STRUCT_CALLS = frozenset({"Struct", "pack", "pack_into", "unpack", "unpack_from", "iter_unpack", "calcsize"})
_PAD = re.compile(r"\d*x")


def _offset_literal(node: ast.AST | None) -> int | None:
    """The integer of ``N`` or ``position + N`` (either side), else None."""
    if node is None:
        return None
    if _int(node):
        return ast.literal_eval(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for side in (node.left, node.right):
            if _int(side):
                return ast.literal_eval(side)
    return None


def _header_offsets_in(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _int(node.value):
            value = ast.literal_eval(node.value)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and _AT_NAME.search(target.id) and value in HEADER_OFFSETS:
                    yield node.lineno, f"{target.id} = {ast.unparse(node.value)}"
        elif isinstance(node, ast.Subscript):
            s = node.slice
            bounds = [s.lower, s.upper] if isinstance(s, ast.Slice) else [s]
            if any(_offset_literal(b) in V2_ONLY_OFFSETS for b in bounds):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Call):
            callee = _callee(node)
            module_call = isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value) == "struct"
            if callee in ("unpack_from", "pack_into"):
                offset = node.args[2 if module_call else 1 : 3 if module_call else 2]
                offset += [k.value for k in node.keywords if k.arg == "offset"]
                if any(_offset_literal(o) in V2_ONLY_OFFSETS for o in offset):
                    yield node.lineno, ast.unparse(node)
            if (module_call or callee == "Struct") and callee in _STRUCT_CALLS and node.args:
                fmt = node.args[0]
                if isinstance(fmt, ast.Constant) and isinstance(fmt.value, str) and _PAD.search(fmt.value):
                    yield node.lineno, f"struct format {fmt.value!r}"


def _found_outside(root: Path, packages: frozenset[str], finder) -> list[str]:
    """``finder``'s (line, what) in every module under ``root`` outside ``packages``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if _package(root, _module_name(root, path)) in packages:
            continue
        where = path.relative_to(root.parent)
        found += [f"{where}:{line}: {what}" for line, what in sorted(finder(ast.parse(path.read_text(), str(path))))]
    return found


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``seglog`` of ``files`` (path below it: source)."""
    root = tmp_path / "seglog"
    for name, source in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(source)
    return root


def header_offsets(root: Path) -> list[str]:
    """Every place under ``root`` (a package directory) outside records/ that restates where a
    record batch header's fields lie."""
    return _found_outside(root, frozenset({"records"}), _header_offsets_in)


def test_batch_header_offsets_only_in_records():
    assert header_offsets(SRC) == []


def test_the_header_offset_check_finds_what_it_forbids(tmp_path):
    apis = (
        "MAGIC_AT = 16\n"
        "ATTRIBUTES_OFFSET: int = 21\n"
        "PEEK = struct.Struct('>qi11xi8xq')\n"
        "def f(b, at):\n"
        "    codec = b[22] & 7 if b[at + 16] == 2 else b[at + 21]\n"  # 22: no field's offset; 16: magic, every magic's
        "    crc = b[17:21]\n"
        "    count = COUNT.unpack_from(b, at + 57)[0] + struct.unpack_from('>q', b, 43)[0]\n"
        "    key, digest, entry = b[:8], h[:16], index.unpack_from(mm, slot * 8 + 12)\n"  # not a v2 field's
        "    return struct.pack('>hi', 1, 2)\n"
        "MAX_OFFSET_DELTA = 2\n"
    )
    # records' own layout: where the offsets are stated
    root = _tree(
        tmp_path, {"records/layout.py": "MAGIC_OFFSET = 16\nS = struct.Struct('>q8x')\n", "broker/apis.py": apis}
    )
    assert [v.split(": ", 1)[1] for v in header_offsets(root)] == [
        "MAGIC_AT = 16",
        "ATTRIBUTES_OFFSET = 21",
        "struct format '>qi11xi8xq'",
        "b[at + 21]",
        "b[17:21]",
        "COUNT.unpack_from(b, at + 57)",
        "struct.unpack_from('>q', b, 43)",
    ]


# --- 5. Kafka's framing only in protocol/ -----------------------------------------------------------

_FRAMING_PACKAGES = frozenset({"protocol", "client"})  # the sans-IO connection, and the client's sockets on it


def _framing_in(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = _callee(node) or ""
            four = bool(node.args) and _int(node.args[0]) and ast.literal_eval(node.args[0]) == 4
            if callee == "frame_size" or (four and re.search(r"read|recv", callee, re.IGNORECASE)):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            lower, upper = node.slice.lower, node.slice.upper
            if lower is not None and _int(lower) and ast.literal_eval(lower) == 4 and _offset_literal(upper) == 4:
                yield node.lineno, ast.unparse(node)  # a frame cut out after its prefix: b[4 : 4 + size]


def framing_loops(root: Path) -> list[str]:
    """Every place under ``root`` (a package directory) outside protocol/ and client/ that
    takes Kafka's 4-byte size prefix off a stream: a read of exactly 4 bytes, a frame cut
    out after its prefix, or protocol's ``frame_size`` called."""
    return _found_outside(root, _FRAMING_PACKAGES, _framing_in)


def test_one_framing_loop_in_protocol():
    assert framing_loops(SRC) == []


def test_the_framing_check_finds_what_it_forbids(tmp_path):
    network = (
        "async def read(reader, sock):\n"
        "    size = SIZE.unpack(await reader.readexactly(4))[0]\n"
        "    head = sock.recv(4)\n"
        "    n = frame_size(bytes(buffer[:4]), limit)\n"
        "    frame = buffer[4 : 4 + n]\n"
        "    magic = view[:4]\n"  # a codec's magic number, no frame
        "    data = sock.recv(65536)\n"
    )
    # protocol's connection: where the framing is
    root = _tree(tmp_path, {"protocol/connection.py": "frame = buffer[4 : 4 + size]\n", "broker/network.py": network})
    assert [v.split(": ", 1)[1] for v in framing_loops(root)] == [
        "reader.readexactly(4)",
        "sock.recv(4)",
        "frame_size(bytes(buffer[:4]), limit)",
        "buffer[4:4 + n]",
    ]
