"""The coordinators' runtime on the broker's event loop (Kafka's ``CoordinatorRuntime``,
with its ``PartitionWriter`` and ``CoordinatorLoader``): what the group coordinator and the
transaction coordinator share, written once. Each of them keeps its state in a sans-IO
class of ``seglog.coordinator``; the runtime gives it:

- leadership: a partition of the coordinator's topic (``__consumer_offsets``,
  ``__transaction_state``) this broker leads is loaded (Kafka's ``onElection``), at
  start-up, on LeaderAndIsr (``on_leadership_change``) or when first asked about while
  led here and not loaded (``partition_error``); one no longer led is unloaded
  (``onResignation``). A partition's state follows the table below; its coordinator
  epoch is the leader epoch it was loaded at. A new leader epoch of a partition this
  broker goes on leading (the controller took a dead follower out of the ISR) changes
  nothing, as Kafka's ``onElection`` comes only to a new leader: a reload would answer the
  writes under way NOT_COORDINATOR and the requests meanwhile COORDINATOR_LOAD_IN_PROGRESS,
  and librdkafka, unsure whether such an AddPartitionsToTxn began its transaction, ends it
  with an EndTxn(abort) the coordinator answers INVALID_TXN_STATE (fatal);
- loading: the partition's log replayed by the coordinator's ``CoordinatorLoader`` in the
  I/O pool, then handed to ``Coordinator.on_loaded`` on the loop, unless the leadership
  moved on meanwhile;
- calls: ``call`` runs a coordinator method with a token and waits for ``complete`` of that
  token (answered inside the call: no future at all);
- writes (``schedule_write``): one batch appended to the partition by its leader as the
  coordinator (``AppendOrigin.COORDINATOR``: the epoch checked, sequences not), with
  acks=all: at once on the loop when no earlier write to the partition is queued and the
  log takes it without waiting as the partition's whole ISR, else in a task, the writes to
  one partition appended in the order they were scheduled (a coordinator's records must
  replay in that order) and each completed once the ISR has it. A write whose partition
  was unloaded or loaded again meanwhile completes NOT_COORDINATOR, as Kafka's runtime
  fails the writes of a coordinator epoch gone;
- time: one timer at ``Coordinator.next_deadline``, moved after every call, write and load;
- the topic: made on first need (``ensure_topic``), concurrent callers waiting for the one
  creation; a failure raises.

A partition's states (Kafka's ``CoordinatorState``, whose INITIAL is CLOSED here: a
partition the runtime holds nothing for)::

    CLOSED  --(led here)-------> LOADING --(replayed)---------> ACTIVE
    FAILED  --(led here again)-> LOADING --(the log unreadable)-> FAILED
    any     --(led elsewhere, unloaded, shutdown)-------------> CLOSED
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..common import TopicPartition
from ..errors import ErrorCode, IllegalStateTransitionError, SeglogError, TopicExistsError
from ..storage import AppendOrigin, PartitionLog
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

L = TypeVar("L")
L_co = TypeVar("L_co", covariant=True)
L_contra = TypeVar("L_contra", contravariant=True)

# (name, partitions, replication factor, topic config): the admin manager's, through ZooKeeper in a cluster
TopicCreator = Callable[[str, int, int, dict[str, Any]], Awaitable[None]]
# (error code of the append, its base offset)
WriteCallback = Callable[[int, int], None]

# while the topic is being made, a due deadline waits this long: the coordinator's partitions move meanwhile
_CREATING_RETRY_S = 0.1
_NO_ANSWER = object()


class CoordinatorState(enum.Enum):
    CLOSED = "closed"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


_S = CoordinatorState
# enum members as module constants where every request asks: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
_ACTIVE, _NONE, _COORDINATOR = _S.ACTIVE, ErrorCode.NONE, AppendOrigin.COORDINATOR
# each state, and the states it may be entered from (Kafka's CoordinatorState.canTransitionFrom)
_ENTERED_FROM: dict[CoordinatorState, frozenset[CoordinatorState]] = {
    _S.LOADING: frozenset({_S.CLOSED, _S.FAILED}),
    _S.ACTIVE: frozenset({_S.LOADING}),
    _S.FAILED: frozenset({_S.LOADING}),
    _S.CLOSED: frozenset(_S),
}


class CoordinatorLoader(Protocol[L_co]):
    """Reads a coordinator's state back from its partition (Kafka's ``CoordinatorLoader``)."""

    def replay(self, log: PartitionLog) -> L_co:
        """The state the partition's log holds at its end; pure reading, in an I/O thread."""
        ...

    def empty(self) -> L_co:
        """The state of a partition just created: nothing to read."""
        ...


class Coordinator(Protocol[L_contra]):
    """What the runtime asks of a coordinator (Kafka's ``CoordinatorShard``)."""

    def on_loaded(self, partition: int, epoch: int, loaded: L_contra) -> None:
        """Take over what the partition held, at coordinator epoch ``epoch``."""
        ...

    def on_unloaded(self, partition: int) -> None:
        """The partition is no longer coordinated here (it was LOADING or ACTIVE): drop its state."""
        ...

    def next_deadline(self) -> int | None:
        """When ``on_deadline`` is next due (wall-clock ms); None: no timer."""
        ...

    def on_deadline(self, now_ms: int) -> None:
        """Run the timers due at ``now_ms``."""
        ...


@dataclass(frozen=True)
class TopicSpec:
    """How the coordinator's topic is made."""

    name: str
    num_partitions: int
    replication_factor: int
    config: dict[str, Any]


class _Partition:
    __slots__ = ("epoch", "state", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.state = _S.CLOSED
        self.epoch = -1  # the leader epoch it is loading or was loaded at


class PartitionWriter:
    """Appends to the coordinator's partitions (Kafka's ``PartitionWriter``): acks=all, as the
    coordinator, in order per partition."""

    def __init__(self, replicas: ReplicaManager, timeout_ms: int) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self._locks: dict[TopicPartition, asyncio.Lock] = {}
        self._queued: dict[TopicPartition, int] = {}  # appends in tasks not yet in the log

    def try_append(self, tp: TopicPartition, batch: bytearray) -> tuple[int, int] | None:
        """(error, base offset) of an append written and acknowledged at once; None: nothing
        written (an earlier append is queued, or the log cannot take it so)."""
        if self._queued.get(tp):
            return None
        result = self.replicas.try_append_inline(tp, memoryview(batch), acks=-1, origin=_COORDINATOR)
        return None if result is None else (result.error_code, result.base_offset)

    def queue(self, tp: TopicPartition) -> None:
        """Hold the partition's inline appends until ``append`` of this batch is in the log:
        called as the append's task is made, so the order is the order of the calls."""
        self._queued[tp] = self._queued.get(tp, 0) + 1

    async def append(self, tp: TopicPartition, batch: bytearray) -> tuple[int, int]:
        """Append after the appends queued before (``queue`` first); (error, base offset) once
        the ISR has it. The order is kept for the append alone: the wait for the ISR is made
        without the lock, as Kafka's DelayedProduce, so one write's replication holds no other."""
        lock = self._locks.setdefault(tp, asyncio.Lock())
        queued, held = True, False

        def appended() -> None:  # in the log (or refused): the next append may go
            nonlocal queued, held
            if queued:
                queued = False
                self._queued[tp] -= 1
            if held:
                held = False
                lock.release()

        try:
            await lock.acquire()  # tasks start in the order they were made: so do the appends
            held = True
            try:
                results = await self.replicas.append_records(
                    {tp: memoryview(batch)},
                    acks=-1,
                    timeout_ms=self.timeout_ms,
                    origin=AppendOrigin.COORDINATOR,
                    on_appended=appended,
                )
                return results[tp].error_code, results[tp].base_offset
            except SeglogError as e:
                return e.error_code, -1
            except Exception as e:  # the pool shut down under us, ...: the caller is told, nothing hangs
                log.warning("append to %s failed: %s", tp, e)
                return ErrorCode.UNKNOWN_SERVER_ERROR, -1
        finally:
            appended()


class CoordinatorRuntime(Generic[L]):
    """One coordinator's partitions of its topic, on the event loop."""

    def __init__(
        self,
        topic: Callable[[], TopicSpec],
        replicas: ReplicaManager,
        loader: CoordinatorLoader[L],
        coordinator: Coordinator[L],
        create_topic: TopicCreator,
        *,
        write_timeout_ms: int,
        clock: Callable[[], int],
    ) -> None:
        self._topic = topic
        self.topic_name = topic().name
        self.replicas = replicas
        self.loader = loader
        self.coordinator = coordinator
        self._create_topic = create_topic
        self.writer = PartitionWriter(replicas, write_timeout_ms)
        self.clock = clock
        self._partitions: dict[int, _Partition] = {}
        self._tokens = itertools.count(1)
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        self._calling: Hashable | None = None  # the token of the call being run
        self._answered: dict[Hashable, Any] = {}  # its answer, when it came inside the call
        self._writes: set[asyncio.Task[None]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: int | None = None
        self._closed = False

    # --- partition states --------------------------------------------------------------------------

    def state(self, partition: int) -> CoordinatorState:
        found = self._partitions.get(partition)
        return _S.CLOSED if found is None else found.state

    def epoch(self, partition: int) -> int | None:
        """The coordinator epoch of an ACTIVE partition; None otherwise."""
        found = self._partitions.get(partition)
        return found.epoch if found is not None and found.state is _S.ACTIVE else None

    @property
    def loading(self) -> bool:
        return any(p.state is _S.LOADING for p in self._partitions.values())

    def _transition(self, partition: int, state: CoordinatorState, epoch: int = -1) -> None:
        found = self._partitions.get(partition)
        if found is None:
            found = self._partitions[partition] = _Partition(TopicPartition(self.topic_name, partition))
        if found.state not in _ENTERED_FROM[state]:
            raise IllegalStateTransitionError(
                f"{self.topic_name}-{partition} cannot move from {found.state.name} to {state.name}"
            )
        was = found.state
        if state is _S.CLOSED:
            del self._partitions[partition]
            if was in (_S.LOADING, _S.ACTIVE):
                self.coordinator.on_unloaded(partition)
            if was is _S.ACTIVE:
                log.info("unloaded %s-%d", self.topic_name, partition)
            return
        found.state = state
        if state is _S.LOADING:
            found.epoch = epoch

    def leader_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch, when this broker leads it; else None."""
        return self.replicas.leading_epoch(TopicPartition(self.topic_name, partition))

    def partition_error(self, partition: int) -> ErrorCode:
        """NONE when the partition is coordinated here now; else what to answer. A partition
        led here and not loaded (a client made the topic, or the leadership came here)
        starts loading; one no longer led is unloaded."""
        found = self._partitions.get(partition)
        if found is not None and found.state is _ACTIVE and self.replicas.leading_epoch(found.tp) is not None:
            return _NONE  # every request of a group coordinated here asks: no more calls than these
        state = self.state(partition)
        if state is _S.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.leader_epoch(partition)
        if epoch is None or state is _S.FAILED:
            if state is _S.ACTIVE:
                self._transition(partition, _S.CLOSED)
            return ErrorCode.NOT_COORDINATOR
        self._load(partition, epoch)  # CLOSED: not ACTIVE, nor LOADING, nor FAILED
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def on_leadership_change(self, leading: Iterable[tuple[str, int]], following: Iterable[tuple[str, int]]) -> None:
        """The replica manager's leadership listener: a partition of the topic led here now
        is loaded, one no longer led unloaded; one led here before keeps its state."""
        for topic, p in following:
            if topic == self.topic_name and p in self._partitions:
                self._transition(p, _S.CLOSED)
        for topic, p in leading:
            epoch = self.leader_epoch(p) if topic == self.topic_name else None
            found = self._partitions.get(p)
            if epoch is not None and (found is None or found.state is _S.FAILED):
                self._load(p, epoch)

    def startup(self) -> list[asyncio.Task[None]]:
        """Load the partitions this broker leads (one broker: all of them; a cluster's come
        with LeaderAndIsr); the loads' tasks, for a caller that waits for them."""
        count = self.replicas.metadata.partition_count(self.topic_name)
        return [self._load(p, epoch) for p in range(count) if (epoch := self.leader_epoch(p)) is not None]

    def close(self) -> None:
        """Unload every partition, stop the timer and the loads; writes under way go on
        (``shutdown`` waits for them) and complete NOT_COORDINATOR."""
        for p in list(self._partitions):
            self._transition(p, _S.CLOSED)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for task in list(self._tasks):
            task.cancel()

    async def shutdown(self) -> None:
        """``close``, then wait for the writes under way (the replica manager's pool must still run them)."""
        self.close()
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)

    # --- loading -----------------------------------------------------------------------------------

    def _load(self, partition: int, epoch: int) -> asyncio.Task[None]:
        if self.state(partition) is not _S.CLOSED and self.state(partition) is not _S.FAILED:
            self._transition(partition, _S.CLOSED)
        self._transition(partition, _S.LOADING, epoch)
        return self.spawn(self._replay(partition, epoch))

    def _current(self, partition: int, state: CoordinatorState, epoch: int) -> bool:
        found = self._partitions.get(partition)
        return found is not None and found.state is state and found.epoch == epoch

    async def _replay(self, partition: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            loaded = await self.replicas.replay(self.topic_name, partition, self.loader.replay)
        except SeglogError as e:
            if self._current(partition, _S.LOADING, epoch):
                log.error("cannot load %s-%d: %s; not coordinated here", self.topic_name, partition, e)
                self._transition(partition, _S.FAILED)
            return
        if not self._current(partition, _S.LOADING, epoch):
            return  # the leadership moved on while the partition was read
        self._activate(partition, loaded)
        took = (time.monotonic() - started) * 1000
        log.info("loaded %s-%d at epoch %d in %.0f ms", self.topic_name, partition, epoch, took)

    def _activate(self, partition: int, loaded: L) -> None:
        self._transition(partition, _S.ACTIVE)
        self.coordinator.on_loaded(partition, self._partitions[partition].epoch, loaded)
        self.reschedule()

    # --- the topic ---------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Make the coordinator's topic unless it exists (its first use); concurrent callers
        wait for the one creation. Raises what the creation raised."""
        if self.replicas.metadata.topic(self.topic_name) is not None and self._creating is None:
            return
        if self._creating is None:
            self._creating = self.spawn(self._make_topic())
        creating = self._creating
        try:
            await asyncio.shield(creating)
        finally:
            if creating.done():
                self._creating = None

    async def _make_topic(self) -> None:
        spec = self._topic()
        try:
            await self._create_topic(spec.name, spec.num_partitions, spec.replication_factor, spec.config)
        except TopicExistsError:
            return  # made meanwhile (a client, another broker): its partitions load as they are led or asked about
        for p in range(self.replicas.metadata.partition_count(spec.name)):
            epoch = self.leader_epoch(p)
            if epoch is not None and self.state(p) is _S.CLOSED:  # new, so empty: nothing to read
                self._transition(p, _S.LOADING, epoch)
                self._activate(p, self.loader.empty())

    # --- calls ---------------------------------------------------------------------------------------

    async def call(self, request: Callable[[Hashable], object]) -> Any:
        """Run ``request(token)`` (a coordinator call acting on its outputs) and wait for
        ``complete(token, answer)``; the answer."""
        token = self._calling = next(self._tokens)
        try:
            request(token)
        finally:
            self._calling = None
            answer = self._answered.pop(token, _NO_ANSWER)
            self.reschedule()
        if answer is not _NO_ANSWER:  # answered inside the call (a write made at once): no future
            return answer
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            return await future
        finally:
            self._waiting.pop(token, None)

    def complete(self, token: Hashable, answer: Any) -> None:
        """Answer the call of ``token``; the first answer wins."""
        future = self._waiting.pop(token, None)
        if future is None:
            if self._calling == token:
                self._answered.setdefault(token, answer)
        elif not future.done():
            future.set_result(answer)

    # --- writes --------------------------------------------------------------------------------------

    def schedule_write(self, partition: int, batch: bytearray, written: WriteCallback) -> asyncio.Task[None] | None:
        """Append ``batch`` to the partition and call ``written(error, base offset)``: before
        returning when the log took it at once (None), else from the returned task, once the
        ISR has it. A partition not ACTIVE here is NOT_COORDINATOR."""
        found = self._partitions.get(partition)
        if found is None or found.state is not _ACTIVE:
            written(ErrorCode.NOT_COORDINATOR, -1)
            return None
        tp, epoch = found.tp, found.epoch
        result = self.writer.try_append(tp, batch)
        if result is not None:
            written(*result)
            return None
        self.writer.queue(tp)
        task = asyncio.get_running_loop().create_task(self._write(tp, epoch, batch, written))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return task

    async def _write(self, tp: TopicPartition, epoch: int, batch: bytearray, written: WriteCallback) -> None:
        error, base_offset = await self.writer.append(tp, batch)
        if self.epoch(tp.partition) != epoch:
            error = ErrorCode.NOT_COORDINATOR  # unloaded (or loaded again) while the batch was written
        written(error, base_offset)
        self.reschedule()

    # --- time ----------------------------------------------------------------------------------------

    def reschedule(self) -> None:
        """One timer at the coordinator's next deadline, moved when that changes; none without one."""
        if self._closed:
            return
        due = self.coordinator.next_deadline()
        if due == self._timer_due and (due is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_due = due
        if due is not None:
            self._arm(max(0, due - self.clock()) / 1000)

    def _arm(self, delay_s: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._creating is not None and not self._creating.done():
            self._arm(_CREATING_RETRY_S)  # the partitions move while the topic is made
            return
        self._timer_due = None
        self.coordinator.on_deadline(self.clock())
        self.reschedule()

    def spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        """A task of the coordinator's, cancelled by ``close``."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
