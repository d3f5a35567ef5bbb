"""``seglog configs --entity-type users|clients|ips``: kafka-configs.sh's client quota forms,
over DescribeClientQuotas and AlterClientQuotas.

    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice
                   [--entity-type clients --entity-name c1 | --entity-default]
                   --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048' | --delete-config K,...
    seglog configs --bootstrap-server H:P --alter --entity-type ips --entity-name 10.0.0.7
                   --add-config connection_creation_rate=10
    seglog configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice | --entity-default]

``--entity-default`` stands for an ``--entity-name`` (the default user, client id or ip); a
``--describe`` without a name lists every entity of that type. The output is kafka-configs.sh's.
What the tool can tell wrong without a broker (an unknown key, a value that is no number or
not one the key takes, an ip that is no address) it refuses before connecting.
"""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple

from ..client import BlockingConnection, check
from ..errors import SeglogError
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterClientQuotasRequestData,
    AlterClientQuotasResponseData,
    DescribeClientQuotasRequestData,
    DescribeClientQuotasResponseData,
)
from ..security.quotas import CLIENT_ID, IP, USER, QuotaEntity, checked_value, ip_entity_name
from ..security.quotas import DEFAULT as DEFAULT_NAME
from .arguments import parse_configs

# kafka-configs.sh's entity types -> the quota entity types of the protocol, and how it prints them
ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID, "ips": IP}
_SHOWN = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types


class QuotaRequest(NamedTuple):
    """What a --describe or --alter asks, checked as far as the tool can without a broker."""

    describe: bool  # else alter
    head: str  # the first --entity-type, as the tool names it (users): its confirmation says it
    types: list[str]  # the protocol's entity types
    names: list[str]  # the names given ("" for --entity-default), in order
    added: dict[str, float]
    deleted: list[str]


def quota_request(args: argparse.Namespace) -> QuotaRequest:
    """The request the arguments make; SystemExit (with kafka-configs.sh's words where it has
    some) for one the tool refuses."""
    types, names = _entities(args)
    request = QuotaRequest(args.describe, args.entity_type[0], types, names, {}, [])
    if args.describe:
        return request
    if len(names) != len(types):
        raise SystemExit(
            "error: --entity-name or --entity-default must be specified with each --entity-type for --alter"
        )
    given = {t: DEFAULT_NAME if n == "" else n for t, n in zip(types, names, strict=True)}
    entity = QuotaEntity(given.get(USER), given.get(CLIENT_ID), given.get(IP))
    added = {k: _value(entity, k, v) for k, v in parse_configs(args.add_config).items()}
    deleted = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    unknown = sorted({k for k in (*added, *deleted) if k not in entity.keys})
    if unknown:
        raise SystemExit(f"error: not quota configs: {', '.join(unknown)} (these are {', '.join(entity.keys)})")
    if not added and not deleted:
        raise SystemExit("error: --alter needs --add-config or --delete-config")
    return request._replace(added=added, deleted=deleted)


def quota_configs(client: BlockingConnection, request: QuotaRequest) -> int:
    types, names = request.types, request.names
    if request.describe:
        for entry in describe(client, types, names):
            values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
            print(f"Quota configs for {_entity_shown(entry.entity)} are {values}")
        return 0
    current = describe(client, types, names)
    set_now = {v.key for v in current[0].values} if current else set()
    missing = [k for k in request.deleted if k not in set_now]
    if missing:  # as kafka-configs.sh: a key to delete must be set
        raise SystemExit(f"error: Invalid config(s): {','.join(missing)}")
    Request = AlterClientQuotasRequestData
    ops = [Request.OpData(key=k, value=v, remove=False) for k, v in request.added.items()]
    ops += [Request.OpData(key=k, value=0.0, remove=True) for k in request.deleted]
    entity = [Request.EntityData(entity_type=t, entity_name=n or None) for t, n in zip(types, names, strict=True)]
    alteration = Request(entries=[Request.EntryData(entity=entity, ops=ops)], validate_only=False)
    answer: AlterClientQuotasResponseData = client.request(ApiKey.ALTER_CLIENT_QUOTAS, alteration)
    (result,) = answer.entries
    check(result.error_code, "cannot alter the quotas", result.error_message)
    if names[0]:
        print(f"Completed updating config for {request.head[:-1]} {names[0]}.")
    else:
        print(f"Completed updating default config for {request.head} in the cluster.")
    return 0


def _entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The protocol's entity types and the names given ("" for --entity-default), in order."""
    kinds: list[str] = args.entity_type
    if any(k not in ENTITY_TYPES for k in kinds) or ("ips" in kinds and len(kinds) > 1):
        raise SystemExit("error: users and clients combine with each other only")
    if len(set(kinds)) != len(kinds):
        raise SystemExit("error: an --entity-type may be given once")
    names: list[str] = args.entity_name or []
    if len(names) > len(kinds):
        raise SystemExit("error: More entity names specified than entity types")
    if kinds[0] == "ips" and names and names[0]:
        try:
            ip_entity_name(names[0])
        except SeglogError:
            raise SystemExit(  # kafka-configs.sh's words
                f"error: The entity name for ips must be a valid IP or resolvable host, but it is: {names[0]}"
            ) from None
    return [ENTITY_TYPES[k] for k in kinds], names


def _value(entity: QuotaEntity, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SystemExit(f"error: Cannot parse quota configuration value for {key}: {text}") from None
    if key not in entity.keys:
        return value  # refused with the other unknown keys
    try:
        return checked_value(entity, key, value)  # the broker's own rule
    except SeglogError as e:
        raise SystemExit(f"error: {e}") from None


def describe(
    client: BlockingConnection, types: list[str], names: list[str]
) -> list[DescribeClientQuotasResponseData.EntryData]:
    """The entities matching exactly these types (a name each, or any), with their quotas."""
    Component = DescribeClientQuotasRequestData.ComponentData
    components = []
    for i, kind in enumerate(types):
        if i >= len(names):
            components.append(Component(entity_type=kind, match_type=SPECIFIED, match=None))
        elif names[i] == "":
            components.append(Component(entity_type=kind, match_type=DEFAULT, match=None))
        else:
            components.append(Component(entity_type=kind, match_type=EXACT, match=names[i]))
    request = DescribeClientQuotasRequestData(components=components, strict=True)
    answer: DescribeClientQuotasResponseData = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    check(answer.error_code, "cannot describe the quotas", answer.error_message)
    return list(answer.entries or [])


def _entity_shown(parts: list[Any]) -> str:
    """As kafka-configs.sh names an entity: ``user-principal 'alice', the default client-id``."""
    order = {USER: 0, CLIENT_ID: 1, IP: 2}
    shown = []
    for part in sorted(parts, key=lambda p: order.get(p.entity_type, 2)):
        kind = _SHOWN.get(part.entity_type, part.entity_type)
        shown.append(f"{kind} '{part.entity_name}'" if part.entity_name is not None else f"the default {kind}")
    return ", ".join(shown)
