"""Followers fetching from their leaders: Kafka's ``ReplicaFetcherManager`` and
``ReplicaFetcherThread``.

Each partition this broker follows is fetched by one of ``num.replica.fetchers`` fetchers
of its leader broker (Kafka's ``getFetcherId``: ``abs(31 * topic.hashCode + partition) %
num.replica.fetchers``). A fetcher is a task on the broker's event loop with one
connection to its leader, whose endpoint it looks up in the metadata cache each time it
connects; storage work runs in the broker's I/O threads.

A partition first truncates, then fetches:

- **Truncating** (KIP-101, KIP-279): OffsetForLeaderEpoch for the follower's latest epoch;
  the leader answers the largest epoch it has at most that one, and where it ended in its
  log. The follower truncates to where both logs agree; when the leader answered an epoch
  the follower does not know, it truncates to the end of its own largest epoch below that
  and asks again. A log with no epochs, or one whose epoch the leader no longer knows (no end
  offset answered), truncates to its high watermark. No divergent
  history survives: what the old leader wrote and nobody replicated goes.
- **Fetching**: Fetch from the log end with ``replica_id`` = this broker
  (``replica.fetch.max.bytes`` a partition, ``replica.fetch.response.max.bytes`` in all,
  ``replica.fetch.wait.max.ms``, ``replica.fetch.min.bytes``); the batches are appended
  through storage's follower path (offsets and epochs kept), the high watermark becomes
  the leader's, cut to the log end, and the log start offset follows the leader's.

Errors: a fenced or unknown leader epoch, or a broker that does not lead, pause the
partition for ``replica.fetch.backoff.ms`` (a new LeaderAndIsr will come); a fetch offset
below the leader's log start starts the log again there; one above the leader's end
truncates again (an unclean election); a lost connection pauses the fetcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..client import PLAINTEXT, AsyncConnection, ClientSecurity
from ..common import ZERO_UUID, TopicPartition
from ..config import BrokerConfig
from ..coordinator.partitioning import java_string_hash
from ..errors import BrokerNotAvailableError, InvalidResponseError, OffsetOutOfRangeError, SeglogError, error_name
from ..protocol import ApiKey
from ..protocol.message_data import FetchRequestData, FetchResponseData, OffsetForLeaderEpochRequestData
from .partition import Partition

log = logging.getLogger(__name__)

Run = Callable[..., Awaitable[Any]]  # runs a storage call in an I/O thread
Endpoint = Callable[[int], tuple[str, int] | None]  # a broker's (host, port), if known


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``getFetcherId``: ``Utils.abs(31 * topic.hashCode + partition) % num_fetchers``."""
    h = (31 * java_string_hash(topic) + partition) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return (0 if h == -(1 << 31) else abs(h)) % num_fetchers


def truncation_offset(partition: Partition, leader_epoch: int, leader_end_offset: int) -> tuple[int, bool]:
    """Where to truncate after the leader answered (``leader_epoch``, ``leader_end_offset``)
    to OffsetForLeaderEpoch, and whether truncation is done (Kafka's
    ``getOffsetTruncationState``)."""
    leo = partition.log_end_offset
    if leader_end_offset < 0:
        # The leader knows no epoch this old, so nothing can be compared: like Kafka, keep only
        # what the initial fetch offset (the high watermark) covers, as a log without epochs does.
        return min(partition.high_watermark, leo), True
    if leader_epoch < 0:
        return min(leader_end_offset, leo), True
    follower_epoch, follower_end = partition.end_offset_for_epoch(leader_epoch)
    if follower_end < 0:  # no epochs of ours (Kafka: endOffsetForEpoch None): the leader's end is all there is
        return min(leader_end_offset, leo), True
    if follower_epoch != leader_epoch:  # an epoch we never had: cut to our previous one, ask again
        return min(follower_end, leo), False
    return min(follower_end, leader_end_offset, leo), True


@dataclass(eq=False)
class _FetchState:
    partition: Partition
    leader_epoch: int
    topic_id: uuid.UUID
    truncating: bool = True
    fetch_offset: int = -1
    delayed_until: float = 0.0


class ReplicaFetcher:
    """One connection to a leader and the partitions fetched through it."""

    def __init__(
        self,
        leader_id: int,
        fetcher: int,
        config: BrokerConfig,
        broker_id: int,
        endpoint: Endpoint,
        run: Run,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.leader_id = leader_id
        self.config = config
        self.broker_id = broker_id
        self._endpoint = endpoint
        self._run = run
        self._security = security
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._wake = asyncio.Event()
        self._connection: AsyncConnection | None = None
        self._name = f"ReplicaFetcher-{fetcher}-{leader_id}"
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._loop(), name=self._name)

    def add(self, partition: Partition) -> None:
        tp = TopicPartition(partition.topic, partition.index)
        self.partitions[tp] = _FetchState(partition, partition.leader_epoch, partition.topic_id)
        self._wake.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def close(self) -> asyncio.Task[None]:
        """Stop fetching; the task to await for it to be done."""
        self._closed = True
        self._wake.set()
        self._task.cancel()
        if self._connection is not None:
            self._connection.close()
        return self._task

    # --- the loop ------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        backoff = self.config["replica.fetch.backoff.ms"] / 1000
        # the flag as well as the cancel: Python 3.11's wait_for drops a cancel that comes in
        # the turn its wait ends, and the loop would go on after close()
        while not self._closed:
            try:
                await self._round()
            except (BrokerNotAvailableError, InvalidResponseError) as e:  # the connection is closed: connect again
                log.info("%s: %s; retrying in %.1f s", self._name, e, backoff)
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("%s: fetch round failed", self._name)
                await asyncio.sleep(backoff)

    async def _round(self) -> None:
        now = asyncio.get_running_loop().time()
        ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until <= now}
        if not ready:
            self._wake.clear()
            delays = [st.delayed_until - now for st in self.partitions.values()]
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(delays) if delays else None)
            return
        connection = self._connect()
        truncating = {tp: st for tp, st in ready.items() if st.truncating}
        if truncating:
            await self._truncate(connection, truncating)
        else:
            await self._fetch(connection, ready)

    def _connect(self) -> AsyncConnection:
        found = self._endpoint(self.leader_id)
        if found is None:
            raise BrokerNotAvailableError(f"leader {self.leader_id}'s endpoint is not known yet")
        old = self._connection
        if old is None or (old.host, old.port) != found:
            if old is not None:
                old.close()
            timeout = self.config["replica.socket.timeout.ms"] / 1000
            self._connection = AsyncConnection(
                found[0], found[1], f"broker-{self.broker_id}-fetcher", timeout, self._security
            )
        assert self._connection is not None
        return self._connection

    def _current(self, tp: TopicPartition, st: _FetchState) -> bool:
        """The partition is still fetched under the same state (not removed or re-added meanwhile)."""
        return self.partitions.get(tp) is st

    def _delay(self, tp: TopicPartition, st: _FetchState, why: str) -> None:
        log.info("%s: %s-%d paused: %s", self._name, tp[0], tp[1], why)
        st.delayed_until = asyncio.get_running_loop().time() + self.config["replica.fetch.backoff.ms"] / 1000

    # --- truncation ----------------------------------------------------------------------------------

    async def _truncate(self, connection: AsyncConnection, states: dict[TopicPartition, _FetchState]) -> None:
        asks: dict[TopicPartition, tuple[_FetchState, int]] = {}
        for tp, st in states.items():
            epoch = st.partition.latest_epoch
            if epoch is None:  # a log without epochs: keep what the high watermark covers
                leo = await self._run(st.partition.truncate, st.partition.high_watermark, st.leader_epoch)
                self._truncated(tp, st, leo)
            else:
                asks[tp] = (st, epoch)
        if not asks:
            return
        by_topic: dict[str, list[OffsetForLeaderEpochRequestData.OffsetForLeaderPartition]] = {}
        for (topic, index), (st, epoch) in asks.items():
            by_topic.setdefault(topic, []).append(
                OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(
                    partition=index, current_leader_epoch=st.leader_epoch, leader_epoch=epoch
                )
            )
        body = OffsetForLeaderEpochRequestData(
            replica_id=self.broker_id,
            topics=[
                OffsetForLeaderEpochRequestData.OffsetForLeaderTopic(topic=t, partitions=parts)
                for t, parts in by_topic.items()
            ],
        )
        answer = await connection.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body)
        for topic in answer.body.topics:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                if tp not in asks or not self._current(tp, asks[tp][0]):
                    continue
                st = asks[tp][0]
                if part.error_code:
                    self._delay(tp, st, f"OffsetForLeaderEpoch error {error_name(part.error_code)}")
                    continue
                offset, done = truncation_offset(st.partition, part.leader_epoch, part.end_offset)
                before = st.partition.log_end_offset
                leo = await self._run(st.partition.truncate, offset, st.leader_epoch)
                if leo < before:
                    log.info(
                        "%s: %s-%d truncated from %d to %d (leader epoch %d)",
                        self._name,
                        *tp,
                        before,
                        leo,
                        st.leader_epoch,
                    )
                if done:
                    self._truncated(tp, st, leo)

    def _truncated(self, tp: TopicPartition, st: _FetchState, leo: int) -> None:
        if self._current(tp, st):
            st.truncating = False
            st.fetch_offset = leo

    # --- fetching ------------------------------------------------------------------------------------

    async def _fetch(self, connection: AsyncConnection, states: dict[TopicPartition, _FetchState]) -> None:
        c = self.config
        by_topic: dict[str, list[FetchRequestData.FetchPartition]] = {}
        ids: dict[str, uuid.UUID] = {}
        for (topic, index), st in states.items():
            ids[topic] = st.topic_id
            by_topic.setdefault(topic, []).append(
                FetchRequestData.FetchPartition(
                    partition=index,
                    current_leader_epoch=st.leader_epoch,
                    fetch_offset=st.fetch_offset,
                    log_start_offset=st.partition.log_start_offset,
                    partition_max_bytes=c["replica.fetch.max.bytes"],
                )
            )
        body = FetchRequestData(
            replica_id=self.broker_id,
            replica_state=FetchRequestData.ReplicaState(replica_id=self.broker_id),
            max_wait_ms=c["replica.fetch.wait.max.ms"],
            min_bytes=c["replica.fetch.min.bytes"],
            max_bytes=c["replica.fetch.response.max.bytes"],
            session_epoch=-1,  # no fetch session: every request names all its partitions
            topics=[
                FetchRequestData.FetchTopic(topic=t, topic_id=ids[t], partitions=parts) for t, parts in by_topic.items()
            ],
        )
        by_name = all(i != ZERO_UUID for i in ids.values())  # from v13 partitions are named by topic id
        answer = await connection.request(ApiKey.FETCH, body, None if by_name else 12)
        response: FetchResponseData = answer.body
        names = {i: t for t, i in ids.items()}
        if response.error_code:
            for tp, st in states.items():
                self._delay(tp, st, f"Fetch error {error_name(response.error_code)}")
            return
        for answered in response.responses:
            name = answered.topic if answer.api_version < 13 else names.get(answered.topic_id)
            for part in answered.partitions:
                tp = TopicPartition(name or "", part.partition_index)
                found = states.get(tp)
                if found is not None and self._current(tp, found):
                    await self._fetched(tp, found, part)

    async def _fetched(self, tp: TopicPartition, st: _FetchState, part: FetchResponseData.PartitionData) -> None:
        code = part.error_code
        if code == OffsetOutOfRangeError.error_code:
            if st.fetch_offset < part.log_start_offset:  # the leader's log starts after ours ends
                leo = await self._run(st.partition.truncate_fully_and_start_at, part.log_start_offset, st.leader_epoch)
                self._truncated(tp, st, leo)
            else:  # past the leader's end: it lost records (unclean election); find where we agree
                st.truncating = True
            return
        if code:
            self._delay(tp, st, f"Fetch error {error_name(code)}")
            return
        records = part.records if part.records is not None else b""
        try:
            leo = await self._run(
                st.partition.append_as_follower, records, st.leader_epoch, part.high_watermark, part.log_start_offset
            )
        except SeglogError as e:
            self._delay(tp, st, f"append failed: {e}")
            return
        if self._current(tp, st):
            st.fetch_offset = leo


class ReplicaFetcherManager:
    """The fetchers of this broker, by (leader, fetcher id)."""

    def __init__(
        self, config: BrokerConfig, broker_id: int, endpoint: Endpoint, run: Run, security: ClientSecurity = PLAINTEXT
    ) -> None:
        self.config = config
        self.security = security  # the fetchers' connections' (the inter-broker listener's TLS, SASL)
        self.broker_id = broker_id
        self._endpoint = endpoint
        self._run = run
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._fetched_by: dict[TopicPartition, tuple[int, int]] = {}
        self._stopped = False

    def add_partition(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader, truncating first (on the event loop). Once shut
        down, nothing: a LeaderAndIsr handled while the broker stops must not start a fetcher
        whose storage calls would go to the I/O threads being shut down."""
        if self._stopped:
            return
        tp = TopicPartition(partition.topic, partition.index)
        self.remove_partitions([tp])
        key = (partition.leader_id, fetcher_id(partition.topic, partition.index, self.config["num.replica.fetchers"]))
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = ReplicaFetcher(
                key[0], key[1], self.config, self.broker_id, self._endpoint, self._run, self.security
            )
        fetcher.add(partition)
        self._fetched_by[tp] = key

    def remove_partitions(self, tps: Iterable[tuple[str, int]]) -> None:
        """Stop fetching ``tps``; a fetcher left with nothing to fetch stops (Kafka's
        ``shutdownIdleFetcherThreads``)."""
        for topic, index in tps:
            tp = TopicPartition(topic, index)
            key = self._fetched_by.pop(tp, None)
            if key is not None:
                fetcher = self._fetchers[key]
                fetcher.remove(tp)
                if not fetcher.partitions:
                    del self._fetchers[key]
                    fetcher.close()

    async def shutdown(self) -> None:
        self._stopped = True
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._fetched_by.clear()
        tasks = [fetcher.close() for fetcher in fetchers]
        await asyncio.gather(*tasks, return_exceptions=True)
