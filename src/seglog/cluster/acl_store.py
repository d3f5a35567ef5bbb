"""ACLs in ZooKeeper as Kafka 3.x keeps them (``AclAuthorizer``'s ZooKeeper side, ``ZkAclStore``).

Each pattern's entries are one znode (paths and JSON in ``znodes``). A change reads the znode,
computes the new entries and writes them back at the zkVersion it read (creates it, or deletes
it when no entry is left), again from the read when another broker changed it meanwhile; then it
leaves a sequential notification naming the pattern under the pattern type's change path. Every
broker watches both change paths and reads again each pattern a new notification names, so an
ACL added on one broker is enforced by all as soon as their watches fire. Notifications older
than Kafka's 15 minutes are deleted by whoever processes them (``ZkNodeChangeNotificationListener``).

All calls block (ZooKeeper round trips): the broker runs them in a thread; the change callback
runs on the ZooKeeper client's event thread.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..errors import SeglogError, ZooKeeperError
from ..security import AccessControlEntry, PatternType, ResourcePattern, ResourceType
from . import znodes
from .zk_client import ZkClient

log = logging.getLogger(__name__)

Entries = frozenset[AccessControlEntry]
PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener.changeExpirationMs


class ZkAclStore:
    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk
        self._seen: dict[str, str] = {}  # the last notification processed, by change path

    def load(self) -> dict[ResourcePattern, Entries]:
        """Every pattern's entries; the notifications there now count as processed."""
        for pattern_type in PATTERN_TYPES:
            path = znodes.acl_change_path(pattern_type)
            self._seen[path] = max(self.zk.get_children(path), default="")
        found: dict[ResourcePattern, Entries] = {}
        for pattern_type in PATTERN_TYPES:
            root = znodes.acl_root(pattern_type)
            for type_name in self.zk.get_children(root):
                resource_type = ResourceType.parse(type_name)
                for name in self.zk.get_children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read(pattern)
                    if entries:
                        found[pattern] = entries
        return found

    def read(self, pattern: ResourcePattern) -> Entries:
        path = znodes.acl_path(pattern)
        got = self.zk.get(path)
        return znodes.decode_acls(got[0], path) if got is not None else frozenset()

    def update(self, pattern: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        """The pattern's entries made ``change(entries)``, compare-and-set; the new entries."""
        path = znodes.acl_path(pattern)
        while True:
            got = self.zk.get(path)
            current = znodes.decode_acls(got[0], path) if got is not None else frozenset()
            wanted = change(current)
            if wanted == current:
                return current
            try:
                if got is None:
                    self.zk.create(path, znodes.encode_acls(wanted), makepath=True)
                elif wanted:
                    self.zk.set(path, znodes.encode_acls(wanted), got[1].version)
                else:
                    self.zk.delete(path, got[1].version)
            except (NodeExistsError, NoNodeError, BadVersionError):
                continue  # another broker changed it since we read it: again from its entries
            self.zk.create_sequential(
                f"{znodes.acl_change_path(pattern.pattern_type)}/{znodes.ACL_CHANGE_PREFIX}",
                znodes.encode_acl_change(pattern),
            )
            return wanted

    def watch(self, on_change: Callable[[ResourcePattern, Entries], None]) -> None:
        """``on_change(pattern, entries)`` for each pattern a new notification names, from now on."""
        for pattern_type in PATTERN_TYPES:
            path = znodes.acl_change_path(pattern_type)
            self.zk.ensure_path(path)
            self._watcher(path, on_change)()

    def _watcher(self, path: str, on_change: Callable[[ResourcePattern, Entries], None]) -> Callable[[], None]:
        """The change path's handler: it reads the new notifications and watches the path again."""

        def handler() -> None:
            self._process(path, handler, on_change)

        return handler

    def _process(
        self, path: str, handler: Callable[[], None], on_change: Callable[[ResourcePattern, Entries], None]
    ) -> None:
        try:
            children = self.zk.watch_children(path, handler)
        except ZooKeeperError as e:  # the connection is lost: the watch runs again once it is back
            log.warning("ACL changes not read: %s", e)
            return
        now_ms = time.time() * 1000
        for child in sorted(c for c in children if c > self._seen.get(path, "")):
            self._seen[path] = child
            node = f"{path}/{child}"
            got = self.zk.get(node)
            if got is None:
                continue
            try:
                pattern = znodes.decode_acl_change(got[0], node)
                on_change(pattern, self.read(pattern))
            except SeglogError:
                log.exception("ACL change %s not applied", node)
            if now_ms - got[1].ctime > NOTIFICATION_EXPIRY_MS:
                with contextlib.suppress(NoNodeError):
                    self.zk.delete(node)
