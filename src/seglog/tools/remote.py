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
    seglog configs      --bootstrap-server H:P --entity-type topics|brokers|users --entity-name N
                        --describe | --alter [--add-config k=v,...] [--delete-config k,...]
    seglog configs      --bootstrap-server H:P --entity-type users|clients|ips --entity-name N | --entity-default
                        [--entity-type clients ...] --describe | --alter ... (client quotas: client_quotas.py;
                        users' SCRAM credentials, 'SCRAM-SHA-256=[password=...]': user_credentials.py)

Each takes ``--command-config FILE``: the client's security.protocol, sasl.* and ssl.* properties.

Output follows Kafka's tools (kafka-topics.sh, kafka-console-producer/consumer.sh,
kafka-get-offsets.sh, kafka-delete-records.sh, kafka-configs.sh). ``cli.py`` sends a
command here when ``--bootstrap-server`` is given.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

from ..client import (
    BlockingConnection,
    ClusterClient,
    MetadataTopic,
    Unanswered,
    check,
    check_partition,
    topics_by_name,
)
from ..common import TopicPartition
from ..partitioner import partition_for_key
from ..protocol import ApiKey
from ..protocol.enums import AlterConfigOpType, ConfigResourceType, ConfigSource, config_source_name
from ..protocol.message_data import (
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteRecordsRequestData,
    DeleteRecordsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
    MetadataResponseData,
    ProduceRequestData,
    ProduceResponseData,
)
from ..records import BatchIterator, Compression, Record
from ..records.batch import build_batch
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from ..storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from . import CLIENT_ID
from .arguments import CommandParser, add_bootstrap_server, command_security, parse_configs, partition_list
from .client_quotas import ENTITY_TYPES, quota_configs, quota_request
from .logdir import record_json
from .user_credentials import user_configs

_TIMES = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}
ANSWER_MARGIN_S = 5.0  # past a request's own timeout_ms, for the broker's answer to arrive
# the configs --describe shows without --all: those set (dynamically or in a broker's file), not defaults
_SET_SOURCES = (
    ConfigSource.DYNAMIC_TOPIC_CONFIG,
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


def build_parser(prog: str = "seglog") -> argparse.ArgumentParser:
    parser = CommandParser(prog=prog, description="Commands against a running broker.")
    parser.add_argument("--verbose", "-v", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_topics_parser, _produce_parser, _consume_parser, _offsets_parser, add_delete_records, add_configs):
        add(sub)
    return parser


def _with_server(p: argparse.ArgumentParser) -> None:
    add_bootstrap_server(p)
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
            configs = [
                CreateTopicsRequestData.CreatableTopicConfig(name=k, value=v)
                for k, v in parse_configs(args.config).items()
            ]
            topic = CreateTopicsRequestData.CreatableTopic(
                name=args.topic,
                num_partitions=-1 if args.partitions is None else args.partitions,
                replication_factor=args.replication_factor,
                assignments=[],
                configs=configs,
            )
            request = CreateTopicsRequestData(topics=[topic], timeout_ms=args.timeout_ms, validate_only=False)
            created: CreateTopicsResponseData = client.request(ApiKey.CREATE_TOPICS, request)
            r = created.topics[0]
            check(r.error_code, f"cannot create topic {args.topic}", r.error_message)
            print(f"Created topic {args.topic}.")
        elif args.delete:
            # version 6 names topics by name or id (KIP-516); before, by name only
            if client.version_for(ApiKey.DELETE_TOPICS) >= 6:
                named = [DeleteTopicsRequestData.DeleteTopicState(name=args.topic)]
                delete = DeleteTopicsRequestData(topics=named, timeout_ms=args.timeout_ms)
            else:
                delete = DeleteTopicsRequestData(topic_names=[args.topic], timeout_ms=args.timeout_ms)
            deleted: DeleteTopicsResponseData = client.request(ApiKey.DELETE_TOPICS, delete)
            d = deleted.responses[0]
            check(d.error_code, f"cannot delete topic {args.topic}", d.error_message)
            print(f"Topic {args.topic} is marked for deletion.")
        elif args.alter:
            if args.partitions is None:
                raise SystemExit("error: --alter needs --partitions (topic configs: seglog configs --alter)")
            more = CreatePartitionsRequestData.CreatePartitionsTopic(
                name=args.topic, count=args.partitions, assignments=None
            )
            alter = CreatePartitionsRequestData(topics=[more], timeout_ms=args.timeout_ms, validate_only=False)
            altered: CreatePartitionsResponseData = client.request(ApiKey.CREATE_PARTITIONS, alter)
            a = altered.results[0]
            check(a.error_code, f"cannot add partitions to {args.topic}", a.error_message)
            print(f"Topic {args.topic} now has {args.partitions} partitions.")
        else:
            found = _metadata(client, [args.topic] if args.topic else None)
            filtered = args.under_replicated_partitions or args.unavailable_partitions
            live = set(client.node_ids()) if filtered else set()
            for name, t in sorted(found.items()):
                if args.list:
                    print(name)
                elif filtered:
                    _describe_partitions(name, t, live, args.under_replicated_partitions, args.unavailable_partitions)
                else:
                    _describe(client, name, t)
    return 0


def _metadata(client: ClusterClient, names: list[str] | None) -> dict[str, MetadataTopic]:
    """The topics ``names`` (None: all), each known, by name."""
    answer = client.metadata(names)
    for t in answer.topics:
        check(t.error_code, f"topic {t.name}")
    return topics_by_name(answer)


def _describe(client: ClusterClient, name: str, topic: MetadataTopic) -> None:
    configs = describe_configs(client, ConfigResourceType.TOPIC, name)
    overrides = ",".join(f"{c.name}={c.value}" for c in configs if c.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG)
    partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
    factor = len(partitions[0].replica_nodes) if partitions else 0
    print(
        f"Topic: {name}\tTopicId: {_kafka_uuid(topic.topic_id)}\tPartitionCount: {len(partitions)}\t"
        f"ReplicationFactor: {factor}\tConfigs: {overrides}"
    )
    for p in partitions:
        _print_partition(name, p)


def _print_partition(topic: str, p: MetadataResponseData.MetadataResponsePartition) -> None:
    print(
        f"\tTopic: {topic}\tPartition: {p.partition_index}\t"
        f"Leader: {p.leader_id if p.leader_id >= 0 else 'none'}\t"
        f"Replicas: {','.join(map(str, p.replica_nodes))}\tIsr: {','.join(map(str, p.isr_nodes))}"
    )


def _describe_partitions(
    name: str, topic: MetadataTopic, live: set[int], under_replicated: bool, unavailable: bool
) -> None:
    """Kafka's filtered describe: only the lines of partitions whose ISR is smaller than their replicas,
    or with no leader among the live brokers."""
    for p in sorted(topic.partitions, key=lambda p: p.partition_index):
        short = len(p.isr_nodes) < len(p.replica_nodes)
        if (under_replicated and short) or (unavailable and p.leader_id not in live):
            _print_partition(name, p)


def _kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka prints it: URL-safe base64, unpadded."""
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
        count = len(_metadata(client, [args.topic])[args.topic].partitions)
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
    built = {TopicPartition(args.topic, p): build_batch(records, compression=codec) for p, records in batches.items()}

    def send(
        leader: BlockingConnection, tps: list[TopicPartition]
    ) -> dict[TopicPartition, ProduceResponseData.PartitionProduceResponse]:
        data = [ProduceRequestData.PartitionProduceData(index=tp.partition, records=built[tp]) for tp in tps]
        request = ProduceRequestData(
            transactional_id=None,
            acks=args.acks,
            timeout_ms=args.timeout_ms,
            topic_data=[ProduceRequestData.TopicProduceData(name=args.topic, partition_data=data)],
        )
        if args.acks == 0:  # no answer comes: each partition's is "no error"
            leader.send_only(ApiKey.PRODUCE, request)
            return {tp: ProduceResponseData.PartitionProduceResponse(index=tp.partition) for tp in tps}
        answer: ProduceResponseData = leader.request(ApiKey.PRODUCE, request)
        return {TopicPartition(t.name, r.index): r for t in answer.responses for r in t.partition_responses}

    for tp, r in client.to_leaders(list(built), send).items():
        check_partition(r, f"cannot produce to {tp}")


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
        topic = _metadata(client, [args.topic])[args.topic]
        wanted = [args.partition] if args.partition is not None else sorted(p.partition_index for p in topic.partitions)
        time = (
            EARLIEST_TIMESTAMP
            if args.from_beginning or args.offset is not None
            else (args.timestamp if args.timestamp is not None else LATEST_TIMESTAMP)
        )
        starts = dict(list_offsets(client, args.topic, wanted, time))
        for p in wanted:
            start = args.offset if args.offset is not None else starts[p]
            for record in _fetch(client, TopicPartition(args.topic, p), start):
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


def _fetch(client: ClusterClient, tp: TopicPartition, offset: int) -> Iterator[Record]:
    """Records of one partition from ``offset`` up to its high watermark, from its leader."""
    while True:
        answer = client.fetch(tp, offset)
        last = offset - 1
        for batch in BatchIterator(answer.records):
            if not batch.is_control:
                for record in batch.records():
                    if record.offset >= offset:
                        yield record
            last = batch.last_offset
        if last < offset or last + 1 >= answer.high_watermark:
            return
        offset = last + 1


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
            wanted = sorted(p.partition_index for p in _metadata(client, [args.topic])[args.topic].partitions)
        for p, offset in list_offsets(client, args.topic, wanted, time):
            print(f"{args.topic}:{p}:{'' if offset < 0 else offset}")
    return 0


def list_offsets(client: ClusterClient, topic: str, partitions: list[int], time: int) -> list[tuple[int, int]]:
    """Each partition's offset at ``time``, from its leader (in the order of ``partitions``)."""
    tps = [TopicPartition(topic, p) for p in partitions]
    found = client.list_offsets(dict.fromkeys(tps, time))
    return [(tp.partition, found[tp].offset) for tp in tps]


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
        offsets = {TopicPartition(str(e["topic"]), int(e["partition"])): int(e["offset"]) for e in wanted}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"error: cannot read --offset-json-file {args.offset_json_file}: {e}") from None
    # the leader answers by timeout_ms (REQUEST_TIMED_OUT for a partition whose replicas have not
    # all deleted the records by then, Kafka's DelayedDeleteRecords): wait for that answer

    def send(
        leader: BlockingConnection, tps: list[TopicPartition]
    ) -> dict[TopicPartition, DeleteRecordsResponseData.DeleteRecordsPartitionResult]:
        by_topic: dict[str, list[DeleteRecordsRequestData.DeleteRecordsPartition]] = {}
        for tp in tps:
            below = DeleteRecordsRequestData.DeleteRecordsPartition(partition_index=tp.partition, offset=offsets[tp])
            by_topic.setdefault(tp.topic, []).append(below)
        topics = [DeleteRecordsRequestData.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        request = DeleteRecordsRequestData(topics=topics, timeout_ms=args.timeout_ms)
        answer: DeleteRecordsResponseData = leader.request(ApiKey.DELETE_RECORDS, request)
        return {TopicPartition(t.name, r.partition_index): r for t in answer.topics for r in t.partitions}

    with ClusterClient(
        args.bootstrap_server,
        args.timeout_ms / 1000,
        answer_margin=ANSWER_MARGIN_S,
        client_id=CLIENT_ID,
        security=command_security(args),
    ) as client:
        answer = client.to_leaders(list(offsets), send)
    print("Records delete operation completed:")
    failed = 0
    for tp, r in answer.items():
        if isinstance(r, Unanswered) or r.error_code:
            failed += 1
            print(f"partition: {tp}\terror: Kafka error code {r.error_code}")
        else:
            print(f"partition: {tp}\tlow_watermark: {r.low_watermark}")
    return 1 if failed else 0


# --- configs -----------------------------------------------------------------------------------------------


def add_configs(sub: Any) -> None:
    p = sub.add_parser("configs", help="describe or alter topic, broker, user and client configs (kafka-configs.sh)")
    _with_server(p)
    # users and clients combine (a user's client id): each --entity-type takes the next name
    p.add_argument("--entity-type", required=True, action="append", choices=("topics", "brokers", *ENTITY_TYPES))
    p.add_argument("--entity-name", action="append")
    p.add_argument(
        "--entity-default",
        dest="entity_name",
        action="append_const",
        const="",
        help="the default user, client id or ip, in place of an --entity-name",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]")
    p.add_argument("--delete-config", action="append", metavar="KEY[,KEY]")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only the set ones")
    p.set_defaults(run=configs)


def _entity_configs(args: argparse.Namespace) -> int:
    """Users', clients' and ips' configs as kafka-configs.sh splits them: a user's SCRAM
    credentials through AlterUserScramCredentials, quotas through AlterClientQuotas; --describe
    of one user shows both. The quotas asked for are checked before connecting."""
    one_user = args.entity_type == ["users"] and len(args.entity_name or []) == 1 and args.entity_name[0]
    user = argparse.Namespace(**{**vars(args), "entity_name": args.entity_name[0]}) if one_user else None
    named = [*parse_configs(args.add_config), *(k for item in args.delete_config or [] for k in item.split(","))]
    if user is not None and args.alter and any(k.strip().upper() in SCRAM_MECHANISMS for k in named):
        with _client(args) as cluster:
            return user_configs(user, cluster)
    request = quota_request(args)
    with _client(args) as cluster:
        code = quota_configs(cluster.bootstrap, request)
        return user_configs(user, cluster) if user is not None and args.describe else code


def configs(args: argparse.Namespace) -> int:
    if args.entity_type[0] in ENTITY_TYPES:
        return _entity_configs(args)
    if len(args.entity_type) > 1 or len(args.entity_name or []) != 1:
        raise SystemExit("error: topics and brokers take one --entity-type and its --entity-name")
    if args.entity_type[0] == "topics" and not args.entity_name[0]:
        raise SystemExit("error: --entity-default is for brokers, users, clients and ips, not topics")
    args.entity_type, args.entity_name = args.entity_type[0], args.entity_name[0]
    kind = ConfigResourceType.TOPIC if args.entity_type == "topics" else ConfigResourceType.BROKER
    what = "topic" if kind == ConfigResourceType.TOPIC else "broker"
    with _client(args) as cluster:
        # a broker's configs are that broker's to tell and change, as Kafka's Admin sends them
        named = kind == ConfigResourceType.BROKER and args.entity_name.isdigit()
        client = cluster.broker(int(args.entity_name)) if named else cluster.bootstrap
        if args.describe:
            entries = describe_configs(client, kind, args.entity_name)
            shown = entries if args.all else [e for e in entries if e.config_source in _SET_SOURCES]
            label = "All" if args.all else "Dynamic"
            if args.entity_name:
                print(f"{label} configs for {what} {args.entity_name} are:")
            else:  # --entity-default: the cluster's dynamic default (kafka-configs.sh's words)
                print("Default configs for brokers in the cluster are:")
            for e in shown:
                synonyms = ", ".join(f"{config_source_name(s.source)}:{s.name}={s.value}" for s in e.synonyms)
                print(f"  {e.name}={e.value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
            return 0
        Op = IncrementalAlterConfigsRequestData.AlterableConfig
        added = parse_configs(args.add_config)
        ops = [Op(name=k, config_operation=AlterConfigOpType.SET, value=v) for k, v in added.items()]
        ops += [
            Op(name=k.strip(), config_operation=AlterConfigOpType.DELETE, value=None)
            for item in args.delete_config or []
            for k in item.split(",")
            if k.strip()
        ]
        if not ops:
            raise SystemExit("error: --alter needs --add-config or --delete-config")
        resource = IncrementalAlterConfigsRequestData.AlterConfigsResource(
            resource_type=kind, resource_name=args.entity_name, configs=ops
        )
        request = IncrementalAlterConfigsRequestData(resources=[resource], validate_only=False)
        altered: IncrementalAlterConfigsResponseData = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
        r = altered.responses[0]
        check(r.error_code, f"cannot alter {what} {args.entity_name or 'default'}", r.error_message)
        if args.entity_name:
            print(f"Completed updating config for {what} {args.entity_name}.")
        else:
            print("Completed updating default config for brokers in the cluster.")
    return 0


def describe_configs(
    client: BlockingConnection | ClusterClient, kind: ConfigResourceType, name: str
) -> list[DescribeConfigsResponseData.DescribeConfigsResourceResult]:
    resource = DescribeConfigsRequestData.DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=None
    )
    request = DescribeConfigsRequestData(resources=[resource], include_synonyms=True, include_documentation=False)
    described: DescribeConfigsResponseData = client.request(ApiKey.DESCRIBE_CONFIGS, request)
    r = described.results[0]
    check(r.error_code, f"cannot describe {name}", r.error_message)
    return list(r.configs)


def _client(args: argparse.Namespace) -> ClusterClient:
    return ClusterClient(
        args.bootstrap_server, timeout=args.timeout_ms / 1000, client_id=CLIENT_ID, security=command_security(args)
    )
