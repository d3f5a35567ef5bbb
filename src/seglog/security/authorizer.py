"""Kafka's ``AclAuthorizer`` decisions over an index of ACL bindings, sans-IO.

A request is allowed (``AclAuthorizer.authorizeAction``) when its principal is a super user
(``super.users``), or when, among the ACLs of every pattern that covers the resource (its LITERAL
name, the LITERAL ``*`` of its type, and each PREFIXED pattern its name starts with):

- there are none at all, for anyone, and ``allow.everyone.if.no.acl.found`` is true; or
- no DENY names the principal (or ``User:*``), the host (or ``*``) and the operation (or ALL),
  and some ALLOW does, for the operation, ALL, or an operation that implies it (``ALLOWED_BY``).

DENY wins over ALLOW; nothing implies a DENY. Hosts are addresses as Java's
``InetAddress.getHostAddress`` prints them (``127.0.0.1``), not resolved names.

Lookups are what every request pays for, so the index is built for them: per resource type a
dict by name for LITERAL patterns and one for PREFIXED patterns, with the set of prefix lengths
in use, so that the prefixes of a name are found with one dict lookup per distinct length (not a
scan of every ACL); each pattern's entries are grouped by principal, so a pattern with ACLs for a
thousand users is checked against two small groups (the principal's and ``User:*``). Updates
replace one pattern's entries at a time, as the stores (ZooKeeper, a file) deliver them; they
and the lookups run on one thread (the broker's event loop), so nothing here locks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from . import acl
from .acl import (
    ALLOWED_BY,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from .principal import KafkaPrincipal

_EMPTY: tuple[acl.AccessControlEntry, ...] = ()
# enum members as module constants: a class attribute of an Enum is a descriptor call per use
_DENY, _ALL = AclPermissionType.DENY, AclOperation.ALL
EVERY_ACL = acl.AclBindingFilter()


class _PatternAcls:
    """One pattern's entries, and the same grouped by principal."""

    __slots__ = ("by_principal", "entries")

    def __init__(self, entries: frozenset[acl.AccessControlEntry]) -> None:
        self.entries = entries
        groups: dict[KafkaPrincipal, list[acl.AccessControlEntry]] = {}
        for entry in entries:
            groups.setdefault(entry.principal, []).append(entry)
        self.by_principal = {principal: tuple(group) for principal, group in groups.items()}


@dataclass
class _TypeIndex:
    """The patterns of one resource type."""

    literal: dict[str, _PatternAcls] = field(default_factory=dict)
    prefixed: dict[str, _PatternAcls] = field(default_factory=dict)
    prefix_lengths: tuple[int, ...] = ()  # the lengths of ``prefixed``'s names, ascending

    def covering(self, name: str) -> list[_PatternAcls]:
        """The ACLs of every pattern that covers the resource named so."""
        literal = self.literal
        found = []
        acls = literal.get(name)
        if acls is not None:
            found.append(acls)
        if name != WILDCARD_RESOURCE:
            acls = literal.get(WILDCARD_RESOURCE)
            if acls is not None:
                found.append(acls)
        prefixed = self.prefixed
        size = len(name)
        for length in self.prefix_lengths:
            if length > size:
                break
            acls = prefixed.get(name[:length])
            if acls is not None:
                found.append(acls)
        return found


class AclAuthorizer:
    """The ACLs a broker enforces and its decisions over them."""

    def __init__(
        self, super_users: Iterable[KafkaPrincipal] = (), *, allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._types: dict[ResourceType, _TypeIndex] = {}

    # --- the index ---------------------------------------------------------------------------

    def acls(self, pattern: acl.ResourcePattern) -> frozenset[acl.AccessControlEntry]:
        """The entries of one pattern (empty when it has none)."""
        index = self._types.get(pattern.resource_type)
        if index is None:
            return frozenset()
        patterns = index.prefixed if pattern.pattern_type == PatternType.PREFIXED else index.literal
        found = patterns.get(pattern.name)
        return found.entries if found is not None else frozenset()

    def set_acls(self, pattern: acl.ResourcePattern, entries: Iterable[acl.AccessControlEntry]) -> None:
        """Replace one pattern's entries (none: the pattern goes)."""
        index = self._types.setdefault(pattern.resource_type, _TypeIndex())
        prefixed = pattern.pattern_type == PatternType.PREFIXED
        patterns = index.prefixed if prefixed else index.literal
        kept = frozenset(entries)
        if kept:
            patterns[pattern.name] = _PatternAcls(kept)
        else:
            patterns.pop(pattern.name, None)
        if prefixed:
            index.prefix_lengths = tuple(sorted({len(name) for name in patterns}))

    def patterns(self) -> Iterator[acl.ResourcePattern]:
        """Every pattern that has entries."""
        for resource_type, index in self._types.items():
            for name in index.literal:
                yield acl.ResourcePattern(resource_type, name, PatternType.LITERAL)
            for name in index.prefixed:
                yield acl.ResourcePattern(resource_type, name, PatternType.PREFIXED)

    def bindings(self, selected: acl.AclBindingFilter = EVERY_ACL) -> list[acl.AclBinding]:
        """The bindings the filter matches."""
        found: list[acl.AclBinding] = []
        for pattern in self.patterns():
            if selected.matches_pattern(pattern):
                found += (b for e in self.acls(pattern) if selected.matches(b := acl.AclBinding(pattern, e)))
        return found

    # --- decisions ---------------------------------------------------------------------------

    def authorize(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """May the principal, connected from host, do the operation on the resource?"""
        if principal in self.super_users:
            return True
        index = self._types.get(resource_type)
        covering = index.covering(name) if index is not None else []
        if not covering:
            return self.allow_everyone_if_no_acl_found
        allowing = ALLOWED_BY[operation]
        allowed = False
        for acls in covering:
            for who in (principal, WILDCARD_PRINCIPAL):
                for entry in acls.by_principal.get(who, _EMPTY):
                    if entry.host != host and entry.host != WILDCARD_HOST:
                        continue
                    if entry.permission_type == _DENY:
                        if entry.operation == operation or entry.operation == _ALL:
                            return False
                    elif entry.operation in allowing:
                        allowed = True
        return allowed

    def authorize_by_resource_type(
        self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do the operation on some resource of the type (Kafka's
        ``Authorizer.authorizeByResourceType``, for an idempotent producer without
        IdempotentWrite: Write on any topic)? An ALLOW counts unless a DENY covers all it covers:
        a LITERAL DENY of its name, or a PREFIXED DENY of a prefix of its name; a LITERAL DENY of
        ``*`` denies them all."""
        # a made-up name: super users, and allow.everyone.if.no.acl.found when no ACL covers it
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        denied: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allowed: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        for pattern, entry in self.bindings(acl.AclBindingFilter(resource_type)):
            if entry.host not in (host, WILDCARD_HOST) or entry.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if entry.operation not in (operation, AclOperation.ALL):
                continue
            if entry.permission_type == AclPermissionType.DENY:
                if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                    return False
                denied[pattern.pattern_type].add(pattern.name)
            else:
                allowed[pattern.pattern_type].add(pattern.name)
        if WILDCARD_RESOURCE in allowed[PatternType.LITERAL]:
            return True
        for pattern_type, names in allowed.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                    continue
                if not any(name[:n] in denied[PatternType.PREFIXED] for n in range(1, len(name) + 1)):
                    return True
        return False
