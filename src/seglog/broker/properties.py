"""server.properties (Java's properties syntax, ``seglog.properties``) read into a ``BrokerConfig``.

Kafka's broker reads the same file. Overrides (``--override k=v``) win over the file. Keys
seglog does not know (``zookeeper.connect``, ``num.network.threads`` ...) are logged and
ignored, as Kafka logs unknown keys, so a Kafka server.properties starts a seglog broker
unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..config import BrokerConfig, is_broker_key
from ..errors import InvalidConfigurationError
from ..properties import parse_properties

log = logging.getLogger(__name__)


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
