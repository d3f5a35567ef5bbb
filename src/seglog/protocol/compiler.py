"""Compiles a declared message at one version into a decoder and an encoder.

Each (struct, version) becomes the Python source of one function, nested arrays inlined as
nested loops, runs of fixed-width fields read or written by a single precompiled
``struct.Struct``; the source is compiled once with ``exec`` (as ``namedtuple`` and ``attrs``
do) and cached by the caller. Interpreting the schema per message instead costs a dict lookup
and a call per field, which is most of the time of a small request.

Decoders: ``decode(b, p, e) -> (dict, p)`` over a memoryview ``b`` from position ``p`` to
``e``. Every read is checked against ``e`` first and every length and count against the bytes
left before anything is allocated (Kafka's own rule), so hostile input costs at most the
frame's size. Records come out as memoryview slices of ``b``.

Encoders: ``encode(d, o, parts) -> o`` append to the bytearray ``o``; a records value larger
than COPY_LIMIT (or not bytes-like: a FileSlice) ends ``o`` in ``parts``, goes into ``parts``
itself, and a new bytearray is returned. Appending ``Struct.pack`` results measured as fast as
``pack_into`` a presized buffer with its growth checks, and needs no size pass.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

from seglog.errors import ErrorCode, SeglogError
from seglog.protocol import primitives
from seglog.protocol.message import UNSET
from seglog.protocol.schema import (
    BOOL,
    BYTES,
    FIXED_FORMATS,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    MAX_VERSION,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    ZERO_UUID,
    Api,
    Array,
    Field,
    FieldType,
    Struct,
    Versions,
)

# records at most this large are copied into the frame's buffer rather than given their own part
COPY_LIMIT = 4096

Decoder = Callable[[memoryview, int, int], tuple[Any, int]]
Encoder = Callable[[Any, bytearray, list[Any]], bytearray]
# the message data class of each struct of one message, by the struct's id (message_data.py)
Classes = dict[int, type]


class _Source:
    """Lines of generated code, with the constants they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {"_unset": UNSET}
        self.counter = 0

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def const(self, value: Any) -> str:
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def struct(self, fmt: str) -> str:
        return self.const(struct.Struct(">" + fmt))

    def build(self, name: str, params: str, body_indent_lines: list[str]) -> Callable[..., Any]:
        src = f"def {name}({params}):\n" + "\n".join(body_indent_lines) + "\n"
        exec(compile(src, f"<seglog.protocol {name}>", "exec"), self.namespace)
        fn = self.namespace[name]
        fn.source = src  # for debugging a schema
        return fn


def _present(struct_: Struct, version: int) -> tuple[list[Field], list[Field]]:
    """The regular fields and the tagged fields (by tag) a version has."""
    regular = [f for f in struct_.fields if version in f.versions and f.tag is None]
    tagged = [f for f in struct_.fields if version in f.versions and f.tag is not None]
    tagged.sort(key=lambda f: f.tag or 0)
    return regular, tagged


def _is_fixed(f: Field) -> bool:
    return isinstance(f.type, str) and f.type in FIXED_FORMATS


def _slot(f: Field) -> str:
    """The slot holding a field: a struct's is private, UNSET until its property first reads it
    (message.py), so that a message leaving its structs at their defaults makes none of them."""
    return f"_{f.name}" if isinstance(f.type, Struct) else f.name


def _default_expr(src: _Source, f: Field) -> str:
    """Source of an expression making the default value (a fresh list each time; UNSET for a
    struct, made by its property when read)."""
    if isinstance(f.type, Array):
        return "[]"
    if isinstance(f.type, Struct):
        return "_unset"
    if isinstance(f.default, bool | int | float | str | bytes) or f.default is None:
        return repr(f.default)
    return src.const(f.default)


# --- decoding ------------------------------------------------------------------------------


class _DecoderGen:
    def __init__(self, version: int, flexible: bool, classes: Classes) -> None:
        self.version = version
        self.flexible = flexible
        self.classes = classes
        self.src = _Source()
        ns = self.src.namespace
        ns.update(
            _new=object.__new__,
            _short=primitives.short,
            _count=primitives.bad_count,
            _null=primitives.not_nullable,
            _uv=primitives.read_uvarint,
            _uuid=primitives.to_uuid,
            _str=str,
            _unpack=struct.unpack_from,
            _I16=struct.Struct(">h").unpack_from,
            _I32=struct.Struct(">i").unpack_from,
        )

    def length(self, ind: int, var: str, compact: bool, int16: bool = False, plus_one: bool = True) -> None:
        """Read a length or count into ``var`` (-1 for null); the caller checks it against the
        bytes left, in its own unit."""
        emit = self.src.emit
        if compact:
            emit(ind, "if p >= e: raise _short(p, 1, e)")
            emit(ind, f"{var} = b[p]")
            emit(ind, "p += 1")
            emit(ind, f"if {var} > 127: {var}, p = _uv(b, p - 1, e)")
            if plus_one:
                emit(ind, f"{var} -= 1")
        else:
            size = 2 if int16 else 4
            emit(ind, f"if e - p < {size}: raise _short(p, {size}, e)")
            emit(ind, f"{var} = {'_I16' if int16 else '_I32'}(b, p)[0]")
            emit(ind, f"p += {size}")

    def null_or(self, ind: int, f: Field, var: str, nvar: str, width: int) -> int:
        """Emit the null branch of a length ``nvar``; returns the indent of the non-null branch."""
        emit = self.src.emit
        emit(ind, f"if {nvar} < 0:")
        if self.version in f.null:
            emit(ind + 1, f"if {nvar} != -1: raise _count(p - {width}, {nvar}, e - p)")
            emit(ind + 1, f"{var} = None")
        else:
            emit(
                ind + 1, f"raise _count(p - {width}, {nvar}, e - p) if {nvar} != -1 else _null(p - {width}, {f.name!r})"
            )
        emit(ind, "else:")
        return ind + 1

    def value(self, ind: int, f: Field, type_: FieldType, var: str, depth: int) -> None:
        """Decode one value of ``type_`` into ``var``."""
        emit = self.src.emit
        compact = self.flexible
        if isinstance(type_, str) and type_ in FIXED_FORMATS:
            fmt = FIXED_FORMATS[type_]
            size = struct.calcsize(">" + fmt)
            emit(ind, f"if e - p < {size}: raise _short(p, {size}, e)")
            emit(ind, f"{var} = {self.src.struct(fmt)}.unpack_from(b, p)[0]")
            emit(ind, f"p += {size}")
            if type_ == UUID:
                emit(ind, f"{var} = _uuid({var})")
            return
        if isinstance(type_, str):  # string, bytes, records
            n = f"n{depth}"
            self.length(ind, n, compact, int16=type_ == STRING)
            width = 1 if compact else (2 if type_ == STRING else 4)
            inner = self.null_or(ind, f, var, n, width)
            emit(inner, f"if {n} > e - p: raise _short(p, {n}, e)")
            if type_ == STRING:
                # primitives.utf8 inline (its errors="replace" is Kafka's): a call less per string
                emit(inner, f"{var} = _str(b[p:p + {n}], 'utf-8', 'replace') if {n} else ''")
            elif type_ == BYTES:
                emit(inner, f"{var} = bytes(b[p:p + {n}])")
            else:
                emit(inner, f"{var} = b[p:p + {n}]")
            emit(inner, f"p += {n}")
            return
        if isinstance(type_, Array):
            n = f"n{depth}"
            self.length(ind, n, compact)
            width = 1 if compact else 4
            inner = self.null_or(ind, f, var, n, width)
            item = type_.item
            if isinstance(item, str) and item in FIXED_FORMATS and item != UUID:
                fmt = FIXED_FORMATS[item]
                size = struct.calcsize(">" + fmt)
                emit(inner, f"if {n} * {size} > e - p: raise _count(p - {width}, {n}, e - p)")
                emit(inner, f"{var} = list(_unpack('>%d{fmt}' % {n}, b, p))")
                emit(inner, f"p += {n} * {size}")
                return
            emit(inner, f"if {n} > e - p: raise _count(p - {width}, {n}, e - p)")
            emit(inner, f"{var} = []")
            add = f"add{depth}"
            emit(inner, f"{add} = {var}.append")
            emit(inner, f"for _ in range({n}):")
            x = f"x{depth + 1}"
            self.value(inner + 1, f, item, x, depth + 1)
            emit(inner + 1, f"{add}({x})")
            return
        self.struct(ind, type_, var, depth + 1)

    def struct(self, ind: int, struct_: Struct, var: str, depth: int) -> None:
        emit = self.src.emit
        regular, tagged = _present(struct_, self.version)
        if not self.flexible:
            tagged = []
        names = {f.name: f"v{depth}_{f.name}" for f in struct_.fields}
        run: list[Field] = []

        def flush() -> None:
            if not run:
                return
            fmt = "".join(FIXED_FORMATS[f.type] for f in run)  # type: ignore[index]
            size = struct.calcsize(">" + fmt)
            targets = ", ".join(names[f.name] for f in run)
            emit(ind, f"if e - p < {size}: raise _short(p, {size}, e)")
            emit(ind, f"({targets},) = {self.src.struct(fmt)}.unpack_from(b, p)")
            emit(ind, f"p += {size}")
            for f in run:
                if f.type == UUID:
                    emit(ind, f"{names[f.name]} = _uuid({names[f.name]})")
            run.clear()

        for f in regular:
            if _is_fixed(f):
                run.append(f)
                continue
            flush()
            self.value(ind, f, f.type, names[f.name], depth)
        flush()
        if self.flexible:
            self.tagged_section(ind, tagged, names, depth)
        present = {f.name for f in regular} | {f.name for f in tagged}
        # made without __init__: a store per slot costs less than the call (and than a dict)
        emit(ind, f"{var} = _new({self.src.const(self.classes[id(struct_)])})")
        for f in struct_.fields:
            value = names[f.name] if f.name in present else _default_expr(self.src, f)
            emit(ind, f"{var}.{_slot(f)} = {value}")

    def tagged_section(self, ind: int, tagged: list[Field], names: dict[str, str], depth: int) -> None:
        emit = self.src.emit
        for f in tagged:
            emit(ind, f"{names[f.name]} = {_default_expr(self.src, f)}")
        t = f"t{depth}"
        emit(ind, "if p >= e: raise _short(p, 1, e)")
        emit(ind, f"{t} = b[p]")
        emit(ind, "p += 1")
        emit(ind, f"if {t}:")  # most sections are empty: one byte, 0
        ind += 1
        emit(ind, f"if {t} > 127: {t}, p = _uv(b, p - 1, e)")
        emit(ind, f"if {t} > e - p: raise _count(p, {t}, e - p)")
        emit(ind, f"for _ in range({t}):")
        emit(ind + 1, f"tag{depth}, p = _uv(b, p, e)")
        emit(ind + 1, f"size{depth}, p = _uv(b, p, e)")
        emit(ind + 1, f"if size{depth} > e - p: raise _short(p, size{depth}, e)")
        emit(ind + 1, f"q{depth} = p + size{depth}")
        for i, f in enumerate(tagged):
            emit(ind + 1, f"{'if' if i == 0 else 'elif'} tag{depth} == {f.tag}:")
            # the value is read within its declared size: e stands for the tag's end meanwhile
            emit(ind + 2, f"e{depth} = e")
            emit(ind + 2, f"e = q{depth}")
            self.value(ind + 2, f, f.type, names[f.name], depth + 1)
            emit(ind + 2, f"e = e{depth}")
        emit(ind + 1, f"p = q{depth}")  # unknown tags are skipped, as Kafka keeps them unread


def compile_decoder(struct_: Struct, version: int, flexible: bool, name: str, classes: Classes) -> Decoder:
    gen = _DecoderGen(version, flexible, classes)
    gen.struct(1, struct_, "d0", 0)
    gen.src.emit(1, "return d0, p")
    return gen.src.build(name, "b, p, e", gen.src.lines)


# --- encoding ------------------------------------------------------------------------------


def _write_records(o: bytearray, parts: list[Any], records: Any, compact: bool) -> bytearray:
    if records is None:
        o += b"\x00" if compact else b"\xff\xff\xff\xff"
        return o
    size = primitives.records_size(records)
    o += primitives.uvarint(size + 1) if compact else size.to_bytes(4, "big", signed=True)
    if size <= COPY_LIMIT and isinstance(records, bytes | bytearray | memoryview):
        o += records
        return o
    parts.append(o)
    parts.append(records)
    return bytearray()


def _differs_source(src: _Source, f: Field, type_: FieldType, value: str) -> str:
    """Source of a test that ``value`` (not None) differs from the field's default: then, and only
    then, Kafka writes a tagged field. Inline, field by field: a response carries its tagged
    structs at their defaults nearly always, and a call per test cost more than the rest of a
    fetch response's partition."""
    if isinstance(type_, Array):
        return f"bool({value})"
    if isinstance(type_, Struct):
        tests = [
            f"{_set(g, f'{value}.{_slot(g)}')} and {_differs_source(src, g, g.type, f'{value}.{_slot(g)}')}"
            if isinstance(g.type, Array | Struct)
            else f"{value}.{g.name} != {_literal(src, g.default)}"
            for g in type_.fields
        ]
        return "(" + " or ".join(tests) + ")" if tests else "False"
    return f"{value} != {_literal(src, f.default)}"


def _set(f: Field, value: str) -> str:
    """Source of a test that the slot ``value`` of an array or struct field holds a value: not
    None, nor (a struct's) UNSET, its default."""
    return f"{value} is not None" + (f" and {value} is not _unset" if isinstance(f.type, Struct) else "")


def _literal(src: _Source, value: Any) -> str:
    if isinstance(value, bool | int | float | str | bytes) or value is None:
        return repr(value)
    return src.const(value)


class _EncoderGen:
    def __init__(self, version: int, flexible: bool, where: str, classes: Classes) -> None:
        self.version = version
        self.flexible = flexible
        self.where = where
        self.classes = classes
        self.src = _Source()
        self.src.namespace.update(
            _uv=primitives.uvarint,
            _rec=_write_records,
            _pack=struct.pack,
            _H=struct.Struct(">h").pack,
            _I=struct.Struct(">i").pack,
            _bad=self.null_error,
        )

    def null_error(self, name: str) -> SeglogError:
        return SeglogError(f"{self.where}: field {name} is not nullable in this version")

    def length(self, ind: int, expr: str, compact: bool, int16: bool = False) -> None:
        emit = self.src.emit
        if compact:
            emit(ind, f"n = {expr} + 1")
            emit(ind, "if n < 128: o.append(n)")
            emit(ind, "else: o += _uv(n)")
        else:
            emit(ind, f"o += {'_H' if int16 else '_I'}({expr})")

    def null(self, ind: int, f: Field, var: str, width: int) -> int:
        """The null branch of ``var``; returns the indent of the non-null branch."""
        emit = self.src.emit
        emit(ind, f"if {var} is None:")
        if self.version in f.null:
            null = b"\x00" if self.flexible else b"\xff" * width
            emit(ind + 1, f"o += {null!r}")
        else:
            emit(ind + 1, f"raise _bad({f.name!r})")
        emit(ind, "else:")
        return ind + 1

    def value(self, ind: int, f: Field, type_: FieldType, var: str, depth: int) -> None:
        emit = self.src.emit
        compact = self.flexible
        if isinstance(type_, str) and type_ in FIXED_FORMATS:
            fmt = FIXED_FORMATS[type_]
            arg = f"{var}.bytes" if type_ == UUID else var
            emit(ind, f"o += {self.src.struct(fmt)}.pack({arg})")
            return
        if type_ == RECORDS:
            emit(ind, f"o = _rec(o, parts, {var}, {compact})")
            return
        if isinstance(type_, str):  # string, bytes
            inner = self.null(ind, f, var, 2 if type_ == STRING else 4)
            raw = f"r{depth}"
            emit(inner, f"{raw} = {var}.encode()" if type_ == STRING else f"{raw} = {var}")
            self.length(inner, f"len({raw})", compact, int16=type_ == STRING)
            emit(inner, f"o += {raw}")
            return
        if isinstance(type_, Array):
            inner = self.null(ind, f, var, 4)
            self.length(inner, f"len({var})", compact)
            item = type_.item
            if isinstance(item, str) and item in FIXED_FORMATS and item != UUID:
                emit(inner, f"o += _pack('>%d{FIXED_FORMATS[item]}' % len({var}), *{var})")
                return
            x = f"x{depth + 1}"
            emit(inner, f"for {x} in {var}:")
            self.value(inner + 1, f, item, x, depth + 1)
            return
        self.struct(ind, type_, var, depth + 1)

    def struct(self, ind: int, struct_: Struct, var: str, depth: int) -> None:
        emit = self.src.emit
        regular, tagged = _present(struct_, self.version)
        run: list[Field] = []

        def arg(f: Field) -> str:
            return f"{var}.{f.name}" + (".bytes" if f.type == UUID else "")

        def flush() -> None:
            if run:
                fmt = "".join(FIXED_FORMATS[f.type] for f in run)  # type: ignore[index]
                emit(ind, f"o += {self.src.struct(fmt)}.pack({', '.join(arg(f) for f in run)})")
                run.clear()

        for f in regular:
            if _is_fixed(f):
                run.append(f)
                continue
            flush()
            v = f"v{depth}"
            emit(ind, f"{v} = {var}.{_slot(f)}")
            if isinstance(f.type, Struct):  # left at its default: a default struct's bytes
                emit(ind, f"if {v} is _unset: {v} = {self.src.const(self.classes[id(f.type)]())}")
            self.value(ind, f, f.type, v, depth)
        flush()
        if self.flexible:
            self.tagged_section(ind, tagged, var, depth)

    def tagged_section(self, ind: int, tagged: list[Field], var: str, depth: int) -> None:
        emit = self.src.emit
        if not tagged:
            emit(ind, "o.append(0)")
            return
        t, saved, v = f"t{depth}", f"s{depth}", f"v{depth}"
        emit(ind, f"{t} = []")
        for f in tagged:
            if _contains_records(f.type):
                raise ValueError(f"records in tagged field {f.name}")
            emit(ind, f"{v} = {var}.{_slot(f)}")
            emit(ind, f"if {_set(f, v)} and {_differs_source(self.src, f, f.type, v)}:")
            emit(ind + 1, f"{saved} = o")
            emit(ind + 1, "o = bytearray()")
            self.value(ind + 1, f, f.type, v, depth + 1)
            emit(ind + 1, f"{t}.append(({primitives.uvarint(f.tag)!r}, o))")  # type: ignore[arg-type]
            emit(ind + 1, f"o = {saved}")
        emit(ind, f"if not {t}: o.append(0)")
        emit(ind, "else:")
        emit(ind + 1, f"o += _uv(len({t}))")
        emit(ind + 1, f"for tag, raw in {t}:")
        emit(ind + 2, "o += tag")
        emit(ind + 2, "o += _uv(len(raw))")
        emit(ind + 2, "o += raw")


def _contains_records(type_: FieldType) -> bool:
    if isinstance(type_, Array):
        return _contains_records(type_.item)
    if isinstance(type_, Struct):
        return any(_contains_records(f.type) for f in type_.fields)
    return type_ == RECORDS


def compile_encoder(struct_: Struct, version: int, flexible: bool, name: str, classes: Classes) -> Encoder:
    gen = _EncoderGen(version, flexible, name, classes)
    gen.struct(1, struct_, "d0", 0)
    gen.src.emit(1, "return o")
    return gen.src.build(name, "d0, o, parts", gen.src.lines)


# --- message data classes -------------------------------------------------------------------------
#
# Kafka generates a ``*Data`` class per request and response from its specs at build time;
# seglog writes the same classes from its declarations into ``message_data.py``
# (``python -m seglog.protocol``; tests/protocol/test_message_data.py checks that
# the file is current). A struct nested anywhere in a message is an inner class of the
# message's class, by the name the spec gives it, as Kafka's are.

MESSAGE_DATA_MODULE = "message_data.py"
_ANNOTATIONS = {
    BOOL: "bool",
    INT8: "int",
    INT16: "int",
    INT32: "int",
    INT64: "int",
    UINT16: "int",
    UINT32: "int",
    FLOAT64: "float",
    UUID: "uuid.UUID",
    STRING: "str",
    BYTES: "bytes",
    RECORDS: "Any",  # bytes-like, or an object with an int size (a FileSlice) to encode
}


def class_name(api: Api, message: Struct) -> str:
    """``ProduceRequestData``: Kafka's name for the class of an API's request or response."""
    camel = "".join(part.capitalize() for part in api.key.name.split("_"))
    return f"{camel}{'Request' if message is api.request else 'Response'}Data"


def struct_name(struct_: Struct) -> str:
    return struct_.name


def nested_structs(message: Struct, top: str) -> list[tuple[Struct, str]]:
    """The structs nested in a message, each name once, in the order of first appearance, with
    where they first appear (``An item of ProduceRequestData.TopicProduceData.partition_data``);
    ValueError when one name denotes two different structs."""
    found: dict[str, Struct] = {}
    where: dict[str, str] = {}

    def visit(struct_: Struct, path: str) -> None:
        for f in struct_.fields:
            inner = f.type.item if isinstance(f.type, Array) else f.type
            if not isinstance(inner, Struct):
                continue
            name = struct_name(inner)
            if not name:
                raise ValueError(f"the struct of field {f.name} has no name")
            seen = found.setdefault(name, inner)
            if seen != inner:
                raise ValueError(f"two different structs named {name} in one message")
            what = "An item of" if isinstance(f.type, Array) else "The value of"
            where.setdefault(name, f"{what} {path}.{f.name}")
            visit(inner, f"{top}.{name}")

    visit(message, top)
    return [(s, where[struct_name(s)]) for s in found.values()]


def message_classes(api: Api, message: Struct, cls: type) -> Classes:
    """The class of each struct of one message, by the struct's id, from the message's class."""
    classes: Classes = {id(message): cls}

    def visit(struct_: Struct) -> None:
        for f in struct_.fields:
            inner = f.type.item if isinstance(f.type, Array) else f.type
            if isinstance(inner, Struct):
                classes[id(inner)] = getattr(cls, struct_name(inner))
                visit(inner)

    visit(message)
    return classes


def _versions_text(versions: Versions) -> str:
    if versions.lo > versions.hi:
        return "none"
    if versions.hi == MAX_VERSION:
        return f"v{versions.lo}+"
    return f"v{versions.lo}" if versions.lo == versions.hi else f"v{versions.lo}-{versions.hi}"


def _annotation(type_: FieldType, top: str) -> str:
    if isinstance(type_, Array):
        return f"list[{_annotation(type_.item, top)}]"
    if isinstance(type_, Struct):
        return f"{top}.{struct_name(type_)}"
    return _ANNOTATIONS[type_]


def _field_annotation(f: Field, top: str) -> str:
    text = _annotation(f.type, top)
    nullable = f.null.lo <= f.null.hi
    return f"{text} | None" if nullable and f.type != RECORDS else text


def _default_source(f: Field) -> str:
    if isinstance(f.type, Array | Struct):
        return "UNSET"
    if f.type == UUID:
        return "ZERO_UUID" if f.default == ZERO_UUID else f'uuid.UUID("{f.default}")'
    if f.type == INT16 and f.name.endswith("error_code"):  # Kafka's codes, by their names (seglog.errors)
        return f"ErrorCode.{ErrorCode(f.default).name}"
    if isinstance(f.default, str):
        return '"' + f.default.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(f.default)


def _class_lines(
    struct_: Struct, name: str, top: str, doc: str, nested: list[tuple[Struct, str]], indent: int
) -> list[str]:
    pad = "    " * indent
    out = [f"{pad}class {name}(Message):", f'{pad}    """{doc}"""', ""]
    slots = ", ".join(f'"{_slot(f)}"' for f in struct_.fields)
    out.append(f"{pad}    __slots__ = ({slots}{',' if len(struct_.fields) == 1 else ''})")
    out.append("")
    for f in struct_.fields:
        tag = f", tag {f.tag}" if f.tag is not None else ""
        nullable = f", nullable {_versions_text(f.null)}" if f.null.lo <= f.null.hi else ""
        lazy = ", UNSET until its property first reads it" if isinstance(f.type, Struct) else ""
        versions = _versions_text(f.versions)
        out.append(f"{pad}    {_slot(f)}: {_field_annotation(f, top)}  # {versions}{tag}{nullable}{lazy}")
    if struct_.fields:
        out += ["", f"{pad}    def __init__(", f"{pad}        self,"]
        for f in struct_.fields:
            out.append(f"{pad}        {f.name}: {_field_annotation(f, top)} = {_default_source(f)},")
        out.append(f"{pad}    ) -> None:")
        for f in struct_.fields:
            value = f"[] if {f.name} is UNSET else {f.name}" if isinstance(f.type, Array) else f.name
            out.append(f"{pad}        self.{_slot(f)} = {value}")
    for f in struct_.fields:
        if isinstance(f.type, Struct):
            out.extend(_property_lines(f, top, pad))
    for inner, where in nested:
        out.append("")
        out.extend(_class_lines(inner, struct_name(inner), top, f"{where}.", [], indent + 1))
    return out


def _property_lines(f: Field, top: str, pad: str) -> list[str]:
    """A struct field's property: its slot's struct, the default made on first read."""
    assert isinstance(f.type, Struct)
    annotation, slot = _field_annotation(f, top), _slot(f)
    return [
        "",
        f"{pad}    @property",
        f"{pad}    def {f.name}(self) -> {annotation}:",
        f"{pad}        if self.{slot} is UNSET:",
        f"{pad}            self.{slot} = {top}.{struct_name(f.type)}()",
        f"{pad}        return self.{slot}",
        "",
        f"{pad}    @{f.name}.setter",
        f"{pad}    def {f.name}(self, value: {annotation}) -> None:",
        f"{pad}        self.{slot} = value",
    ]


def message_data_source(schemas: dict[int, Api]) -> str:
    """The source of ``message_data.py``."""
    lines = [
        '"""Kafka\'s message data classes (its generated ``*Data`` classes): one for each request and',
        "response of every API declared in ``messages/``, with the structs nested in it as inner",
        "classes by the names Kafka's specs give them. Every field of every version is a slot; a",
        "version without a field leaves its default. The comment after a field gives the versions",
        "that carry it.",
        "",
        "Generated by ``python -m seglog.protocol`` from the declarations: do not edit.",
        '"""',
        "",
        "# ruff: noqa: RUF022, RUF023  (slots and names in the specs' order)",
        "",
        "from __future__ import annotations",
        "",
        "import uuid",
        "from typing import Any",
        "",
        "from seglog.common import ZERO_UUID",
        "from seglog.errors import ErrorCode",
        "from seglog.protocol.message import UNSET, Message",
        "",
        '__all__ = ["UNSET", "Message", "ZERO_UUID", "uuid"]',
    ]
    names = []
    for key in sorted(schemas):
        api = schemas[key]
        for message in (api.request, api.response):
            top = class_name(api, message)
            names.append(top)
            side = "request" if message is api.request else "response"
            flexible = f", flexible {_versions_text(api.flexible)}" if api.flexible.lo <= api.flexible.hi else ""
            doc = f"{api.key.name} {side}: API key {int(api.key)}, {_versions_text(api.versions)}{flexible}."
            lines += ["", ""]
            lines.extend(_class_lines(message, top, top, doc, nested_structs(message, top), 0))
    lines[lines.index('__all__ = ["UNSET", "Message", "ZERO_UUID", "uuid"]')] = (
        "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]"
    )
    return _formatted("\n".join(lines) + "\n")


def _formatted(source: str) -> str:
    """The source as ``ruff format`` writes it (the project's formatter), so that the file
    written and the source compared by the test are the same."""
    import subprocess
    import sys

    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    done = subprocess.run(
        [ruff, "format", "--line-length", "120", "--stdin-filename", MESSAGE_DATA_MODULE, "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main() -> None:
    """Write ``message_data.py`` beside this module from the declarations."""
    from seglog.protocol.messages import SCHEMAS

    path = os.path.join(os.path.dirname(__file__), MESSAGE_DATA_MODULE)
    with open(path, "w") as out:
        out.write(message_data_source(SCHEMAS))
    print(f"wrote {path}")
