"""A broker's ZooKeeper session and Kafka's operations on it (Kafka's ``KafkaZkClient``), through kazoo.

- Sessions (Kafka's ``ZooKeeperClient`` state change handlers): when a session
  is found expired, the ``on_session_expired`` handlers run (Kafka's
  ``beforeInitializingSession``: the controller resigns); on the first
  connection of the next session the broker is registered again, then the
  ``on_new_session`` handlers run (``afterInitializingSession``: the election).
- Watches: kazoo drops every watch when the connection is lost and fires it
  with a NONE event. Such a watch is not acted on at once (ZooKeeper cannot be
  read then): it is run again when the same session connects again (it reads,
  and so watches, anew, as the Java client's SetWatches would), and dropped
  when the session expired (the new-session handlers read everything again).
- ``register_broker``: the ephemeral /brokers/ids/<id>. kazoo keeps connecting
  after a session expires but does not re-create ephemeral nodes: this client
  does, on the first connection of every new session, from a worker thread
  (kazoo's own threads must not block). A registration left by our previous
  session (ZOOKEEPER-2985) is deleted and made again; one owned by another
  live session means another broker has this id: ``ZooKeeperError``.
- ``create_or_get_cluster_id``: /cluster/id is written once; everyone reads it.
- ``register_controller_and_increment_epoch``: one multi-op creates the
  ephemeral /controller and sets /controller_epoch to epoch + 1 at the zkVersion
  just read; losing either race is ``ControllerMovedError``.
- ``claim_producer_id_block``: the next block of producer ids, claimed by a
  compare-and-set of /latest_producer_id_block at the zkVersion just read,
  read again and retried when another broker claimed one meanwhile (Kafka's
  ``ZkProducerIdManager.getNewProducerIdBlock``): no two brokers share an id.
- ``fenced_write``: a controller's writes go in a multi-op behind a check of
  /controller_epoch's zkVersion, so a controller that was replaced (its session
  expired, another was elected) cannot change anything: ``ControllerMovedError``.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    ZookeeperError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent
from kazoo.retry import KazooRetry

from ..common import TopicPartition
from ..errors import ControllerMovedError, ZooKeeperError
from . import znodes

log = logging.getLogger(__name__)

# a watch fired with these states went with its session: nothing to run it again in
_SESSION_ENDED = (KeeperState.EXPIRED_SESSION, KeeperState.CLOSED, KeeperState.AUTH_FAILED)

# Kafka's zookeeper.session.timeout.ms default
DEFAULT_SESSION_TIMEOUT_MS = 18_000


def generate_cluster_id() -> str:
    """A random id as Kafka makes one (``Uuid.randomUuid``): base64url of 16 bytes, never starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1  # -1 matches any version


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


ZkOp = CreateOp | SetDataOp | DeleteOp


class ZkClient:
    """One ZooKeeper session, re-established (with its ephemeral registrations) whenever it expires."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
    ) -> None:
        if not connect:
            raise ZooKeeperError("zookeeper.connect is not set")
        if session_timeout_ms <= 0:
            raise ZooKeeperError(f"invalid zookeeper.session.timeout.ms {session_timeout_ms}")
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        # reconnect quickly: a restarted ZooKeeper must find its brokers back within a session timeout
        connection_retry = KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_jitter=0.1, max_delay=1.0)
        # a call waits out a lost connection (or session) for up to the connection timeout, then fails
        command_retry = KazooRetry(
            max_tries=-1,
            delay=0.05,
            backoff=1.5,
            max_jitter=0.1,
            max_delay=1.0,
            deadline=self.connection_timeout_ms / 1000,
        )
        self._kazoo = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000,
            connection_retry=connection_retry,
            command_retry=command_retry,
        )
        self._kazoo.add_listener(self._on_state)
        self._session_handlers: list[Callable[[], None]] = []
        self._expiry_handlers: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._lost_watches: set[Callable[[], None]] = set()  # dropped with the connection, to run again
        self._broker: znodes.BrokerRegistration | None = None
        self._registered_session: int | None = None  # the session that made our broker registration
        self.broker_epoch = -1  # the czxid of our current registration (KIP-380), -1 before the first
        # set by kazoo's thread when a session was lost, cleared by the event thread once handled
        self._new_session = False
        self._registration_pending = False  # until the broker is registered in the current session
        self._events: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._watchers: dict[tuple[str, Callable[[], None]], Callable[[Any], None]] = {}

    # --- session -----------------------------------------------------------------------

    def start(self) -> ZkClient:
        self._worker = threading.Thread(target=self._run_events, name=f"zk-events-{self.connect}", daemon=True)
        self._worker.start()
        try:
            self._kazoo.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            self.close()
            raise ZooKeeperError(
                f"could not connect to ZooKeeper at {self.connect} within {self.connection_timeout_ms} ms"
            ) from None
        return self

    def close(self) -> None:
        """End the session: its ephemeral nodes go at once."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(KazooException):
            self._kazoo.stop()
        self._kazoo.close()
        self._events.put(None)
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join()

    def __enter__(self) -> ZkClient:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def session_id(self) -> int:
        return int(self._kazoo.client_id[0]) if self._kazoo.client_id else 0

    @property
    def session_credentials(self) -> tuple[int, bytes] | None:
        """(session id, password): what a second client needs to take this session over (tests expire it so)."""
        return self._kazoo.client_id

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    def on_new_session(self, handler: Callable[[], None]) -> None:
        """Call ``handler`` (on this client's event thread) after each session that replaces an expired one."""
        self._session_handlers.append(handler)

    def on_session_expired(self, handler: Callable[[], None]) -> None:
        """Call ``handler`` (on this client's event thread) when the session is found expired, before
        the broker is registered again and the ``on_new_session`` handlers run."""
        self._expiry_handlers.append(handler)

    def submit(self, event: Callable[[], None]) -> None:
        """Run ``event`` on this client's event thread, after the events queued before it."""
        self._events.put(event)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: no ZooKeeper calls here
        if state == KazooState.LOST:
            if self._closed:
                return
            self._new_session = True
            self._registration_pending = self._broker is not None
            with self._lock:
                self._lost_watches.clear()
            self._events.put(self._on_session_expired)
        elif state == KazooState.CONNECTED:
            if self._new_session or self._registration_pending:
                self._events.put(self._after_new_session)
            self._events.put(self._rearm_lost_watches)

    def _on_session_expired(self) -> None:
        log.warning("ZooKeeper session expired at %s", self.connect)
        self._run_handlers(self._expiry_handlers, "session-expiry")

    def _after_new_session(self) -> None:
        if not self.connected:
            return  # the next connection queues this again
        if self._registration_pending:
            try:
                self._reregister_broker()
                self._registration_pending = False
            except Exception:  # tried again at the next connection
                log.exception("broker registration failed")
        if self._new_session:
            self._new_session = False
            log.info("new ZooKeeper session 0x%x at %s", self.session_id, self.connect)
            self._run_handlers(self._session_handlers, "new-session")

    def _rearm_lost_watches(self) -> None:
        if not self.connected:
            return  # the next connection queues this again
        with self._lock:
            lost, self._lost_watches = self._lost_watches, set()
        self._run_handlers(lost, "watch")

    @staticmethod
    def _run_handlers(handlers: Iterable[Callable[[], None]], what: str) -> None:
        for handler in handlers:
            try:
                handler()
            except Exception:  # one failing handler must not stop the others or the thread
                log.exception("ZooKeeper %s handler failed", what)

    def _run_events(self) -> None:
        while (event := self._events.get()) is not None:
            try:
                event()
            except Exception:
                log.exception("ZooKeeper event failed")

    # --- plain reads and writes ---------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, Any] | None:
        """(data, stat) of a znode, or None if it does not exist."""
        try:
            data, stat = self._call(self._kazoo.get, path)
        except NoNodeError:
            return None
        return data, stat

    def get_children(self, path: str) -> list[str]:
        try:
            return list(self._call(self._kazoo.get_children, path))
        except NoNodeError:
            return []

    def create(self, path: str, data: bytes, *, makepath: bool = False) -> None:
        """Create a persistent znode; ``NodeExistsError`` if it is there already."""
        self._call(self._kazoo.create, path, data, makepath=makepath)

    def create_sequential(self, path: str, data: bytes) -> str:
        """Create the persistent sequential znode ``path<seq>`` (a notification); returns its path."""
        return str(self._call(self._kazoo.create, path, data, sequence=True, makepath=True))

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        """Set a znode's data at ``version`` (-1: any); ``BadVersionError`` if it moved on."""
        self._call(self._kazoo.set, path, data, version)

    def delete(self, path: str, version: int = -1) -> None:
        """Delete a znode at ``version`` (-1: any); ``NoNodeError`` if gone, ``BadVersionError`` if it moved on."""
        self._call(self._kazoo.delete, path, version)

    def set_or_create(self, path: str, data: bytes) -> None:
        try:
            self._call(self._kazoo.set, path, data)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                self._call(self._kazoo.create, path, data, makepath=True)
                return
            self._call(self._kazoo.set, path, data)

    def ensure_path(self, path: str) -> None:
        self._call(self._kazoo.ensure_path, path)

    def ensure_persistent_paths(self) -> None:
        """What a broker makes sure exists when it starts (``ZkData.PersistentZkPaths``)."""
        for path in znodes.PERSISTENT_PATHS:
            self.ensure_path(path)

    def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        # Kafka's retryRequestUntilConnected: reads and idempotent writes wait out a lost connection
        try:
            return self._kazoo.retry(fn, *args, **kw)
        except (NoNodeError, NodeExistsError, BadVersionError):
            raise
        except (KazooException, KazooTimeoutError) as e:
            raise ZooKeeperError(f"ZooKeeper {fn.__name__} failed: {type(e).__name__} {e}", file=_path(args)) from None

    # --- /cluster/id ----------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        found = self.get(znodes.CLUSTER_ID)
        return None if found is None else znodes.decode_cluster_id(found[0])

    def create_or_get_cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``proposed`` if this call created /cluster/id, else the one already there."""
        try:
            self._call(self._kazoo.create, znodes.CLUSTER_ID, znodes.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            existing = self.get_cluster_id()
            if existing is None:
                raise ZooKeeperError("/cluster/id was deleted while being read", file=znodes.CLUSTER_ID) from None
            return existing

    # --- /brokers/ids/<id> ------------------------------------------------------------

    def register_broker(self, broker: znodes.BrokerRegistration) -> int:
        """Create the ephemeral registration (again after every session expiry); returns the broker epoch (czxid)."""
        self._broker = broker
        return self._create_registration(broker)

    def _reregister_broker(self) -> None:
        if self._broker is not None:
            epoch = self._create_registration(self._broker)
            log.info("broker %d registered again, broker epoch %d", self._broker.broker_id, epoch)

    def _create_registration(self, broker: znodes.BrokerRegistration) -> int:
        path = znodes.broker_path(broker.broker_id)
        data = znodes.encode_broker(broker)
        for _attempt in range(3):
            with contextlib.suppress(NodeExistsError):
                self._call(self._kazoo.create, path, data, ephemeral=True, makepath=True)
            found = self.get(path)
            if found is None:
                continue  # the old node went away between create and get: try again
            owner = found[1].ephemeralOwner
            if owner == self.session_id:
                self._registered_session = owner
                self.broker_epoch = int(found[1].czxid)
                return self.broker_epoch
            if owner == self._registered_session:  # ours, from a session that expired (ZOOKEEPER-2985)
                with contextlib.suppress(NoNodeError):
                    self._call(self._kazoo.delete, path)
                continue
            raise ZooKeeperError(
                f"broker id {broker.broker_id} is registered by another ZooKeeper session (0x{owner:x}): "
                "is another broker running with this broker.id?",
                file=path,
            )
        raise ZooKeeperError(f"could not register broker {broker.broker_id}", file=path)

    def get_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self.get_children(znodes.BROKER_IDS) if c.isdigit())

    def get_broker(self, broker_id: int) -> znodes.BrokerRegistration | None:
        found = self.get(znodes.broker_path(broker_id))
        return None if found is None else znodes.decode_broker(broker_id, found[0])

    # --- /latest_producer_id_block -------------------------------------------------------

    def claim_producer_id_block(self, broker_id: int, block_size: int) -> znodes.ProducerIdBlock:
        """Claim the block after the latest one for ``broker_id``; the first block starts at 0."""
        path = znodes.LATEST_PRODUCER_ID_BLOCK
        while True:
            found = self.get(path)
            start = 0
            if found is not None and found[0]:  # the znode is made empty at start-up
                start = znodes.decode_producer_id_block(found[0], path).block_end + 1
            if start + block_size - 1 >= (1 << 63) - 1:
                raise ZooKeeperError("producer ids are exhausted", file=path)
            block = znodes.ProducerIdBlock(broker_id, start, start + block_size - 1)
            data = znodes.encode_producer_id_block(block)
            # a retried set that had succeeded fails on the version: the next round claims another block
            with contextlib.suppress(BadVersionError, NodeExistsError, NoNodeError):
                if found is None:
                    self._call(self._kazoo.create, path, data, makepath=True)
                else:
                    self.set(path, data, int(found[1].version))
                return block
            log.debug("producer id block %d-%d claimed by another broker first: reading again", *block[1:])

    # --- /controller and /controller_epoch ------------------------------------------------

    def get_controller_id(self) -> int | None:
        found = self.get(znodes.CONTROLLER)
        return None if found is None else znodes.decode_controller(found[0]).broker_id

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before the first election."""
        found = self.get(znodes.CONTROLLER_EPOCH)
        return None if found is None else (znodes.decode_controller_epoch(found[0]), int(found[1].version))

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Become the controller: returns (new epoch, its zkVersion), the fence for every later write."""
        current = self.get_controller_epoch() or self._create_controller_epoch()
        epoch, version = current[0] + 1, current[1]
        tx = self._kazoo.transaction()
        tx.create(znodes.CONTROLLER, znodes.encode_controller(broker_id, int(time.time() * 1000)), ephemeral=True)
        tx.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch), version)
        results = self._commit(tx, znodes.CONTROLLER)
        if not any(isinstance(r, Exception) for r in results):
            return epoch, int(results[1].version)
        if any(isinstance(r, NodeExistsError | BadVersionError) for r in results):
            return self._check_controller_and_epoch(broker_id, epoch)
        raise ZooKeeperError(f"controller election failed: {results}", file=znodes.CONTROLLER)

    def _create_controller_epoch(self) -> tuple[int, int]:
        try:
            path = znodes.CONTROLLER_EPOCH
            self._call(self._kazoo.create, path, znodes.encode_controller_epoch(znodes.INITIAL_CONTROLLER_EPOCH))
            return znodes.INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            found = self.get_controller_epoch()
            if found is None:
                raise ZooKeeperError("/controller_epoch went away while being read", file=path) from None
            return found

    def _check_controller_and_epoch(self, broker_id: int, epoch: int) -> tuple[int, int]:
        # the multi-op may have succeeded before a lost connection made us retry it
        if self.get_controller_id() == broker_id:
            found = self.get_controller_epoch()
            if found is not None and found[0] == epoch:
                return found
        raise ControllerMovedError(f"broker {broker_id} lost the controller election at epoch {epoch}")

    def fenced_write(self, epoch_zk_version: int, ops: Sequence[ZkOp]) -> list[Any]:
        """Apply ``ops`` atomically, only while /controller_epoch is still at ``epoch_zk_version``."""
        results = self.fenced_try(epoch_zk_version, ops)
        for op, result in zip(ops, results, strict=True):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise ZooKeeperError(f"{type(op).__name__} failed: {type(result).__name__}", file=op.path)
        return results

    def fenced_try(self, epoch_zk_version: int, ops: Sequence[ZkOp]) -> list[Any]:
        """``fenced_write`` that returns each op's result or exception (a zkVersion conflict is a
        ``BadVersionError`` there, for the caller to re-read and retry); a moved controller still raises."""
        tx = self._kazoo.transaction()
        tx.check(znodes.CONTROLLER_EPOCH, epoch_zk_version)
        for op in ops:
            if isinstance(op, CreateOp):
                tx.create(op.path, op.data, ephemeral=op.ephemeral)
            elif isinstance(op, SetDataOp):
                tx.set_data(op.path, op.data, op.version)
            else:
                tx.delete(op.path, op.version)
        results = self._commit(tx, znodes.CONTROLLER_EPOCH)
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError(
                f"controller epoch zkVersion check failed (expected {epoch_zk_version}): "
                "another controller was elected",
                file=znodes.CONTROLLER_EPOCH,
            )
        return list(results[1:])

    def fenced_delete_recursive(self, epoch_zk_version: int, paths: Sequence[str]) -> None:
        """Delete ``paths`` and everything under them in one fenced multi-op (children first)."""
        ops: list[ZkOp] = []
        for path in paths:
            ops += [DeleteOp(p) for p in self._subtree(path)]
        if ops:
            self.fenced_write(epoch_zk_version, ops)

    def _subtree(self, path: str) -> list[str]:
        if self.get(path) is None:
            return []
        below = [p for child in self.get_children(path) for p in self._subtree(f"{path}/{child}")]
        return [*below, path]

    def _commit(self, tx: Any, path: str) -> list[Any]:
        try:
            return list(tx.commit())
        except (ZookeeperError, KazooException, KazooTimeoutError) as e:
            raise ZooKeeperError(f"ZooKeeper transaction failed: {type(e).__name__} {e}", file=path) from None

    # --- topics and partition states (what the controller reads) ------------------------

    def get_topics(self) -> list[str]:
        return sorted(self.get_children(znodes.TOPICS))

    def get_topic(self, topic: str) -> znodes.TopicAssignment | None:
        found = self.get(znodes.topic_path(topic))
        return None if found is None else znodes.decode_topic(topic, found[0])

    def get_partition_state(self, tp: TopicPartition) -> znodes.LeaderIsrAndControllerEpoch | None:
        """A partition's leader, ISR and controller epoch; ``partition_epoch`` is the znode's zkVersion."""
        path = znodes.partition_state_path(tp.topic, tp.partition)
        found = self.get(path)
        return None if found is None else znodes.decode_partition_state(found[0], int(found[1].version), path)

    def get_topic_config(self, topic: str) -> dict[str, str]:
        found = self.get(znodes.topic_config_path(topic))
        return {} if found is None else znodes.decode_config(found[0], znodes.topic_config_path(topic))

    # --- watches ---------------------------------------------------------------------
    # A watch fires once; the handler runs on the event thread and reads (and so watches) again.
    # One closure per (path, handler), so reading a path again does not pile up watchers in kazoo.

    def watch_exists(self, path: str, handler: Callable[[], None]) -> bool:
        """Does ``path`` exist; ``handler`` runs once, on the event thread, at its next change."""
        return self._call(self._kazoo.exists, path, watch=self._watcher(path, handler)) is not None

    def watch_children(self, path: str, handler: Callable[[], None]) -> list[str]:
        """The children of ``path`` (none if it does not exist); ``handler`` runs when they change."""
        if not self.watch_exists(path, handler):
            return []  # the exists watch fires when it is created
        try:
            return list(self._call(self._kazoo.get_children, path, watch=self._watcher(path, handler)))
        except NoNodeError:
            return []

    def watch_data(self, path: str, handler: Callable[[], None]) -> tuple[bytes, Any] | None:
        """(data, stat) of ``path`` or None; ``handler`` runs when it is created, changed or deleted."""
        if not self.watch_exists(path, handler):
            return None
        try:
            data, stat = self._call(self._kazoo.get, path, watch=self._watcher(path, handler))
        except NoNodeError:
            return None
        return data, stat

    def _watcher(self, path: str, handler: Callable[[], None]) -> Callable[[Any], None]:
        key = (path, handler)
        fire = self._watchers.get(key)
        if fire is None:

            def fire(event: WatchedEvent) -> None:
                if event.type != EventType.NONE:
                    self._events.put(handler)
                elif event.state not in _SESSION_ENDED:  # the connection was lost: run it once back
                    with self._lock:
                        self._lost_watches.add(handler)
                    if self.connected:  # already back (kazoo calls this on another thread)
                        self._events.put(self._rearm_lost_watches)

            self._watchers[key] = fire
        return fire


def _path(args: Sequence[Any]) -> str | None:
    return args[0] if args and isinstance(args[0], str) else None
