"""Kafka's transaction index (``.txnindex``): the search a read_committed fetch makes,
against Kafka's own loop over every entry; appends, truncation, a partial entry a crash
left; and the offset index's upper bound of a fetch (``fetchUpperBoundOffset``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError
from seglog.storage.index import OffsetIndex
from seglog.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, read_txn_index


def kafkas_search(entries: list[AbortedTxn], fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
    """``TransactionIndex.collectAbortedTxns`` as Kafka writes it: every entry, in order."""
    found = []
    for t in entries:
        if t.last_offset >= fetch_offset and t.first_offset < upper_bound:
            found.append(t)
        if t.last_stable_offset >= upper_bound:
            return found, True
    return found, False


@st.composite
def index_entries(draw) -> list[AbortedTxn]:
    out, last = [], draw(st.integers(0, 5))
    for _ in range(draw(st.integers(0, 12))):
        last += draw(st.integers(1, 6))
        first = last - draw(st.integers(1, 10))
        out.append(AbortedTxn(max(first, 0), last, draw(st.integers(1, 4)), draw(st.integers(0, last + 8))))
    return out


@settings(max_examples=300, deadline=None)
@given(entries=index_entries(), fetch=st.integers(0, 80), span=st.integers(1, 40))
def test_the_search_is_kafkas(tmp_path_factory, entries, fetch, span) -> None:
    path = str(tmp_path_factory.mktemp("txn") / "00000000000000000000.txnindex")
    owner = TransactionIndex(path, 0)
    owner.write(entries)
    expected = kafkas_search(entries, fetch, fetch + span)
    assert tuple(owner.collect_aborted_txns(fetch, fetch + span)) == expected
    reader = TransactionIndex(path, 0, read_only=True)
    assert tuple(reader.collect_aborted_txns(fetch, fetch + span)) == expected


def test_appends_truncation_and_a_partial_entry(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path, 0)
    assert index.entries() == [] and not index.exists()
    index.append(AbortedTxn(0, 3, 1, 4))
    with pytest.raises(CorruptIndexError):
        index.append(AbortedTxn(1, 3, 2, 4))  # a marker at or before the last one's
    with open(path, "ab") as f:
        f.write(b"\0" * 5)  # a crash in the middle of an entry: left out, and cut before the next
    assert read_txn_index(path) == [AbortedTxn(0, 3, 1, 4)]
    index.append(AbortedTxn(2, 7, 2, 8))
    assert read_txn_index(path) == [AbortedTxn(0, 3, 1, 4), AbortedTxn(2, 7, 2, 8)]
    assert (tmp_path / "00000000000000000000.txnindex").stat().st_size == 2 * ENTRY_SIZE
    index.flush()
    index.truncate_to(7)
    assert index.entries() == read_txn_index(path) == [AbortedTxn(0, 3, 1, 4)]
    index.truncate_to(0)
    assert index.entries() == [] and not index.exists()


def test_the_upper_bound_of_a_fetch(tmp_path) -> None:
    index = OffsetIndex(str(tmp_path / "00000000000000000100.index"), 100, 8 * 64)
    entries = [(110, 0), (125, 300), (130, 700), (170, 1000)]  # (last offset, start position)
    index.append_entries(entries)
    for position in range(0, 1100, 7):
        expected = next((offset for offset, start in entries if start >= position), None)
        assert index.fetch_upper_bound_offset(position) == expected
    index.close()
