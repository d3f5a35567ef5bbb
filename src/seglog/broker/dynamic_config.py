"""Dynamic broker configs: Kafka's ``DynamicBrokerConfig`` for the keys seglog reconfigures
while running, the connection quotas' (``connection_quotas.BROKER_KEYS``, and
``listener.name.<l>.max.connections`` / ``.max.connection.creation.rate``).

A key's value is, in Kafka's order of precedence: this broker's dynamic config, the cluster's
dynamic default (``<default>``), server.properties, Kafka's default. Both dynamic levels are
kept as Kafka 3.x keeps them, strings by key:

    ZooKeeper:  /config/brokers/<id>         {"version":1,"config":{"max.connections":"100"}}
                /config/brokers/<default>    the same, for every broker
                with a /config/changes notification (``brokers/<id>``) each broker follows
    alone:      broker-configs.json in the first log dir
                {"version":1,"brokers":{"<default>":{...},"0":{...}}}, rewritten whole at each change

A change is checked as Kafka's ``DynamicBrokerConfig.validate`` and ``ZkAdminManager`` check
it, and refused with their words: a key that is not dynamic, a value its type or range does
not take, a listener's limit below 1 (``ListenerConnectionQuota.validateReconfiguration``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..cluster import admin_zk_client
from ..cluster.zk_client import ZkClient
from ..config import BROKER_KEYS, BrokerConfig, Key, listener_override
from ..errors import InvalidConfigurationError, InvalidRequestError, KafkaStorageError, SeglogError
from ..security.quotas import DEFAULT
from ..storage.fileio import read_json_file, write_atomically
from .connection_quotas import BROKER_KEYS as DYNAMIC_KEYS
from .connection_quotas import LISTENER_KEYS, check_per_ip, resolved_overrides

log = logging.getLogger(__name__)
CONFIG_FILE = "broker-configs.json"
Configs = dict[str, str]  # a level's dynamic configs, as stored


def dynamic_key(name: str) -> Key | None:
    """The key ``name`` sets dynamically (a listener's named as written); None: not a dynamic one."""
    if name in DYNAMIC_KEYS:
        return BROKER_KEYS[name]
    override = listener_override(name)
    if override is None or override[1].name not in LISTENER_KEYS:
        return None
    return dataclasses.replace(override[1], name=name)


def resource_string(name: str) -> str:
    """The resource as Kafka's ConfigResource.toString writes it (its error messages say it)."""
    return f"ConfigResource(type=BROKER, name='{name}')"


def parsed(key: Key, value: str) -> Any:
    """A dynamic value parsed, or ValueError with Kafka's ConfigDef words."""
    try:
        return key.coerce(value)
    except InvalidConfigurationError:
        bounds = key.bounds()
        if bounds is not None:
            try:
                number = int(value)
            except ValueError:
                raise ValueError(
                    f"Invalid value {value} for configuration {key.name}: Not a number of type INT"
                ) from None
            if number < bounds[0]:
                raise ValueError(
                    f"Invalid value {value} for configuration {key.name}: Value must be at least {int(bounds[0])}"
                ) from None
        raise ValueError(f"Invalid value {value} for configuration {key.name}: not {key.allowed()}") from None


class DynamicBrokerConfig:
    """A broker's config with its dynamic levels over the static one; reads as a BrokerConfig
    does (``[]``, ``for_listener``) for the dynamic keys and every other one."""

    def __init__(self, static: BrokerConfig, broker_id: int) -> None:
        self.static = static
        self.broker_id = broker_id
        self.default: dict[str, Any] = {}  # the cluster's dynamic default, parsed
        self.broker: dict[str, Any] = {}  # this broker's own

    def __getitem__(self, name: str) -> Any:
        for level in (self.broker, self.default):
            if name in level:
                return level[name]
        return self.static[name]

    def for_listener(self, listener: str, name: str) -> Any:
        """As Kafka's ``valuesWithPrefixOverride`` over the levels merged: the listener's own key
        at any level beats the broker-wide one at any level."""
        own = f"listener.name.{listener.lower()}.{name}"
        for level in (self.broker, self.default):
            if own in level:
                return level[own]
        return self.static[own] if self.static.is_set(own) else self[name]

    def level(self, name: str) -> str | None:
        """Where a dynamic value of ``name`` comes from: ``broker``, ``default``, or None."""
        return "broker" if name in self.broker else "default" if name in self.default else None

    def set_level(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        """A level's stored configs taken (values it cannot parse left out, as Kafka ignores them)."""
        values = {}
        for name, value in configs.items():
            key = dynamic_key(name)
            if key is None:
                continue
            try:
                values[name] = parsed(key, value)
            except ValueError:
                continue
        if per_broker:
            self.broker = values
        else:
            self.default = values

    def validate(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        """Whether ``configs`` may be a level's dynamic configs; InvalidRequestError with
        Kafka's message (ZkAdminManager's, around DynamicBrokerConfig's) when not."""
        resource = resource_string(str(self.broker_id) if per_broker else "")
        refused = sorted(name for name in configs if dynamic_key(name) is None)
        if refused:
            raise InvalidRequestError(
                f"Invalid config value for resource {resource}: Cannot update these configs dynamically: "
                f"Set({', '.join(refused)})"
            )
        values = {}
        try:
            for name, value in configs.items():
                key = dynamic_key(name)
                assert key is not None
                values[name] = parsed(key, value)
                base = listener_override(name)
                if base is not None and values[name] <= 0:  # Kafka's ListenerConnectionQuota
                    raise ValueError(f"Invalid {base[1].name} {values[name]}")
            after = DynamicBrokerConfig(self.static, self.broker_id)
            after.broker, after.default = (values, self.default) if per_broker else (self.broker, values)
            check_per_ip(after)
            resolved_overrides(after["max.connections.per.ip.overrides"])
        except (ValueError, InvalidConfigurationError) as e:
            reason = e.message if isinstance(e, InvalidConfigurationError) else str(e)
            raise InvalidRequestError(f"Invalid config value for resource {resource}: {reason}") from None


class DynamicConfigStore(Protocol):
    def load(self, broker_id: int) -> tuple[Configs, Configs]: ...  # (the default's, the broker's)

    def entity(self, entity: str) -> Configs: ...  # a level's configs (entity: an id or DEFAULT)

    def alter(self, entity: str, configs: Configs) -> None: ...  # a level's configs replaced (entity: an id or DEFAULT)


class ZkDynamicConfigStore:
    """A cluster's dynamic broker configs, in ZooKeeper (calls block)."""

    def __init__(self, zk: ZkClient) -> None:
        self.zk = zk

    def load(self, broker_id: int) -> tuple[Configs, Configs]:
        return self.entity(DEFAULT), self.entity(str(broker_id))

    def entity(self, entity: str) -> Configs:
        return admin_zk_client.fetch_entity_config(self.zk, f"brokers/{entity}")

    def alter(self, entity: str, configs: Configs) -> None:
        admin_zk_client.change_entity_config(self.zk, f"brokers/{entity}", lambda _: dict(configs))


class LogDirDynamicConfigStore:
    """A broker's own dynamic configs, in ``broker-configs.json`` of its log dir (calls block)."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, CONFIG_FILE)

    def _read(self) -> dict[str, Configs]:
        brokers = read_json_file(self.path, "brokers", dict, "a dynamic broker config") or {}
        try:
            return {str(e): {str(k): str(v) for k, v in c.items()} for e, c in brokers.items()}
        except AttributeError as e:
            raise KafkaStorageError(f"not a dynamic broker config file: {e}", file=self.path) from None

    def load(self, broker_id: int) -> tuple[Configs, Configs]:
        found = self._read()
        return found.get(DEFAULT, {}), found.get(str(broker_id), {})

    def entity(self, entity: str) -> Configs:
        return self._read().get(entity, {})

    def alter(self, entity: str, configs: Configs) -> None:
        found = self._read()
        if configs:
            found[entity] = dict(configs)
        else:
            found.pop(entity, None)
        write_atomically(self.path, json.dumps({"version": 1, "brokers": found}, sort_keys=True).encode())


class DynamicConfigs:
    """A broker's dynamic configs kept up to date: read from the store at start, altered
    through it (AlterConfigs), followed on another broker's change (a /config/changes
    notification), each time handed to the ``reconfigurables`` (the connection quotas)."""

    def __init__(self, config: DynamicBrokerConfig, store: DynamicConfigStore) -> None:
        self.config = config
        self.store = store
        self.stored: dict[str, Configs] = {DEFAULT: {}, str(config.broker_id): {}}  # as written, by level
        self.reconfigurables: list[Callable[[DynamicBrokerConfig], None]] = []
        self._loop = asyncio.get_running_loop()

    def entity(self, name: str) -> str:
        """The level a BROKER resource's name stands for (an id or DEFAULT); InvalidRequestError
        with Kafka's words for another broker's id or a name that is none."""
        if name == "":
            return DEFAULT
        if not name.lstrip("-").isdigit():
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}")
        if int(name) != self.config.broker_id:
            raise InvalidRequestError(f"Unexpected broker id, expected {self.config.broker_id}, but received {name}")
        return name

    async def load(self) -> None:
        default, own = await self._loop.run_in_executor(None, self.store.load, self.config.broker_id)
        self._apply(DEFAULT, default)
        self._apply(str(self.config.broker_id), own)

    async def alter(self, entity: str, configs: Configs, validate_only: bool) -> None:
        # in a thread: max.connections.per.ip.overrides may name hosts to resolve
        await self._loop.run_in_executor(None, self.config.validate, entity != DEFAULT, configs)
        if not validate_only:
            await self._loop.run_in_executor(None, self.store.alter, entity, configs)
            self._apply(entity, configs)

    def config_changed(self, entity_path: str) -> None:
        """A ``brokers/<id>`` notification (on ZooKeeper's event thread): this broker's level or
        the default read again, and applied on the loop."""
        entity = entity_path.partition("/")[2]
        if entity in self.stored:  # another broker's own configs are not this one's business
            configs = self.store.entity(entity)
            self._loop.call_soon_threadsafe(self._apply, entity, configs)

    def _apply(self, entity: str, configs: Configs) -> None:
        self.stored[entity] = dict(configs)
        self.config.set_level(entity != DEFAULT, configs)
        for reconfigure in self.reconfigurables:
            try:
                reconfigure(self.config)
            except SeglogError as e:  # a value another broker's check let by: the old ones stay
                log.error("dynamic broker configs of %s not applied: %s", entity, e)
