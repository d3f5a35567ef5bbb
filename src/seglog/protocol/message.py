"""What every message data class shares (``message_data.py`` holds the classes themselves).

A message is a request or response body, or a struct nested in one: a class with a slot per
field of the schema, every version's fields at once (a field a version lacks keeps its
default, as Kafka's generated ``*Data`` classes do). Decoders make them without calling
``__init__`` (``object.__new__`` and a store per slot: cheaper than a dict literal);
people make them with keyword arguments, every one optional.

A field holding a struct keeps it in a private slot (``_current_leader``) behind a property
(``current_leader``): the slot stays UNSET until the property is first read, which makes the
default struct then. Most responses leave their tagged structs at their defaults (a fetch
response's partition has three), and making them up front was most of the cost of making one.
"""

from __future__ import annotations

from typing import Any


class _Unset:
    """The default of an array or struct argument: a fresh list or struct each time. One object,
    compared by identity: copies and pickles of a message keep it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
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
        """The fields' names: a struct's slot is its name with a leading underscore."""
        slots: tuple[str, ...] = self.__slots__
        return tuple(name.removeprefix("_") for name in slots)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields())
        return f"{type(self).__qualname__}({fields})"
