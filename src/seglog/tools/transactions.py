"""``seglog transactions``: the transactions of a broker's transaction coordinator, as
Kafka's ``kafka-transactions.sh`` prints them (``list`` and ``describe``)::

    seglog transactions --bootstrap-server H:P --list [--duration-filter MS]
    seglog transactions --bootstrap-server H:P --describe --transactional-id ID

Tables are Kafka's ``ToolsUtils.prettyPrintTable``: each column padded to its widest
value, every value followed by a tab. ``--list`` asks the broker given (Kafka's tool asks
every broker of the cluster and prints each one's coordinator's transactions).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..protocol import ApiKey
from .arguments import INT64_MAX, UsageError, int_between
from .broker_client import BrokerClient
from .remote import BrokerError

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
)
KEY_TYPE_TRANSACTION = 1


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("transactions", help="list or describe transactions (kafka-transactions.sh)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker to talk to")
    p.add_argument("--timeout-ms", type=int_between(1, INT64_MAX), default=30_000)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="every transactional id the coordinator knows")
    action.add_argument("--describe", action="store_true", help="one transactional id's state")
    p.add_argument("--transactional-id", help="--describe: the transactional id")
    p.add_argument(
        "--duration-filter",
        type=int_between(0, INT64_MAX),
        metavar="MS",
        help="--list: only transactions running longer than this",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.describe and not args.transactional_id:
        raise UsageError("--describe needs --transactional-id")
    if args.list and args.transactional_id:
        raise UsageError("--transactional-id goes with --describe, not --list")
    with BrokerClient(args.bootstrap_server, timeout=args.timeout_ms / 1000) as client:
        if args.list:
            _list(client, args.duration_filter, args.bootstrap_server)
        else:
            _describe(client, args.transactional_id)
    return 0


def _list(client: BrokerClient, duration: int | None, bootstrap: str) -> None:
    body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1 if duration is None else duration}
    if duration is not None and client.version(ApiKey.LIST_TRANSACTIONS) < 1:
        raise BrokerError(35, "the broker cannot filter transactions by duration", "cannot list transactions")
    answer = client.request(ApiKey.LIST_TRANSACTIONS, body)
    if answer["error_code"]:
        raise BrokerError(answer["error_code"], None, "cannot list transactions")
    node = _broker_id(client, bootstrap)
    rows = [
        [t["transactional_id"], str(node), str(t["producer_id"]), t["transaction_state"]]
        for t in answer["transaction_states"]
    ]
    _print_table(LIST_HEADERS, rows)


def _describe(client: BrokerClient, txn_id: str) -> None:
    coordinator = _coordinator(client, txn_id)
    answer = client.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]})
    state = answer["transaction_states"][0]
    if state["error_code"]:
        raise BrokerError(
            state["error_code"], None, f"cannot describe the transaction state of transactional-id `{txn_id}`"
        )
    start = state["transaction_start_time_ms"]
    started = start >= 0
    partitions = ",".join(f"{t['topic']}-{p}" for t in state["topics"] for p in t["partitions"])
    row = [
        str(coordinator),
        txn_id,
        str(state["producer_id"]),
        str(state["producer_epoch"]),
        state["transaction_state"],
        str(state["transaction_timeout_ms"]),
        str(start) if started else "None",
        str(time.time_ns() // 1_000_000 - start) if started else "None",
        partitions,
    ]
    _print_table(DESCRIBE_HEADERS, [row])


def _coordinator(client: BrokerClient, txn_id: str) -> int:
    """The transaction coordinator's broker id (FindCoordinator, key type 1)."""
    version = min(client.version(ApiKey.FIND_COORDINATOR), 3)
    answer = client.request(ApiKey.FIND_COORDINATOR, {"key": txn_id, "key_type": KEY_TYPE_TRANSACTION}, version)
    if answer["error_code"]:
        raise BrokerError(answer["error_code"], answer.get("error_message"), "cannot find the transaction coordinator")
    return int(answer["node_id"])


def _broker_id(client: BrokerClient, bootstrap: str) -> int:
    """The id of the broker answering (ListTransactions lists its own coordinator's ids)."""
    brokers = client.request(ApiKey.METADATA, {"topics": []})["brokers"]
    if len(brokers) == 1:
        return int(brokers[0]["node_id"])
    port = int(bootstrap.rsplit(":", 1)[1])
    return next((int(b["node_id"]) for b in brokers if b["port"] == port), -1)


def _print_table(headers: tuple[str, ...], rows: list[list[str]]) -> None:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        print("".join(value.ljust(width) + "\t" for value, width in zip(row, widths, strict=True)))
