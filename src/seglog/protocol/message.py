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
        if isinstance(other, dict):  # TRANSITION
            return self.as_dict() == _plain_dict(other)
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

    # --- TRANSITION: dict-style access while callers move to attributes; removed after ------------

    def __getitem__(self, name: str) -> Any:
        if name not in self.__slots__:
            raise KeyError(name)
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        if name not in self.__slots__:
            raise KeyError(name)
        setattr(self, name, value)

    def __contains__(self, name: object) -> bool:
        return name in self.__slots__

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self.__slots__ else default

    def keys(self) -> tuple[str, ...]:
        return self._fields()

    def as_dict(self) -> dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in self._fields()}


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _plain_dict(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain_dict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_dict(v) for v in value]
    if isinstance(value, Message):
        return value.as_dict()
    return value
