"""What every message data class shares (``message_data.py`` holds the classes themselves).

A message is a request or response body, or a struct nested in one: a class with a slot per
field of the schema, every version's fields at once (a field a version lacks keeps its
default, as Kafka's generated ``*Data`` classes do). Decoders make them without calling
``__init__`` (``object.__new__`` and a store per slot: cheaper than a dict literal);
people make them with keyword arguments, every one optional.
"""

from __future__ import annotations

from typing import Any


class _Unset:
    """The default of an array or struct argument: a fresh list or struct each time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


class Message:
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields())

    __hash__ = None  # type: ignore[assignment]  # mutable, as Kafka's

    def _fields(self) -> tuple[str, ...]:
        fields: tuple[str, ...] = self.__slots__
        return fields

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__qualname__}({fields})"
