"""The transaction coordinator driven by requests and a fake clock, its records appended
to a real __transaction_state log and reloaded; producer ids from a real block file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import seglog
from seglog.config import BrokerConfig
from seglog.coordinator.group_coordinator import Reply
from seglog.coordinator.partitioning import partition_for
from seglog.coordinator.producer_id_manager import ProducerIdManager, producer_id_block_path
from seglog.coordinator.transaction_coordinator import (
    ErrorCode,
    InitProducerIdRequest,
    InitProducerIdResponse,
    StoreTransaction,
    TransactionConfig,
    TransactionCoordinator,
    WriteTxnMarkers,
)
from seglog.coordinator.transaction_records import (
    TransactionLogKey,
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from seglog.coordinator.transaction_state import TransactionState as S
from seglog.errors import IllegalStateTransitionError, InvalidConfigurationError, KafkaStorageError, SeglogError
from seglog.records import Record

TX = "payments-tx"
TIMEOUT = 60_000
DAY = 24 * 3600 * 1000
P0, P1 = ("orders", 0), ("orders", 1)


@pytest.fixture
def txn_log(tmp_path: Path):
    manager = seglog.open(str(tmp_path / "logs"), background=False)
    manager.create_topic("__transaction_state", 1, {"cleanup.policy": "compact"})
    yield manager.partition("__transaction_state", 0)
    manager.close()


class Txns:
    """A coordinator, a clock, a real log its records go to, outputs kept by kind."""

    def __init__(self, tmp_path: Path, log, **config) -> None:
        self.path = producer_id_block_path(str(tmp_path))
        self.log = log
        self.now = 0
        self.coordinator = TransactionCoordinator(ProducerIdManager(self.path), TransactionConfig(**config))
        self.replies: dict = {}
        self.stores: list[StoreTransaction] = []
        self.markers: list[WriteTxnMarkers] = []
        self.tokens = iter(range(10**6))

    def take(self, outputs) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                assert out.token not in self.replies
                self.replies[out.token] = out.response
            elif isinstance(out, StoreTransaction):
                self.stores.append(out)
            else:
                self.markers.append(out)

    def init(self, txn_id: str | None = TX, timeout: int = TIMEOUT, **kw):
        token = next(self.tokens)
        request = InitProducerIdRequest(txn_id, timeout, **kw)
        self.take(self.coordinator.init_producer_id(token, request, self.now))
        return token

    def add(self, pid: int, epoch: int, *partitions, txn_id: str = TX):
        token = next(self.tokens)
        self.take(self.coordinator.add_partitions_to_txn(token, txn_id, pid, epoch, partitions, self.now))
        return token

    def add_offsets(self, pid: int, epoch: int, group: str):
        token = next(self.tokens)
        self.take(self.coordinator.add_offsets_to_txn(token, TX, pid, epoch, group, self.now))
        return token

    def end(self, pid: int, epoch: int, commit: bool, txn_id: str = TX):
        token = next(self.tokens)
        self.take(self.coordinator.end_txn(token, txn_id, pid, epoch, commit, self.now))
        return token

    def store(self, error: int = 0) -> TransactionLogValue | None:
        """Append the oldest record to the log and complete it; its decoded value."""
        out = self.stores.pop(0)
        assert out.partition == partition_for(out.transactional_id, 50)
        assert decode_key(out.key) == TransactionLogKey(out.transactional_id)
        if error == 0:
            self.log.append([Record(out.key, out.value)])
        self.take(self.coordinator.complete_store(out.store_id, error, self.now))
        return None if out.value is None else decode_value(out.value)

    def markers_written(self) -> WriteTxnMarkers:
        marker = self.markers.pop(0)
        self.take(self.coordinator.complete_markers(marker.transactional_id, self.now))
        return marker

    def ready(self, txn_id: str = TX) -> tuple[int, int]:
        """InitProducerId stored: (producer id, epoch)."""
        token = self.init(txn_id)
        self.store()
        response = self.replies[token]
        assert response.error_code == 0
        return response.producer_id, response.producer_epoch

    @property
    def txn(self):
        return self.coordinator.transactions[TX]


def test_producer_ids_come_in_blocks_that_survive_a_restart(tmp_path):
    path = producer_id_block_path(str(tmp_path))
    ids = ProducerIdManager(path)
    assert [ids.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert json.loads(Path(path).read_text()) == {"version": 1, "broker": 0, "block_start": "0", "block_end": "999"}
    assert ProducerIdManager(path).generate_producer_id() == 1000  # the rest of the old block is skipped
    again = ProducerIdManager(path)
    assert [again.generate_producer_id() for _ in range(1001)][-2:] == [2999, 3000]
    assert json.loads(Path(path).read_text())["block_start"] == "3000"
    Path(path).write_text('{"version":1,"broker":0,"block_start":"5","block_end":"x"}')
    with pytest.raises(KafkaStorageError) as e:
        ProducerIdManager(path)
    assert e.value.file == path


def test_init_producer_id_gives_an_id_then_bumps_the_epoch_and_fences(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    token = t.init()
    assert token not in t.replies  # answered once the record is written
    value = t.store()
    assert (value.producer_id, value.producer_epoch, value.state, value.partitions) == (0, 0, S.EMPTY, None)
    assert value.transaction_timeout_ms == TIMEOUT
    assert t.replies[token] == InitProducerIdResponse(0, 0, 0)
    pid, epoch = t.ready()
    assert (pid, epoch) == (0, 1)
    token = t.add(pid, 0, P0)  # the first producer, fenced by the second
    assert t.replies[token].errors == {P0: ErrorCode.PRODUCER_FENCED}
    # an idempotent producer: a fresh id, epoch 0, nothing stored
    token = t.init(None)
    assert t.replies[token] == InitProducerIdResponse(0, 1, 0) and not t.stores


def test_init_producer_id_errors(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log, max_timeout_ms=100_000)
    assert t.replies[t.init("")].error_code == ErrorCode.INVALID_REQUEST
    assert t.replies[t.init(timeout=100_001)].error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert t.replies[t.init(timeout=0)].error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert not t.stores
    pid, epoch = t.ready()
    # a producer (v3+) asking to bump another producer id's epoch is fenced
    assert t.replies[t.init(producer_id=pid + 5, producer_epoch=epoch)].error_code == ErrorCode.PRODUCER_FENCED
    token = t.init(producer_id=pid, producer_epoch=epoch)  # its own: bumped
    t.store()
    assert t.replies[token] == InitProducerIdResponse(0, pid, epoch + 1)
    token = t.init(producer_id=pid, producer_epoch=epoch)  # a retry of that bump: the same epoch again
    t.store()
    assert t.replies[token] == InitProducerIdResponse(0, pid, epoch + 1)


def test_a_committed_transaction_logs_every_step_and_writes_markers(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    t.now = 100
    token = t.add(pid, epoch, P0, P1)
    value = t.store()
    assert t.replies[token].errors == {P0: 0, P1: 0}
    assert (value.state, value.partitions, value.start_timestamp_ms) == (S.ONGOING, (("orders", (0, 1)),), 100)
    token = t.add(pid, epoch, P0)  # nothing new: answered at once
    assert t.replies[token].errors == {P0: 0} and not t.stores
    token = t.add_offsets(pid, epoch, "app")
    value = t.store()
    offsets_partition = ("__consumer_offsets", partition_for("app", 50))
    assert t.replies[token].error_code == 0
    assert ("__consumer_offsets", (offsets_partition[1],)) in value.partitions
    # a client may not bump its own epoch (only the coordinator's aborts carry a newer one)
    assert t.replies[t.end(pid, epoch + 1, commit=True)].error_code == ErrorCode.PRODUCER_FENCED
    t.now = 200
    token = t.end(pid, epoch, commit=True)
    value = t.store()
    assert (value.state, t.replies[token].error_code) == (S.PREPARE_COMMIT, 0)
    (marker,) = t.markers
    assert (marker.producer_id, marker.producer_epoch, marker.committed) == (pid, epoch, True)
    assert marker.partitions == {P0, P1, offsets_partition}
    # while the markers are written
    assert t.replies[t.add(pid, epoch, ("x", 0))].errors == {("x", 0): ErrorCode.CONCURRENT_TRANSACTIONS}
    assert t.replies[t.end(pid, epoch, commit=True)].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert t.replies[t.init()].error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    t.markers_written()
    value = t.store()
    assert (value.state, value.partitions, t.txn.state) == (S.COMPLETE_COMMIT, (), S.COMPLETE_COMMIT)
    assert t.replies[t.end(pid, epoch, commit=True)].error_code == 0  # a retry
    assert t.replies[t.end(pid, epoch, commit=False)].error_code == ErrorCode.INVALID_TXN_STATE
    assert t.replies[t.end(pid + 1, epoch, commit=False)].error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert t.replies[t.end(pid, epoch, True, txn_id="nobody")].error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert t.replies[t.add(pid, epoch, P0, txn_id="")].errors == {P0: ErrorCode.INVALID_REQUEST}


def test_ending_a_transaction_that_never_began_is_an_invalid_state(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    assert t.replies[t.end(pid, epoch, commit=True)].error_code == ErrorCode.INVALID_TXN_STATE


def test_the_checks_start_an_interval_after_start_up_and_none_is_due_before(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log, remove_expired_interval_ms=50_000)
    assert t.coordinator.next_deadline() is None  # no timer before start-up (not one at once)
    t.coordinator.schedule_checks(1_000)
    assert (t.coordinator.next_abort_check_ms, t.coordinator.next_expiry_check_ms) == (11_000, 51_000)
    assert t.coordinator.next_deadline() == 11_000


def test_a_timed_out_transaction_is_aborted_with_its_epoch_bumped(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    t.take(t.coordinator.tick(0))
    assert t.coordinator.next_deadline() == 10_000
    t.now = 1_000
    t.add(pid, epoch, P0)
    t.store()
    t.take(t.coordinator.tick(TIMEOUT + 1_000))  # not past start + timeout
    assert not t.stores and t.coordinator.next_deadline() == TIMEOUT + 11_000
    t.now = TIMEOUT + 11_000  # the next check, an interval later
    t.take(t.coordinator.tick(t.now))
    value = t.store()
    assert (value.state, value.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    (marker,) = t.markers
    assert (marker.committed, marker.producer_epoch, marker.partitions) == (False, epoch + 1, {P0})
    t.markers_written()
    assert t.store().state is S.COMPLETE_ABORT
    # the producer still on the old epoch is fenced
    assert t.replies[t.end(pid, epoch, commit=True)].error_code == ErrorCode.PRODUCER_FENCED


def test_init_producer_id_during_a_transaction_aborts_it_first(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    t.add(pid, epoch, P0)
    t.store()
    token = t.init()  # a new instance of the producer
    value = t.store()
    assert (value.state, value.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert t.replies[token].error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # it retries
    assert t.replies[t.init()].error_code == ErrorCode.CONCURRENT_TRANSACTIONS  # markers not yet written
    t.markers_written()
    t.store()
    assert t.ready() == (pid, epoch + 2)


def test_a_failed_append_changes_nothing(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    token = t.add(pid, epoch, P0)
    t.store(error=6)  # NOT_LEADER_OR_FOLLOWER
    assert t.replies[token].errors == {P0: ErrorCode.NOT_COORDINATOR}
    assert (t.txn.state, t.txn.pending, t.txn.partitions) == (S.EMPTY, None, set())
    # a completion that fails to be written is written again
    t.add(pid, epoch, P0)
    t.store()
    t.end(pid, epoch, commit=False)
    t.store()
    t.markers_written()
    t.store(error=7)
    assert t.txn.state is S.PREPARE_ABORT and len(t.stores) == 1
    assert t.store().state is S.COMPLETE_ABORT


def test_a_completion_whose_partition_was_unloaded_meanwhile_is_not_written_again(tmp_path, txn_log):
    """The partition's next coordinator completes the transaction from its PrepareCommit; the
    unloaded one neither retries (a stale record after the new one's) nor loops on the
    NOT_COORDINATOR its runtime answers at once while the partition is not loaded."""
    t = Txns(tmp_path, txn_log)
    pid, epoch = t.ready()
    t.add(pid, epoch, P0)
    t.store()
    t.end(pid, epoch, commit=True)
    t.store()
    t.markers_written()  # CompleteCommit asked to be written
    t.coordinator.unload_partition(partition_for(TX, 50))
    t.store(error=ErrorCode.NOT_COORDINATOR)
    assert not t.stores and not t.markers and TX not in t.coordinator.transactions


def test_an_exhausted_epoch_gets_a_new_producer_id(tmp_path, txn_log):
    value = TransactionLogValue(42, 32766, TIMEOUT, S.COMPLETE_COMMIT, (), 0, 0)
    txn_log.append([Record(encode_key(TransactionLogKey(TX)), encode_value(value))])
    t = Txns(tmp_path, txn_log)
    t.coordinator.load_partition(txn_log, partition_for(TX, 50), 3, 0)
    pid, epoch = t.ready()
    assert (pid, epoch) == (0, 0) and t.txn.last_producer_id == 42


def test_a_reloaded_partition_completes_prepared_transactions_and_times_out_ongoing_ones(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    prepared, epoch = t.ready("prepared")
    t.add(prepared, epoch, P0, txn_id="prepared")
    t.store()
    t.end(prepared, epoch, commit=True, txn_id="prepared")
    t.store()  # crash here: PrepareCommit logged, markers not written
    ongoing, epoch2 = t.ready("ongoing")
    t.add(ongoing, epoch2, P1, txn_id="ongoing")
    t.store()
    gone, _ = t.ready("gone")
    txn_log.append([Record(encode_key(TransactionLogKey("gone")), None)])

    restarted = Txns(tmp_path, txn_log)
    restarted.take(restarted.coordinator.load_partition(txn_log, partition_for("prepared", 50), 7, 0))
    assert set(restarted.coordinator.transactions) == {"prepared", "ongoing"}
    (marker,) = restarted.markers
    assert (marker.transactional_id, marker.committed, marker.partitions) == ("prepared", True, {P0})
    assert marker.coordinator_epoch == 7
    restarted.markers_written()
    assert restarted.store().state is S.COMPLETE_COMMIT
    restarted.take(restarted.coordinator.tick(TIMEOUT + 1))
    value = restarted.store()
    assert (value.state, value.producer_id) == (S.PREPARE_ABORT, ongoing)
    # the restarted coordinator never hands out an id it handed out before
    assert restarted.ready("new")[0] not in {prepared, ongoing, gone}


def test_an_idle_transactional_id_expires_with_a_tombstone(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log, transactional_id_expiration_ms=DAY)
    t.ready()
    t.take(t.coordinator.tick(DAY - 1))
    assert not t.stores
    t.take(t.coordinator.tick(DAY - 1 + 3_600_000))
    assert t.store() is None
    assert TX not in t.coordinator.transactions
    restarted = Txns(tmp_path, txn_log)
    restarted.coordinator.load_partition(txn_log, 0, 0, 0)
    assert restarted.coordinator.transactions == {}


def test_state_moves_and_config_are_checked(tmp_path, txn_log):
    t = Txns(tmp_path, txn_log)
    t.ready()
    with pytest.raises(IllegalStateTransitionError, match="Empty to CompleteAbort"):
        t.txn.prepare_complete(0)
    with pytest.raises(SeglogError, match="store 9"):
        t.coordinator.complete_store(9, 0, 0)
    with pytest.raises(SeglogError, match="no transaction markers"):
        t.coordinator.complete_markers(TX, 0)
    with pytest.raises(InvalidConfigurationError, match=r"transaction\.max\.timeout\.ms"):
        TransactionConfig(max_timeout_ms=0)
    broker = BrokerConfig({"transaction.max.timeout.ms": 5, "offsets.topic.num.partitions": 3})
    assert TransactionConfig.from_broker(broker) == TransactionConfig(max_timeout_ms=5, offsets_topic_num_partitions=3)
