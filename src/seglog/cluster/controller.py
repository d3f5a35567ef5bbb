"""The controller (Kafka's ZooKeeper-mode ``KafkaController`` and its ``ControllerEventManager``).

Every broker runs one; the one that wins the election (``controller_election``)
is active. All its work is events on one queue, handled by one thread, in the
order they came: ZooKeeper watches, the election, the rebalance timer and
brokers' requests only queue events, so the context is never touched by two
threads. An inactive controller drops the events that need an active one::

    event                          what the active controller does
    Elected(epoch)                 load the context from ZooKeeper, watch it, UpdateMetadata to every broker,
                                   start the replica and partition state machines (LeaderAndIsr to each
                                   replica, leaders for partitions without one), run pending elections
    Resigned                       forget the context, stop the rebalance timer, drop the brokers (after a
                                   session expiry, before the next session does anything: Kafka's Expire)
    BrokerChange                   /brokers/ids changed: new brokers (UpdateMetadata, replicas Online,
                                   leaderless partitions elected), dead ones (replicas Offline, their
                                   partitions elected by the offline strategy), bounced ones (both)
    TopicChange                    /brokers/topics changed: new topics' partitions brought online
    PartitionModifications(t)      /brokers/topics/<t> changed: new partitions brought online
    PreferredReplicaElection       /admin/preferred_replica_election: elect the preferred replicas, delete it
    AutoPreferredReplicaElection   every leader.imbalance.check.interval.seconds: rebalance brokers above
                                   leader.imbalance.per.broker.percentage
    ControlledShutdown(b)          move leadership off b (controlled-shutdown strategy), b leaves the ISRs it
                                   follows; answer the partitions b still leads
    AlterPartition(b)              a leader's new ISR, checked against the broker, leader and partition
                                   epochs and written; answer the states written or why not
    ZkPartitionReassignment        /admin/reassign_partitions created: start moving those partitions
                                   (``reassignment``); each completes when its targets are all in the ISR
    ReplicaLeaderElection          ElectLeaders from a client: preferred or unclean elections, per partition
                                   elected, ELECTION_NOT_NEEDED, or why not
    ApiPartitionReassignment       AlterPartitionReassignments (KIP-455): start, replace or cancel (back to
                                   the original replicas) each partition's reassignment; the latest request
                                   wins, so those partitions leave /admin/reassign_partitions
    ListPartitionReassignments     the partitions being reassigned, with their adding and removing replicas
    TopicDeletion                  /admin/delete_topics changed: queue topics for ``topic_deletion``
    StopReplicaResponseReceived    a broker deleted (or failed to delete) replicas: deletion goes on

A write refused because another controller was elected since
(``ControllerMovedError``) ends the event and makes this controller resign; the
election goes on through its watch of /controller.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from ..common import TopicPartition
from ..config import BrokerConfig
from ..errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidTopicError,
    InvalidUpdateVersionError,
    NoReassignmentInProgressError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    SeglogError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
    ZooKeeperError,
)
from ..protocol.message_data import StopReplicaResponseData
from . import znodes
from .controller_channel import ControllerBrokerRequestBatch, ControllerChannel
from .controller_context import ControllerContext
from .controller_election import ControllerElection
from .leader_balance import partitions_to_rebalance
from .partition_state_machine import (
    CONTROLLED_SHUTDOWN,
    PREFERRED,
    Election,
    ElectionType,
    PartitionStateMachine,
    set_leader_and_isr,
)
from .reassignment import PartitionReassignment
from .replica_state_machine import ReplicaStateMachine
from .state_machine import PartitionState, ReplicaState
from .topic_deletion import TopicDeletionManager
from .zk_client import DeleteOp, SetDataOp, ZkClient, generate_cluster_id

log = logging.getLogger(__name__)
T = TypeVar("T")
RESIGN_TIMEOUT_S = 60


class _Event:
    def __init__(self, name: str, process: Callable[[], None], needs_active: bool = True) -> None:
        self.name = name
        self.process = process
        self.needs_active = needs_active


class KafkaController:
    def __init__(
        self, zk: ZkClient, broker_id: int, channel: ControllerChannel, config: BrokerConfig | None = None
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.channel = channel
        self.config = config or BrokerConfig()
        self._events: queue.Queue[_Event | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"controller-event-thread-{broker_id}", daemon=True)
        self._active = False
        self._ctx = ControllerContext()
        self._rebalance_timer: threading.Timer | None = None
        self._watchers: dict[str, Callable[[], None]] = {}
        self._election = ControllerElection(
            zk,
            broker_id,
            on_elected=lambda epoch, version: self._put("Elected", lambda: self._on_elected(epoch, version), False),
            on_resigned=self._on_resigned,
        )

    # --- lifecycle and queries (any thread) -------------------------------------------------

    def start(self) -> KafkaController:
        self._thread.start()
        self._election.start()
        return self

    def stop(self) -> None:
        """Stop taking part in the election and stop the event thread (an active controller resigns)."""
        self._election.stop()

        def shutdown() -> None:
            self._put("Shutdown", self._resign, False)
            self._events.put(None)

        if self.zk.closed:
            shutdown()
        else:  # after the election's own stop on the client's thread, so no Elected event can follow
            self.zk.submit(shutdown)
        if self._thread is not threading.current_thread():
            self._thread.join(30)
        if self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int | None:
        return self._ctx.epoch if self._active else None

    def wait_for_events(self, timeout: float = 30.0) -> None:
        """Block until the events queued before this call were handled (tests use it as a barrier)."""
        done = threading.Event()
        self._put("Barrier", done.set, False)
        if not done.wait(timeout):
            raise ZooKeeperError(f"controller {self.broker_id} did not handle its events within {timeout} s")

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self._call(lambda: self._ctx.partition_state(tp))

    def replica_state(self, tp: TopicPartition, replica: int) -> ReplicaState:
        return self._call(lambda: self._ctx.replica_state(tp, replica))

    def leadership(self) -> dict[TopicPartition, znodes.LeaderIsrAndControllerEpoch]:
        """The cached leader and ISR of every partition (what ZooKeeper held when last read or written)."""
        return self._call(lambda: dict(self._ctx.leadership))

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout: float = 30.0) -> set[TopicPartition]:
        """A broker asks to stop: leaders move off it; returns the partitions it still leads (Kafka's
        ControlledShutdown request: the broker retries while that set is not empty)."""
        return self._call(lambda: self._controlled_shutdown(broker_id, broker_epoch), timeout, needs_active=True)

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Mapping[TopicPartition, znodes.LeaderAndIsr]
    ) -> dict[TopicPartition, znodes.LeaderAndIsr | SeglogError]:
        """A leader changes the ISR of partitions it leads (KIP-497's AlterPartition): each change carries the
        leader epoch and partition epoch it was made from; returns per partition the state written or why not."""
        return self._call(lambda: self._alter_partition(broker_id, broker_epoch, changes), needs_active=True)

    def elect_leaders(
        self, partitions: Iterable[TopicPartition], unclean: bool
    ) -> dict[TopicPartition, int | SeglogError]:
        """ElectLeaders (KIP-460): per partition its new leader, or why none was elected."""
        wanted = set(partitions)
        return self._call(lambda: self._replica_leader_election(wanted, unclean), needs_active=True)

    def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, SeglogError | None]:
        """AlterPartitionReassignments (KIP-455): None as a target cancels; per partition None or why not."""
        return self._call(lambda: self._api_partition_reassignment(targets), needs_active=True)

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, znodes.ReplicaAssignment]:
        """The partitions (of ``partitions``, or all) being reassigned, with their full assignments."""
        wanted = None if partitions is None else set(partitions)
        return self._call(lambda: self._list_partition_reassignments(wanted), needs_active=True)

    def _call(self, fn: Callable[[], T], timeout: float = 30.0, needs_active: bool = False) -> T:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if needs_active and not self._active:
                future.set_exception(NotControllerError(f"broker {self.broker_id} is not the controller"))
                return
            try:
                future.set_result(fn())
            except Exception as e:
                future.set_exception(e)
                if isinstance(e, ControllerMovedError):
                    raise  # and resign

        self._put("Call", run, False)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ZooKeeperError(f"controller {self.broker_id} did not answer within {timeout} s") from None

    # --- the event thread ---------------------------------------------------------------

    def _put(self, name: str, process: Callable[[], None], needs_active: bool = True) -> None:
        self._events.put(_Event(name, process, needs_active))

    def _watcher(self, name: str, process: Callable[[], None]) -> Callable[[], None]:
        """A watch handler (run on the ZooKeeper client's thread) that only queues the event; one per name, so
        that reading a znode again re-arms the same watch instead of adding one."""
        watcher = self._watchers.get(name)
        if watcher is None:
            watcher = self._watchers[name] = lambda: self._put(name, process)
        return watcher

    def _run(self) -> None:
        while (event := self._events.get()) is not None:
            if event.needs_active and not self._active:
                continue
            try:
                event.process()
            except ControllerMovedError as e:
                log.warning("controller %d: %s; resigning", self.broker_id, e)
                self._resign()
            except Exception:
                log.exception("controller %d: event %s failed", self.broker_id, event.name)

    # --- becoming the controller, and resigning -----------------------------------------------

    def _on_elected(self, epoch: int, epoch_zk_version: int) -> None:
        if self._active:
            self._resign()
        log.info("controller %d: active at epoch %d", self.broker_id, epoch)
        self._ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        self._batch = ControllerBrokerRequestBatch(
            self.broker_id, self._ctx, self.channel, self._stop_replica_response_received
        )
        self._partitions = PartitionStateMachine(self._ctx, self.zk, self._batch, self.config)
        self._replicas = ReplicaStateMachine(self._ctx, self.zk, self._batch)
        self._deletion = TopicDeletionManager(
            self._ctx, self.zk, self._partitions, self._replicas, bool(self.config["delete.topic.enable"])
        )
        self._reassignment = PartitionReassignment(self._ctx, self.zk, self._partitions, self._replicas)
        self._reassignment_czxid: int | None = None
        self._active = True
        for path in (znodes.TOPICS, znodes.BROKER_IDS, znodes.DELETE_TOPICS):
            self.zk.ensure_path(path)
        self._load_brokers()
        self._load_topics(self.zk.watch_children(znodes.TOPICS, self._watcher("TopicChange", self._topic_change)))
        self._init_topic_deletion()
        self._send_update_metadata(self._ctx.live_or_shutting_down_broker_ids)
        self._replicas.startup()
        self._partitions.startup()
        # those asked for in /admin/reassign_partitions, then those only the topic znodes record
        self._reassignment.resume(skip=self._zk_partition_reassignment())
        self._deletion.resume()
        self._preferred_replica_election()
        self._schedule_rebalance()

    def _init_topic_deletion(self) -> None:
        # queued before the state machines start, so replicas of these topics on dead brokers are ineligible
        queued = set(self._delete_topic_requests()) & self._ctx.all_topics
        if self._deletion.enabled:
            self._ctx.topics_to_be_deleted |= queued
            dead = {
                tp.topic
                for tp, r in self._ctx.replicas_of_partitions(self._ctx.all_partitions())
                if tp.topic in queued and not self._ctx.is_replica_online(r, include_shutting_down=True)
            }
            self._ctx.topics_ineligible_for_deletion |= dead

    def _delete_topic_requests(self) -> list[str]:
        return self.zk.watch_children(znodes.DELETE_TOPICS, self._watcher("TopicDeletion", self._topic_deletion))

    def _topic_deletion(self) -> None:
        self._deletion.enqueue(self._delete_topic_requests())

    def _stop_replica_response_received(self, broker_id: int, response: StopReplicaResponseData) -> None:
        # the channel's thread: only queue it
        self._put(
            "TopicDeletionStopReplicaResponseReceived",
            lambda: self._deletion.on_stop_replica_response(broker_id, response),
        )

    def _on_resigned(self) -> None:
        # the ZooKeeper client's thread: wait until resigned (Kafka's Expire event is waited for so), so
        # that nothing this controller does under its old epoch runs on into the next session
        done = threading.Event()

        def resign() -> None:
            self._resign()
            done.set()

        self._put("Resigned", resign, False)
        if self._thread.is_alive() and not done.wait(RESIGN_TIMEOUT_S):
            log.warning("controller %d: still busy %d s after losing the election", self.broker_id, RESIGN_TIMEOUT_S)

    def _resign(self) -> None:
        if not self._active:
            return
        log.info("controller %d: resigning at epoch %d", self.broker_id, self._ctx.epoch)
        self._active = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        for broker_id in list(self._ctx.live_brokers):
            self.channel.remove_broker(broker_id)
        self._ctx = ControllerContext()

    def _load_brokers(self) -> None:
        ids = self.zk.watch_children(znodes.BROKER_IDS, self._watcher("BrokerChange", self._broker_change))
        for broker, epoch in self._read_brokers(ids):
            self._ctx.add_live_broker(broker, epoch)
            self.channel.add_broker(broker)

    def _read_brokers(self, ids: Iterable[str]) -> list[tuple[znodes.BrokerRegistration, int]]:
        out = []
        for child in sorted(ids, key=lambda c: (len(c), c)):
            if not child.isdigit():
                continue
            found = self.zk.get(znodes.broker_path(int(child)))
            if found is not None:  # gone between the listing and the read: the next change says so
                out.append((znodes.decode_broker(int(child), found[0]), int(found[1].czxid)))
        return out

    def _load_topics(self, topics: Iterable[str]) -> list[str]:
        """Read (and watch) each topic's assignment and partition states; returns the topics read."""
        loaded = []
        for topic in sorted(topics):
            assignment = self._read_topic(topic)
            if assignment is None:
                continue
            self._ctx.assignments[topic] = dict(assignment.partitions)
            for tp in self._ctx.partitions_of(topic):
                state = self.zk.get_partition_state(tp)
                if state is not None:
                    self._ctx.leadership[tp] = state
            loaded.append(topic)
        return loaded

    def _read_topic(self, topic: str) -> znodes.TopicAssignment | None:
        path = znodes.topic_path(topic)
        found = self.zk.watch_data(path, self._watcher(f"PartitionModifications({topic})", self._modified(topic)))
        if found is None:
            return None
        assignment = znodes.decode_topic(topic, found[0], path)
        if assignment.topic_id is None:
            # topics made by old tools have no id: the controller gives them one (Kafka 2.8+)
            assignment = znodes.TopicAssignment(assignment.partitions, generate_cluster_id())
            op = SetDataOp(path, znodes.encode_topic(assignment), int(found[1].version))
            self.zk.fenced_write(self._ctx.epoch_zk_version, [op])
        self._ctx.topic_ids[topic] = assignment.topic_id  # type: ignore[assignment]
        return assignment

    def _send_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self._batch.new_batch()
        try:
            self._batch.add_update_metadata_request_for_brokers(brokers, list(partitions))
            self._batch.send_requests_to_brokers()
        finally:
            self._batch.clear()

    # --- brokers --------------------------------------------------------------------

    def _broker_change(self) -> None:
        ids = self.zk.watch_children(znodes.BROKER_IDS, self._watcher("BrokerChange", self._broker_change))
        current = dict((b.broker_id, (b, epoch)) for b, epoch in self._read_brokers(ids))
        known = dict(self._ctx.broker_epochs)
        new = sorted(set(current) - set(known))
        dead = sorted(set(known) - set(current))
        bounced = sorted(b for b in set(current) & set(known) if current[b][1] != known[b])
        log.info("controller %d: brokers new %s, dead %s, bounced %s", self.broker_id, new, dead, bounced)
        for b in dead + bounced:
            self._ctx.remove_live_broker(b)
            self.channel.remove_broker(b)
        for b in new + bounced:
            self._ctx.add_live_broker(*current[b])
            self.channel.add_broker(current[b][0])
        if new:
            self._on_broker_startup(new)
        if bounced:
            self._on_broker_failure(bounced)
            self._on_broker_startup(bounced)
        if dead:
            self._on_broker_failure(dead)

    def _on_broker_startup(self, brokers: list[int]) -> None:
        existing = self._ctx.live_or_shutting_down_broker_ids - set(brokers)
        self._send_update_metadata(existing)
        self._send_update_metadata(brokers, self._ctx.leadership)
        replicas = self._ctx.replicas_on_brokers(brokers)
        deleting = [(tp, r) for tp, r in replicas if self._ctx.is_topic_queued_for_deletion(tp.topic)]
        self._replicas.handle_state_changes([x for x in replicas if x not in deleting], ReplicaState.ONLINE)
        self._partitions.trigger_online_partition_state_change()
        if deleting:
            self._deletion.resume_for({tp.topic for tp, _ in deleting})

    def _on_broker_failure(self, brokers: list[int]) -> None:
        replicas = self._ctx.replicas_on_brokers(brokers)
        live = self._ctx.live_or_shutting_down_broker_ids
        leaderless = sorted(
            tp
            for tp, state in self._ctx.leadership.items()
            if state.leader_and_isr.leader not in live and not self._ctx.is_topic_queued_for_deletion(tp.topic)
        )
        self._partitions.handle_state_changes(leaderless, PartitionState.OFFLINE)
        self._partitions.trigger_online_partition_state_change()
        deleting = [(tp, r) for tp, r in replicas if self._ctx.is_topic_queued_for_deletion(tp.topic)]
        self._replicas.handle_state_changes([x for x in replicas if x not in deleting], ReplicaState.OFFLINE)
        if deleting:
            self._deletion.fail_replica_deletion(deleting)
        if not leaderless:
            # no election sent metadata: tell the brokers who is left
            self._send_update_metadata(self._ctx.live_or_shutting_down_broker_ids)

    # --- topics and partitions -------------------------------------------------------------

    def _topic_change(self) -> None:
        topics = self.zk.watch_children(znodes.TOPICS, self._watcher("TopicChange", self._topic_change))
        new = sorted(set(topics) - self._ctx.all_topics)
        for gone in sorted(self._ctx.all_topics - set(topics)):
            self._ctx.remove_topic(gone)
        added = self._load_topics(new)
        self._on_new_partition_creation([tp for t in added for tp in self._ctx.partitions_of(t)])

    def _modified(self, topic: str) -> Callable[[], None]:
        def process() -> None:
            if topic not in self._ctx.assignments or self._ctx.is_topic_queued_for_deletion(topic):
                return
            assignment = self._read_topic(topic)
            if assignment is None:
                return  # deleted: TopicChange follows
            known = self._ctx.assignments[topic]
            added = sorted(set(assignment.partitions) - set(known))
            for p in added:
                known[p] = assignment.partitions[p]
            self._on_new_partition_creation([TopicPartition(topic, p) for p in added])

        return process

    def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        if not partitions:
            return
        log.info("controller %d: new partitions %s", self.broker_id, ", ".join(map(str, partitions)))
        replicas = self._ctx.replicas_of_partitions(partitions)
        self._partitions.handle_state_changes(partitions, PartitionState.NEW)
        self._replicas.handle_state_changes(replicas, ReplicaState.NEW)
        self._partitions.handle_state_changes(partitions, PartitionState.ONLINE)
        self._replicas.handle_state_changes(replicas, ReplicaState.ONLINE)

    # --- reassignment -------------------------------------------------------------------------

    def _zk_partition_reassignment(self) -> set[TopicPartition]:
        """Start the reassignments /admin/reassign_partitions asks for; returns the partitions started."""
        path = znodes.REASSIGN_PARTITIONS
        found = self.zk.watch_data(path, self._watcher("ZkPartitionReassignment", self._on_reassignment_znode))
        # Kafka acts when the znode is created; its later rewrites (by us, as partitions complete) are not new
        if found is None or found[1].czxid == self._reassignment_czxid:
            return set()
        self._reassignment_czxid = found[1].czxid
        try:
            targets = znodes.decode_reassignment(found[0], path)
        except SeglogError:
            log.exception("controller %d: ignoring %s", self.broker_id, path)
            return set()
        failed = self._reassignment.trigger(targets)
        for tp, error in failed.items():
            log.warning("controller %d: reassignment of %s refused: %s", self.broker_id, tp, error)
        self._reassignment.remove_from_zk(lambda tp, _replicas: tp in failed)
        return set(targets) - set(failed)

    def _on_reassignment_znode(self) -> None:
        self._zk_partition_reassignment()

    def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        self._reassignment.maybe_complete(tp)
        if self._ctx.is_topic_queued_for_deletion(tp.topic) and tp not in self._reassignment.in_progress:
            self._deletion.resume_for([tp.topic])

    # --- preferred leaders -------------------------------------------------------------------

    def _preferred_replica_election(self) -> None:
        path = znodes.PREFERRED_REPLICA_ELECTION
        found = self.zk.watch_data(path, self._watcher("PreferredReplicaElection", self._preferred_replica_election))
        if found is None:
            return
        try:
            wanted = znodes.decode_partitions(found[0], path)
        except SeglogError:
            log.exception("controller %d: ignoring %s", self.broker_id, path)
            wanted = set()
        known = [tp for tp in sorted(wanted) if tp in self._ctx.leadership]
        self._elect_preferred(known)
        # done (or impossible now): the request goes, as Kafka removes it
        self.zk.fenced_write(self._ctx.epoch_zk_version, [DeleteOp(path, int(found[1].version))])

    def _elect_preferred(self, partitions: list[TopicPartition]) -> dict[TopicPartition, SeglogError]:
        moving = [
            tp
            for tp in partitions
            if not self._ctx.is_topic_queued_for_deletion(tp.topic)
            and self._ctx.leadership[tp].leader_and_isr.leader != self._ctx.replicas(tp)[0]
        ]
        return self._partitions.handle_state_changes(moving, PartitionState.ONLINE, PREFERRED)

    def _replica_leader_election(
        self, partitions: set[TopicPartition], unclean: bool
    ) -> dict[TopicPartition, int | SeglogError]:
        # Kafka's processReplicaLeaderElection, AdminClientTriggered
        results: dict[TopicPartition, int | SeglogError] = {}
        electable = []
        for tp in sorted(partitions):
            if tp not in self._ctx.leadership:
                results[tp] = UnknownTopicOrPartitionError("The partition does not exist.")
            elif self._ctx.is_topic_queued_for_deletion(tp.topic):
                results[tp] = InvalidTopicError("The topic is being deleted")
            elif (
                self._leader(tp) in self._ctx.live_broker_ids
                if unclean
                else self._leader(tp) == self._ctx.replicas(tp)[0]
            ):
                results[tp] = ElectionNotNeededError(f"partition {tp} already has the leader the election would choose")
            else:
                electable.append(tp)
        election = Election(ElectionType.OFFLINE, allow_unclean=True) if unclean else PREFERRED
        failed = self._partitions.handle_state_changes(electable, PartitionState.ONLINE, election)
        refused = EligibleLeadersNotAvailableError if unclean else PreferredLeaderNotAvailableError
        for tp in electable:
            error = failed.get(tp)
            results[tp] = self._leader(tp) if error is None else refused(str(error))
        return results

    def _api_partition_reassignment(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, SeglogError | None]:
        # Kafka's processApiPartitionReassignment: a null target cancels, back to the original replicas
        results: dict[TopicPartition, SeglogError | None] = {}
        chosen: dict[TopicPartition, Sequence[int]] = {}
        for tp, target in sorted(targets.items()):
            if tp not in self._ctx.leadership:
                results[tp] = UnknownTopicOrPartitionError(f"partition {tp} does not exist")
                continue
            current = self._ctx.assignment(tp)
            if target is not None:
                chosen[tp] = target
            elif current.is_being_reassigned:
                chosen[tp] = [r for r in current.replicas if r not in current.adding_replicas]
            else:
                results[tp] = NoReassignmentInProgressError(f"partition {tp} is not being reassigned")
        failed = self._reassignment.trigger(chosen, from_api=True)
        for tp in chosen:
            results[tp] = failed.get(tp)
        return results

    def _list_partition_reassignments(
        self, partitions: set[TopicPartition] | None
    ) -> dict[TopicPartition, znodes.ReplicaAssignment]:
        candidates = self._ctx.all_partitions() if partitions is None else partitions
        return {
            tp: self._ctx.assignment(tp)
            for tp in sorted(candidates)
            if self._ctx.replicas(tp) and self._ctx.assignment(tp).is_being_reassigned
        }

    def _schedule_rebalance(self) -> None:
        if not self.config["auto.leader.rebalance.enable"]:
            return
        interval = float(self.config["leader.imbalance.check.interval.seconds"])
        timer = threading.Timer(
            interval, lambda: self._put("AutoPreferredReplicaLeaderElection", lambda: self._auto_rebalance(timer))
        )
        timer.daemon = True
        self._rebalance_timer = timer
        timer.start()

    def _auto_rebalance(self, timer: threading.Timer) -> None:
        if timer is not self._rebalance_timer:
            return  # queued by an earlier term as the controller: that term's timer was cancelled
        try:
            if not self._ctx.shutting_down_broker_ids:  # Kafka skips the check while a broker is stopping
                assignments = {tp: self._ctx.replicas(tp) for tp in self._ctx.all_partitions()}
                leaders = {tp: s.leader_and_isr for tp, s in self._ctx.leadership.items()}
                chosen = partitions_to_rebalance(
                    assignments,
                    leaders,
                    self._ctx.live_broker_ids,
                    int(self.config["leader.imbalance.per.broker.percentage"]),
                    self._ctx.topics_to_be_deleted,
                )
                self._elect_preferred(sorted(chosen))
        finally:
            if self._active:
                self._schedule_rebalance()

    # --- controlled shutdown ------------------------------------------------------------------

    def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        self._check_broker_epoch(broker_id, broker_epoch, "controlled shutdown", newer_ok=True)
        log.info("controller %d: shutting down broker %d", self.broker_id, broker_id)
        self._ctx.shutting_down_broker_ids.add(broker_id)
        # partitions with other replicas to take over; a topic being deleted is left alone
        acted_on = [
            tp
            for tp, _ in self._ctx.replicas_on_brokers([broker_id])
            if len(self._ctx.replicas(tp)) > 1
            and tp in self._ctx.leadership
            and not self._ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        led = [tp for tp in acted_on if self._leader(tp) == broker_id]
        followed = [tp for tp in acted_on if self._leader(tp) != broker_id]
        self._partitions.handle_state_changes(led, PartitionState.ONLINE, CONTROLLED_SHUTDOWN)
        # a follower leaves the ISRs (StopReplica without delete to it, LeaderAndIsr to the leaders)
        self._replicas.handle_state_changes([(tp, broker_id) for tp in followed], ReplicaState.OFFLINE)
        # Kafka's replicatedPartitionsBrokerLeads: an unreplicated partition cannot move and does not
        # hold the broker back, nor does a topic being deleted
        return {
            tp
            for tp in self._ctx.partitions_led_by(broker_id)
            if len(self._ctx.replicas(tp)) > 1 and not self._ctx.is_topic_queued_for_deletion(tp.topic)
        }

    def _check_broker_epoch(self, broker_id: int, broker_epoch: int, what: str, newer_ok: bool = False) -> None:
        if broker_id not in self._ctx.live_brokers:
            raise BrokerNotAvailableError(f"{what} from broker {broker_id}, which is not registered")
        current = self._ctx.broker_epochs[broker_id]
        # a controlled shutdown from a newer registration than we have seen yet is accepted, as in Kafka
        if broker_epoch < current or (broker_epoch > current and not newer_ok):
            raise StaleBrokerEpochError(
                f"{what} from broker {broker_id} with broker epoch {broker_epoch}; its registration's is {current}"
            )

    def _leader(self, tp: TopicPartition) -> int:
        return self._ctx.leadership[tp].leader_and_isr.leader

    # --- AlterPartition ------------------------------------------------------------------------

    def _alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Mapping[TopicPartition, znodes.LeaderAndIsr]
    ) -> dict[TopicPartition, znodes.LeaderAndIsr | SeglogError]:
        self._check_broker_epoch(broker_id, broker_epoch, "AlterPartition")
        results: dict[TopicPartition, znodes.LeaderAndIsr | SeglogError] = {}
        for tp, new in sorted(changes.items()):
            new = znodes.LeaderAndIsr(
                broker_id, new.leader_epoch, new.isr, new.leader_recovery_state, new.partition_epoch
            )
            verdict = self._check_alter_partition(tp, new)
            if verdict is not None:
                results[tp] = verdict
                continue
            written = set_leader_and_isr(self.zk, self._ctx, tp, new)
            if written is None:
                results[tp] = InvalidUpdateVersionError(f"the state of partition {tp} changed meanwhile")
                continue
            self._ctx.leadership[tp] = written
            results[tp] = written.leader_and_isr
        self._send_update_metadata(self._ctx.live_or_shutting_down_broker_ids, changes)
        # a reassignment waits for its target replicas to join the ISR
        for tp, result in results.items():
            if isinstance(result, znodes.LeaderAndIsr):
                self._maybe_complete_reassignment(tp)
        return results

    def _check_alter_partition(
        self, tp: TopicPartition, new: znodes.LeaderAndIsr
    ) -> znodes.LeaderAndIsr | SeglogError | None:
        """Why the change is refused, the current state if it is there already, or None to write it."""
        state = self._ctx.leadership.get(tp)
        if state is None:
            return UnknownTopicOrPartitionError(f"partition {tp} is unknown to the controller")
        current = state.leader_and_isr
        if new.partition_epoch > current.partition_epoch or new.leader_epoch > current.leader_epoch:
            # the leader knows a newer state than ours: we are probably not the controller any more
            return NotControllerError(f"partition {tp}: the leader's epochs are ahead of the controller's")
        if new.leader_epoch < current.leader_epoch:
            return FencedLeaderEpochError(
                f"partition {tp}: leader epoch {new.leader_epoch} is older than {current.leader_epoch}"
            )
        same = (new.leader, new.isr, new.leader_recovery_state) == (
            current.leader,
            current.isr,
            current.leader_recovery_state,
        )
        if same:  # idempotent: before the partition epoch check, as Kafka does
            return current
        if new.partition_epoch < current.partition_epoch:
            return InvalidUpdateVersionError(
                f"partition {tp}: partition epoch {new.partition_epoch} is older than {current.partition_epoch}"
            )
        if new.leader_recovery_state == 1 and len(new.isr) > 1:
            return InvalidRequestError(f"partition {tp}: a recovering leader cannot have an ISR of {list(new.isr)}")
        if current.leader_recovery_state == 0 and new.leader_recovery_state == 1:
            return InvalidRequestError(f"partition {tp}: the leader recovery state cannot go back to RECOVERING")
        ineligible = sorted(set(new.isr) - self._ctx.live_broker_ids)
        if ineligible:
            return IneligibleReplicaError(f"partition {tp}: the new ISR names brokers not alive: {ineligible}")
        return None
