"""``seglog consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` against a broker.

    seglog consumer-groups --bootstrap-server H:P --list
    seglog consumer-groups --bootstrap-server H:P --describe --group G
    seglog consumer-groups --bootstrap-server H:P --reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
                           (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:mm:SS.sss | --shift-by N)
                           [--dry-run | --execute]
    seglog consumer-groups --bootstrap-server H:P --delete --group G

Output is the Kafka tool's: ``--describe`` prints GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID, a row per assigned partition (members'
assignments read from the consumer protocol's bytes) and per committed partition no
member holds; ``--reset-offsets`` prints GROUP TOPIC PARTITION NEW-OFFSET and commits
only with ``--execute`` (a dry run is the default, as in Kafka), and only to a group with
no active members. Requests go to the group's coordinator (FindCoordinator).
"""

from __future__ import annotations

import argparse
import struct
import sys
from datetime import datetime

from ..client import BlockingConnection, ClusterClient, check, check_coordinator, topics_by_name
from ..common import TopicPartition
from ..errors import SeglogError
from ..protocol import ApiKey
from ..protocol.enums import CoordinatorType
from ..protocol.message_data import (
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    ListGroupsRequestData,
    ListGroupsResponseData,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
)
from ..storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from . import CLIENT_ID
from .arguments import UsageError, add_bootstrap_server, command_security, int_between
from .remote import list_offsets

MISSING = "-"
CONSUMER_PROTOCOL = "consumer"
INACTIVE_STATES = ("Empty", "Dead")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consumer-groups", help="list, describe, reset or delete consumer groups (a broker's)")
    add_bootstrap_server(p)
    p.add_argument("--timeout-ms", type=int_between(1, 2**31 - 1), default=30_000, help="how long to wait for it")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="the consumer groups")
    action.add_argument("--describe", action="store_true", help="a group's partitions, offsets, lag and members")
    action.add_argument("--reset-offsets", action="store_true", help="a group's committed offsets, set anew")
    action.add_argument("--delete", action="store_true", help="a group with no active members, and its offsets")
    p.add_argument("--group", help="the consumer group")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,...]", help="--reset-offsets: a topic's partitions")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic the group committed")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="the log start offsets")
    to.add_argument("--to-latest", action="store_true", help="the log end offsets")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="the first offsets at or after a time")
    to.add_argument("--shift-by", type=int_between(-(2**63), 2**63 - 1), metavar="N", help="the committed ones + N")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="--reset-offsets: print, commit nothing (default)")
    run_mode.add_argument("--execute", action="store_true", help="--reset-offsets: commit the new offsets")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_arguments(args)
    with ClusterClient(
        args.bootstrap_server, timeout=args.timeout_ms / 1000, client_id=CLIENT_ID, security=command_security(args)
    ) as client:
        # as Kafka's admin client: a coordinator loading or moving is waited for, to --timeout-ms
        return client.retrying(lambda: _run_once(client, args))


def _run_once(client: ClusterClient, args: argparse.Namespace) -> int:
    """The command, once: its output is printed only when every request has succeeded."""
    if args.list:
        return _list(client)
    _, coordinator = client.coordinator(args.group, CoordinatorType.GROUP)
    if args.describe:
        return _describe(client, coordinator, args.group)
    if args.delete:
        return _delete(coordinator, args.group)
    return _reset(client, coordinator, args)


def _check_arguments(args: argparse.Namespace) -> None:
    if not args.list and not args.group:
        raise UsageError("--group is required with --describe, --reset-offsets and --delete")
    scenario = args.to_earliest or args.to_latest or args.to_datetime is not None or args.shift_by is not None
    if args.reset_offsets:
        if not scenario:
            raise UsageError("--reset-offsets needs one of --to-earliest, --to-latest, --to-datetime, --shift-by")
        if not args.topic and not args.all_topics:
            raise UsageError("--reset-offsets needs --topic or --all-topics")
        if args.to_datetime is not None:
            args.timestamp = _datetime_ms(args.to_datetime)
    elif scenario or args.topic or args.all_topics or args.execute or args.dry_run:
        raise UsageError("--topic, --all-topics, --to-*, --shift-by, --dry-run and --execute go with --reset-offsets")


def _datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: an ISO date and time, local unless it names its zone."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--to-datetime takes YYYY-MM-DDTHH:mm:SS.sss, not {text!r}") from None
    return int(moment.astimezone().timestamp() * 1000)


# --- the coordinator's answers ---------------------------------------------------------------------------------


def describe_group(coordinator: BlockingConnection, group: str) -> DescribeGroupsResponseData.DescribedGroup:
    request = DescribeGroupsRequestData(groups=[group], include_authorized_operations=False)
    answer: DescribeGroupsResponseData = coordinator.request(ApiKey.DESCRIBE_GROUPS, request)
    described = answer.groups[0]
    check_coordinator(described.error_code, f"cannot describe group {group}")
    if described.protocol_type not in (CONSUMER_PROTOCOL, ""):  # Kafka's admin client refuses these too
        raise SeglogError(f"{group} is not a consumer group (protocol type {described.protocol_type})")
    return described


def committed_offsets(coordinator: BlockingConnection, group: str) -> dict[TopicPartition, int]:
    # every topic's offsets (topics None) of one group, in the fields of before and after version 8
    # (KIP-709: groups batched)
    request = OffsetFetchRequestData(
        group_id=group,
        topics=None,
        groups=[OffsetFetchRequestData.OffsetFetchRequestGroup(group_id=group, topics=None)],
        require_stable=False,
    )
    answer: OffsetFetchResponseData = coordinator.request(ApiKey.OFFSET_FETCH, request)
    found: OffsetFetchResponseData | OffsetFetchResponseData.OffsetFetchResponseGroup = (
        answer.groups[0] if answer.groups else answer
    )
    check_coordinator(found.error_code, f"cannot fetch the offsets of group {group}")
    out = {}
    for topic in found.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            check_coordinator(p.error_code, f"cannot fetch the offset of {tp}")
            if p.committed_offset >= 0:
                out[tp] = p.committed_offset
    return out


def log_offsets(client: ClusterClient, partitions: list[TopicPartition], time: int) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    return {TopicPartition(t, p): o for t, ps in by_topic.items() for p, o in list_offsets(client, t, ps, time)}


def assigned_partitions(assignment: bytes) -> list[TopicPartition]:
    """The partitions of a consumer protocol Assignment (int16 version, then [topic string,
    [partition int32]]; what follows, user data, is not needed); [] when it does not parse."""
    try:
        (count,) = struct.unpack_from(">i", assignment, 2)
        pos, out = 6, []
        for _ in range(max(count, 0)):
            (size,) = struct.unpack_from(">h", assignment, pos)
            topic = assignment[pos + 2 : pos + 2 + size].decode("utf-8")
            pos += 2 + size
            (n,) = struct.unpack_from(">i", assignment, pos)
            out += [TopicPartition(topic, p) for p in struct.unpack_from(f">{max(n, 0)}i", assignment, pos + 4)]
            pos += 4 + 4 * max(n, 0)
        return out
    except (struct.error, UnicodeDecodeError):
        return []


# --- --list, --describe, --delete -------------------------------------------------------------------


def consumer_groups(client: ClusterClient) -> list[str]:
    """Every broker's consumer groups (each lists those it coordinates), as Kafka's admin client
    asks them, sorted."""
    groups = []
    for node in client.node_ids():
        request = ListGroupsRequestData(states_filter=[], types_filter=[])
        answer: ListGroupsResponseData = client.broker(node).request(ApiKey.LIST_GROUPS, request)
        check_coordinator(answer.error_code, f"cannot list the groups of broker {node}")
        groups += [g.group_id for g in answer.groups if g.protocol_type in (CONSUMER_PROTOCOL, "")]
    return sorted(set(groups))


def _list(client: ClusterClient) -> int:
    for group in consumer_groups(client):
        print(group)
    return 0


def _describe(client: ClusterClient, coordinator: BlockingConnection, group: str) -> int:
    described = describe_group(coordinator, group)
    state = described.group_state
    committed = committed_offsets(coordinator, group)
    if state == "Dead":
        raise SeglogError(f"Consumer group '{group}' does not exist.")
    members = [(m, assigned_partitions(bytes(m.member_assignment))) for m in described.members]
    members.sort(key=lambda m: -len(m[1]))
    held = {tp for _, tps in members for tp in tps}
    partitions = sorted(held | set(committed))
    ends = log_offsets(client, partitions, LATEST_TIMESTAMP) if partitions else {}
    rows = []
    for member, tps in members:
        who = (member.member_id, member.client_host, member.client_id)
        rows += [_row(group, tp, committed.get(tp), ends.get(tp), who) for tp in sorted(tps)]
        if not tps:
            rows.append((group, MISSING, MISSING, MISSING, MISSING, MISSING, *who))
    rows += [_row(group, tp, committed[tp], ends.get(tp), None) for tp in sorted(set(committed) - held)]
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state != "Stable":
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    if not rows:
        return 0
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    widths = [max(15, *(len(r[i]) for r in rows)) if i in (0, 1, 6, 7) else 0 for i in range(9)]
    fixed = {2: 10, 3: 15, 4: 15, 5: 15}
    for line in (header, *rows):
        cells = [c.ljust(fixed.get(i, widths[i])) for i, c in enumerate(line[:-1])]
        print("\n" + " ".join([*cells, line[-1]]), end="")
    print()
    return 0


def _row(
    group: str, tp: TopicPartition, committed: int | None, end: int | None, who: tuple[str, str, str] | None
) -> tuple[str, ...]:
    lag = MISSING if committed is None or end is None else str(max(end - committed, 0))
    current = MISSING if committed is None else str(committed)
    return (
        group,
        tp.topic,
        str(tp.partition),
        current,
        MISSING if end is None else str(end),
        lag,
        *(who or (MISSING,) * 3),
    )


def _delete(coordinator: BlockingConnection, group: str) -> int:
    answer: DeleteGroupsResponseData = coordinator.request(
        ApiKey.DELETE_GROUPS, DeleteGroupsRequestData(groups_names=[group])
    )
    check_coordinator(answer.results[0].error_code, f"cannot delete group {group}")
    print(f"Deletion of requested consumer groups ('{group}') was successful.")
    return 0


# --- --reset-offsets ----------------------------------------------------------------------------------


def _reset(client: ClusterClient, coordinator: BlockingConnection, args: argparse.Namespace) -> int:
    group = args.group
    state = describe_group(coordinator, group).group_state
    if state not in INACTIVE_STATES:
        raise SeglogError(
            f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        )
    committed = committed_offsets(coordinator, group)
    partitions = _partitions_to_reset(client, args, committed)
    new = _new_offsets(client, args, partitions, committed)
    if args.execute:
        commit_offsets(coordinator, group, new)
    for line in (("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), *((group, t, p, o) for (t, p), o in new.items())):
        print("\n{:<30} {:<30} {:<10} {:<15}".format(*map(str, line)), end="")
    print()
    return 0


def _partitions_to_reset(
    client: ClusterClient, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    wanted: list[TopicPartition] = []
    for item in args.topic:
        topic, _, listed = item.partition(":")
        if listed:
            try:
                wanted += [TopicPartition(topic, int(p)) for p in listed.split(",")]
            except ValueError:
                raise UsageError(f"--topic takes TOPIC or TOPIC:0,1,2, not {item!r}") from None
            continue
        found = topics_by_name(client.metadata([topic]))[topic]
        check(found.error_code, f"topic {topic}")
        wanted += [TopicPartition(topic, p) for p in sorted(p.partition_index for p in found.partitions)]
    return wanted


def _new_offsets(
    client: ClusterClient,
    args: argparse.Namespace,
    partitions: list[TopicPartition],
    committed: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    earliest = log_offsets(client, partitions, EARLIEST_TIMESTAMP)
    latest = log_offsets(client, partitions, LATEST_TIMESTAMP)
    if args.to_earliest:
        return {tp: earliest[tp] for tp in partitions}
    if args.to_latest:
        return {tp: latest[tp] for tp in partitions}
    if args.to_datetime is not None:
        found = log_offsets(client, partitions, args.timestamp)
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in partitions}
    out = {}
    for tp in partitions:
        if tp not in committed:
            raise SeglogError(f"Cannot shift offset for partition {tp} since there is no current committed offset")
        out[tp] = min(max(committed[tp] + args.shift_by, earliest[tp]), latest[tp])
    return out


def commit_offsets(coordinator: BlockingConnection, group: str, offsets: dict[TopicPartition, int]) -> None:
    """An admin's commit of a group's offsets (the web console's reset too)."""
    by_topic: dict[str, list[OffsetCommitRequestData.OffsetCommitRequestPartition]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            OffsetCommitRequestData.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""
            )
        )
    # an admin's commit, as Kafka's: no generation, no member (the group has no active members)
    request = OffsetCommitRequestData(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[OffsetCommitRequestData.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    answer: OffsetCommitResponseData = coordinator.request(ApiKey.OFFSET_COMMIT, request)
    for topic in answer.topics:
        for p in topic.partitions:
            check_coordinator(p.error_code, f"cannot commit the offset of {topic.name}-{p.partition_index}")
