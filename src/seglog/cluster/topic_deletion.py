"""Topic deletion, driven by /admin/delete_topics/<t> (Kafka's ``TopicDeletionManager``).

A topic queued for deletion goes through these steps, resumed whenever something
changes (a StopReplica answer, a broker coming back, a new controller)::

    partitions  -> Offline -> NonExistent; UpdateMetadata with leader -2 to every broker
    replicas on dead brokers      -> ReplicaDeletionIneligible (the topic waits for them)
    replicas on live brokers      -> Offline (StopReplica, keep) -> ReplicaDeletionStarted (StopReplica, delete)
    a broker answers without error   -> ReplicaDeletionSuccessful
    a broker answers with an error   -> ReplicaDeletionIneligible (retried when the topic is resumed)
    all replicas successful       -> NonExistent; /brokers/topics/<t>, /config/topics/<t> and
                                     /admin/delete_topics/<t> removed

With ``delete.topic.enable=false`` the request znodes are removed and nothing is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..common import TopicPartition
from ..errors import ErrorCode
from ..protocol.message_data import StopReplicaResponseData
from .controller_context import ControllerContext
from .partition_state_machine import PartitionStateMachine
from .replica_state_machine import ReplicaStateMachine
from .state_machine import PartitionState, ReplicaState
from .zk_client import DeleteOp, ZkClient
from .znodes import delete_topic_path, topic_config_path, topic_path

log = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        ctx: ControllerContext,
        zk: ZkClient,
        partitions: PartitionStateMachine,
        replicas: ReplicaStateMachine,
        enabled: bool,
    ) -> None:
        self.ctx = ctx
        self.zk = zk
        self.partitions = partitions
        self.replicas = replicas
        self.enabled = enabled
        self._started: set[str] = set()  # topics whose partitions went NonExistent already

    def enqueue(self, topics: Iterable[str]) -> None:
        """Topics named under /admin/delete_topics: queue the known ones, drop requests for unknown ones."""
        requested = set(topics)
        unknown = requested - self.ctx.all_topics
        if not self.enabled:
            unknown = requested  # deletion disabled: every request goes, as Kafka does
        if unknown:
            ops = [DeleteOp(delete_topic_path(t)) for t in sorted(unknown)]
            self.zk.fenced_write(self.ctx.epoch_zk_version, ops)
        queued = requested - unknown
        if queued - self.ctx.topics_to_be_deleted:
            log.info("topics queued for deletion: %s", ", ".join(sorted(queued - self.ctx.topics_to_be_deleted)))
        self.ctx.topics_to_be_deleted |= queued
        self.resume()

    def resume_for(self, topics: Iterable[str]) -> None:
        """Something changed for these topics (a broker came back): try their deletion again."""
        self.ctx.topics_ineligible_for_deletion -= set(topics)
        self.resume()

    def fail_replica_deletion(self, replicas: Iterable[tuple[TopicPartition, int]]) -> None:
        failed = [(tp, r) for tp, r in replicas if self.ctx.is_topic_queued_for_deletion(tp.topic)]
        if failed:
            self.ctx.topics_ineligible_for_deletion |= {tp.topic for tp, _ in failed}
            self.replicas.handle_state_changes(failed, ReplicaState.DELETION_INELIGIBLE)
        self.resume()

    def on_stop_replica_response(self, broker_id: int, response: StopReplicaResponseData) -> None:
        errors = {TopicPartition(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
        failed = [tp for tp, code in errors.items() if response.error_code != ErrorCode.NONE or code != ErrorCode.NONE]
        deleted = [(tp, broker_id) for tp in errors if tp not in failed]
        deleted = [(tp, r) for tp, r in deleted if self.ctx.replica_state(tp, r) is ReplicaState.DELETION_STARTED]
        if failed:
            log.warning("broker %d could not delete %s", broker_id, ", ".join(map(str, failed)))
            self.fail_replica_deletion([(tp, broker_id) for tp in failed])
        if deleted:
            self.replicas.handle_state_changes(deleted, ReplicaState.DELETION_SUCCESSFUL)
            self.resume()

    def resume(self) -> None:
        retry, eligible = [], []
        for topic in sorted(self.ctx.topics_to_be_deleted):
            states = [self.ctx.replica_state(tp, r) for tp, r in self._replicas_of(topic)]
            if all(s is ReplicaState.DELETION_SUCCESSFUL for s in states):
                self._complete(topic)
                continue
            if ReplicaState.DELETION_STARTED in states:
                continue  # answers outstanding
            if ReplicaState.DELETION_INELIGIBLE in states:
                retry.append(topic)
            if topic not in self.ctx.topics_ineligible_for_deletion:
                eligible.append(topic)
        if retry:
            self._retry_ineligible(retry)
        if eligible:
            self._delete(eligible)

    def _replicas_of(self, topic: str) -> list[tuple[TopicPartition, int]]:
        return self.ctx.replicas_of_partitions(self.ctx.partitions_of(topic))

    def _retry_ineligible(self, topics: list[str]) -> None:
        ineligible = [
            (tp, r)
            for t in topics
            for tp, r in self._replicas_of(t)
            if self.ctx.replica_state(tp, r) is ReplicaState.DELETION_INELIGIBLE
            and self.ctx.is_replica_online(r, include_shutting_down=True)
        ]
        self.replicas.handle_state_changes(ineligible, ReplicaState.OFFLINE)

    def _delete(self, topics: list[str]) -> None:
        unseen = [t for t in topics if t not in self._started]
        if unseen:
            partitions = [tp for t in unseen for tp in self.ctx.partitions_of(t)]
            self.partitions.handle_state_changes(partitions, PartitionState.OFFLINE)
            self.partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            self._started.update(unseen)
        # brokers stop serving the topics: leader -2 in their metadata
        batch = self.partitions.batch
        batch.new_batch()
        try:
            partitions = [tp for t in topics for tp in self.ctx.partitions_of(t)]
            batch.add_update_metadata_request_for_brokers(self.ctx.live_or_shutting_down_broker_ids, partitions)
            batch.send_requests_to_brokers()
        finally:
            batch.clear()
        dead, alive = [], []
        for topic in topics:
            for tp, r in self._replicas_of(topic):
                if not self.ctx.is_replica_online(r, include_shutting_down=True):
                    dead.append((tp, r))
                    self.ctx.topics_ineligible_for_deletion.add(topic)
                elif self.ctx.replica_state(tp, r) is not ReplicaState.DELETION_SUCCESSFUL:
                    alive.append((tp, r))
        self.replicas.handle_state_changes(dead, ReplicaState.DELETION_INELIGIBLE)
        self.replicas.handle_state_changes(alive, ReplicaState.OFFLINE)
        self.replicas.handle_state_changes(alive, ReplicaState.DELETION_STARTED)

    def _complete(self, topic: str) -> None:
        self.replicas.handle_state_changes(self._replicas_of(topic), ReplicaState.NON_EXISTENT)
        paths = [topic_path(topic), topic_config_path(topic), delete_topic_path(topic)]
        self.zk.fenced_delete_recursive(self.ctx.epoch_zk_version, paths)
        self.ctx.remove_topic(topic)
        self._started.discard(topic)
        log.info("topic %s deleted", topic)
