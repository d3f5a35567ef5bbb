"""seglog.locks.RLock: threading.RLock's semantics, which the produce path relies on
(a log's lock and a broker partition's), checked against real threads."""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from seglog.locks import RLock


def test_reentrant_and_counted():
    lock = RLock()
    assert lock.acquire() is True
    assert lock.acquire() is True  # its holder takes it again
    assert lock.acquire(False) is True
    for _ in range(3):
        lock.release()
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()  # released as often as taken: free


def test_another_thread_cannot_take_or_release_it():
    lock = RLock()
    lock.acquire()
    answers: list[object] = []

    def other() -> None:
        answers.append(lock.acquire(False))
        try:
            lock.release()
        except RuntimeError as e:
            answers.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert answers == [False, "cannot release un-acquired lock"]
    lock.release()
    t = threading.Thread(target=lambda: answers.append(lock.acquire(False)))
    t.start()
    t.join()
    assert answers[-1] is True  # free now (and held by a thread that ended: as threading's)


def test_a_blocked_acquire_waits_for_the_last_release():
    lock = RLock()
    lock.acquire()
    lock.acquire()
    taken = threading.Event()

    def waiter() -> None:
        with lock:
            taken.set()

    t = threading.Thread(target=waiter)
    t.start()
    lock.release()
    assert not taken.wait(0.2)  # still held once
    lock.release()
    assert taken.wait(30)
    t.join()


def test_with_releases_on_an_exception():
    lock = RLock()
    with pytest.raises(ValueError), lock:
        raise ValueError("inside")
    assert lock.acquire(False) is True
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_arguments_as_threading_rlock_takes_them_positionally():
    lock = RLock()
    with pytest.raises(TypeError):
        lock.acquire(True, 1.0)  # no timeout
    with pytest.raises(TypeError):
        lock.acquire(blocking=False)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RLock(1)  # type: ignore[call-arg]
    assert lock.acquire(0) is True  # any truth value
    lock.release()


def test_mutual_exclusion_under_contention():
    """Threads switching every microsecond each make read-then-write updates of a
    shared list under the lock (nested, as an append's roll is): none is lost."""
    lock, state, rounds, threads = RLock(), [0], 20_000, 4
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)

    def bump() -> None:
        for _ in range(rounds):
            with lock:
                with lock:
                    value = state[0]
                if value % 997 == 0:
                    time.sleep(0)  # a wait inside, now and then
                state[0] = value + 1

    try:
        workers = [threading.Thread(target=bump) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        sys.setswitchinterval(interval)
    assert state[0] == rounds * threads


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")
def test_a_signal_handler_runs_while_waiting_and_its_exception_ends_the_wait():
    lock = RLock()
    holder_in, holder_out = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            holder_in.set()
            holder_out.wait(30)

    class Alarm(Exception):
        pass

    def on_alarm(signum: int, frame: object) -> None:
        raise Alarm

    t = threading.Thread(target=holder)
    t.start()
    assert holder_in.wait(30)
    previous = signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(Alarm):
            lock.acquire()  # the main thread waits; the handler's exception ends the wait
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        holder_out.set()
        t.join()
    assert lock.acquire(False) is True  # the wait took nothing: the holder's release freed it
    lock.release()
