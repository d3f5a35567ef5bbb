"""Which handler answers each API, at which versions: the broker's one routing table.

Each handler module declares the APIs it answers, each with its handler and the versions it
implements (``routes()``, a ``Routes`` dict); ``routing_table`` merges them for the server,
refusing an API two modules claim, and cuts every range to what ``protocol/`` decodes and
encodes, so that ApiVersions never advertises a version the codec lacks. A handler takes the
request's version and its decoded body (the API's ``*RequestData``) and returns the response
body (its ``*ResponseData``), or None for a request the broker leaves unanswered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NamedTuple

from ..errors import SeglogError
from ..protocol import ApiKey, supported_versions

Handler = Callable[[int, Any], Awaitable[Any]]


class Route(NamedTuple):
    handler: Handler | None  # None: the connection answers it itself (ApiVersions, from this table)
    versions: tuple[int, int]  # the versions the handler implements, inclusive


Routes = dict[ApiKey, Route]


def routing_table(*routes: Mapping[ApiKey, Route]) -> Routes:
    """Every module's routes in one table, each range cut to what the protocol package handles
    (an API it has no version of in common is left out); ValueError for an API declared twice."""
    table: Routes = {}
    for declared in routes:
        for key, route in declared.items():
            if key in table:
                raise ValueError(f"{key.name} is routed twice")
            try:
                low, high = supported_versions(key)
            except SeglogError:  # no schema for it
                continue
            low, high = max(low, route.versions[0]), min(high, route.versions[1])
            if low <= high:
                table[key] = Route(route.handler, (low, high))
    return table


def served_versions(table: Mapping[ApiKey, Route]) -> dict[int, tuple[int, int]]:
    """The ranges a table serves, by API key: what ApiVersions advertises and connections accept."""
    return {int(key): route.versions for key, route in table.items()}
