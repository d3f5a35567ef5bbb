"""``seglog leader-election``: Kafka's ``kafka-leader-election`` (``LeaderElectionCommand``).

    seglog leader-election --bootstrap-server H:P --election-type preferred|unclean
        (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)

ElectLeaders goes to the controller; the output is Kafka's: the partitions elected, those whose
leader was already the one to choose, and one line per partition that could not be elected (then
the command fails).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..client import check
from ..common import TopicPartition
from ..errors import ErrorCode, SeglogError, error_name
from ..protocol import ApiKey
from ..protocol.message_data import ElectLeadersRequestData, ElectLeadersResponseData
from .arguments import UsageError, add_bootstrap_server, command_security, int_between, partition_id
from .controller_client import connect_to_controller

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("leader-election", help="elect preferred or unclean leaders (a cluster's controller)")
    add_bootstrap_server(p, "a broker of the cluster")
    p.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=sorted(ELECTION_TYPES),
        metavar="preferred|unclean",
        help="the preferred replica, or the first live one when no in-sync replica is",
    )
    p.add_argument("--topic", help="the topic of the partition to elect for (with --partition)")
    p.add_argument("--partition", type=partition_id, help="the partition to elect for (with --topic)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="F", help='{"partitions": [{"topic": T, "partition": P}, ...]}')
    p.add_argument("--timeout-ms", type=int_between(1, 2**31 - 1), default=30_000, help="how long to wait")
    p.set_defaults(run=run)


def _partitions(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions asked for; None for all of them."""
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise UsageError(
            "One and only one of the following options is required: --topic, --all-topic-partitions, "
            "--path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise UsageError("Missing required option(s): --partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option --partition is only allowed if --topic is used")
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [TopicPartition(args.topic, args.partition)]
    return read_partitions_json(Path(args.path_to_json_file))


def read_partitions_json(path: Path) -> list[TopicPartition]:
    """Kafka's election JSON file: the partitions, each once."""
    try:
        data = json.loads(path.read_text())
        found = [TopicPartition(str(p["topic"]), int(p["partition"])) for p in data["partitions"]]
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path} is not a partitions JSON file ({e.__class__.__name__}: {e})") from None
    duplicates = sorted({str(tp) for tp in found if found.count(tp) > 1})
    if duplicates:
        raise UsageError(f"Replica election data contains duplicate partitions: {','.join(duplicates)}")
    return found


def run(args: argparse.Namespace) -> int:
    partitions = _partitions(args)
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        topics.setdefault(topic, []).append(partition)
    request = ElectLeadersRequestData(
        election_type=ELECTION_TYPES[args.election_type],
        topic_partitions=None
        if partitions is None
        else [ElectLeadersRequestData.TopicPartitions(topic=t, partitions=ps) for t, ps in topics.items()],
        timeout_ms=args.timeout_ms,
    )
    with connect_to_controller(args.bootstrap_server, args.timeout_ms / 1000, command_security(args)) as client:
        response: ElectLeadersResponseData = client.request(ApiKey.ELECT_LEADERS, request)
    check(response.error_code, "leader election refused")
    succeeded, noop, failed = [], [], []
    for elected in response.replica_election_results:
        for r in elected.partition_result:
            name = f"{elected.topic}-{r.partition_id}"
            if r.error_code == ErrorCode.NONE:
                succeeded.append(name)
            elif r.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                failed.append((name, r.error_message or error_name(r.error_code)))
    if succeeded:
        print(f"Successfully completed leader election ({args.election_type}) for partitions {', '.join(succeeded)}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(noop)}")
    for name, message in failed:
        print(f"Error completing leader election ({args.election_type}) for partition: {name}: {message}")
    if failed:
        raise SeglogError(f"{len(failed)} replica(s) could not be elected")
    return 0
