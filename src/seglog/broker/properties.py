"""server.properties: Java's properties syntax, read into a ``BrokerConfig``.

Kafka's broker reads the same file: ``key=value`` or ``key: value`` lines, ``#`` and
``!`` comments, a trailing backslash continuing a line, ``\\`` escapes. Overrides
(``--override k=v``) win over the file. Keys seglog does not know (``zookeeper.connect``,
``num.network.threads`` ...) are logged and ignored, as Kafka logs unknown keys, so a
Kafka server.properties starts a seglog broker unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import BrokerConfig, is_broker_key
from ..errors import InvalidConfigurationError

log = logging.getLogger(__name__)

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Java's ``Properties.load`` on ``text``: the key/value pairs, last one winning."""
    out: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        logical = line.lstrip()
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1] + next(lines, "").lstrip()
        key, value = _split(logical)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` from ``--override`` (kafka-server-start's syntax)."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise InvalidConfigurationError(f"--override expects key=value, not {item!r}")
        out[key.strip()] = value.strip()
    return out


def broker_config(values: Mapping[str, Any], source: str = "config") -> BrokerConfig:
    """A ``BrokerConfig`` from Kafka's keys; unknown keys are logged and left out."""
    known = {}
    for key, value in values.items():
        if is_broker_key(key):
            known[key] = value
        else:
            log.warning("%s: ignoring %r, a key seglog's broker does not use", source, key)
    return BrokerConfig(known)


def load_config(path: str | None, overrides: Iterable[str] = ()) -> BrokerConfig:
    """server.properties at ``path`` (None: Kafka's defaults) with ``--override``s applied."""
    values: dict[str, str] = {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise InvalidConfigurationError(f"cannot read the broker config: {e.strerror}", file=path) from None
        try:
            values = parse_properties(text, path)
        except ValueError as e:
            raise InvalidConfigurationError(f"bad escape in the broker config: {e}", file=path) from None
    values.update(parse_overrides(overrides))
    try:
        return broker_config(values, path or "--override")
    except InvalidConfigurationError as e:
        raise e.at(file=path) from None
