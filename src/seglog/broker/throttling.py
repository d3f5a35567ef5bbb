"""Client quotas applied to requests: what each request counts against its client's quotas,
the ``throttle_time_ms`` its response carries, and how the client is held back.

After a request's handler has answered, the server asks ``Throttler.throttle`` (Kafka's
``KafkaApis`` and ``RequestHandlerHelper`` do this per API; here it is done once for all):

- Produce counts its request's bytes, header and body (Kafka's ``request.sizeInBytes``),
  against ``producer_byte_rate`` (an acks=0 produce too, though it gets no answer); a Fetch
  its response's records against ``consumer_byte_rate`` (Kafka counts the whole response),
  and a throttled fetch is answered without records (they are taken back from the rate: the
  client fetches them again once its throttle ends); a follower's fetch counts against neither;
- every request but the inter-broker ones and an acks=0 produce counts its handler time
  against ``request_percentage``: the time the handler ran on the event loop, not the time it
  waited (for a purgatory, a storage thread);
- a consumer's fetch asks for no more than its quota lets through in a window (its
  ``max_bytes`` cut before the handler runs, as Kafka's);
- CreateTopics, CreatePartitions and DeleteTopics count the partitions they create or delete
  against ``controller_mutation_rate`` as their handlers go (``ControllerMutationQuota``): from
  KIP-599's versions on, a topic is refused with THROTTLING_QUOTA_EXCEEDED while its client is
  over the quota; before them, the request goes through and its client is throttled;
- the response carries the larger throttle time. From the versions of KIP-219 on, the client
  waits it out itself: the response leaves at once and the connection is muted, its next
  requests neither read nor answered meanwhile. An older client is answered only once the
  throttle time has passed.
"""

from __future__ import annotations

import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, cast

from ..errors import ApiError, ErrorCode
from ..protocol import ApiKey, Request
from ..security.quotas import NANOS_TO_PERCENTAGE, ClientQuotas
from .request_context import RequestContext, current_request

# KIP-219: the first version of each API whose client waits out throttle_time_ms itself
# (each response's ``shouldClientThrottle`` in Kafka); an API not here gets its answer late
CLIENT_THROTTLES_FROM = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
    ApiKey.ELECT_LEADERS: 0,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
}

# KIP-599: the first version of each mutating API whose topics are refused once their client is
# over its controller_mutation_rate (Kafka's strictSinceVersion); older ones are let through
STRICT_MUTATIONS_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ControllerMutationQuota:
    """One request's partition creations and deletions against its client's
    ``controller_mutation_rate`` (Kafka's Strict- and PermissiveControllerMutationQuota);
    ``throttle_ms`` is what its response carries."""

    def __init__(self, quotas: ClientQuotas, api_key: ApiKey, version: int, clock: Callable[[], int] = _monotonic_ms):
        context = current_request()
        self.user, self.client_id = context.principal.name, context.client_id
        self.manager = quotas.controller_mutation
        self.strict = version >= STRICT_MUTATIONS_FROM[api_key]
        self.clock = clock
        self.throttle_ms = 0

    def record(self, partitions: int) -> None:
        """A topic's mutation of ``partitions`` partitions counted; ApiError
        THROTTLING_QUOTA_EXCEEDED (nothing counted) when the request is strict and its client
        already over its quota: a strict request's throttle time is that of its refusals."""
        now = self.clock()
        if self.strict:
            over = self.manager.throttle_time(self.user, self.client_id, now)
            if over:
                self.throttle_ms = max(self.throttle_ms, over)
                raise ApiError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")
            self.manager.record(self.user, self.client_id, partitions, now)
        else:
            throttle = self.manager.record(self.user, self.client_id, partitions, now)
            self.throttle_ms = max(self.throttle_ms, throttle)


# the inter-broker APIs (Kafka's ClusterAction ones), which no client quota holds back
EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
    }
)


class Throttler:
    """The broker's quotas applied to the requests it answers (``clock``: ms, injectable)."""

    def __init__(self, quotas: ClientQuotas, clock: Callable[[], int] = _monotonic_ms) -> None:
        self.quotas = quotas
        self.clock = clock

    def before(self, request: Request, who: RequestContext) -> bool:
        """Before the handler: a consumer's fetch cut to what its quota lets through in a
        window (Kafka's ``getMaxValueInQuotaWindow``), which a larger answer would exceed at
        once; whether the handler's time is wanted (a request quota is set and counts it)."""
        key, body = request.header.api_key, request.body
        if key == ApiKey.FETCH and self.quotas.fetch.enabled and not _from_follower(body):
            quota = self.quotas.fetch.quota(who.principal.name, who.client_id)
            if quota is not None:
                body.max_bytes = min(body.max_bytes, int(quota * self.quotas.fetch.window_bytes_factor))
        # an acks=0 produce is not held to the request quota (Kafka's handleProduceRequest: it
        # gets no answer to carry a throttle time), only to its byte rate
        return self.quotas.request.enabled and key not in EXEMPT and not (key == ApiKey.PRODUCE and body.acks == 0)

    def throttle(self, request: Request, body: Any, handler_ns: int, who: RequestContext) -> int:
        """The request counted against its client's quotas; the throttle time, ms, set on
        ``body`` (a throttled fetch's records are taken out of it)."""
        key = request.header.api_key
        if key in EXEMPT or (key == ApiKey.FETCH and _from_follower(request.body)):
            return 0
        user, client = who.principal.name, who.client_id
        now = self.clock()
        quotas = self.quotas
        throttle = quotas.request.record(user, client, handler_ns * NANOS_TO_PERCENTAGE, now) if handler_ns else 0
        if key == ApiKey.PRODUCE:
            throttle = max(throttle, quotas.produce.record(user, client, request.size, now))
        elif key == ApiKey.FETCH and quotas.fetch.enabled and body is not None:
            fetched = _fetched(body)
            throttle = max(throttle, quotas.fetch.record(user, client, fetched, now))
            if throttle:  # answered without records: they do not count
                quotas.fetch.unrecord(user, client, fetched, now)
                body.responses = []
        elif key in STRICT_MUTATIONS_FROM and body is not None:  # the handler's ControllerMutationQuota's
            throttle = max(throttle, body.throttle_time_ms)
        if throttle and body is not None:
            body.throttle_time_ms = throttle
        return throttle

    @staticmethod
    def client_throttles(request: Request) -> bool:
        """Whether the client waits out the throttle time itself (KIP-219)."""
        first = CLIENT_THROTTLES_FROM.get(request.header.api_key)
        return first is not None and request.header.api_version >= first


def _from_follower(body: Any) -> bool:
    replica_state = getattr(body, "replica_state", None)  # KIP-903 moved the replica's id there (v15)
    replica_id = replica_state.replica_id if replica_state is not None and replica_state.replica_id >= 0 else -1
    return max(replica_id, body.replica_id) >= 0


def _records_size(records: Any) -> int:
    if records is None:
        return 0
    size = getattr(records, "size", None)  # a storage FileSlice, sent with sendfile
    return size if isinstance(size, int) else len(records)


def _fetched(body: Any) -> int:
    return sum(_records_size(p.records) for t in body.responses for p in t.partitions)


@types.coroutine
def timed(
    awaitable: Awaitable[Any], clock: Callable[[], int] = time.perf_counter_ns
) -> Generator[Any, Any, tuple[Any, int]]:
    """Await ``awaitable``; its result and the time, ns, its steps ran (not the time it
    waited between them)."""
    coroutine = cast(Generator[Any, Any, Any], awaitable.__await__())
    spent = 0
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        started = clock()
        try:
            waited = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
        except StopIteration as done:
            return done.value, spent + clock() - started
        spent += clock() - started
        try:
            sent, thrown = (yield waited), None
        except BaseException as e:  # a cancellation of the task: the coroutine's to handle
            sent, thrown = None, e
