"""The controller's replica state machine (Kafka's ``ZkReplicaStateMachine``).

Moves replicas through the states of ``state_machine.py`` and does what each
move means::

    -> NewReplica            LeaderAndIsr (is_new) to the replica if its partition has a leader
    -> OnlineReplica         LeaderAndIsr to the replica (its broker came back, or the controller started)
    -> OfflineReplica        StopReplica (keep the log) to it; out of the ISR of each of its partitions
                             (the leader too: leader -1; an ISR of one keeps its last member, so that
                             an unclean election stays visible), leader_epoch + 1, LeaderAndIsr to the rest
    -> ReplicaDeletionStarted     StopReplica with delete
    -> ReplicaDeletionSuccessful / Ineligible    recorded
    -> NonExistentReplica    forgotten, and taken out of the assignment in the context
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import groupby

from ..common import TopicPartition
from ..errors import IllegalStateChangeError, SeglogError
from .controller_channel import ControllerBrokerRequestBatch
from .controller_context import ControllerContext
from .partition_state_machine import update_leader_and_isr
from .state_machine import ReplicaState, check_replica_transition
from .zk_client import ZkClient
from .znodes import NO_LEADER, LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment

log = logging.getLogger(__name__)

Replica = tuple[TopicPartition, int]


class ReplicaStateMachine:
    def __init__(self, ctx: ControllerContext, zk: ZkClient, batch: ControllerBrokerRequestBatch) -> None:
        self.ctx = ctx
        self.zk = zk
        self.batch = batch

    def startup(self) -> None:
        """Replicas on live brokers are Online (LeaderAndIsr to each), the others Offline."""
        online, offline = [], []
        for tp, r in self.ctx.replicas_of_partitions(self.ctx.all_partitions()):
            if self.ctx.is_replica_online(r, include_shutting_down=True):
                self.ctx.replica_states[(tp, r)] = ReplicaState.ONLINE
                online.append((tp, r))
            elif self.ctx.is_topic_queued_for_deletion(tp.topic):
                self.ctx.replica_states[(tp, r)] = ReplicaState.DELETION_INELIGIBLE
            else:
                self.ctx.replica_states[(tp, r)] = ReplicaState.OFFLINE
                offline.append((tp, r))
        self.handle_state_changes(online, ReplicaState.ONLINE)
        self.handle_state_changes(offline, ReplicaState.OFFLINE)

    def handle_state_changes(self, replicas: Sequence[Replica], target: ReplicaState) -> None:
        if not replicas:
            return
        self.batch.new_batch()
        try:
            for replica_id, group in groupby(sorted(replicas, key=lambda x: (x[1], x[0])), key=lambda x: x[1]):
                self._do_handle(replica_id, [tp for tp, _ in group], target)
            self.batch.send_requests_to_brokers()
        finally:
            self.batch.clear()

    def _do_handle(self, replica_id: int, partitions: list[TopicPartition], target: ReplicaState) -> None:
        valid = []
        for tp in partitions:
            try:
                check_replica_transition(tp, replica_id, self.ctx.replica_state(tp, replica_id), target)
                valid.append(tp)
            except IllegalStateChangeError as e:
                log.error("%s", e)
        if target is ReplicaState.OFFLINE:
            self._go_offline(replica_id, valid)
            return
        for tp in valid:
            # a new replica going online was told in the partition's first LeaderAndIsr already
            was_new = self.ctx.replica_state(tp, replica_id) is ReplicaState.NEW
            if target is ReplicaState.NEW or (target is ReplicaState.ONLINE and not was_new):
                state = self.ctx.leadership.get(tp)
                if state is not None:
                    if target is ReplicaState.NEW and state.leader_and_isr.leader == replica_id:
                        log.error("replica %d of partition %s cannot be new: it leads the partition", replica_id, tp)
                        continue
                    is_new = target is ReplicaState.NEW
                    self.batch.add_leader_and_isr_request_for_brokers(
                        [replica_id], tp, state, self.ctx.assignment(tp), is_new
                    )
            elif target is ReplicaState.DELETION_STARTED:
                self.batch.add_stop_replica_request_for_brokers([replica_id], tp, delete=True)
            if target is ReplicaState.NON_EXISTENT:
                self._forget(replica_id, tp)
            else:
                self.ctx.replica_states[(tp, replica_id)] = target

    def _go_offline(self, replica_id: int, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.batch.add_stop_replica_request_for_brokers([replica_id], tp, delete=False)
        with_leader = [tp for tp in partitions if tp in self.ctx.leadership]
        done, failed = self.remove_replica_from_isr(replica_id, with_leader)
        for tp, state in done.items():
            if not self.ctx.is_topic_queued_for_deletion(tp.topic):
                others = [r for r in self.ctx.replicas(tp) if r != replica_id]
                self.batch.add_leader_and_isr_request_for_brokers(
                    others, tp, state, self.ctx.assignment(tp), is_new=False
                )
            self.ctx.replica_states[(tp, replica_id)] = ReplicaState.OFFLINE
        for tp, error in failed.items():
            log.warning("replica %d of partition %s could not leave the ISR: %s", replica_id, tp, error)
        for tp in partitions:
            if tp not in self.ctx.leadership:
                self.batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])
                self.ctx.replica_states[(tp, replica_id)] = ReplicaState.OFFLINE

    def remove_replica_from_isr(
        self, replica_id: int, partitions: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], dict[TopicPartition, SeglogError]]:
        def compute(_tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderAndIsr | SeglogError:
            lai = current.leader_and_isr
            if replica_id not in lai.isr:
                return lai
            leader = NO_LEADER if lai.leader == replica_id else lai.leader
            isr = lai.isr if len(lai.isr) == 1 else tuple(r for r in lai.isr if r != replica_id)
            return lai.new_leader_and_isr(leader, isr)

        return update_leader_and_isr(self.zk, self.ctx, partitions, compute)

    def _forget(self, replica_id: int, tp: TopicPartition) -> None:
        self.ctx.replica_states.pop((tp, replica_id), None)
        current = self.ctx.assignment(tp)
        topic = self.ctx.assignments.get(tp.topic)
        if topic is not None and tp.partition in topic:
            topic[tp.partition] = ReplicaAssignment(
                tuple(r for r in current.replicas if r != replica_id),
                tuple(r for r in current.adding_replicas if r != replica_id),
                tuple(r for r in current.removing_replicas if r != replica_id),
            )
