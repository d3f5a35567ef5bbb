"""The ``--bootstrap-server`` forms of the command line: the same commands against a
running broker (``seglog broker`` or Kafka), through ``BlockingConnection``.

    seglog topics       --bootstrap-server H:P --create --topic T [--partitions N] [--replication-factor R]
                        [--config k=v] | --list | --describe [--topic T] | --delete --topic T
                        | --alter --topic T --partitions N
    seglog produce      --bootstrap-server H:P --topic T [--partition P] [--key-separator S] [--acks A]
    seglog consume      --bootstrap-server H:P --topic T [--partition P] [--offset N | --from-beginning
                        | --timestamp MS] [--max-messages N] [--json]
    seglog get-offsets  --bootstrap-server H:P --topic T [--partitions 0,1] [--time earliest|latest|...]
    seglog delete-records --bootstrap-server H:P --offset-json-file F
    seglog configs      --bootstrap-server H:P --entity-type topics|brokers --entity-name N
                        --describe | --alter [--add-config k=v,...] [--delete-config k,...]

Output follows Kafka's tools (kafka-topics.sh, kafka-console-producer/consumer.sh,
kafka-get-offsets.sh, kafka-delete-records.sh, kafka-configs.sh). ``cli.py`` sends a
command here when ``--bootstrap-server`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

from ..client import BlockingConnection
from ..errors import ErrorCode, error_for
from ..partitioner import partition_for_key
from ..protocol import ApiKey
from ..records import BatchIterator, Compression, Record
from ..records.batch import build_batch
from .arguments import CommandParser, parse_configs, partition_list
from .cluster_client import ClusterClient, TopicPartition
from .controller_client import cluster_metadata
from .logdir import record_json

REMOTE_COMMANDS = ("topics", "produce", "consume", "get-offsets", "delete-records", "configs")
_NO_ID = uuid.UUID(int=0)  # a topic asked by name
_TIMES = {"earliest": -2, "latest": -1, "max-timestamp": -3}
ANSWER_MARGIN_S = 5.0  # past a request's own timeout_ms, for the broker's answer to arrive
_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}


def _check(code: int, message: str | None, what: str) -> None:
    if code:
        raise error_for(code, message, what)


def wants_broker(argv: list[str]) -> bool:
    """Whether a command line is one of these forms (a command named here with --bootstrap-server)."""
    command = next((a for a in argv if not a.startswith("-")), None)
    return command in REMOTE_COMMANDS and any(a.split("=")[0] == "--bootstrap-server" for a in argv)


def build_parser(prog: str = "seglog") -> argparse.ArgumentParser:
    parser = CommandParser(prog=prog, description="Commands against a running broker.")
    parser.add_argument("--verbose", "-v", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_topics_parser, _produce_parser, _consume_parser, _offsets_parser, add_delete_records, add_configs):
        add(sub)
    return parser


def _with_server(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker to talk to")
    p.add_argument("--timeout-ms", type=int, default=30_000, help="how long to wait for the broker")


# --- topics ----------------------------------------------------------------------------------------


def _topics_parser(sub: Any) -> None:
    p = sub.add_parser("topics", help="create, list, describe, alter or delete topics")
    _with_server(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--under-replicated-partitions", action="store_true", help="--describe: ISR smaller than replicas")
    p.add_argument("--unavailable-partitions", action="store_true", help="--describe: partitions without a leader")
    p.set_defaults(run=topics)


def topics(args: argparse.Namespace) -> int:
    if (args.create or args.alter or args.delete) and not args.topic:
        raise SystemExit("error: --topic is required with --create, --alter and --delete")
    if (args.under_replicated_partitions or args.unavailable_partitions) and not args.describe:
        raise SystemExit("error: --under-replicated-partitions and --unavailable-partitions go with --describe")
    with _client(args) as client:
        if args.create:
            body = {
                "topics": [
                    {
                        "name": args.topic,
                        "num_partitions": -1 if args.partitions is None else args.partitions,
                        "replication_factor": args.replication_factor,
                        "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in parse_configs(args.config).items()],
                    }
                ],
                "timeout_ms": args.timeout_ms,
                "validate_only": False,
            }
            r = client.request(ApiKey.CREATE_TOPICS, body)["topics"][0]
            _check(r["error_code"], r.get("error_message"), f"cannot create topic {args.topic}")
            print(f"Created topic {args.topic}.")
        elif args.delete:
            version = client.version_for(ApiKey.DELETE_TOPICS)
            body = (
                {"topics": [{"name": args.topic}], "timeout_ms": args.timeout_ms}
                if version >= 6
                else {"topic_names": [args.topic], "timeout_ms": args.timeout_ms}
            )
            r = client.request(ApiKey.DELETE_TOPICS, body)["responses"][0]
            _check(r["error_code"], r.get("error_message"), f"cannot delete topic {args.topic}")
            print(f"Topic {args.topic} is marked for deletion.")
        elif args.alter:
            if args.partitions is None:
                raise SystemExit("error: --alter needs --partitions (topic configs: seglog configs --alter)")
            body = {
                "topics": [{"name": args.topic, "count": args.partitions, "assignments": None}],
                "timeout_ms": args.timeout_ms,
                "validate_only": False,
            }
            r = client.request(ApiKey.CREATE_PARTITIONS, body)["results"][0]
            _check(r["error_code"], r.get("error_message"), f"cannot add partitions to {args.topic}")
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        else:
            topics_ = _metadata(client, [args.topic] if args.topic else None)
            filtered = args.under_replicated_partitions or args.unavailable_partitions
            live = {b["node_id"] for b in cluster_metadata(client.bootstrap, [])["brokers"]} if filtered else set()
            for t in sorted(topics_, key=lambda t: t["name"]):
                if args.list:
                    print(t["name"])
                elif filtered:
                    _describe_partitions(t, live, args.under_replicated_partitions, args.unavailable_partitions)
                else:
                    _describe(client, t)
    return 0


def _metadata(client: ClusterClient, names: list[str] | None) -> list[dict[str, Any]]:
    body = {
        "topics": None if names is None else [{"name": n, "topic_id": _NO_ID} for n in names],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    found = client.request(ApiKey.METADATA, body)["topics"]
    for t in found:
        _check(t["error_code"], None, f"topic {t['name']}")
    return found


def _describe(client: ClusterClient, topic: dict[str, Any]) -> None:
    configs = _describe_configs(client, 2, topic["name"])
    overrides = ",".join(f"{c['name']}={c['value']}" for c in configs if c["config_source"] == 1)
    partitions = sorted(topic["partitions"], key=lambda p: p["partition_index"])
    factor = len(partitions[0]["replica_nodes"]) if partitions else 0
    topic_id = _kafka_uuid(topic.get("topic_id"))
    print(
        f"Topic: {topic['name']}\tTopicId: {topic_id}\tPartitionCount: {len(partitions)}\t"
        f"ReplicationFactor: {factor}\tConfigs: {overrides}"
    )
    for p in partitions:
        _print_partition(topic["name"], p)


def _print_partition(topic: str, p: dict[str, Any]) -> None:
    print(
        f"\tTopic: {topic}\tPartition: {p['partition_index']}\t"
        f"Leader: {p['leader_id'] if p['leader_id'] >= 0 else 'none'}\t"
        f"Replicas: {','.join(map(str, p['replica_nodes']))}\tIsr: {','.join(map(str, p['isr_nodes']))}"
    )


def _describe_partitions(topic: dict[str, Any], live: set[int], under_replicated: bool, unavailable: bool) -> None:
    """Kafka's filtered describe: only the lines of partitions whose ISR is smaller than their replicas,
    or with no leader among the live brokers."""
    for p in sorted(topic["partitions"], key=lambda p: p["partition_index"]):
        short = len(p["isr_nodes"]) < len(p["replica_nodes"])
        if (under_replicated and short) or (unavailable and p["leader_id"] not in live):
            _print_partition(topic["name"], p)


def _kafka_uuid(value: Any) -> str:
    import base64

    if value is None:
        return ""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


# --- produce -----------------------------------------------------------------------------------------


def _produce_parser(sub: Any) -> None:
    p = sub.add_parser("produce", help="send lines from stdin to a topic")
    _with_server(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    p.add_argument("--key-separator")
    p.add_argument("--compression", default=None, help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--batch-size", type=int, default=1000, help="records per batch (default 1000)")
    p.add_argument("--acks", type=int, choices=(-1, 0, 1), default=-1)
    p.set_defaults(run=produce)


def produce(args: argparse.Namespace) -> int:
    separator = args.key_separator.encode() if args.key_separator is not None else None
    codec = Compression.parse(args.compression or "none")
    with _client(args) as client:
        topic = _metadata(client, [args.topic])[0]
        count = len(topic["partitions"])
        pending: dict[int, list[Record]] = {}
        for line in sys.stdin.buffer:
            record = _record(line.rstrip(b"\n"), separator)
            p = args.partition if args.partition is not None else _partition(record.key, count, len(pending))
            pending.setdefault(p, []).append(record)
            if len(pending[p]) >= args.batch_size:
                _send(client, args, {p: pending.pop(p)}, codec)
        if pending:
            _send(client, args, pending, codec)
    return 0


def _record(line: bytes, separator: bytes | None) -> Record:
    if separator is None:
        return Record(None, line)
    key, sep, value = line.partition(separator)
    if not sep:
        raise SystemExit(f"error: no key separator {separator.decode()!r} in line {line[:60]!r}")
    return Record(key, value)


def _partition(key: bytes | None, count: int, spread: int) -> int:
    return partition_for_key(key, count) if key is not None else spread % count


def _send(
    client: ClusterClient, args: argparse.Namespace, batches: dict[int, list[Record]], codec: Compression
) -> None:
    built = {(args.topic, p): build_batch(records, compression=codec) for p, records in batches.items()}

    def send(leader: BlockingConnection, tps: list[TopicPartition]) -> dict[Any, dict[str, Any]]:
        body = {
            "transactional_id": None,
            "acks": args.acks,
            "timeout_ms": args.timeout_ms,
            "topic_data": [
                {"name": args.topic, "partition_data": [{"index": p, "records": built[(t, p)]} for t, p in tps]}
            ],
        }
        if args.acks == 0:
            leader.send_only(ApiKey.PRODUCE, body)
            return {tp: {"error_code": ErrorCode.NONE} for tp in tps}
        return {
            (t["name"], r["index"]): r
            for t in leader.request(ApiKey.PRODUCE, body)["responses"]
            for r in t["partition_responses"]
        }

    for (topic, p), r in client.to_leaders(list(built), send).items():
        _check(r["error_code"], r.get("error_message"), f"cannot produce to {topic}-{p}")


# --- consume --------------------------------------------------------------------------------------------


def _consume_parser(sub: Any) -> None:
    p = sub.add_parser("consume", help="print records of a topic")
    _with_server(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int)
    start.add_argument("--timestamp", type=int)
    p.add_argument("--max-messages", type=int)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=consume)


def consume(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise SystemExit("error: --offset needs --partition")
    count = 0
    with _client(args) as client:
        topic = _metadata(client, [args.topic])[0]
        wanted = (
            [args.partition]
            if args.partition is not None
            else sorted(p["partition_index"] for p in topic["partitions"])
        )
        time = (
            -2
            if args.from_beginning or args.offset is not None
            else (args.timestamp if args.timestamp is not None else -1)
        )
        starts = dict(list_offsets(client, args.topic, wanted, time))
        for p in wanted:
            start = args.offset if args.offset is not None else starts[p]
            for record in _fetch(client, topic, p, start):
                if args.max_messages is not None and count >= args.max_messages:
                    break
                if args.json:
                    print(json.dumps(record_json(record, "CreateTime", partition=p)))
                else:
                    sys.stdout.buffer.write((record.value or b"") + b"\n")
                count += 1
    sys.stdout.flush()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _fetch(client: ClusterClient, topic: dict[str, Any], partition: int, offset: int) -> Iterator[Record]:
    """Records of one partition from ``offset`` up to its high watermark, from its leader."""
    tp = (topic["name"], partition)
    while True:
        answer = client.to_leaders([tp], partial(_fetch_once, topic, partition, offset))[tp]
        _check(
            answer["error_code"], answer.get("error_message"), f"cannot fetch {tp[0]}-{partition} at offset {offset}"
        )
        data = answer["records"]
        last = offset - 1
        for batch in BatchIterator(bytes(data) if data is not None else b""):
            if not batch.is_control:
                for record in batch.records():
                    if record.offset >= offset:
                        yield record
            last = batch.last_offset
        if last < offset or last + 1 >= answer["high_watermark"]:
            return
        offset = last + 1


def _fetch_once(
    topic: dict[str, Any], partition: int, offset: int, leader: BlockingConnection, _: list[TopicPartition]
) -> dict[Any, dict[str, Any]]:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 4 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic["name"],
                "topic_id": topic.get("topic_id"),
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return {(topic["name"], partition): leader.request(ApiKey.FETCH, body)["responses"][0]["partitions"][0]}


# --- get-offsets --------------------------------------------------------------------------------------


def _offsets_parser(sub: Any) -> None:
    p = sub.add_parser("get-offsets", help="offsets of a topic's partitions at a time")
    _with_server(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=partition_list, help="comma-separated partitions (default: all)")
    p.add_argument("--time", default="latest")
    p.set_defaults(run=get_offsets)


def get_offsets(args: argparse.Namespace) -> int:
    time = _TIMES.get(args.time)
    if time is None:
        try:
            time = int(args.time)
        except ValueError:
            raise SystemExit("error: --time takes earliest, latest, max-timestamp or milliseconds") from None
    with _client(args) as client:
        if args.partitions:
            wanted = args.partitions
        else:
            wanted = sorted(p["partition_index"] for p in _metadata(client, [args.topic])[0]["partitions"])
        for p, offset in list_offsets(client, args.topic, wanted, time):
            print(f"{args.topic}:{p}:{'' if offset < 0 else offset}")
    return 0


def list_offsets(client: ClusterClient, topic: str, partitions: list[int], time: int) -> list[tuple[int, int]]:
    """Each partition's offset at ``time``, from its leader (in the order of ``partitions``)."""

    def send(leader: BlockingConnection, tps: list[TopicPartition]) -> dict[Any, dict[str, Any]]:
        wanted = [{"partition_index": p, "current_leader_epoch": -1, "timestamp": time} for _, p in tps]
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": wanted}]}
        answer = leader.request(ApiKey.LIST_OFFSETS, body)
        return {(t["name"], r["partition_index"]): r for t in answer["topics"] for r in t["partitions"]}

    found = client.to_leaders([(topic, p) for p in partitions], send)
    out = []
    for p in partitions:
        r = found[(topic, p)]
        _check(r["error_code"], r.get("error_message"), f"cannot list offsets of {topic}-{p}")
        out.append((p, r["offset"]))
    return out


# --- delete-records ----------------------------------------------------------------------------------------


def add_delete_records(sub: Any) -> None:
    p = sub.add_parser("delete-records", help="delete records below offsets (kafka-delete-records.sh)")
    _with_server(p)
    p.add_argument("--offset-json-file", required=True, help='{"partitions": [{"topic", "partition", "offset"}]}')
    p.set_defaults(run=delete_records)


def delete_records(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            wanted = json.load(f)["partitions"]
        offsets = {(str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in wanted}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"error: cannot read --offset-json-file {args.offset_json_file}: {e}") from None
    # the leader answers by timeout_ms (REQUEST_TIMED_OUT for a partition whose replicas have not
    # all deleted the records by then, Kafka's DelayedDeleteRecords): wait for that answer

    def send(leader: BlockingConnection, tps: list[TopicPartition]) -> dict[Any, dict[str, Any]]:
        by_topic: dict[str, list[dict[str, int]]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append({"partition_index": p, "offset": offsets[(t, p)]})
        body = {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()], "timeout_ms": args.timeout_ms}
        answer = leader.request(ApiKey.DELETE_RECORDS, body)
        return {(t["name"], r["partition_index"]): r for t in answer["topics"] for r in t["partitions"]}

    with ClusterClient(args.bootstrap_server, args.timeout_ms / 1000, answer_margin=ANSWER_MARGIN_S) as client:
        answer = client.to_leaders(list(offsets), send)
    print("Records delete operation completed:")
    failed = 0
    for (topic, p), r in answer.items():
        if r["error_code"]:
            failed += 1
            print(f"partition: {topic}-{p}\terror: Kafka error code {r['error_code']}")
        else:
            print(f"partition: {topic}-{p}\tlow_watermark: {r['low_watermark']}")
    return 1 if failed else 0


# --- configs -----------------------------------------------------------------------------------------------


def add_configs(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe or alter topic and broker configs (kafka-configs.sh)")
    _with_server(p)
    p.add_argument("--entity-type", required=True, choices=("topics", "brokers"))
    p.add_argument("--entity-name", required=True)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]")
    p.add_argument("--delete-config", action="append", metavar="KEY[,KEY]")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only the set ones")
    p.set_defaults(run=configs)


def configs(args: argparse.Namespace) -> int:
    kind = 2 if args.entity_type == "topics" else 4
    what = "topic" if kind == 2 else "broker"
    with _client(args) as cluster:
        # a broker's configs are that broker's to tell and change, as Kafka's Admin sends them
        named = kind == 4 and args.entity_name.isdigit()
        client = cluster.broker(int(args.entity_name)) if named else cluster.bootstrap
        if args.describe:
            entries = _describe_configs(client, kind, args.entity_name)
            shown = entries if args.all else [e for e in entries if e["config_source"] in (1, 2, 4)]
            label = "All" if args.all else "Dynamic"
            print(f"{label} configs for {what} {args.entity_name} are:")
            for e in shown:
                synonyms = ", ".join(
                    f"{_SOURCES.get(s['source'], s['source'])}:{s['name']}={s['value']}" for s in e["synonyms"]
                )
                print(f"  {e['name']}={e['value']} sensitive={str(e['is_sensitive']).lower()} synonyms={{{synonyms}}}")
            return 0
        ops = [{"name": k, "config_operation": 0, "value": v} for k, v in parse_configs(args.add_config).items()]
        ops += [
            {"name": k.strip(), "config_operation": 1, "value": None}
            for item in args.delete_config or []
            for k in item.split(",")
            if k.strip()
        ]
        if not ops:
            raise SystemExit("error: --alter needs --add-config or --delete-config")
        body = {
            "resources": [{"resource_type": kind, "resource_name": args.entity_name, "configs": ops}],
            "validate_only": False,
        }
        r = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)["responses"][0]
        _check(r["error_code"], r.get("error_message"), f"cannot alter {what} {args.entity_name}")
        print(f"Completed updating config for {what} {args.entity_name}.")
    return 0


def _describe_configs(client: BlockingConnection | ClusterClient, kind: int, name: str) -> list[dict[str, Any]]:
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    r = client.request(ApiKey.DESCRIBE_CONFIGS, body)["results"][0]
    _check(r["error_code"], r.get("error_message"), f"cannot describe {name}")
    return list(r["configs"])


def _client(args: argparse.Namespace) -> ClusterClient:
    return ClusterClient(args.bootstrap_server, timeout=args.timeout_ms / 1000)
