"""Controller election through the ephemeral /controller znode (Kafka's ``KafkaController.elect``).

Every broker runs one. Whoever creates /controller (and moves /controller_epoch
up by one in the same multi-op) is the controller until its session ends;
the others watch /controller and try again when it goes away. A controller
that finds /controller gone or owned by another broker resigns. When the
session expires every broker forgets the controller and a controller resigns
(Kafka's ``Expire``) before anything is done in the next session; once the
broker is registered again in the new one, it stands again (Kafka's
``RegisterBrokerAndReelect``): registration comes first, so a broker elected
then finds itself among the live brokers. All of it runs on the ZooKeeper
client's event thread, one event at a time, as Kafka's controller event queue does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..errors import ControllerMovedError, ZooKeeperError
from . import znodes
from .zk_client import ZkClient

log = logging.getLogger(__name__)


class ControllerElection:
    """Take part in electing the controller. ``on_elected(epoch, epoch_zk_version)`` and ``on_resigned()``
    run on the client's event thread."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        *,
        on_elected: Callable[[int, int], None] | None = None,
        on_resigned: Callable[[], None] | None = None,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._on_elected = on_elected
        self._on_resigned = on_resigned
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._active_controller: int | None = None
        self._epoch: int | None = None
        self._epoch_zk_version: int | None = None
        self._stopped = False

    def start(self) -> ControllerElection:
        self.zk.on_session_expired(self._on_session_expired)
        self.zk.on_new_session(self._on_new_session)
        self.zk.submit(self._elect)
        return self

    def stop(self) -> None:
        """Stop taking part; a controller resigns (its /controller node goes with the session)."""
        self.zk.submit(self._stop)

    @property
    def is_controller(self) -> bool:
        with self._lock:
            return self._epoch is not None

    @property
    def epoch(self) -> tuple[int, int] | None:
        """(controller epoch, /controller_epoch zkVersion) while this broker is the controller."""
        with self._lock:
            if self._epoch is None or self._epoch_zk_version is None:
                return None
            return self._epoch, self._epoch_zk_version

    @property
    def active_controller(self) -> int | None:
        with self._lock:
            return self._active_controller

    def wait_for_controller(self, timeout: float) -> int | None:
        """Block until some broker is known to be the controller; its id, or None after ``timeout`` s."""
        with self._changed:
            self._changed.wait_for(lambda: self._active_controller is not None, timeout)
            return self._active_controller

    # --- events (the client's event thread) -----------------------------------------

    def _elect(self) -> None:
        if self._stopped:
            return
        # watch first, so a controller that goes between our read and our attempt still wakes us
        exists = self.zk.watch_exists(znodes.CONTROLLER, self._on_controller_change)
        found = self.zk.get(znodes.CONTROLLER) if exists else None
        if found is not None:
            active = znodes.decode_controller(found[0]).broker_id
            if active == self.broker_id and found[1].ephemeralOwner == self.zk.session_id and not self.is_controller:
                # made in this very session by an election whose calls went on past the expiry of the session
                # they began in (and so resigned at once): this broker is the controller, at the current epoch
                current = self.zk.get_controller_epoch()
                if current is not None and self.zk.get(znodes.CONTROLLER) == found:
                    self._become_controller(*current)
                    return
            self._set_active(active)
            return
        try:
            epoch, version = self.zk.register_controller_and_increment_epoch(self.broker_id)
        except ControllerMovedError:
            self._set_active(self.zk.get_controller_id())
            return
        self._become_controller(epoch, version)

    def _become_controller(self, epoch: int, version: int) -> None:
        log.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        with self._changed:
            self._active_controller = self.broker_id
            self._epoch, self._epoch_zk_version = epoch, version
            self._changed.notify_all()
        if self._on_elected is not None:
            self._on_elected(epoch, version)

    def _on_controller_change(self) -> None:
        # /controller was created, changed or deleted: resign if it is not ours any more, elect if it is gone
        if self._stopped:
            return
        try:
            self._elect()
        except ZooKeeperError:
            if self.zk.closed:
                return
            log.exception("controller election of broker %d failed; retried on the next session", self.broker_id)

    def _on_session_expired(self) -> None:
        # Kafka's processExpire: the old session's /controller went with it
        self._set_active(None)

    def _on_new_session(self) -> None:
        # Kafka's processReelect, the broker registered again: resign if another won meanwhile, else stand
        self._on_controller_change()

    def _set_active(self, active: int | None) -> None:
        if active != self.broker_id:
            self._resign()
        with self._changed:
            self._active_controller = active
            self._changed.notify_all()

    def _resign(self) -> None:
        with self._changed:
            was_controller = self._epoch is not None
            self._epoch = self._epoch_zk_version = None
            if self._active_controller == self.broker_id:
                self._active_controller = None
            self._changed.notify_all()
        if was_controller:
            log.info("broker %d resigns as the controller", self.broker_id)
            if self._on_resigned is not None:
                self._on_resigned()

    def _stop(self) -> None:
        self._resign()
        self._stopped = True
