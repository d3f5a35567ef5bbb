"""Kafka's ACL model: resources and their patterns, operations, permissions, and the filters that
DescribeAcls and DeleteAcls match bindings with (``org.apache.kafka.common.acl`` and
``org.apache.kafka.common.resource``).

An ACL binding is a resource pattern (``Topic`` named ``orders``, LITERAL, or every ``Topic``
whose name starts with ``orders-``, PREFIXED) and an entry: who (a principal, ``User:*`` for
everyone), from where (a host address, ``*`` for anywhere), what (an operation) and whether that
is allowed or denied. The enums' values are Kafka's wire codes; their ``title`` is the name
Kafka's JSON in ZooKeeper and kafka-acls.sh write (``Topic``, ``IdempotentWrite``, ``Allow``).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple, Self

from ..errors import InvalidRequestError
from .principal import KafkaPrincipal


def _title(name: str) -> str:
    """``TRANSACTIONAL_ID`` as Kafka's ``SecurityUtils`` writes it: ``TransactionalId``."""
    return "".join(word.capitalize() for word in name.split("_"))


class _Named(IntEnum):
    # an int's hash, as equality is an int's: Enum's own hashes the name in Python, and every
    # authorization hashes an operation and a resource type
    __hash__ = int.__hash__

    @property
    def title(self) -> str:
        return _title(self.name)

    @classmethod
    def parse(cls, text: str) -> Self:
        """A member from its Kafka name in any case and spelling (``Topic``, ``TOPIC``,
        ``transactional-id``, ``TransactionalId``)."""
        wanted = text.replace("-", "").replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == wanted:
                return member
        raise InvalidRequestError(f"unknown {cls.__name__} {text!r}")


class ResourceType(_Named):
    """Kafka's ``ResourceType``: what an ACL protects. UNKNOWN and ANY are for filters only."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Named):
    """How a resource pattern's name matches resources' names (Kafka's ``PatternType``). A binding
    is LITERAL or PREFIXED; a filter may also be ANY (any pattern, by its own name) or MATCH (the
    patterns that would match a resource of the filter's name)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Named):
    """Kafka's ``AclOperation``. ALL in a binding grants or denies every operation; ANY is a filter's."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Named):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD_RESOURCE = "*"  # a LITERAL pattern of this name matches every resource of its type
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = KafkaPrincipal("User", "*")
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name

# What an ALLOW of each operation is granted by (Kafka's ``AclAuthorizer.allowAclExists``): the
# operation itself and ALL; who may read, write, delete or alter a resource may also describe it,
# who may alter its configs may describe them. A DENY implies nothing: denying Read leaves Describe
# as the other ACLs make it.
_IMPLYING = {
    AclOperation.DESCRIBE: (AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER),
    AclOperation.DESCRIBE_CONFIGS: (AclOperation.ALTER_CONFIGS,),
}
ALLOWED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    op: frozenset((op, AclOperation.ALL, *_IMPLYING.get(op, ()))) for op in AclOperation
}


# The operations each resource type has a use for (Kafka's ``AclEntry.supportedOperations``): what
# kafka-acls.sh lets one add besides ALL, and what an authorized-operations bitfield reports on
_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS)
    ),
    ResourceType.GROUP: frozenset((_O.READ, _O.DESCRIBE, _O.DELETE)),
    ResourceType.CLUSTER: frozenset(
        (
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        )
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset((_O.DESCRIBE, _O.WRITE)),
    ResourceType.DELEGATION_TOKEN: frozenset((_O.DESCRIBE,)),
    ResourceType.USER: frozenset((_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS)),
}
# an authorized-operations field's value when the client did not ask for it (KIP-430)
OPERATIONS_NOT_REQUESTED = -(2**31)


def operations_field(operations: Iterable[AclOperation]) -> int:
    """The operations as KIP-430's bitfield (Kafka's ``Utils.to32BitField``): bit n set for the
    operation of code n (the codes stop at 14: the INT32 stays positive)."""
    value = 0
    for operation in operations:
        value |= 1 << operation
    return value


def parse_principal(text: str) -> KafkaPrincipal:
    """``User:alice`` as Kafka's ``SecurityUtils.parseKafkaPrincipal`` reads it (the name may hold ':')."""
    principal_type, sep, name = text.partition(":")
    if not sep or not principal_type or not name:
        raise InvalidRequestError(f"principal must be TYPE:NAME (User:alice), not {text!r}")
    return KafkaPrincipal(principal_type, name)


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        kind, pattern = self.resource_type.name, self.pattern_type.name
        return f"ResourcePattern(resourceType={kind}, name={self.name}, patternType={pattern})"


class AccessControlEntry(NamedTuple):
    principal: KafkaPrincipal
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry


def validate_binding(binding: AclBinding) -> None:
    """InvalidRequestError for a binding no authorizer may store (Kafka's ``AclApis.handleCreateAcls``
    and ``AuthorizerUtils.validateAclBinding``): a filter's value, an empty name, a Cluster not
    named kafka-cluster."""
    pattern, entry = binding
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidRequestError(f"invalid resource type {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"invalid pattern type {pattern.pattern_type.name}: LITERAL or PREFIXED")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidRequestError(f"invalid permission type {entry.permission_type.name}")
    if not pattern.name:
        raise InvalidRequestError("Invalid empty resource name specified.")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not entry.host:
        raise InvalidRequestError("Invalid empty host specified.")


class AclBindingFilter(NamedTuple):
    """What DescribeAcls and DeleteAcls select: None or an ANY value matches everything there."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            return self.name is None or matches_resource(pattern, self.name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches(self, binding: AclBinding) -> bool:
        entry = binding.entry
        return (
            self.matches_pattern(binding.pattern)
            and (self.principal is None or self.principal == str(entry.principal))
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def validate(self) -> None:
        """InvalidRequestError for a filter with an UNKNOWN element, which matches nothing known."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise InvalidRequestError("the filter has an unknown resource or pattern type")
        if self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN:
            raise InvalidRequestError("the filter has an unknown operation or permission type")


def matches_resource(pattern: ResourcePattern, name: str) -> bool:
    """Does a binding's pattern cover the resource named so (of the pattern's type)?"""
    if pattern.pattern_type == PatternType.PREFIXED:
        return name.startswith(pattern.name)
    return pattern.name in (name, WILDCARD_RESOURCE)
