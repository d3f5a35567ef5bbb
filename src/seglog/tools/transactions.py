"""``seglog transactions``: the transactions of a broker's transaction coordinator, as
Kafka's ``kafka-transactions.sh`` prints them (``list`` and ``describe``)::

    seglog transactions --bootstrap-server H:P --list [--duration-filter MS]
    seglog transactions --bootstrap-server H:P --describe --transactional-id ID

Tables are Kafka's ``ToolsUtils.prettyPrintTable``: each column padded to its widest
value, every value followed by a tab. ``--list`` asks every broker of the cluster and prints each one's
coordinator's transactions, as Kafka's tool does; ``--describe`` asks the transactional id's
coordinator (FindCoordinator).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..client import ClusterClient, check_coordinator
from ..errors import ApiError, ErrorCode
from ..protocol import ApiKey
from ..protocol.enums import CoordinatorType
from ..protocol.message_data import (
    DescribeTransactionsRequestData,
    DescribeTransactionsResponseData,
    ListTransactionsRequestData,
    ListTransactionsResponseData,
)
from . import CLIENT_ID
from .arguments import INT64_MAX, UsageError, add_bootstrap_server, command_security, int_between

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


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("transactions", help="list or describe transactions (kafka-transactions.sh)")
    add_bootstrap_server(p)
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
    with ClusterClient(
        args.bootstrap_server, timeout=args.timeout_ms / 1000, client_id=CLIENT_ID, security=command_security(args)
    ) as client:
        if args.list:
            client.retrying(lambda: _list(client, args.duration_filter))
        else:
            client.retrying(lambda: _describe(client, args.transactional_id))
    return 0


def _list(client: ClusterClient, duration: int | None) -> None:
    rows = [
        [t.transactional_id, str(node), str(t.producer_id), t.transaction_state] for node, t in listed(client, duration)
    ]
    _print_table(LIST_HEADERS, rows)


def listed(
    client: ClusterClient, duration: int | None = None
) -> list[tuple[int, ListTransactionsResponseData.TransactionState]]:
    """Every broker's transactions (each lists those its coordinator holds), with the broker's id;
    only those running longer than ``duration`` ms when given."""
    request = ListTransactionsRequestData(
        state_filters=[], producer_id_filters=[], duration_filter=-1 if duration is None else duration
    )
    found = []
    for node in client.node_ids():
        broker = client.broker(node)
        if duration is not None and broker.version_for(ApiKey.LIST_TRANSACTIONS) < 1:
            message = "cannot list transactions: the broker cannot filter transactions by duration"
            raise ApiError(ErrorCode.UNSUPPORTED_VERSION, message)
        answer: ListTransactionsResponseData = broker.request(ApiKey.LIST_TRANSACTIONS, request)
        check_coordinator(answer.error_code, f"cannot list the transactions of broker {node}")
        found += [(node, t) for t in answer.transaction_states]
    return found


def described(client: ClusterClient, txn_id: str) -> tuple[int, DescribeTransactionsResponseData.TransactionState]:
    """A transactional id's state, from its coordinator, with the coordinator's id."""
    coordinator, broker = client.coordinator(txn_id, CoordinatorType.TRANSACTION)
    request = DescribeTransactionsRequestData(transactional_ids=[txn_id])
    answer: DescribeTransactionsResponseData = broker.request(ApiKey.DESCRIBE_TRANSACTIONS, request)
    state = answer.transaction_states[0]
    check_coordinator(state.error_code, f"cannot describe the transaction state of transactional-id `{txn_id}`")
    return coordinator, state


def _describe(client: ClusterClient, txn_id: str) -> None:
    coordinator, state = described(client, txn_id)
    start = state.transaction_start_time_ms
    started = start >= 0
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    row = [
        str(coordinator),
        txn_id,
        str(state.producer_id),
        str(state.producer_epoch),
        state.transaction_state,
        str(state.transaction_timeout_ms),
        str(start) if started else "None",
        str(time.time_ns() // 1_000_000 - start) if started else "None",
        partitions,
    ]
    _print_table(DESCRIBE_HEADERS, [row])


def _print_table(headers: tuple[str, ...], rows: list[list[str]]) -> None:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in [list(headers), *rows]:
        print("".join(value.ljust(width) + "\t" for value, width in zip(row, widths, strict=True)))
