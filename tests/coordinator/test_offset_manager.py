"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete and expiry,
driven by requests and a fake clock, their records appended to a real __consumer_offsets
log and read back by the loader."""

from __future__ import annotations

import struct

import pytest

from seglog.coordinator import group_records as g
from seglog.coordinator.group_coordinator import GroupCoordinator, MemberIdentity, Reply
from seglog.coordinator.group_loader import load_groups
from seglog.coordinator.group_state import GroupState
from seglog.coordinator.offset_manager import (
    ErrorCode,
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetManager,
    PartitionCommit,
    StoreOffsets,
    TxnOffsetCommitRequest,
)
from seglog.coordinator.partitioning import partition_for
from seglog.errors import SeglogError
from seglog.records import build_batch
from seglog.records.control import end_transaction_marker

from .test_group_coordinator import G, Harness, stable_group

DAY = 24 * 3600 * 1000
RETENTION = 7 * DAY


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocol subscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Offsets:
    """An offset manager over a harness's group coordinator, its stores appended to a real
    log; replies kept by token."""

    def __init__(self, h: Harness, log) -> None:
        self.h = h
        self.log = log
        self.manager = OffsetManager(h.coordinator)
        self.replies: dict = {}
        self.stores: list[StoreOffsets] = []
        self.committing: dict[int, object] = {}  # store id -> the token of the commit it stores
        self.tokens = iter(range(10**6))

    def take(self, outputs) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                assert out.token not in self.replies
                self.replies[out.token] = out.response
            else:
                assert isinstance(out, StoreOffsets)
                self.stores.append(out)

    def commit(self, offsets: dict, **kw):
        token = ("commit", next(self.tokens))
        request = OffsetCommitRequest(kw.pop("group", G), offsets, **kw)
        self.answer(token, self.manager.commit_offsets(request, self.h.now))
        return token

    def txn_commit(self, pid: int, offsets: dict, **kw):
        token = ("txn", next(self.tokens))
        request = TxnOffsetCommitRequest("tx", kw.pop("group", G), pid, 0, offsets, **kw)
        self.answer(token, self.manager.txn_commit_offsets(request, self.h.now))
        return token

    def answer(self, token, result: OffsetCommitResponse | StoreOffsets) -> None:
        """A commit's result: its answer now, or a store whose completion answers it."""
        if isinstance(result, OffsetCommitResponse):
            self.replies[token] = result
        else:
            self.stores.append(result)
            self.committing[result.store_id] = token

    def append(self, error: int = 0) -> StoreOffsets:
        """Append the oldest store to the log (as a transactional batch for a producer)."""
        store = self.stores.pop(0)
        assert store.partition == partition_for(store.group_id, 50)
        base = -1
        if error == 0:
            transactional = store.producer_id != -1
            batch = build_batch(
                list(store.records),
                producer_id=store.producer_id,
                producer_epoch=store.producer_epoch,
                base_sequence=0 if transactional else -1,
                transactional=transactional,
                log_append_time=None,
            )
            base = self.log.append_batches(batch).first_offset
        answer = self.manager.complete_store(store.store_id, error, base)
        token = self.committing.pop(store.store_id, None)
        assert (answer is None) == (token is None)  # tombstones answer nothing
        if token is not None:
            self.replies[token] = answer
        return store

    def marker(self, pid: int, commit: bool) -> None:
        batch = build_batch(
            [end_transaction_marker(commit, 0)], producer_id=pid, producer_epoch=0, transactional=True, control=True
        )
        self.log.append_batches(batch, origin="coordinator")
        self.manager.complete_transaction(pid, commit, partition_for(G, 50))

    def fetch(self, *tps, group: str = G, stable: bool = False) -> dict:
        response = self.manager.fetch_offsets(OffsetFetchRequest(group, tps or None, stable))
        assert response.error_code == 0
        return {tp: (p.offset if p.error_code == 0 else p.error_code) for tp, p in response.partitions.items()}

    def delete(self, *tps, group: str = G):
        token = ("delete", next(self.tokens))
        self.take(self.manager.delete_offsets(token, OffsetDeleteRequest(group, tps), self.h.now))
        return self.replies[token]

    def reloaded(self) -> dict:
        """What a coordinator that loads the log afresh serves: (group, tp) -> offset."""
        coordinator = GroupCoordinator()
        for loaded in load_groups(self.log).values():
            coordinator.load_group(loaded, 0)
        fresh = OffsetManager(coordinator)
        return {
            (gid, tp): p.offset
            for gid in coordinator.groups
            for tp, p in fresh.fetch_offsets(OffsetFetchRequest(gid)).partitions.items()
        }


T0, T1, T2 = ("t", 0), ("t", 1), ("u", 0)


def test_a_members_commit_is_answered_once_stored_and_reloads(log):
    h = Harness(initial_rebalance_delay_ms=0)
    a, _ = stable_group(h, "a", "b")
    o = Offsets(h, log)
    token = o.commit({T0: PartitionCommit(10, "m", 3), T1: PartitionCommit(20, None)}, generation_id=1, member_id=a)
    assert token not in o.replies  # answered when the record is written
    assert o.fetch(T0) == {T0: -1}
    assert o.fetch(T0, stable=True) == {T0: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    o.append()
    assert o.replies[token].errors == {T0: 0, T1: 0}
    fetched = o.manager.fetch_offsets(OffsetFetchRequest(G, (T0, T1, T2))).partitions
    assert fetched == {T0: FetchedOffset(10, 3, "m"), T1: FetchedOffset(20, -1, ""), T2: FetchedOffset()}
    assert o.reloaded() == {(G, T0): 10, (G, T1): 20}


def test_commit_errors_follow_kafka(log):
    h = Harness(initial_rebalance_delay_ms=0)
    a, _ = stable_group(h, "a", "b")
    o = Offsets(h, log)
    one = {T0: PartitionCommit(1)}

    def error(**kw):
        token = o.commit(one, **kw)
        assert not o.stores
        return o.replies[token].errors[T0]

    assert error(group="unknown", generation_id=1, member_id="x") == ErrorCode.ILLEGAL_GENERATION
    assert error(generation_id=2, member_id=a) == ErrorCode.ILLEGAL_GENERATION
    assert error(generation_id=1, member_id="stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert error() == ErrorCode.UNKNOWN_MEMBER_ID  # a standalone commit to a group with members
    assert error(generation_id=1, member_id=a, group_instance_id="nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    h.join(a)  # the leader's rejoin starts a rebalance; commits are still taken while members rejoin
    assert h.group.state is GroupState.PREPARING_REBALANCE
    o.commit(one, generation_id=1, member_id=a)
    assert len(o.stores) == 1


def test_a_static_member_fenced_and_a_completing_rebalance(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    first = h.join(client="s", group_instance_id="i-1")
    h.tick(h.coordinator.next_deadline())
    member = h.replies[first].member_id
    assert h.group.state is GroupState.COMPLETING_REBALANCE
    token = o.commit({T0: PartitionCommit(1)}, generation_id=1, member_id=member, group_instance_id="i-1")
    assert o.replies[token].errors == {T0: ErrorCode.REBALANCE_IN_PROGRESS}
    token = o.commit({T0: PartitionCommit(1)}, generation_id=1, member_id="old", group_instance_id="i-1")
    assert o.replies[token].errors == {T0: ErrorCode.FENCED_INSTANCE_ID}


def test_a_commit_restarts_the_members_session(log):
    h = Harness(initial_rebalance_delay_ms=0)
    a, b = stable_group(h, "a", "b")
    o = Offsets(h, log)
    h.tick(h.now + 8_000)
    h.heartbeat(b, 1)
    o.commit({T0: PartitionCommit(1)}, generation_id=1, member_id=a)
    h.tick(h.now + 8_000)  # past a's session counted from its last heartbeat: the commit kept it
    assert set(h.group.members) == {a, b}


def test_standalone_commits_make_an_offsets_only_group(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    token = o.commit({T0: PartitionCommit(5)}, group="simple")
    o.append()
    assert o.replies[token].errors == {T0: 0}
    group = h.coordinator.groups["simple"]
    assert (group.state, group.protocol_type, group.generation_id) == (GroupState.EMPTY, None, 0)
    assert o.fetch(group="simple") == {T0: 5}
    assert o.reloaded() == {("simple", T0): 5}


def test_metadata_longer_than_the_limit_is_refused_per_partition(log):
    h = Harness(initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4)
    o = Offsets(h, log)
    # Java's String.length counts UTF-16 units: an emoji is two, an é one
    token = o.commit({T0: PartitionCommit(1, "\U0001f600" * 2 + "x"), T1: PartitionCommit(2, "éééé")}, group="s")
    o.append()
    assert o.replies[token].errors == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE, T1: 0}
    token = o.commit({T0: PartitionCommit(1, "12345")}, group="s")
    assert o.replies[token].errors == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE} and not o.stores
    assert o.fetch(group="s") == {T1: 2}


def test_a_failed_append_commits_nothing_and_says_why(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    token = o.commit({T0: PartitionCommit(1)}, group="s")
    o.append(error=6)  # NOT_LEADER_OR_FOLLOWER: the partition moved
    assert o.replies[token].errors == {T0: ErrorCode.NOT_COORDINATOR}
    assert o.fetch(T0, group="s", stable=True) == {T0: -1}
    token = o.commit({T0: PartitionCommit(1)}, group="s")
    o.append(error=10)  # MESSAGE_TOO_LARGE
    assert o.replies[token].errors == {T0: ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    with pytest.raises(SeglogError, match="offset store 99"):
        o.manager.complete_store(99, 0, 0)


def test_transactional_offsets_show_on_the_commit_marker_and_go_on_abort(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    o.commit({T0: PartitionCommit(1)})
    o.append()
    token = o.txn_commit(7, {T0: PartitionCommit(50), T1: PartitionCommit(60)})
    o.append()
    assert o.replies[token].errors == {T0: 0, T1: 0}
    assert o.fetch(T0, T1) == {T0: 1, T1: -1}  # not before the marker
    assert o.fetch(T0, stable=True) == {T0: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    o.txn_commit(8, {T2: PartitionCommit(70)})
    o.append()
    o.marker(7, commit=True)
    o.marker(8, commit=False)
    assert o.fetch(stable=True) == {T0: 50, T1: 60}
    assert o.reloaded() == {(G, T0): 50, (G, T1): 60}


def test_a_plain_commit_written_after_a_transactional_one_wins(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    o.txn_commit(7, {T0: PartitionCommit(50)})
    o.append()
    o.commit({T0: PartitionCommit(9)})
    o.append()
    o.marker(7, commit=True)
    assert o.fetch() == {T0: 9}
    assert o.reloaded() == {(G, T0): 9}


def test_transactional_commits_are_checked_like_plain_ones(log):
    h = Harness(initial_rebalance_delay_ms=0)
    a, _ = stable_group(h, "a", "b")
    o = Offsets(h, log)
    token = o.txn_commit(7, {T0: PartitionCommit(1)}, generation_id=5, member_id=a)
    assert o.replies[token].errors == {T0: ErrorCode.ILLEGAL_GENERATION}
    token = o.txn_commit(7, {T0: PartitionCommit(1)}, group="")
    assert o.replies[token].errors == {T0: ErrorCode.INVALID_GROUP_ID}
    o.txn_commit(7, {T0: PartitionCommit(1)})  # old clients send no member: taken
    assert o.stores[0].producer_id == 7


def test_fetching_several_groups_and_unknown_ones(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    o.commit({T0: PartitionCommit(3)}, group="x")
    o.append()
    responses = o.manager.fetch_offsets_of_groups(
        (OffsetFetchRequest("x"), OffsetFetchRequest("nobody", (T1,)), OffsetFetchRequest("nobody"))
    )
    assert [(r.group_id, {tp: p.offset for tp, p in r.partitions.items()}) for r in responses] == [
        ("x", {T0: 3}),
        ("nobody", {T1: -1}),
        ("nobody", {}),
    ]


def test_offset_delete_follows_the_groups_subscriptions(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    ids = [h.new_member(c, protocols=(("range", subscription("t")),)) for c in ("a",)]
    h.tick(h.coordinator.next_deadline())
    member = h.replies[ids[0]].member_id
    h.sync(member, 1, {member: b""})
    h.store_done()
    o.commit({T0: PartitionCommit(1), T2: PartitionCommit(2)}, generation_id=1, member_id=member)
    o.append()
    assert o.delete(T0, T2).errors == {T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, T2: 0}
    (tombstones,) = o.stores
    assert tombstones.records == ((g.encode_key(g.OffsetCommitKey(G, "u", 0)), None),)
    o.append()
    assert o.fetch() == {T0: 1}
    assert o.reloaded() == {(G, T0): 1}
    assert o.delete(T0, group="nobody").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert o.delete(T0, group="").error_code == ErrorCode.INVALID_GROUP_ID


def test_offset_delete_of_a_non_consumer_group_and_of_an_empty_one(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    token = h.new_member("a", protocol_type="connect")
    h.tick(h.coordinator.next_deadline())
    member = h.replies[token].member_id
    assert o.delete(T0).error_code == ErrorCode.NON_EMPTY_GROUP
    h.sync(member, 1, {member: b""})
    h.store_done()
    o.commit({T0: PartitionCommit(1)}, generation_id=1, member_id=member)
    o.append()
    h.leave(MemberIdentity(member))
    h.store_done()
    assert h.group.state is GroupState.EMPTY
    assert o.delete(T0).errors == {T0: 0}
    # its last offset gone, the empty group dies: its metadata's tombstone too
    (store,) = o.stores
    assert [k for k, _ in store.records] == [
        g.encode_key(g.OffsetCommitKey(G, "t", 0)),
        g.encode_key(g.GroupMetadataKey(G)),
    ]
    assert G not in h.coordinator.groups
    o.append()
    assert o.reloaded() == {}
    assert G not in load_groups(log)


def test_standalone_offsets_expire_from_their_commit(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    o.commit({T0: PartitionCommit(1)}, group="s")
    o.append()
    h.now = DAY
    o.commit({T1: PartitionCommit(2)}, group="s")
    o.append()
    o.take(o.manager.cleanup(RETENTION - 1))
    assert not o.stores and o.manager.next_cleanup_ms == RETENTION - 1 + 600_000
    o.take(o.manager.cleanup(RETENTION))
    o.append()
    assert o.fetch(group="s") == {T1: 2}
    o.take(o.manager.cleanup(RETENTION + DAY))
    (store,) = o.stores
    # a group that only stored offsets never wrote metadata: no GroupMetadata tombstone
    assert [v for _, v in store.records] == [None] and "s" not in h.coordinator.groups
    o.append()
    assert o.reloaded() == {}


def test_an_empty_groups_offsets_expire_from_when_it_became_empty(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    (a,) = stable_group(h, "a")
    o.commit({T0: PartitionCommit(1)}, generation_id=1, member_id=a)
    o.append()
    h.now = 10 * DAY  # the member stays for ten days (no timer runs meanwhile), then goes
    h.leave(MemberIdentity(a))
    h.store_done()
    assert h.group.state is GroupState.EMPTY
    o.take(o.manager.cleanup(10 * DAY + RETENTION - 1))  # the commit is 17 days old: kept
    assert not o.stores
    o.take(o.manager.cleanup(10 * DAY + RETENTION))
    assert [k for k, _ in o.stores[0].records] == [
        g.encode_key(g.OffsetCommitKey(G, "t", 0)),
        g.encode_key(g.GroupMetadataKey(G)),
    ]


def test_a_stable_groups_unsubscribed_offsets_expire_and_pending_ones_stay(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    token = h.new_member("a", protocols=(("range", subscription("t")),))
    h.tick(h.coordinator.next_deadline())
    a = h.replies[token].member_id
    h.sync(a, 1, {a: b""})
    h.store_done()
    X = ("x", 0)
    o.commit({T0: PartitionCommit(1), T2: PartitionCommit(2), X: PartitionCommit(5)}, generation_id=1, member_id=a)
    o.append()
    o.commit({T2: PartitionCommit(3)}, generation_id=1, member_id=a)  # not yet written: T2 stays
    o.txn_commit(7, {X: PartitionCommit(6)})  # a transaction's commit does not hold X (as in Kafka)
    h.now = RETENTION + h.now
    o.take(o.manager.cleanup(h.now))
    tombstones = o.stores[-1]
    assert tombstones.records == ((g.encode_key(g.OffsetCommitKey(G, "x", 0)), None),)
    assert o.fetch() == {T0: 1, T2: 2}


def test_a_commit_with_its_own_retention_keeps_it(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    o.commit({T0: PartitionCommit(1)}, group="s", retention_time_ms=1000)
    store = o.append()
    value = g.decode_offset_commit_value(store.records[0][1])
    assert (value.version, value.expire_timestamp) == (1, 1000)
    o.take(o.manager.cleanup(999))
    assert not o.stores
    o.take(o.manager.cleanup(1000))
    assert o.stores
