"""``seglog reassign-partitions``: Kafka's ``kafka-reassign-partitions`` (``ReassignPartitionsCommand``),
partition moves only (no log dir moves, no throttles).

    seglog reassign-partitions --bootstrap-server H:P --generate --topics-to-move-json-file F --broker-list 2,3,4
    seglog reassign-partitions --bootstrap-server H:P --execute --reassignment-json-file F
    seglog reassign-partitions --bootstrap-server H:P --verify --reassignment-json-file F
    seglog reassign-partitions --bootstrap-server H:P --cancel --reassignment-json-file F
    seglog reassign-partitions --bootstrap-server H:P --list

Kafka's JSON formats: ``{"version":1,"topics":[{"topic":T}]}`` to move, and
``{"version":1,"partitions":[{"topic":T,"partition":P,"replicas":[...],"log_dirs":[...]}]}`` for a
reassignment (``--generate`` prints the current one and a proposal; ``--execute`` prints the
current one to roll back with). The requests are KIP-455's, sent to the controller.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..client import BlockingConnection, check, connect, metadata, topics_by_name
from ..cluster.assignment import BrokerMetadata, assign_replicas_to_brokers
from ..common import TopicPartition
from ..errors import SeglogError, error_for, error_name
from ..protocol import ApiKey
from ..protocol.message_data import (
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
    MetadataResponseData,
)
from . import CLIENT_ID
from .arguments import UsageError, add_bootstrap_server, command_security, int_between
from .controller_client import connect_to_controller

Ongoing = ListPartitionReassignmentsResponseData.OngoingPartitionReassignment
ACTIONS = ("generate", "execute", "verify", "list", "cancel")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reassign-partitions", help="move partitions' replicas between brokers (a cluster's)")
    add_bootstrap_server(p, "a broker of the cluster")
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true", help=f"{action} (Kafka's action of that name)")
    p.add_argument("--topics-to-move-json-file", metavar="F", help='--generate: {"version":1,"topics":[...]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="--generate: the brokers to place replicas on")
    p.add_argument("--reassignment-json-file", metavar="F", help="--execute, --verify, --cancel: the reassignment")
    p.add_argument("--timeout-ms", type=int_between(1, 2**31 - 1), default=30_000, help="how long to wait")
    p.set_defaults(run=run)


def _check_arguments(args: argparse.Namespace) -> str:
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in ACTIONS)}")
    action = actions[0]
    needs = {
        "generate": ("topics_to_move_json_file", "broker_list"),
        "execute": ("reassignment_json_file",),
        "verify": ("reassignment_json_file",),
        "cancel": ("reassignment_json_file",),
        "list": (),
    }[action]
    for name in needs:
        if getattr(args, name) is None:
            raise UsageError(f'Missing required argument "[{name.replace("_", "-")}]"')
    for name in ("topics_to_move_json_file", "broker_list", "reassignment_json_file"):
        if name not in needs and getattr(args, name) is not None:
            raise UsageError(f'Option "[{name.replace("_", "-")}]" can\'t be used with action "[{action}]"')
    return action


def run(args: argparse.Namespace) -> int:
    action = _check_arguments(args)
    timeout = args.timeout_ms / 1000
    if action == "generate":
        topics = read_topics_to_move(Path(args.topics_to_move_json_file))
        brokers = parse_broker_list(args.broker_list)
        with connect(
            args.bootstrap_server, client_id=CLIENT_ID, timeout=timeout, security=command_security(args)
        ) as client:
            answer = metadata(client, topics)
        current, proposed = generate(answer, topics, brokers)
        print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
        print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
        return 0
    targets = None if action == "list" else read_reassignment(Path(args.reassignment_json_file))
    with connect_to_controller(args.bootstrap_server, timeout, command_security(args)) as controller:
        if action == "list":
            print(_ongoing_text(list_reassignments(controller, None)))
        elif action == "execute":
            assert targets is not None
            _execute(controller, targets, args.timeout_ms)
        elif action == "verify":
            assert targets is not None
            return _verify(controller, targets)
        else:
            assert targets is not None
            _cancel(controller, targets, args.timeout_ms)
    return 0


# --- the JSON files ---------------------------------------------------------------------------------


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise UsageError(f"{path} is not JSON: {e}") from None


def read_topics_to_move(path: Path) -> list[str]:
    data = _load(path)
    try:
        topics = [str(t["topic"]) for t in data["topics"]]
    except (KeyError, TypeError) as e:
        raise UsageError(f'{path}: expected {{"version":1,"topics":[{{"topic":...}}]}} ({e!r})') from None
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise UsageError(f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise UsageError(f"--broker-list {text!r} is not a comma-separated list of broker ids") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise UsageError(f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}")
    return brokers


def read_reassignment(path: Path) -> dict[TopicPartition, list[int]]:
    data = _load(path)
    try:
        if data.get("version", 1) != 1:
            raise UsageError(f"{path}: unsupported version {data['version']} (1 is)")
        entries = [(str(p["topic"]), int(p["partition"]), [int(r) for r in p["replicas"]]) for p in data["partitions"]]
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{path}: not a partition reassignment JSON file ({e!r})") from None
    if not entries:
        raise UsageError(f"{path}: Partition reassignment list cannot be empty")
    targets: dict[TopicPartition, list[int]] = {}
    for topic, partition, replicas in entries:
        if (topic, partition) in targets:
            raise UsageError(f"{path} contains multiple entries for {topic}-{partition}")
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"Partition replica lists may not contain duplicate entries: {topic}-{partition}")
        targets[TopicPartition(topic, partition)] = replicas
    return targets


def reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


# --- the actions ------------------------------------------------------------------------------------


def _current_assignment(answer: MetadataResponseData) -> dict[TopicPartition, list[int]]:
    return {
        TopicPartition(name, p.partition_index): list(p.replica_nodes)
        for name, t in topics_by_name(answer).items()
        if not t.error_code
        for p in t.partitions
    }


def generate(
    answer: MetadataResponseData, topics: list[str], brokers: list[int]
) -> tuple[dict[TopicPartition, list[int]], dict[TopicPartition, tuple[int, ...]]]:
    """The current assignment of ``topics`` (``answer``: their Metadata) and Kafka's proposal over ``brokers``."""
    racks = {b.node_id: b.rack for b in answer.brokers}
    unknown = sorted(set(brokers) - set(racks))
    if unknown:
        raise SeglogError(f"Unknown broker id {unknown[0]}")
    for t in answer.topics:
        if t.error_code:
            raise error_for(t.error_code, f"Topic {t.name} not found ({error_name(t.error_code)})")
    current = _current_assignment(answer)
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in topics:
        parts = sorted(p for t, p in current if t == topic)
        factor = len(current[TopicPartition(topic, parts[0])])
        chosen = [BrokerMetadata(b, racks[b]) for b in brokers]
        for p, replicas in assign_replicas_to_brokers(chosen, len(parts), factor).items():
            proposed[TopicPartition(topic, p)] = replicas
    return current, proposed


def list_reassignments(
    controller: BlockingConnection, partitions: Sequence[TopicPartition] | None
) -> dict[TopicPartition, Ongoing]:
    topics: dict[str, list[int]] = {}
    for t, p in partitions or ():
        topics.setdefault(t, []).append(p)
    Topic = ListPartitionReassignmentsRequestData.ListPartitionReassignmentsTopics
    request = ListPartitionReassignmentsRequestData(
        timeout_ms=30_000,
        topics=None if partitions is None else [Topic(name=t, partition_indexes=ps) for t, ps in topics.items()],
    )
    response: ListPartitionReassignmentsResponseData = controller.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, request)
    check(response.error_code, "cannot list reassignments", response.error_message)
    return {TopicPartition(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def _ongoing_text(ongoing: Mapping[TopicPartition, Ongoing]) -> str:
    if not ongoing:
        return "No partition reassignments found."
    lines = []
    for tp, r in sorted(ongoing.items()):
        adding = f" adding: {','.join(map(str, r.adding_replicas))}." if r.adding_replicas else ""
        removing = f" removing: {','.join(map(str, r.removing_replicas))}." if r.removing_replicas else ""
        lines.append(f"{tp}: replicas: {','.join(map(str, r.replicas))}.{adding}{removing}")
    return "Current partition reassignments:\n" + "\n".join(lines)


def _alter(
    controller: BlockingConnection, targets: Mapping[TopicPartition, Sequence[int] | None], timeout_ms: int
) -> dict[TopicPartition, str]:
    """AlterPartitionReassignments; the partitions refused, with why."""
    Request = AlterPartitionReassignmentsRequestData
    topics: dict[str, list[AlterPartitionReassignmentsRequestData.ReassignablePartition]] = {}
    for (t, p), replicas in sorted(targets.items()):
        # no replicas: the partition's reassignment cancelled (KIP-455)
        topics.setdefault(t, []).append(
            Request.ReassignablePartition(partition_index=p, replicas=None if replicas is None else list(replicas))
        )
    request = Request(
        timeout_ms=timeout_ms, topics=[Request.ReassignableTopic(name=t, partitions=ps) for t, ps in topics.items()]
    )
    response: AlterPartitionReassignmentsResponseData = controller.request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, request
    )
    check(response.error_code, "reassignment refused", response.error_message)
    return {
        TopicPartition(t.name, p.partition_index): p.error_message or error_name(p.error_code)
        for t in response.responses
        for p in t.partitions
        if p.error_code
    }


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions))


def _execute(controller: BlockingConnection, targets: Mapping[TopicPartition, list[int]], timeout_ms: int) -> None:
    if list_reassignments(controller, None):
        raise SeglogError(
            "Cannot execute because there is an existing partition assignment.  Use --additional to override "
            "this and create a new partition assignment in addition to the existing one. The --additional "
            "flag can also be used to change the throttle by resubmitting the current reassignment."
        )
    answer = metadata(controller, sorted({t for t, _ in targets}))
    known = {b.node_id for b in answer.brokers}
    unknown = sorted({r for replicas in targets.values() for r in replicas} - known)
    if unknown:
        raise SeglogError(f"Unknown broker id {unknown[0]}")
    current = _current_assignment(answer)
    print("Current partition replica assignment\n")
    print(reassignment_json({tp: r for tp, r in current.items() if tp in targets}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    errors = _alter(controller, targets, timeout_ms)
    if errors:
        lines = "\n".join(f"{t}-{p}: {why}" for (t, p), why in sorted(errors.items()))
        raise SeglogError(f"Error reassigning partition(s):\n{lines}")
    plural = "" if len(targets) == 1 else "s"
    print(f"Successfully started partition reassignment{plural} for {_names(list(targets))}")


def _verify(controller: BlockingConnection, targets: Mapping[TopicPartition, list[int]]) -> int:
    """Kafka's ``verifyPartitionAssignments``: a partition is still in progress while a
    reassignment of it is listed; once none is, it is completed when its replicas (Metadata's)
    are the target's, else its replica set is told. The exit code is 0 whatever the states, as
    Kafka's tool's (1 only when the command fails): the output says which they are."""
    ongoing = list_reassignments(controller, None)
    done = sorted({tp.topic for tp in targets if tp not in ongoing})
    current = _current_assignment(metadata(controller, done)) if done else {}
    print("Status of partition reassignment:")
    for tp, target in sorted(targets.items()):
        if tp in ongoing:
            print(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp) == target:
            print(f"Reassignment of partition {tp} is completed.")
        else:
            now = ",".join(map(str, current.get(tp, [])))
            print(
                f"There is no active reassignment of partition {tp}, but replica set is {now} rather than "
                f"{','.join(map(str, target))}."
            )
    return 0


def _cancel(controller: BlockingConnection, targets: Mapping[TopicPartition, list[int]], timeout_ms: int) -> None:
    ongoing = list_reassignments(controller, list(targets))
    if not ongoing:
        print("None of the specified partition reassignments are active.")
        return
    errors = _alter(controller, dict.fromkeys(ongoing), timeout_ms)
    if errors:
        plural = "" if len(errors) == 1 else "s"
        lines = "\n".join(f"{t}-{p}: {why}" for (t, p), why in sorted(errors.items()))
        raise SeglogError(f"Error cancelling partition reassignment{plural} for:\n{lines}")
    plural = "" if len(ongoing) == 1 else "s"
    print(f"Successfully cancelled partition reassignment{plural} for: {_names(list(ongoing))}")
