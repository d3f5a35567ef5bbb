"""Where the client quota configs are kept: in ZooKeeper for a cluster, as Kafka 3.x keeps
them, or in a file of the log dir for a broker on its own.

ZooKeeper (every broker reads them at start and follows ``/config/changes``)::

    /config/users/<user>                     {"version":1,"config":{"producer_byte_rate":"1024"}}
    /config/users/<user>/clients/<client>    the same
    /config/clients/<client>                 the same

with names sanitized (``quotas.sanitize``) and ``<default>`` for the default ones. A user's
znode holds its SCRAM credentials too: a change writes the znode's quota keys and keeps the
others. The log dir (the first one)::

    client-quotas.json   {"version":1,"entities":{"users/alice":{"producer_byte_rate":"1024"},...}}

rewritten whole at each change (a temp file, fsynced, renamed over).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Protocol

from ..cluster import admin_zk_client
from ..cluster.zk_client import ZkClient
from ..errors import KafkaStorageError
from ..security.quotas import QUOTA_KEYS, QuotaEntity, quota_values
from ..storage.fileio import read_json_file, write_atomically

QUOTA_FILE = "client-quotas.json"
Changes = Mapping[str, float | None]  # the keys set (a value) or removed (None)
Entities = dict[QuotaEntity, dict[str, float]]


class QuotaStore(Protocol):
    def load(self) -> Entities: ...  # every entity with a quota, and its quotas

    def entity(self, entity: QuotaEntity) -> dict[str, float]: ...  # one entity's quotas

    def alter(self, entity: QuotaEntity, changes: Changes) -> dict[str, float]: ...  # the entity's quotas after


def _quota_string(key: str, value: float) -> str:
    # as Kafka writes them: a LONG key's value as a whole number, a DOUBLE's as Java prints it
    return str(int(value)) if QUOTA_KEYS[key] else repr(value)


def changed(config: Mapping[str, str], changes: Changes) -> dict[str, str]:
    """A stored config (string values, other keys than quotas among them) with ``changes`` made."""
    updated = dict(config)
    for key, value in changes.items():
        if value is None:
            updated.pop(key, None)
        else:
            updated[key] = _quota_string(key, value)
    return updated


class LogDirQuotaStore:
    """A broker's own quotas, in ``client-quotas.json`` of its log dir (calls block: file I/O)."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, QUOTA_FILE)

    def _read(self) -> dict[str, dict[str, str]]:
        entities = read_json_file(self.path, "entities", dict, "a client quota") or {}
        try:
            read = {str(path): {str(k): str(v) for k, v in config.items()} for path, config in entities.items()}
            for path in read:
                QuotaEntity.from_path(path)  # ValueError for a path no entity has
            return read
        except (ValueError, AttributeError) as e:
            raise KafkaStorageError(f"not a client quota file: {e}", file=self.path) from None

    def load(self) -> Entities:
        found = {QuotaEntity.from_path(path): quota_values(config) for path, config in self._read().items()}
        return {entity: values for entity, values in found.items() if values}

    def entity(self, entity: QuotaEntity) -> dict[str, float]:
        return quota_values(self._read().get(entity.path, {}))

    def alter(self, entity: QuotaEntity, changes: Changes) -> dict[str, float]:
        entities = self._read()
        config = changed(entities.get(entity.path, {}), changes)
        if config:
            entities[entity.path] = config
        else:
            entities.pop(entity.path, None)
        write_atomically(self.path, json.dumps({"version": 1, "entities": entities}, sort_keys=True).encode())
        return quota_values(config)


class ZkQuotaStore:
    """A cluster's quotas, in ZooKeeper (calls block)."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def load(self) -> Entities:
        found = {
            QuotaEntity.from_path(path): quota_values(admin_zk_client.fetch_entity_config(self.zk, path))
            for path in admin_zk_client.fetch_entity_paths(self.zk)
        }
        return {entity: values for entity, values in found.items() if values}

    def entity(self, entity: QuotaEntity) -> dict[str, float]:
        """One entity's quotas, as ZooKeeper has them now (a change notification's)."""
        return quota_values(admin_zk_client.fetch_entity_config(self.zk, entity.path))

    def alter(self, entity: QuotaEntity, changes: Changes) -> dict[str, float]:
        after: dict[str, str] = {}

        def change(config: dict[str, str]) -> dict[str, str]:
            nonlocal after
            after = changed(config, changes)
            return after

        admin_zk_client.change_entity_config(self.zk, entity.path, change)
        return quota_values(after)
