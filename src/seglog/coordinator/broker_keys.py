"""The coordinators' configs (``GroupConfig``, ``TransactionConfig``) on the broker's keys:
each field names its key in ``seglog.config``, whose default is the field's, so every
default stands in one place."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from ..config import BrokerConfig

C = TypeVar("C")
_DEFAULTS = BrokerConfig()  # nothing set: every key at its default


def broker_key(name: str, factor: int = 1) -> Any:
    """A config field read from broker key ``name`` (times ``factor``, to the field's
    unit), defaulting as the key does."""
    return dataclasses.field(default=_DEFAULTS[name] * factor, metadata={"key": name, "factor": factor})


def key_of(field: dataclasses.Field[Any]) -> str:
    return str(field.metadata["key"])


def from_broker(cls: type[C], broker: BrokerConfig) -> C:
    """``cls`` with each field as the broker's config sets its key."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return cls(**{f.name: broker[key_of(f)] * f.metadata["factor"] for f in fields})
