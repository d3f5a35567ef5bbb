"""AclAuthorizer's decisions as a table against Kafka's rules (``AclAuthorizer.authorizeAction``,
``allowAclExists``, ``Authorizer.authorizeByResourceType``)."""

from __future__ import annotations

import pytest

from seglog.errors import InvalidRequestError
from seglog.security import (
    AccessControlEntry,
    AclAuthorizer,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    KafkaPrincipal,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_principal,
    validate_binding,
)

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
ANYONE = KafkaPrincipal("User", "*")
HOST = "10.0.0.1"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op, T = AclOperation, ResourceType
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    name: str, op: AclOperation, who: KafkaPrincipal = ALICE, perm: AclPermissionType = ALLOW, **kw: object
) -> AclBinding:
    pattern = ResourcePattern(kw.get("rtype", T.TOPIC), name, kw.get("ptype", LIT))  # type: ignore[arg-type]
    return AclBinding(pattern, AccessControlEntry(who, str(kw.get("host", "*")), op, perm))


def authorizer(*bindings: AclBinding, **kw: object) -> AclAuthorizer:
    auth = AclAuthorizer(**kw)  # type: ignore[arg-type]
    for pattern in {b.pattern for b in bindings}:
        auth.set_acls(pattern, [b.entry for b in bindings if b.pattern == pattern])
    return auth


# (ACLs, principal, operation, resource name, allowed?)
TABLE = [
    ((), ALICE, Op.READ, "t", False),  # no ACLs: denied unless allow.everyone.if.no.acl.found
    ((acl("t", Op.READ),), ALICE, Op.READ, "t", True),
    ((acl("t", Op.READ),), BOB, Op.READ, "t", False),  # an ACL for someone else: no longer "no ACLs"
    ((acl("t", Op.READ),), ALICE, Op.WRITE, "t", False),
    ((acl("t", Op.READ),), ALICE, Op.READ, "u", False),
    # Read, Write, Delete, Alter imply Describe; AlterConfigs implies DescribeConfigs
    *(((acl("t", op),), ALICE, Op.DESCRIBE, "t", True) for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)),
    *(((acl("t", op),), ALICE, Op.DESCRIBE, "t", False) for op in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)),
    ((acl("t", Op.ALTER_CONFIGS),), ALICE, Op.DESCRIBE_CONFIGS, "t", True),
    ((acl("t", Op.DESCRIBE),), ALICE, Op.READ, "t", False),  # nothing implies upwards
    ((acl("t", Op.ALL),), ALICE, Op.CREATE, "t", True),
    ((acl("t", Op.ALL),), ALICE, Op.DESCRIBE_CONFIGS, "t", True),
    # DENY wins, and implies nothing
    ((acl("t", Op.READ), acl("t", Op.READ, perm=DENY)), ALICE, Op.READ, "t", False),
    ((acl("t", Op.ALL), acl("t", Op.WRITE, perm=DENY)), ALICE, Op.READ, "t", True),
    ((acl("t", Op.ALL), acl("t", Op.ALL, perm=DENY)), ALICE, Op.READ, "t", False),
    ((acl("t", Op.READ), acl("t", Op.READ, perm=DENY)), ALICE, Op.DESCRIBE, "t", True),
    ((acl("t", Op.DESCRIBE), acl("t", Op.READ, ANYONE, DENY)), ALICE, Op.READ, "t", False),
    # User:* and host *
    ((acl("t", Op.READ, ANYONE),), BOB, Op.READ, "t", True),
    ((acl("t", Op.READ, host=HOST),), ALICE, Op.READ, "t", True),
    ((acl("t", Op.READ, host="10.0.0.2"),), ALICE, Op.READ, "t", False),
    ((acl("t", Op.READ), acl("t", Op.READ, perm=DENY, host="10.0.0.2")), ALICE, Op.READ, "t", True),
    ((acl("t", Op.READ), acl("t", Op.READ, perm=DENY, host=HOST)), ALICE, Op.READ, "t", False),
    # the literal * resource, and prefixes
    ((acl("*", Op.READ),), ALICE, Op.READ, "anything", True),
    ((acl("*", Op.READ), acl("secret", Op.READ, perm=DENY)), ALICE, Op.READ, "secret", False),
    ((acl("*", Op.READ, perm=DENY), acl("t", Op.READ)), ALICE, Op.READ, "t", False),
    ((acl("or", Op.WRITE, ptype=PRE),), ALICE, Op.WRITE, "orders", True),
    ((acl("or", Op.WRITE, ptype=PRE),), ALICE, Op.WRITE, "o", False),
    ((acl("or", Op.WRITE, ptype=PRE),), ALICE, Op.WRITE, "xorders", False),
    ((acl("orders", Op.WRITE, ptype=PRE),), ALICE, Op.WRITE, "orders", True),
    ((acl("o", Op.WRITE, ptype=PRE), acl("or-x", Op.ALL, perm=DENY, ptype=PRE)), ALICE, Op.WRITE, "or-x1", False),
    ((acl("o", Op.WRITE, ptype=PRE), acl("or-x", Op.ALL, perm=DENY, ptype=PRE)), ALICE, Op.WRITE, "or-1", True),
    ((acl("*", Op.READ, ptype=PRE),), ALICE, Op.READ, "t", False),  # a PREFIXED '*' is a prefix, no wildcard
    ((acl("*", Op.READ, ptype=PRE),), ALICE, Op.READ, "*t", True),
    # another resource type's ACLs are no ACLs on this one
    ((acl("t", Op.READ, rtype=T.GROUP),), ALICE, Op.READ, "t", False),
]


@pytest.mark.parametrize(("bindings", "principal", "operation", "name", "allowed"), TABLE)
def test_decision_table(
    bindings: tuple[AclBinding, ...], principal: KafkaPrincipal, operation: AclOperation, name: str, allowed: bool
) -> None:
    assert authorizer(*bindings).authorize(principal, HOST, operation, T.TOPIC, name) is allowed


def test_super_users_pass_every_deny() -> None:
    auth = authorizer(acl("t", Op.ALL, ALICE, DENY), acl("*", Op.ALL, ANYONE, DENY), super_users=[ALICE])
    assert auth.authorize(ALICE, HOST, Op.DELETE, T.TOPIC, "t")
    assert not auth.authorize(BOB, HOST, Op.DELETE, T.TOPIC, "t")


def test_allow_everyone_if_no_acl_found_only_where_no_acl_covers() -> None:
    auth = authorizer(acl("t", Op.READ, BOB), acl("p-", Op.READ, BOB, ptype=PRE), allow_everyone_if_no_acl_found=True)
    assert auth.authorize(ALICE, HOST, Op.WRITE, T.TOPIC, "u")
    assert auth.authorize(ALICE, HOST, Op.ALTER, T.GROUP, "g")
    assert not auth.authorize(ALICE, HOST, Op.READ, T.TOPIC, "t")  # bob's ACL covers t
    assert not auth.authorize(ALICE, HOST, Op.READ, T.TOPIC, "p-1")


def test_removing_a_patterns_last_acl_removes_it() -> None:
    auth = authorizer(acl("or", Op.READ, ptype=PRE), acl("orders", Op.READ, BOB, ptype=PRE))
    auth.set_acls(ResourcePattern(T.TOPIC, "or", PRE), [])
    assert not auth.authorize(ALICE, HOST, Op.READ, T.TOPIC, "orders")
    assert auth.authorize(BOB, HOST, Op.READ, T.TOPIC, "orders")
    assert list(auth.patterns()) == [ResourcePattern(T.TOPIC, "orders", PRE)]


BY_TYPE = [
    ((), False),
    ((acl("t", Op.WRITE),), True),
    ((acl("t", Op.READ),), False),
    ((acl("t", Op.WRITE), acl("t", Op.WRITE, perm=DENY)), False),
    ((acl("t", Op.WRITE), acl("u", Op.WRITE, perm=DENY)), True),
    ((acl("t", Op.WRITE), acl("t", Op.WRITE, perm=DENY, ptype=PRE)), False),  # a deny prefix covers it
    ((acl("tx", Op.WRITE, ptype=PRE), acl("t", Op.WRITE, perm=DENY)), True),  # a literal deny does not
    ((acl("tx", Op.WRITE, ptype=PRE), acl("t", Op.WRITE, perm=DENY, ptype=PRE)), False),
    ((acl("t", Op.WRITE), acl("*", Op.WRITE, perm=DENY)), False),
    ((acl("*", Op.ALL, ANYONE),), True),
    ((acl("t", Op.WRITE, host="10.9.9.9"),), False),
]


@pytest.mark.parametrize(("bindings", "allowed"), BY_TYPE)
def test_authorize_by_resource_type(bindings: tuple[AclBinding, ...], allowed: bool) -> None:
    assert authorizer(*bindings).authorize_by_resource_type(ALICE, HOST, Op.WRITE, T.TOPIC) is allowed


def test_filters() -> None:
    bindings = [
        acl("orders", Op.READ),
        acl("ord", Op.WRITE, BOB, ptype=PRE),
        acl("*", Op.DESCRIBE, ANYONE),
        acl("g", Op.READ, rtype=T.GROUP),
    ]
    auth = authorizer(*bindings)

    def names(f: AclBindingFilter) -> set[tuple[str, str]]:
        return {(b.pattern.name, b.pattern.pattern_type.name) for b in auth.bindings(f)}

    assert len(auth.bindings()) == 4
    assert names(AclBindingFilter(T.TOPIC, "orders", PatternType.MATCH)) == {
        ("orders", "LITERAL"),
        ("ord", "PREFIXED"),
        ("*", "LITERAL"),
    }
    assert names(AclBindingFilter(T.TOPIC, "orders", PatternType.ANY)) == {("orders", "LITERAL")}
    assert names(AclBindingFilter(T.ANY, None, PRE)) == {("ord", "PREFIXED")}
    assert names(AclBindingFilter(principal="User:bob")) == {("ord", "PREFIXED")}
    assert names(AclBindingFilter(operation=Op.READ)) == {("orders", "LITERAL"), ("g", "LITERAL")}
    with pytest.raises(InvalidRequestError):
        AclBindingFilter(T.UNKNOWN).validate()


@pytest.mark.parametrize(
    "binding",
    [
        acl("", Op.READ),
        acl("t", Op.ANY),
        acl("t", Op.READ, perm=AclPermissionType.ANY),
        acl("t", Op.READ, ptype=PatternType.MATCH),
        acl("other-cluster", Op.ALTER, rtype=T.CLUSTER),
        acl("t", Op.READ, rtype=T.ANY),
    ],
)
def test_invalid_bindings_are_refused(binding: AclBinding) -> None:
    with pytest.raises(InvalidRequestError):
        validate_binding(binding)


def test_names_parse_as_kafka_writes_them() -> None:
    assert AclOperation.parse("IdempotentWrite") == Op.IDEMPOTENT_WRITE
    assert AclOperation.parse("describe-configs") == Op.DESCRIBE_CONFIGS
    assert ResourceType.parse("TransactionalId") == T.TRANSACTIONAL_ID
    assert T.TRANSACTIONAL_ID.title == "TransactionalId" and Op.ALTER_CONFIGS.title == "AlterConfigs"
    assert parse_principal("User:CN=a,O=b:c") == KafkaPrincipal("User", "CN=a,O=b:c")
    with pytest.raises(InvalidRequestError):
        AclOperation.parse("Fly")
    with pytest.raises(InvalidRequestError):
        parse_principal("alice")
