"""DescribeClientQuotas and AlterClientQuotas (KIP-546), as Kafka 3.9's ZooKeeper-mode
``ZkAdminManager`` answers them: quotas of users, client ids, users' client ids and ips, read
from and written to the quota store (ZooKeeper in a cluster, the log dir else) and applied to
this broker's quota managers at once (the other brokers of a cluster follow /config/changes).

Entity names on the wire are null for the default entity; ``quotas.DEFAULT`` here. An ``ip``
entity (its one key: connection_creation_rate) is an address, and combines with no user or
client id, in an alteration as in a filter.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import InvalidRequestError, SeglogError, UnsupportedVersionError
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterClientQuotasRequestData,
    AlterClientQuotasResponseData,
    DescribeClientQuotasRequestData,
    DescribeClientQuotasResponseData,
)
from ..security.quotas import CLIENT_ID, DEFAULT, IP, USER, ClientQuotas, QuotaEntity, checked_value, ip_entity_name
from .quota_store import Changes, Entities, QuotaStore
from .routes import Route, Routes

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match_type
T = TypeVar("T")
log = logging.getLogger(__name__)


class ClientQuotaApis:
    def __init__(self, quotas: ClientQuotas, store: QuotaStore) -> None:
        self.quotas = quotas
        self.store = store
        self._altering = asyncio.Lock()  # a file store's read, change and rewrite, one at a time
        self._loop = asyncio.get_running_loop()

    def routes(self) -> Routes:
        return {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: Route(self.describe_client_quotas, (0, 1)),
            ApiKey.ALTER_CLIENT_QUOTAS: Route(self.alter_client_quotas, (0, 1)),
        }

    async def load(self) -> None:
        """Every stored quota applied (at start-up)."""
        self.quotas.load((await _blocking(self.store.load)).items())

    def config_changed(self, entity_path: str) -> None:
        """A /config/changes notification of a user or client entity (on ZooKeeper's event
        thread): its quotas read again, and applied on the loop."""
        try:
            entity = QuotaEntity.from_path(entity_path)
        except ValueError as e:
            log.warning("config change notification ignored: %s", e)
            return
        self._loop.call_soon_threadsafe(self.quotas.apply, entity, self.store.entity(entity))

    # --- DescribeClientQuotas -------------------------------------------------------------------

    async def describe_client_quotas(
        self, version: int, body: DescribeClientQuotasRequestData
    ) -> DescribeClientQuotasResponseData:
        try:
            wanted = _filter(body.components, version)
        except SeglogError as e:
            return DescribeClientQuotasResponseData(error_code=e.error_code, error_message=str(e), entries=None)
        found = await _blocking(self.store.load)
        return DescribeClientQuotasResponseData(entries=_described(found, wanted, body.strict))

    # --- AlterClientQuotas ----------------------------------------------------------------------

    async def alter_client_quotas(
        self, version: int, body: AlterClientQuotasRequestData
    ) -> AlterClientQuotasResponseData:
        entries = []
        for entry in body.entries:
            answer = AlterClientQuotasResponseData.EntryData(entity=_echoed(entry.entity))
            try:
                entity = _entity(entry.entity)
                changes = _changes(entity, entry.ops)
                if not body.validate_only:
                    async with self._altering:
                        after = await _blocking(functools.partial(self.store.alter, entity, changes))
                    self.quotas.apply(entity, after)
            except SeglogError as e:
                answer.error_code, answer.error_message = e.error_code, str(e)
            entries.append(answer)
        return AlterClientQuotasResponseData(entries=entries)


async def _blocking(call: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, call)


def _entity(parts: list[Any]) -> QuotaEntity:
    """The entity an AlterClientQuotas entry names; INVALID_REQUEST for one Kafka refuses."""
    if not parts:
        raise InvalidRequestError("Invalid empty client quota entity")
    names: dict[str, str] = {}
    for part in parts:
        kind, name = part.entity_type, part.entity_name
        if kind not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if kind in names:
            raise InvalidRequestError(f"Duplicate {kind} entity type in a client quota entity")
        if name == "":
            raise InvalidRequestError(f"Empty {kind} not supported")
        names[kind] = DEFAULT if name is None else name
    ip = names.get(IP)
    if ip is None:
        return QuotaEntity(names.get(USER), names.get(CLIENT_ID))
    if len(names) > 1:
        raise InvalidRequestError(
            "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
        )
    return QuotaEntity(None, None, ip_entity_name(ip))


def _changes(entity: QuotaEntity, ops: list[Any]) -> Changes:
    """An entry's ops as keys set or removed; INVALID_REQUEST for a key or value Kafka refuses."""
    changes: dict[str, float | None] = {}
    for op in ops:
        if op.remove:
            if op.key not in entity.keys:
                raise InvalidRequestError(f"Invalid configuration key {op.key}")
            changes[op.key] = None
        else:
            changes[op.key] = checked_value(entity, op.key, op.value)
    return changes


def _echoed(parts: list[Any]) -> list[AlterClientQuotasResponseData.EntityData]:
    return [
        AlterClientQuotasResponseData.EntityData(entity_type=p.entity_type, entity_name=p.entity_name) for p in parts
    ]


# --- DescribeClientQuotas' filter ----------------------------------------------------------------

# an entity type's component: None, none given; else the name wanted (None: any specified one)
Filter = dict[str, str | None]


def _filter(components: list[Any], version: int) -> Filter:
    wanted: Filter = {}
    for c in components:
        kind = c.entity_type
        if not kind:
            raise InvalidRequestError("Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID, IP):
            raise UnsupportedVersionError(
                f"Custom entity type '{kind}' not supported",
                api_key=ApiKey.DESCRIBE_CLIENT_QUOTAS,
                api_version=version,
            )
        if kind in wanted:
            raise InvalidRequestError(f"Duplicate {kind} filter component entity type")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise InvalidRequestError(f"an exact {kind} filter component needs a name to match")
            wanted[kind] = c.match
        elif c.match_type == MATCH_DEFAULT:
            wanted[kind] = DEFAULT
        elif c.match_type == MATCH_SPECIFIED:
            wanted[kind] = None
        else:
            raise InvalidRequestError(f"Unexpected match type {c.match_type} of a {kind} filter component")
    if IP in wanted and len(wanted) > 1:
        raise InvalidRequestError(
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component."
        )
    return wanted


def _parts(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    return [(USER, entity.user), (CLIENT_ID, entity.client_id), (IP, entity.ip)]


def _matches(wanted: Filter, kind: str, name: str | None, strict: bool) -> bool:
    if kind not in wanted:
        return name is None or not strict
    want = wanted[kind]
    return name is not None and (want is None or name == want)


def _described(found: Entities, wanted: Filter, strict: bool) -> list[DescribeClientQuotasResponseData.EntryData]:
    Entry, Entity, Value = (
        DescribeClientQuotasResponseData.EntryData,
        DescribeClientQuotasResponseData.EntityData,
        DescribeClientQuotasResponseData.ValueData,
    )
    entries = []
    for entity, values in sorted(found.items(), key=lambda item: item[0].path):
        if not all(_matches(wanted, kind, name, strict) for kind, name in _parts(entity)):
            continue
        parts = _parts(entity)
        described = [
            Entity(entity_type=kind, entity_name=None if name == DEFAULT else name)
            for kind, name in parts
            if name is not None
        ]
        entries.append(Entry(entity=described, values=[Value(key=k, value=v) for k, v in sorted(values.items())]))
    return entries
