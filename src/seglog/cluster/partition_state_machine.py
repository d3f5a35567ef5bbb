"""The controller's partition state machine (Kafka's ``ZkPartitionStateMachine``).

Moves partitions through the states of ``state_machine.py`` and does what each
move means::

    -> NewPartition       the assignment is known; nothing written yet
    New -> Online         the first live assigned replica leads, the live replicas are the ISR: the state
                          znode is created (leader_epoch 0, our controller epoch); LeaderAndIsr (is_new)
    Online/Offline        a leader is elected by a strategy (offline, preferred, controlled shutdown,
                          reassignment);
      -> Online           the state znode is set at its zkVersion; LeaderAndIsr to the replicas
    -> Offline            the leader is gone; nothing written (the election that follows writes)
    Offline -> NonExistent  the topic was deleted

Every write goes through ``update_leader_and_isr``: read the state znode, work
out the next ``LeaderAndIsr`` from what ZooKeeper holds (not from the cache),
set it at the zkVersion read and fenced by the controller epoch's zkVersion. A
zkVersion conflict (a leader changed the ISR meanwhile) is read again and
retried; a state written by a newer controller fails the partition; a moved
controller raises ``ControllerMovedError`` for the controller to resign.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError

from ..common import TopicPartition
from ..config import BrokerConfig, LogConfig
from ..errors import IllegalStateChangeError, NoReplicaOnlineError, SeglogError, ZooKeeperError
from . import leader_election, znodes
from .controller_channel import ControllerBrokerRequestBatch
from .controller_context import ControllerContext
from .state_machine import PartitionState, check_partition_transition
from .zk_client import CreateOp, SetDataOp, ZkClient
from .znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch

log = logging.getLogger(__name__)


class ElectionType(enum.Enum):
    OFFLINE = "offline"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    REASSIGN = "reassignment"


@dataclass(frozen=True)
class Election:
    """A leader election strategy (Kafka's ``PartitionLeaderElectionStrategy``)."""

    type: ElectionType
    allow_unclean: bool = False  # offline only: unclean for every partition, not just topics configured so


OFFLINE = Election(ElectionType.OFFLINE)
PREFERRED = Election(ElectionType.PREFERRED)
CONTROLLED_SHUTDOWN = Election(ElectionType.CONTROLLED_SHUTDOWN)
REASSIGN = Election(ElectionType.REASSIGN)

# the next LeaderAndIsr of a partition from its current state, ``current`` itself for no change, or an error
Compute = Callable[[TopicPartition, LeaderIsrAndControllerEpoch], "LeaderAndIsr | SeglogError"]


def update_leader_and_isr(
    zk: ZkClient, ctx: ControllerContext, partitions: Iterable[TopicPartition], compute: Compute
) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, SeglogError]]:
    """Apply ``compute`` to each partition's state znode with compare-and-set, retrying conflicts.

    Returns the partitions' new states (also put in the context's cache) and the partitions that failed.
    """
    done: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    failed: dict[TopicPartition, SeglogError] = {}
    remaining = list(partitions)
    while remaining:
        retry = []
        for tp in remaining:
            current = zk.get_partition_state(tp)
            if current is None:
                failed[tp] = ZooKeeperError(f"partition {tp} has no state znode", file=_state_path(tp))
                continue
            if current.controller_epoch > ctx.epoch:
                failed[tp] = IllegalStateChangeError(
                    f"leader and ISR of partition {tp} were written by a newer controller "
                    f"(epoch {current.controller_epoch} > {ctx.epoch})"
                )
                continue
            new = compute(tp, current)
            if isinstance(new, SeglogError):
                failed[tp] = new
                continue
            if new is current.leader_and_isr:
                done[tp] = ctx.leadership[tp] = current
                continue
            written = set_leader_and_isr(zk, ctx, tp, new)
            if written is None:
                retry.append(tp)  # changed since we read it: read again
            else:
                done[tp] = ctx.leadership[tp] = written
        remaining = retry
    return done, failed


def set_leader_and_isr(
    zk: ZkClient, ctx: ControllerContext, tp: TopicPartition, new: LeaderAndIsr
) -> LeaderIsrAndControllerEpoch | None:
    """Write ``new`` at its ``partition_epoch`` (the zkVersion it was computed from); None if that moved on."""
    state = LeaderIsrAndControllerEpoch(new, ctx.epoch)
    op = SetDataOp(_state_path(tp), znodes.encode_partition_state(state), new.partition_epoch)
    (result,) = zk.fenced_try(ctx.epoch_zk_version, [op])
    if isinstance(result, BadVersionError):
        return None
    if isinstance(result, Exception):
        raise ZooKeeperError(f"setting the state of partition {tp} failed: {type(result).__name__}", file=op.path)
    lai = LeaderAndIsr(new.leader, new.leader_epoch, new.isr, new.leader_recovery_state, int(result.version))
    return LeaderIsrAndControllerEpoch(lai, ctx.epoch)


def _state_path(tp: TopicPartition) -> str:
    return znodes.partition_state_path(tp.topic, tp.partition)


class PartitionStateMachine:
    def __init__(
        self, ctx: ControllerContext, zk: ZkClient, batch: ControllerBrokerRequestBatch, config: BrokerConfig
    ) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch
        self.config = config

    def startup(self) -> None:
        """Partitions with a live leader are Online, with a dead one Offline, without a state New; then elect."""
        for tp in self.ctx.all_partitions():
            state = self.ctx.leadership.get(tp)
            if state is None:
                self.ctx.partition_states[tp] = PartitionState.NEW
            elif self.ctx.is_replica_online(state.leader_and_isr.leader, include_shutting_down=True):
                self.ctx.partition_states[tp] = PartitionState.ONLINE
            else:
                self.ctx.partition_states[tp] = PartitionState.OFFLINE
        self.trigger_online_partition_state_change()

    def trigger_online_partition_state_change(self) -> dict[TopicPartition, SeglogError]:
        """Bring every New or Offline partition (of topics not being deleted) online."""
        waiting = [
            tp
            for tp, state in sorted(self.ctx.partition_states.items())
            if state in (PartitionState.NEW, PartitionState.OFFLINE)
            and not self.ctx.is_topic_queued_for_deletion(tp.topic)
        ]
        return self.handle_state_changes(waiting, PartitionState.ONLINE, OFFLINE)

    def handle_state_changes(
        self, partitions: Sequence[TopicPartition], target: PartitionState, election: Election | None = None
    ) -> dict[TopicPartition, SeglogError]:
        """Move ``partitions`` to ``target``; returns those that could not move, with why."""
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            failed = self._do_handle(partitions, target, election)
            self.batch.send_requests_to_brokers()
        finally:
            self.batch.clear()
        for tp, error in failed.items():
            log.warning("partition %s stays %s: %s", tp, self.ctx.partition_state(tp), error)
        return failed

    def _do_handle(
        self, partitions: Sequence[TopicPartition], target: PartitionState, election: Election | None
    ) -> dict[TopicPartition, SeglogError]:
        failed: dict[TopicPartition, SeglogError] = {}
        valid = []
        for tp in partitions:
            try:
                check_partition_transition(tp, self.ctx.partition_state(tp), target)
                valid.append(tp)
            except IllegalStateChangeError as e:
                failed[tp] = e
        if target is PartitionState.ONLINE:
            new = [tp for tp in valid if self.ctx.partition_state(tp) is PartitionState.NEW]
            existing = [tp for tp in valid if self.ctx.partition_state(tp) is not PartitionState.NEW]
            failed.update(self._initialize_leader_and_isr(new))
            failed.update(self.elect_leaders(existing, election or OFFLINE))
            for tp in valid:
                if tp not in failed:
                    self.ctx.partition_states[tp] = PartitionState.ONLINE
        elif target is PartitionState.NON_EXISTENT:
            for tp in valid:
                self.ctx.partition_states.pop(tp, None)
        else:
            for tp in valid:
                self.ctx.partition_states[tp] = target
        return failed

    def _initialize_leader_and_isr(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, SeglogError]:
        failed: dict[TopicPartition, SeglogError] = {}
        for tp in partitions:
            try:
                lai = leader_election.initial_leader_and_isr(tp, self.ctx.replicas(tp), self.ctx.live_broker_ids)
            except NoReplicaOnlineError as e:
                failed[tp] = e
                continue
            state = LeaderIsrAndControllerEpoch(lai, self.ctx.epoch)
            # the parents are plain empty znodes: made unfenced, as Kafka makes them
            self.zk.ensure_path(znodes.partition_path(tp.topic, tp.partition))
            op = CreateOp(_state_path(tp), znodes.encode_partition_state(state))
            (result,) = self.zk.fenced_try(self.ctx.epoch_zk_version, [op])
            if isinstance(result, NodeExistsError):
                failed[tp] = IllegalStateChangeError(f"the state znode of new partition {tp} exists already")
                continue
            if isinstance(result, Exception):
                raise ZooKeeperError(f"creating the state of partition {tp} failed: {result!r}", file=op.path)
            self.ctx.leadership[tp] = state
            self.batch.add_leader_and_isr_request_for_brokers(lai.isr, tp, state, self.ctx.assignment(tp), is_new=True)
        return failed

    def elect_leaders(
        self, partitions: Sequence[TopicPartition], election: Election
    ) -> dict[TopicPartition, SeglogError]:
        """Elect a leader for each partition; LeaderAndIsr to the replicas the election names."""
        recipients: dict[TopicPartition, tuple[int, ...]] = {}
        unclean = {tp.topic: self._unclean_enabled(tp.topic, election) for tp in partitions}

        def compute(tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderAndIsr | SeglogError:
            result = self._elect(tp, current.leader_and_isr, election, unclean[tp.topic])
            if result.leader_and_isr is None:
                return NoReplicaOnlineError(
                    f"no replica of partition {tp} can lead by the {election.type.value} election "
                    f"(assigned {list(self.ctx.replicas(tp))}, ISR {list(current.leader_and_isr.isr)}, "
                    f"live brokers {sorted(self.ctx.live_broker_ids)})"
                )
            recipients[tp] = result.live_replicas
            return result.leader_and_isr

        done, failed = update_leader_and_isr(self.zk, self.ctx, partitions, compute)
        for tp, state in done.items():
            self.batch.add_leader_and_isr_request_for_brokers(
                recipients[tp], tp, state, self.ctx.assignment(tp), is_new=False
            )
        return failed

    def _elect(
        self, tp: TopicPartition, current: LeaderAndIsr, election: Election, unclean: bool
    ) -> leader_election.ElectionResult:
        replicas = self.ctx.replicas(tp)
        if election.type is ElectionType.PREFERRED:
            return leader_election.leader_for_preferred_replica(replicas, current, self.ctx.live_broker_ids)
        if election.type is ElectionType.REASSIGN:
            return leader_election.leader_for_reassign(self.ctx.assignment(tp), current, self.ctx.live_broker_ids)
        if election.type is ElectionType.CONTROLLED_SHUTDOWN:
            return leader_election.leader_for_controlled_shutdown(
                replicas, current, self.ctx.live_or_shutting_down_broker_ids, self.ctx.shutting_down_broker_ids
            )
        return leader_election.leader_for_offline(replicas, current, self.ctx.live_broker_ids, unclean)

    def _unclean_enabled(self, topic: str, election: Election) -> bool:
        if election.type is not ElectionType.OFFLINE:
            return False
        if election.allow_unclean:
            return True
        # the topic's override, else the broker's default (Kafka reads /config/topics/<t> here too); other
        # keys there are not the controller's to judge
        key = "unclean.leader.election.enable"
        overrides = {k: v for k, v in self.zk.get_topic_config(topic).items() if k == key}
        return bool(LogConfig(self.config, overrides).unclean_leader_election_enable)
