"""Partition reassignment (Kafka's ``KafkaController.onPartitionReassignment``, KIP-455's form).

A partition moving from its original replicas ORS to target replicas TRS
(AR = TRS - ORS added, RR = ORS - TRS removed) goes in two phases::

    phase A (TRS not all in the ISR yet)
      A0  the topic znode says replicas TRS + ORS, adding AR, removing RR (so a new controller can resume)
      A1  leader epoch + 1; LeaderAndIsr to ORS, and to AR as new replicas
      A2  AR -> NewReplica
    phase B (once the leader's AlterPartition has every TRS member in the ISR)
      B1  AR -> OnlineReplica
      B2  the assignment in memory is TRS
      B3  a leader outside TRS (or dead) is replaced by the reassignment election; else leader epoch + 1
      B4  RR -> Offline (out of the ISR), DeletionStarted (StopReplica delete), Successful, NonExistent
      B6  the topic znode says TRS
      B7  the partition leaves /admin/reassign_partitions (the znode goes with the last one)
      B8  UpdateMetadata to every broker

The topic znode is written with TRS last: until then it holds ORS, so a
controller that dies midway resumes from ZooKeeper.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from ..common import TopicPartition
from ..errors import InvalidReplicaAssignmentError, SeglogError
from . import znodes
from .controller_context import ControllerContext
from .partition_state_machine import REASSIGN, PartitionStateMachine, update_leader_and_isr
from .replica_state_machine import ReplicaStateMachine
from .state_machine import PartitionState, ReplicaState
from .zk_client import DeleteOp, SetDataOp, ZkClient
from .znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment

log = logging.getLogger(__name__)


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """The assignment while moving to ``target`` (``ReplicaAssignment.reassignTo``): target first."""
    origin = [r for r in current.replicas if r not in current.adding_replicas]
    full = list(dict.fromkeys([*target, *origin]))
    return ReplicaAssignment(
        tuple(full), tuple(r for r in full if r not in origin), tuple(r for r in full if r not in target)
    )


class PartitionReassignment:
    def __init__(
        self,
        ctx: ControllerContext,
        zk: ZkClient,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
    ) -> None:
        self.ctx = ctx
        self.zk = zk
        self.partitions = partitions
        self.replicas = replicas
        self.batch = partitions.batch
        self.in_progress: set[TopicPartition] = set()

    def trigger(
        self, targets: Mapping[TopicPartition, Sequence[int]], *, from_api: bool = False
    ) -> dict[TopicPartition, SeglogError]:
        """Start (or replace) the reassignment of each partition; returns those refused, with why.
        ``from_api``: the latest request wins, so the partitions started leave /admin/reassign_partitions
        (Kafka's processApiPartitionReassignment), where a request would neither complete (its target is
        not the partition's) nor be forgotten by the next controller."""
        failed: dict[TopicPartition, SeglogError] = {}
        valid: dict[TopicPartition, Sequence[int]] = {}
        for tp, target in sorted(targets.items()):
            error = self._validate(tp, target)
            if error is None:
                valid[tp] = target
            else:
                failed[tp] = error
        if from_api:
            self.remove_from_zk(lambda tp, _replicas: tp in valid)
        for tp, target in valid.items():
            self.on_partition_reassignment(tp, reassign_to(self.ctx.assignment(tp), target))
        return failed

    def resume(self, skip: Collection[TopicPartition] = ()) -> None:
        """A new controller carries on with the reassignments the topic znodes record (but ``skip``)."""
        for tp in self.ctx.all_partitions():
            assignment = self.ctx.assignment(tp)
            if assignment.is_being_reassigned and tp not in skip:
                self.on_partition_reassignment(tp, assignment)

    def maybe_complete(self, tp: TopicPartition) -> None:
        if tp in self.in_progress and self._is_complete(tp, self.ctx.assignment(tp)):
            log.info("the target replicas of %s are all in the ISR", tp)
            self.on_partition_reassignment(tp, self.ctx.assignment(tp))

    def _validate(self, tp: TopicPartition, target: Sequence[int]) -> SeglogError | None:
        if not self.ctx.replicas(tp) or tp not in self.ctx.leadership:
            return InvalidReplicaAssignmentError(f"partition {tp} does not exist")
        if self.ctx.is_topic_queued_for_deletion(tp.topic):
            return InvalidReplicaAssignmentError(f"cannot reassign {tp}: its topic is queued for deletion")
        if not target or len(set(target)) != len(target) or min(target) < 0:
            return InvalidReplicaAssignmentError(f"invalid replica list {list(target)} for partition {tp}")
        adding = set(reassign_to(self.ctx.assignment(tp), target).adding_replicas)
        if not adding <= self.ctx.live_broker_ids:
            return InvalidReplicaAssignmentError(
                f"the reassignment of {tp} adds brokers that are not alive: {sorted(adding - self.ctx.live_broker_ids)}"
            )
        return None

    def on_partition_reassignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.ctx.topics_ineligible_for_deletion.add(tp.topic)
        self._update_current(tp, assignment)
        if not self._is_complete(tp, assignment):
            self._bump_leader_epoch_and_send(tp, assignment)  # A1
            # A2; a new controller found them Online already (they are on live brokers): they stay so
            unstarted = [
                (tp, r)
                for r in assignment.adding_replicas
                if self.ctx.replica_state(tp, r) is ReplicaState.NON_EXISTENT
            ]
            self.replicas.handle_state_changes(unstarted, ReplicaState.NEW)
            return
        added = [(tp, r) for r in assignment.adding_replicas]
        self.replicas.handle_state_changes(added, ReplicaState.ONLINE)  # B1
        completed = ReplicaAssignment(assignment.target_replicas)
        self.ctx.assignments[tp.topic][tp.partition] = completed  # B2
        self._move_leader_if_required(tp, completed)  # B3
        self._stop_removed_replicas(tp, assignment.removing_replicas)  # B4
        self._write_assignment(tp, completed)  # B6
        self.remove_from_zk(lambda p, replicas: p == tp and replicas == completed.replicas)  # B7
        self.in_progress.discard(tp)
        self.ctx.topics_ineligible_for_deletion.discard(tp.topic)
        self.batch.new_batch()  # B8
        try:
            self.batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, [tp])
            self.batch.send_requests_to_brokers()
        finally:
            self.batch.clear()
        log.info("partition %s reassigned to %s", tp, list(completed.replicas))

    def _update_current(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        current = self.ctx.assignment(tp)
        if current != assignment:
            self._write_assignment(tp, assignment)
            self.ctx.assignments[tp.topic][tp.partition] = assignment
            # a reassignment replacing another: replicas it was adding that are no longer wanted go
            unneeded = [r for r in current.replicas if r not in assignment.replicas]
            self._stop_removed_replicas(tp, unneeded)
        self.in_progress.add(tp)

    def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        state = self.zk.get_partition_state(tp)
        return state is not None and set(assignment.target_replicas) <= set(state.leader_and_isr.isr)

    def _bump_leader_epoch_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        def new_epoch(_tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderAndIsr:
            # the leader epoch goes up even without a change, so the leader takes the new replica list
            return current.leader_and_isr.new_leader(current.leader_and_isr.leader)

        done, failed = update_leader_and_isr(self.zk, self.ctx, [tp], new_epoch)
        if tp in failed:
            log.error("reassignment of %s: leader epoch not updated: %s", tp, failed[tp])
            return
        origin = [r for r in assignment.replicas if r not in assignment.adding_replicas]
        self.batch.new_batch()
        try:
            self.batch.add_leader_and_isr_request_for_brokers(origin, tp, done[tp], assignment, is_new=False)
            self.batch.add_leader_and_isr_request_for_brokers(
                assignment.adding_replicas, tp, done[tp], assignment, is_new=True
            )
            self.batch.send_requests_to_brokers()
        finally:
            self.batch.clear()

    def _move_leader_if_required(self, tp: TopicPartition, completed: ReplicaAssignment) -> None:
        leader = self.ctx.leadership[tp].leader_and_isr.leader
        if leader in completed.replicas and self.ctx.is_replica_online(leader):
            self._bump_leader_epoch_and_send(tp, completed)
        else:
            self.partitions.handle_state_changes([tp], PartitionState.ONLINE, REASSIGN)

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        replicas = [(tp, r) for r in removed]
        for target in (
            ReplicaState.OFFLINE,
            ReplicaState.DELETION_STARTED,
            ReplicaState.DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT,
        ):
            self.replicas.handle_state_changes(replicas, target)

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        partitions = dict(self.ctx.assignments[tp.topic])
        partitions[tp.partition] = assignment
        data = znodes.encode_topic(znodes.TopicAssignment(partitions, self.ctx.topic_ids.get(tp.topic)))
        self.zk.fenced_write(self.ctx.epoch_zk_version, [SetDataOp(znodes.topic_path(tp.topic), data)])

    def remove_from_zk(self, should_remove: Callable[[TopicPartition, tuple[int, ...]], bool]) -> None:
        """Take the requests ``should_remove`` picks out of /admin/reassign_partitions, deleting the znode
        when none is left (Kafka's maybeRemoveFromZkReassignment); its watch sees a new one created."""
        path = znodes.REASSIGN_PARTITIONS
        found = self.zk.get(path)
        if found is None:
            return
        try:
            pending = znodes.decode_reassignment(found[0], path)
        except SeglogError as e:
            log.warning("leaving %s as it is: %s", path, e)  # nothing of it was started either
            return
        left = {tp: replicas for tp, replicas in pending.items() if not should_remove(tp, replicas)}
        if pending and len(left) == len(pending):
            return
        log.info("removing %s from %s", ", ".join(str(tp) for tp in pending if tp not in left), path)
        version = int(found[1].version)
        op = SetDataOp(path, znodes.encode_reassignment(left), version) if left else DeleteOp(path, version)
        self.zk.fenced_write(self.ctx.epoch_zk_version, [op])
