"""``seglog acls``: a broker's ACLs added, listed and removed, as Kafka's ``kafka-acls.sh`` does::

    seglog acls --bootstrap-server H:P --add --allow-principal User:alice [--allow-host H]
                [--deny-principal User:bob [--deny-host H]] [--operation Read ...]
                (--topic T ... | --group G ... | --cluster | --transactional-id ID ...)
                [--resource-pattern-type literal|prefixed]
    seglog acls --bootstrap-server H:P --list [--topic T ...] [--principal User:alice]
                [--resource-pattern-type any|match|literal|prefixed]
    seglog acls --bootstrap-server H:P --remove [--allow-principal ...] [--operation ...]
                (--topic T ... | ...) [--resource-pattern-type ...] [--force]

The output is Kafka's AclCommand's: ``Adding ACLs for resource `ResourcePattern(...)`:``, each
entry on a tab-indented line, then the resource's ACLs as they stand. ``--operation`` defaults
to All; a principal without ``--allow-host``/``--deny-host`` is allowed or denied from every
host; an operation the resource type has no use for is refused (Kafka's
``AclEntry.supportedOperations``). ``--remove`` asks before it removes unless ``--force``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from ..client import ClusterClient, check
from ..errors import SeglogError
from ..protocol import ApiKey
from ..protocol.message_data import (
    CreateAclsRequestData,
    DeleteAclsRequestData,
    DescribeAclsRequestData,
)
from ..security import acl
from . import CLIENT_ID
from .arguments import INT64_MAX, UsageError, add_bootstrap_server, command_security, int_between

ALLOW, DENY = acl.AclPermissionType.ALLOW, acl.AclPermissionType.DENY


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("acls", help="add, list or remove ACLs (kafka-acls.sh)")
    action = p.add_mutually_exclusive_group(required=True)
    for flag, what in (("add", "add the ACLs given"), ("remove", "remove those selected"), ("list", "list them")):
        action.add_argument(f"--{flag}", action="store_true", help=what)
    add_bootstrap_server(p)
    p.add_argument("--timeout-ms", type=int_between(1, INT64_MAX), default=30_000)
    for flag, what in (("allow", "allowed"), ("deny", "denied")):
        p.add_argument(f"--{flag}-principal", action="append", default=[], metavar="TYPE:NAME", help=f"{what}")
        p.add_argument(f"--{flag}-host", action="append", default=[], metavar="HOST", help=f"{what} from (* all)")
    p.add_argument("--operation", action="append", default=[], help="Read, Write, Describe, ... (default All)")
    p.add_argument("--principal", help="--list: only this principal's ACLs")
    p.add_argument("--topic", action="append", default=[], help="a topic (* for all)")
    p.add_argument("--group", action="append", default=[], help="a consumer group (* for all)")
    p.add_argument("--transactional-id", action="append", default=[], help="a transactional id (* for all)")
    p.add_argument("--cluster", action="store_true", help="the cluster")
    p.add_argument(
        "--resource-pattern-type",
        default="literal",
        help="literal or prefixed; to list or remove also any or match (default literal)",
    )
    p.add_argument("--force", action="store_true", help="--remove without asking")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    pattern_type = _parse(acl.PatternType, args.resource_pattern_type, "--resource-pattern-type")
    resources = _resources(args)
    _entries(args)  # a mistyped --operation or principal refused before any broker is asked
    if args.principal:
        _principal(args.principal)
    security = command_security(args)
    with ClusterClient(
        args.bootstrap_server, timeout=args.timeout_ms / 1000, client_id=CLIENT_ID, security=security
    ) as client:
        if args.add:
            _add(client, _bindings(args, resources, pattern_type))
        elif args.remove:
            _remove(client, args, resources, pattern_type)
        else:
            _list(client, args, resources, pattern_type)
    return 0


def _parse(enum: Any, text: str, option: str) -> Any:
    try:
        return enum.parse(text)
    except SeglogError as e:  # a mistake in the command line: say which option
        raise UsageError(f"{option}: {e}") from None


def _resources(args: argparse.Namespace) -> list[tuple[acl.ResourceType, str]]:
    found = [(acl.ResourceType.TOPIC, t) for t in args.topic]
    found += [(acl.ResourceType.GROUP, g) for g in args.group]
    found += [(acl.ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        found.append((acl.ResourceType.CLUSTER, acl.CLUSTER_NAME))
    return found


def _entries(args: argparse.Namespace) -> list[acl.AccessControlEntry]:
    """Every principal with every host of its kind and every operation (Kafka's getAcls)."""
    operations = [_parse(acl.AclOperation, o, "--operation") for o in args.operation] or [acl.AclOperation.ALL]
    entries = []
    for permission, principals, hosts in (
        (ALLOW, args.allow_principal, args.allow_host),
        (DENY, args.deny_principal, args.deny_host),
    ):
        if hosts and not principals:
            raise UsageError(f"--{permission.name.lower()}-host goes with --{permission.name.lower()}-principal")
        for principal in principals:
            parsed = _principal(principal)
            entries += [acl.AccessControlEntry(parsed, h, op, permission) for h in hosts or ["*"] for op in operations]
    return entries


def _principal(text: str) -> Any:
    try:
        return acl.parse_principal(text)
    except SeglogError as e:
        raise UsageError(str(e)) from None


def _bindings(
    args: argparse.Namespace, resources: list[tuple[acl.ResourceType, str]], pattern_type: acl.PatternType
) -> list[acl.AclBinding]:
    if not resources:
        raise UsageError("--add needs a resource: --topic, --group, --transactional-id or --cluster")
    if pattern_type not in (acl.PatternType.LITERAL, acl.PatternType.PREFIXED):
        raise UsageError("--add takes a --resource-pattern-type of literal or prefixed")
    entries = _entries(args)
    if not entries:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    for resource_type, _ in resources:
        for entry in entries:
            # ALL besides each type's own, as kafka-acls.sh (AclCommand.validateOperation)
            supported_ops = acl.SUPPORTED_OPERATIONS[resource_type] | {acl.AclOperation.ALL}
            if entry.operation not in supported_ops:
                supported = ", ".join(sorted(op.title for op in supported_ops))
                kind, asked = resource_type.title, entry.operation.title
                raise UsageError(f"acl.ResourceType {kind} only supports operations {supported}, not {asked}")
    return [acl.AclBinding(acl.ResourcePattern(t, n, pattern_type), e) for t, n in resources for e in entries]


def _add(client: ClusterClient, bindings: list[acl.AclBinding]) -> None:
    for pattern in dict.fromkeys(b.pattern for b in bindings):
        print(f"Adding ACLs for resource `{pattern}`: ")
        _print_entries(b.entry for b in bindings if b.pattern == pattern)
    # the spec's field order: type, name, pattern type, principal, host, operation, permission
    creations = [
        CreateAclsRequestData.AclCreation(*p, str(e.principal), e.host, e.operation, e.permission_type)
        for p, e in bindings
    ]
    answer = client.request(ApiKey.CREATE_ACLS, CreateAclsRequestData(creations=creations))
    for result in answer.results:
        check(result.error_code, "cannot add ACLs", result.error_message)
    _print_current(client, [acl.AclBindingFilter(p.resource_type, p.name, p.pattern_type) for p, _ in bindings])


def _filters(
    resources: list[tuple[acl.ResourceType, str]], pattern_type: acl.PatternType
) -> list[acl.AclBindingFilter]:
    """The filters --list and --remove select with: the resources' (all of them, when none is given)."""
    if not resources:
        return [
            acl.AclBindingFilter(
                pattern_type=acl.PatternType.ANY if pattern_type == acl.PatternType.LITERAL else pattern_type
            )
        ]
    return [acl.AclBindingFilter(t, n, pattern_type) for t, n in resources]


def _list(
    client: ClusterClient,
    args: argparse.Namespace,
    resources: list[tuple[acl.ResourceType, str]],
    pattern: acl.PatternType,
) -> None:
    principal = str(_principal(args.principal)) if args.principal else None
    _print_current(client, [f._replace(principal=principal) for f in _filters(resources, pattern)])


def _remove(
    client: ClusterClient,
    args: argparse.Namespace,
    resources: list[tuple[acl.ResourceType, str]],
    pattern: acl.PatternType,
) -> None:
    if not resources:
        raise UsageError("--remove needs a resource: --topic, --group, --transactional-id or --cluster")
    entries = _entries(args)
    filters = _filters(resources, pattern)
    if entries:  # those entries on each resource; else every ACL of the resources
        filters = [
            f._replace(
                principal=str(e.principal), host=e.host, operation=e.operation, permission_type=e.permission_type
            )
            for f in filters
            for e in entries
        ]
    if not args.force and not _confirmed(filters):
        return
    request = DeleteAclsRequestData(
        filters=[DeleteAclsRequestData.DeleteAclsFilter(**_wire_filter(f)) for f in filters]
    )
    answer = client.request(ApiKey.DELETE_ACLS, request)
    for result in answer.filter_results:
        check(result.error_code, "cannot remove ACLs", result.error_message)
    _print_current(client, _filters(resources, pattern))


def _confirmed(filters: list[acl.AclBindingFilter]) -> bool:
    names = ", ".join(f"{f.resource_type.title}:{f.name}" for f in filters)
    print(f"Are you sure you want to remove ACLs from resource filter `{names}`? (y/n)")
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _wire_filter(f: acl.AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": f.resource_type,
        "resource_name_filter": f.name,
        "pattern_type_filter": f.pattern_type,
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": f.operation,
        "permission_type": f.permission_type,
    }


def described(client: ClusterClient, selected: acl.AclBindingFilter) -> list[acl.AclBinding]:
    """The broker's bindings the filter selects."""
    answer = client.request(ApiKey.DESCRIBE_ACLS, DescribeAclsRequestData(**_wire_filter(selected)))
    check(answer.error_code, "cannot list ACLs", answer.error_message)
    return [
        acl.AclBinding(
            acl.ResourcePattern(acl.ResourceType(r.resource_type), r.resource_name, acl.PatternType(r.pattern_type)),
            acl.AccessControlEntry(
                acl.parse_principal(a.principal),
                a.host,
                acl.AclOperation(a.operation),
                acl.AclPermissionType(a.permission_type),
            ),
        )
        for r in answer.resources
        for a in r.acls
    ]


def _print_current(client: ClusterClient, filters: list[acl.AclBindingFilter]) -> None:
    found: dict[acl.ResourcePattern, list[acl.AccessControlEntry]] = {}
    for selected in dict.fromkeys(filters):
        for pattern, entry in described(client, selected):
            found.setdefault(pattern, []).append(entry)
    for pattern, entries in found.items():
        print(f"Current ACLs for resource `{pattern}`: ")
        _print_entries(entries)


def _print_entries(entries: Iterable[acl.AccessControlEntry]) -> None:
    for entry in dict.fromkeys(entries):
        print(f" \t{entry} ")
    print()
