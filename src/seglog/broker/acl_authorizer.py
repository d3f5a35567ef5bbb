"""The broker's authorizer: Kafka's ``AclAuthorizer`` as ``authorizer.class.name`` configures it.

Unset, every request passes (as a Kafka broker without an authorizer). Set to Kafka's
``kafka.security.authorizer.AclAuthorizer``, each handler asks ``authorize`` (one call per
resource, on the request's own principal and address) and the ACLs decide, with ``super.users``
and ``allow.everyone.if.no.acl.found`` (``security.authorizer``'s rules). The ACLs live where the
broker keeps its state: in ZooKeeper in a cluster (``cluster.acl_store``; changes made on any
broker reach this one through its watch), else in ``kafka-acl.json`` in the first log dir,
rewritten atomically on every change::

    {"version":1,"resources":[{"resourceType":"Topic","patternType":"LITERAL","name":"t",
      "acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}]}

The index is read and changed on the event loop only: the stores' reads and writes run in a
thread, and ZooKeeper's notifications are handed to the loop.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..cluster import znodes
from ..cluster.acl_store import Entries, ZkAclStore
from ..cluster.zk_client import ZkClient
from ..config import ACL_AUTHORIZER, BrokerConfig
from ..errors import ApiError, ErrorCode, KafkaStorageError, SeglogError
from ..security import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePattern,
    ResourceType,
    operations_field,
    parse_principal,
    validate_binding,
)
from ..storage.fileio import read_json_file, write_atomically
from .request_context import current_request

ACL_FILE = "kafka-acl.json"
# decisions remembered until the ACLs change; past this many (a client asking for ever new
# names), forgotten all at once
DECISION_CACHE_SIZE = 10_000
# the error a request refused on a resource of each type gets
AUTHORIZATION_FAILED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


class AclStore(Protocol):
    def load(self) -> dict[ResourcePattern, Entries]: ...

    def update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries: ...


class FileAclStore:
    """A single broker's ACLs: one JSON file, rewritten whole (write, fsync, rename) on each change."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, ACL_FILE)
        self._acls: dict[ResourcePattern, Entries] = {}

    def load(self) -> dict[ResourcePattern, Entries]:
        for item in read_json_file(self.path, "resources", list, "an ACL") or []:
            try:
                pattern = ResourcePattern(
                    ResourceType.parse(item["resourceType"]), item["name"], PatternType.parse(item["patternType"])
                )
                self._acls[pattern] = znodes.acl_entries_from_json(item.get("acls"), self.path)
            except (KeyError, TypeError, AttributeError, SeglogError) as e:
                raise KafkaStorageError(f"bad ACL resource {item!r}: {e}", file=self.path) from None
        return dict(self._acls)

    def update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        current = self._acls.get(pattern, frozenset())
        wanted = change(current)
        if wanted != current:
            acls = {**self._acls, pattern: wanted} if wanted else {p: e for p, e in self._acls.items() if p != pattern}
            write_atomically(self.path, _encode_file(acls))
            self._acls = acls
        return wanted


def _encode_file(acls: dict[ResourcePattern, Entries]) -> bytes:
    resources = [
        {
            "resourceType": p.resource_type.title,
            "patternType": p.pattern_type.name,
            "name": p.name,
            "acls": znodes.acl_entries_json(entries),
        }
        for p, entries in sorted(acls.items())
    ]
    return json.dumps({"version": 1, "resources": resources}, separators=(",", ":")).encode()


def _super_users(text: str) -> list[Any]:
    """super.users: ``User:admin;User:broker`` (Kafka splits on ';': a name may hold ',')."""
    return [parse_principal(p.strip()) for p in text.split(";") if p.strip()]


class BrokerAuthorizer:
    """The ACLs of a broker configured so; of none (every request passes) without a config."""

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config
        self.enabled = config is not None and config["authorizer.class.name"] == ACL_AUTHORIZER
        self.acls = AclAuthorizer()
        if config is not None:
            self.acls = AclAuthorizer(
                _super_users(config["super.users"]),
                allow_everyone_if_no_acl_found=config["allow.everyone.if.no.acl.found"],
            )
        # (principal, client host, operation, resource type, name) -> allowed: a request's check
        # is one dict lookup while the ACLs stay as they are (the decision reads nothing else)
        self._decisions: dict[tuple[Any, ...], bool] = {}
        self._store: AclStore | None = None
        self._zk: ZkClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changes = asyncio.Lock()  # one admin change at a time: a store's update is not reentrant

    async def startup(self) -> None:
        """The ACLs loaded (before the listeners serve) and, in a cluster, their changes watched."""
        if not self.enabled:
            return
        self._loop = asyncio.get_running_loop()
        loaded = await self._loop.run_in_executor(None, self._open_store)
        for pattern, entries in loaded.items():
            self._set_acls(pattern, entries)

    def _open_store(self) -> dict[ResourcePattern, Entries]:
        assert self.config is not None  # enabled
        if not self.config["zookeeper.connect"]:
            self._store = FileAclStore(self.config.log_dirs[0])
            return self._store.load()
        # its own session, as Kafka's AclAuthorizer has its own ZooKeeper client
        zk = self._zk = ZkClient(
            self.config["zookeeper.connect"],
            session_timeout_ms=self.config["zookeeper.session.timeout.ms"],
            connection_timeout_ms=self.config["zookeeper.connection.timeout.ms"],
        ).start()
        store = self._store = ZkAclStore(zk)
        loaded = store.load()
        store.watch(self._on_change)
        zk.on_new_session(self._on_new_session)  # watches end with a session: read everything anew
        return loaded

    def _set_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """One pattern's entries replaced in the index (on the loop), the decisions forgotten."""
        self.acls.set_acls(pattern, entries)
        self._decisions.clear()

    def shutdown(self) -> None:
        if self._zk is not None:
            self._zk.close()

    def _on_change(self, pattern: ResourcePattern, entries: Entries) -> None:
        # ZooKeeper's event thread: the index changes on the loop
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._set_acls, pattern, entries)

    def _on_new_session(self) -> None:
        assert isinstance(self._store, ZkAclStore)
        loaded = self._store.load()
        self._store.watch(self._on_change)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._replace_all, loaded)

    def _replace_all(self, loaded: dict[ResourcePattern, Entries]) -> None:
        for pattern in list(self.acls.patterns()):
            if pattern not in loaded:
                self._set_acls(pattern, ())
        for pattern, entries in loaded.items():
            self._set_acls(pattern, entries)

    # --- the checks handlers make ----------------------------------------------------------------

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May the request being handled do the operation on the resource?"""
        if not self.enabled:
            return True
        context = current_request()
        key = (context.principal, context.client_host, operation, resource_type, name)
        decided = self._decisions.get(key)
        if decided is None:
            host = context.client_host.lstrip("/")  # the address alone, as Java's getHostAddress gives it
            decided = self.acls.authorize(context.principal, host, operation, resource_type, name)
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            self._decisions[key] = decided
        return decided

    def check(self, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
        """``authorize`` as an error: the resource type's *_AUTHORIZATION_FAILED when refused."""
        if not self.authorize(operation, resource_type, name):
            what = f"{resource_type.title} {name!r}" if resource_type != ResourceType.CLUSTER else "the cluster"
            raise ApiError(AUTHORIZATION_FAILED[resource_type], f"{operation.title} on {what} is not authorized")

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names among ``names`` the request may do the operation on."""
        if not self.enabled:
            return set(names)
        return {name for name in names if self.authorize(operation, resource_type, name)}

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bitfield of the operations the request may do on the resource, among those its
        type supports (Kafka's ``AuthHelper.authorizedOperations``; all of them without an
        authorizer)."""
        ops = SUPPORTED_OPERATIONS[resource_type]
        return operations_field(op for op in ops if self.authorize(op, resource_type, name))

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the request do the operation on some resource of the type?"""
        if not self.enabled:
            return True
        context = current_request()
        host = context.client_host.lstrip("/")
        return self.acls.authorize_by_resource_type(context.principal, host, operation, resource_type)

    # --- the ACL APIs ------------------------------------------------------------------------------

    def describe(self, selected: AclBindingFilter) -> list[AclBinding]:
        return self.acls.bindings(selected)

    async def create(self, bindings: Sequence[AclBinding]) -> list[SeglogError | None]:
        """Each binding added (or the error that refused it)."""
        results: list[SeglogError | None] = []
        valid: list[AclBinding] = []
        for binding in bindings:
            try:
                validate_binding(binding)
                valid.append(binding)
                results.append(None)
            except SeglogError as e:
                results.append(e)
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for pattern, entry in valid:
            by_pattern.setdefault(pattern, set()).add(entry)
        for pattern, entries in by_pattern.items():

            def add(current: Entries, added: Entries = frozenset(entries)) -> Entries:
                return current | added

            await self._update(pattern, add)
        return results

    async def delete(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Each filter's matching bindings, all deleted (Kafka's ``AclAuthorizer.deleteAcls``)."""
        matched = [self.acls.bindings(f) for f in filters]
        patterns = {b.pattern for found in matched for b in found}
        for pattern in patterns:

            def keep(current: Entries, pattern: ResourcePattern = pattern) -> Entries:
                return frozenset(e for e in current if not any(f.matches(AclBinding(pattern, e)) for f in filters))

            await self._update(pattern, keep)
        return matched

    async def _update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> None:
        assert self._store is not None and self._loop is not None
        store = self._store
        async with self._changes:
            entries = await self._loop.run_in_executor(None, store.update, pattern, change)
        self._set_acls(pattern, entries)


NO_AUTHORIZER = BrokerAuthorizer()  # a handler module's own, when the server gives it none (unit tests)
