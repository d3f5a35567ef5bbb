"""Where the command line's requests go in a cluster, as Kafka's Admin, consumer and producer clients
send them: a partition's request to its leader (from Metadata), a group's or a transactional id's to
its coordinator (FindCoordinator), a broker's configs to that broker, the rest to the bootstrap
broker. Answers that say the leader or coordinator moved or is loading (NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) and
a leader that cannot be reached are retried with fresh Metadata until the command's timeout; a
partition whose leader stays unavailable then ends with its last error, naming it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from ..client import BlockingConnection, connect
from ..errors import ApiError, BrokerNotAvailableError, ErrorCode, error_for, error_name
from ..protocol import ApiKey
from . import CLIENT_ID

RETRIABLE_LEADER = frozenset({int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.LEADER_NOT_AVAILABLE)})
RETRIABLE_COORDINATOR = frozenset(
    {
        int(ErrorCode.NOT_COORDINATOR),
        int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    }
)
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
NO_TOPIC_ID = uuid.UUID(int=0)  # a topic asked by name
TopicPartition = tuple[str, int]
Result = dict[str, Any]  # one partition's answer, with its "error_code"
T = TypeVar("T")


class RetriableError(ApiError):
    """An answer to retry after fresh Metadata (a leader or coordinator that moved or loads)."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(ErrorCode(code), f"{what}: {error_name(code)}")


class ClusterClient:
    """Connections to the brokers of one cluster, opened as requests need them."""

    def __init__(self, bootstrap: str, timeout: float, answer_margin: float = 0.0) -> None:
        """``timeout``: for the whole command's retries; a socket waits ``answer_margin`` longer
        (for requests whose broker answers at their own timeout_ms)."""
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._socket_timeout = timeout + answer_margin
        self.bootstrap = connect(bootstrap, client_id=CLIENT_ID, timeout=self._socket_timeout)
        self._brokers: dict[int, BlockingConnection] = {}
        self._metadata: dict[str, Any] | None = None
        self._topics_known: set[str] = set()
        self._leader_of: dict[TopicPartition, int] = {}

    # --- the bootstrap broker and Metadata -------------------------------------------------------

    def request(self, api_key: ApiKey, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        """A request any broker serves (Metadata, topic configs, and topic admin, which a seglog
        broker writes to ZooKeeper itself): to the bootstrap one."""
        return self.bootstrap.request(api_key, body, version)

    def version_for(self, api_key: ApiKey) -> int:
        return self.bootstrap.version_for(api_key)

    def metadata(self, topics: list[str] | None) -> dict[str, Any]:
        body = {
            "topics": None if topics is None else [{"name": t, "topic_id": NO_TOPIC_ID} for t in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return self.request(ApiKey.METADATA, body)

    def node_ids(self) -> list[int]:
        """The live brokers' ids."""
        return sorted(int(b["node_id"]) for b in self.metadata([])["brokers"])

    def _leaders(self, topics: list[str], fresh: bool) -> dict[TopicPartition, int]:
        """Each known partition's leader (-1: none now), from a fresh Metadata of ``topics`` unless
        the last one had them all and ``fresh`` is not asked."""
        if fresh or not set(topics) <= self._topics_known:
            self._metadata = self.metadata(topics)
            self._topics_known = {t["name"] for t in self._metadata["topics"] if not t["error_code"]}
            self._leader_of = {
                (t["name"], p["partition_index"]): p["leader_id"] if not p["error_code"] else -1
                for t in self._metadata["topics"]
                if not t["error_code"]
                for p in t["partitions"]
            }
        return self._leader_of

    # --- connections ---------------------------------------------------------------------------------

    def broker(self, node_id: int) -> BlockingConnection:
        """A connection to broker ``node_id`` (the bootstrap one's Metadata tells where it is)."""
        if node_id in self._brokers:
            return self._brokers[node_id]
        brokers = self._metadata["brokers"] if self._metadata else self.metadata([])["brokers"]
        found = next((b for b in brokers if b["node_id"] == node_id), None)
        if found is None:
            found = next((b for b in self.metadata([])["brokers"] if b["node_id"] == node_id), None)
        if found is None:
            raise BrokerNotAvailableError(f"broker {node_id} is not among the live brokers of the cluster")
        self._brokers[node_id] = BlockingConnection(
            found["host"], found["port"], CLIENT_ID, timeout=self._socket_timeout
        )
        return self._brokers[node_id]

    def _forget(self, node_id: int) -> None:
        client = self._brokers.pop(node_id, None)
        if client is not None:
            client.close()

    def coordinator(self, key: str, key_type: int) -> tuple[int, BlockingConnection]:
        """The coordinator of a group (key type 0) or transactional id (1): its id and a connection."""
        version = self.version_for(ApiKey.FIND_COORDINATOR)
        body = {"key": key, "key_type": key_type, "coordinator_keys": [key]}
        answer = self.request(ApiKey.FIND_COORDINATOR, body, version)
        found = answer["coordinators"][0] if version >= 4 else answer
        what = f"cannot find the {'transaction' if key_type else 'group'} coordinator of {key}"
        if found["error_code"] in RETRIABLE_COORDINATOR:
            raise RetriableError(found["error_code"], what)
        if found["error_code"]:
            raise error_for(found["error_code"], found.get("error_message"), what)
        node = int(found["node_id"])
        if node not in self._brokers:
            self._brokers[node] = BlockingConnection(
                found["host"], found["port"], CLIENT_ID, timeout=self._socket_timeout
            )
        return node, self._brokers[node]

    # --- retries -------------------------------------------------------------------------------------

    def retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` again while it raises a RetriableError (a moved or loading coordinator),
        until the timeout; connections are opened anew for each try."""
        while True:
            try:
                return attempt()
            except RetriableError:
                if time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                    raise
            self._close_brokers()
            time.sleep(RETRY_BACKOFF_S)

    def to_leaders(
        self,
        partitions: list[TopicPartition],
        send: Callable[[BlockingConnection, list[TopicPartition]], dict[Any, Result]],
    ) -> dict[TopicPartition, Result]:
        """Each partition's answer from its leader: ``send(leader, its partitions)`` once per leader,
        again for the partitions whose leader moved, until the timeout (then the last error stays in
        their answer). A partition the cluster does not know answers UNKNOWN_TOPIC_OR_PARTITION."""
        results: dict[TopicPartition, Result] = {}
        pending = list(dict.fromkeys(partitions))
        fresh = False
        while True:
            leaders = self._leaders(sorted({t for t, _ in pending}), fresh)
            retry: list[TopicPartition] = []
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                if tp not in leaders:
                    results[tp] = _error(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "the cluster does not know it")
                elif leaders[tp] < 0:
                    results[tp] = _error(ErrorCode.LEADER_NOT_AVAILABLE, "it has no leader")
                    retry.append(tp)
                else:
                    by_leader.setdefault(leaders[tp], []).append(tp)
            for node, tps in by_leader.items():
                retry += self._send_to(node, tps, send, results)
            if not retry:
                return results
            if time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                for tp in retry:
                    code = results[tp]["error_code"]
                    results[tp] = _error(code, f"no leader answered within {self.timeout:g} s")
                return results
            pending, fresh = retry, True
            time.sleep(RETRY_BACKOFF_S)

    def _send_to(
        self,
        node: int,
        tps: list[TopicPartition],
        send: Callable[[BlockingConnection, list[TopicPartition]], dict[Any, Result]],
        results: dict[TopicPartition, Result],
    ) -> list[TopicPartition]:
        """The answers of one leader into ``results``; the partitions to retry."""
        try:
            answered = send(self.broker(node), tps)
        except BrokerNotAvailableError as e:  # a leader just stopped: Metadata will name the next one
            self._forget(node)
            for tp in tps:
                results[tp] = _error(ErrorCode.LEADER_NOT_AVAILABLE, f"its leader, broker {node}, is unreachable ({e})")
            return tps
        retry = []
        for tp in tps:
            result = answered.get(tp, _error(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} did not answer for it"))
            results[tp] = result
            if result["error_code"] in RETRIABLE_LEADER:
                retry.append(tp)
        return retry

    # --- closing -------------------------------------------------------------------------------------

    def _close_brokers(self) -> None:
        for node in list(self._brokers):
            self._forget(node)

    def close(self) -> None:
        self._close_brokers()
        self.bootstrap.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def raise_for(code: int, what: str) -> None:
    """A coordinator's answer: a RetriableError while it moves or loads, the error of its code
    (``error_for``) for any other."""
    if code in RETRIABLE_COORDINATOR:
        raise RetriableError(code, what)
    if code:
        raise error_for(code, what=what)


def _error(code: int, why: str) -> Result:
    return {"error_code": code, "error_message": f"{error_name(code)}: {why}"}
