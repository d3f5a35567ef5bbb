"""``seglog configs --entity-type users|clients``: kafka-configs.sh's client quota forms, over
DescribeClientQuotas and AlterClientQuotas.

    seglog configs --bootstrap-server H:P --alter --entity-type users --entity-name alice
                   [--entity-type clients --entity-name c1 | --entity-default]
                   --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048' | --delete-config K,...
    seglog configs --bootstrap-server H:P --describe --entity-type users [--entity-name alice | --entity-default]

``--entity-default`` stands for an ``--entity-name`` (the default user or client id); a
``--describe`` without a name lists every entity of that type. The output is kafka-configs.sh's.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..broker.quotas import CLIENT_ID, QUOTA_KEYS, USER
from ..client import BlockingConnection, check
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterClientQuotasRequestData,
    AlterClientQuotasResponseData,
    DescribeClientQuotasRequestData,
    DescribeClientQuotasResponseData,
)
from .arguments import parse_configs

# kafka-configs.sh's entity types -> the quota entity types of the protocol, and how it prints them
ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_SHOWN = {USER: "user-principal", CLIENT_ID: "client-id"}
EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types


def quota_configs(client: BlockingConnection, args: argparse.Namespace) -> int:
    types, names = _entities(args)
    if args.describe:
        for entry in describe(client, types, names):
            values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
            print(f"Quota configs for {_entity_shown(entry.entity)} are {values}")
        return 0
    if len(names) != len(types):
        raise SystemExit(
            "error: --entity-name or --entity-default must be specified with each --entity-type for --alter"
        )
    added = {k: _value(k, v) for k, v in parse_configs(args.add_config).items()}
    deleted = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    unknown = sorted({k for k in (*added, *deleted) if k not in QUOTA_KEYS})
    if unknown:
        raise SystemExit(f"error: not quota configs: {', '.join(unknown)} (these are {', '.join(QUOTA_KEYS)})")
    if not added and not deleted:
        raise SystemExit("error: --alter needs --add-config or --delete-config")
    current = describe(client, types, names)
    set_now = {v.key for v in current[0].values} if current else set()
    missing = [k for k in deleted if k not in set_now]
    if missing:  # as kafka-configs.sh: a key to delete must be set
        raise SystemExit(f"error: Invalid config(s): {','.join(missing)}")
    Request = AlterClientQuotasRequestData
    ops = [Request.OpData(key=k, value=v, remove=False) for k, v in added.items()]
    ops += [Request.OpData(key=k, value=0.0, remove=True) for k in deleted]
    entity = [Request.EntityData(entity_type=t, entity_name=n or None) for t, n in zip(types, names, strict=True)]
    request = Request(entries=[Request.EntryData(entity=entity, ops=ops)], validate_only=False)
    answer: AlterClientQuotasResponseData = client.request(ApiKey.ALTER_CLIENT_QUOTAS, request)
    (result,) = answer.entries
    check(result.error_code, "cannot alter the quotas", result.error_message)
    head_type, head_name = args.entity_type[0], names[0]
    if head_name:
        print(f"Completed updating config for {head_type[:-1]} {head_name}.")
    else:
        print(f"Completed updating default config for {head_type} in the cluster.")
    return 0


def _entities(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The protocol's entity types and the names given ("" for --entity-default), in order."""
    kinds: list[str] = args.entity_type
    if any(k not in ENTITY_TYPES for k in kinds):
        raise SystemExit("error: users and clients combine with each other only")
    if len(set(kinds)) != len(kinds):
        raise SystemExit("error: an --entity-type may be given once")
    names: list[str] = args.entity_name or []
    if len(names) > len(kinds):
        raise SystemExit("error: More entity names specified than entity types")
    return [ENTITY_TYPES[k] for k in kinds], names


def _value(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"error: Cannot parse quota configuration value for {key}: {text}") from None


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
    order = {USER: 0, CLIENT_ID: 1}
    shown = []
    for part in sorted(parts, key=lambda p: order.get(p.entity_type, 2)):
        kind = _SHOWN.get(part.entity_type, part.entity_type)
        shown.append(f"{kind} '{part.entity_name}'" if part.entity_name is not None else f"the default {kind}")
    return ", ".join(shown)
