"""DescribeClientQuotas and AlterClientQuotas with a real client (kafka-python's protocol
classes: neither confluent-kafka's nor kafka-python's AdminClient has methods for them), on a
broker without ZooKeeper, whose quotas live in its log dir."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

from seglog.broker.embedded import EmbeddedBroker
from seglog.broker.quota_store import QUOTA_FILE
from seglog.cli import main
from seglog.errors import ErrorCode
from seglog.security.quotas import DEFAULT, QuotaEntity

Entry = AlterClientQuotasRequest.EntryData
Entity = Entry.EntityData
Op = Entry.OpData
Component = DescribeClientQuotasRequest.ComponentData
EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2
IP_1234 = [Entity(entity_type="ip", entity_name="1.2.3.4")]
CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")


def send(admin: KafkaAdminClient, request: Any) -> Any:
    return admin._manager.run(admin._manager.send, request)


def entity(user: str | None = None, client: str | None = None, *, default_user: bool = False) -> list[Any]:
    parts = []
    if user is not None or default_user:
        parts.append(Entity(entity_type="user", entity_name=user))
    if client is not None:
        parts.append(Entity(entity_type="client-id", entity_name=None if client == DEFAULT else client))
    return parts


def alter(admin: KafkaAdminClient, parts: list[Any], *ops: Any, validate_only: bool = False) -> tuple[int, str | None]:
    answer = send(
        admin, AlterClientQuotasRequest(entries=[Entry(entity=parts, ops=list(ops))], validate_only=validate_only)
    )
    (entry,) = answer.entries
    return entry.error_code, entry.error_message


def describe(
    admin: KafkaAdminClient, *components: Any, strict: bool = False
) -> dict[tuple[Any, ...], dict[str, float]]:
    answer = send(admin, DescribeClientQuotasRequest(components=list(components), strict=strict))
    assert answer.error_code == 0, answer.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
        for entry in answer.entries
    }


def set_op(key: str, value: float) -> Any:
    return Op(key=key, value=value, remove=False)


def remove_op(key: str) -> Any:
    return Op(key=key, value=0.0, remove=True)


@pytest.fixture
def cleared(admin: KafkaAdminClient) -> Iterator[None]:
    """Every quota removed after the test (the broker is the module's)."""
    yield
    for described in describe(admin):
        parts = [Entity(entity_type=t, entity_name=n) for t, n in described]
        keys = ("connection_creation_rate",) if parts[0].entity_type == "ip" else CLIENT_KEYS
        for key in keys:
            alter(admin, parts, remove_op(key))
    assert describe(admin) == {}


@pytest.mark.usefixtures("cleared")
def test_alter_then_describe(admin: KafkaAdminClient) -> None:
    assert alter(admin, entity("alice"), set_op("producer_byte_rate", 1024), set_op("consumer_byte_rate", 2048)) == (
        0,
        None,
    )
    assert alter(admin, entity(client="c1"), set_op("request_percentage", 12.5))[0] == 0
    assert alter(admin, entity("alice", DEFAULT), set_op("producer_byte_rate", 10))[0] == 0
    assert alter(admin, entity(None, DEFAULT, default_user=True), set_op("consumer_byte_rate", 99))[0] == 0
    assert describe(admin) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        (("client-id", "c1"),): {"request_percentage": 12.5},
        (("user", "alice"), ("client-id", None)): {"producer_byte_rate": 10.0},
        (("user", None), ("client-id", None)): {"consumer_byte_rate": 99.0},
    }
    # a key removed, the other kept
    assert alter(admin, entity("alice"), remove_op("consumer_byte_rate"))[0] == 0
    assert describe(admin, Component(entity_type="user", match_type=EXACT, match="alice"), strict=True) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}
    }


@pytest.mark.usefixtures("cleared")
def test_describe_filters_as_kafka(admin: KafkaAdminClient) -> None:
    for parts in (entity("alice"), entity("bob"), entity(client="c1"), entity("alice", "c1"), entity("alice", DEFAULT)):
        assert alter(admin, parts, set_op("producer_byte_rate", 100))[0] == 0
    users = {k for k in describe(admin, Component(entity_type="user", match_type=SPECIFIED, match=None), strict=True)}
    assert users == {(("user", "alice"),), (("user", "bob"),)}
    # not strict: entities with a client id too
    alices = describe(admin, Component(entity_type="user", match_type=EXACT, match="alice"))
    assert set(alices) == {
        (("user", "alice"),),
        (("user", "alice"), ("client-id", "c1")),
        (("user", "alice"), ("client-id", None)),
    }
    default_clients = describe(admin, Component(entity_type="client-id", match_type=DEFAULT_MATCH, match=None))
    assert set(default_clients) == {(("user", "alice"), ("client-id", None))}
    both = describe(
        admin,
        Component(entity_type="user", match_type=EXACT, match="alice"),
        Component(entity_type="client-id", match_type=SPECIFIED, match=None),
        strict=True,
    )
    assert set(both) == {(("user", "alice"), ("client-id", "c1")), (("user", "alice"), ("client-id", None))}


@pytest.mark.parametrize(
    ("parts", "op", "message"),
    [
        ([], set_op("producer_byte_rate", 1), "empty client quota entity"),
        (entity("alice"), set_op("bogus", 1), "Invalid configuration key bogus"),
        (entity("alice"), set_op("producer_byte_rate", 1.5), "must be a LONG value"),
        (entity("alice"), set_op("consumer_byte_rate", 0), "greater than 0"),
        (entity("alice"), set_op("request_percentage", -1), "greater than 0"),
        (IP_1234, set_op("producer_byte_rate", 1), "Invalid configuration key producer_byte_rate"),
        (IP_1234, set_op("connection_creation_rate", 1.5), "must be a INT value"),
        (entity("alice"), set_op("connection_creation_rate", 1), "Invalid configuration key connection_creation_rate"),
        (IP_1234 + entity("alice"), set_op("connection_creation_rate", 1), "IP entity should not be used with user"),
        (
            [Entity(entity_type="ip", entity_name="host-x")],
            set_op("connection_creation_rate", 1),
            "host-x is not a valid IP or resolvable host.",
        ),
        ([Entity(entity_type="group", entity_name="g")], set_op("producer_byte_rate", 1), "entity type: group"),
        (entity(""), set_op("producer_byte_rate", 1), "Empty user"),
        (entity("a") + entity("b"), set_op("producer_byte_rate", 1), "Duplicate user"),
    ],
)
def test_bad_alterations_are_refused_and_change_nothing(
    admin: KafkaAdminClient, parts: list[Any], op: Any, message: str
) -> None:
    code, error = alter(admin, parts, op)
    assert code == ErrorCode.INVALID_REQUEST
    assert error is not None and message in error
    assert describe(admin) == {}


@pytest.mark.usefixtures("cleared")
def test_ip_quotas_are_altered_and_described_apart_from_users_and_clients(admin: KafkaAdminClient) -> None:
    rate = set_op("connection_creation_rate", 5)
    assert alter(admin, IP_1234, rate) == (0, None)
    assert alter(admin, [Entity(entity_type="ip", entity_name=None)], set_op("connection_creation_rate", 50))[0] == 0
    assert alter(admin, [Entity(entity_type="ip", entity_name="::0001")], rate)[0] == 0  # stored as ::1
    assert alter(admin, entity("alice"), set_op("producer_byte_rate", 100))[0] == 0
    ips = {
        (("ip", "1.2.3.4"),): {"connection_creation_rate": 5.0},
        (("ip", None),): {"connection_creation_rate": 50.0},
        (("ip", "::1"),): {"connection_creation_rate": 5.0},
    }
    # as Kafka's ZkAdminManager: no filter and not strict, everything; an ip filter, ips alone;
    # a user filter, no ips
    assert describe(admin) == {**ips, (("user", "alice"),): {"producer_byte_rate": 100.0}}
    assert describe(admin, Component(entity_type="ip", match_type=SPECIFIED, match=None)) == ips
    exact = describe(admin, Component(entity_type="ip", match_type=EXACT, match="1.2.3.4"), strict=True)
    assert exact == {(("ip", "1.2.3.4"),): {"connection_creation_rate": 5.0}}
    default = describe(admin, Component(entity_type="ip", match_type=DEFAULT_MATCH, match=None))
    assert default == {(("ip", None),): {"connection_creation_rate": 50.0}}
    assert set(describe(admin, Component(entity_type="user", match_type=SPECIFIED, match=None))) == {
        (("user", "alice"),)
    }
    answer = send(
        admin,
        DescribeClientQuotasRequest(
            components=[
                Component(entity_type="ip", match_type=SPECIFIED, match=None),
                Component(entity_type="user", match_type=SPECIFIED, match=None),
            ],
            strict=False,
        ),
    )
    assert answer.error_code == ErrorCode.INVALID_REQUEST and "IP filter component" in answer.error_message


def test_validate_only_changes_nothing(admin: KafkaAdminClient) -> None:
    assert alter(admin, entity("alice"), set_op("producer_byte_rate", 5), validate_only=True) == (0, None)
    assert describe(admin) == {}


def test_a_bad_filter_is_an_error(admin: KafkaAdminClient) -> None:
    answer = send(
        admin,
        DescribeClientQuotasRequest(
            components=[Component(entity_type="user", match_type=EXACT, match="a")] * 2, strict=False
        ),
    )
    assert answer.error_code == ErrorCode.INVALID_REQUEST and "Duplicate user" in answer.error_message
    assert answer.entries is None


def test_quotas_are_kept_in_the_log_dir_across_a_restart(
    seglog_broker_factory: Callable[..., EmbeddedBroker], tmp_path: Any
) -> None:
    log_dir = str(tmp_path / "logs")
    broker = seglog_broker_factory(log_dir)
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        assert alter(client, entity("CN=a b", "id/1"), set_op("producer_byte_rate", 4096))[0] == 0
        assert alter(client, entity(client="c2"), set_op("request_percentage", 50))[0] == 0
        assert alter(client, IP_1234, set_op("connection_creation_rate", 7))[0] == 0
    finally:
        client.close()
    broker.stop()
    with open(os.path.join(log_dir, QUOTA_FILE)) as f:
        stored = json.load(f)
    assert stored == {
        "version": 1,
        "entities": {
            "users/CN%3Da%20b/clients/id%2F1": {"producer_byte_rate": "4096"},
            "clients/c2": {"request_percentage": "50.0"},
            "ips/1.2.3.4": {"connection_creation_rate": "7"},
        },
    }
    again = seglog_broker_factory(log_dir)
    quotas = again.server.quotas
    assert quotas.configs == {
        QuotaEntity("CN=a b", "id/1"): {"producer_byte_rate": 4096.0},
        QuotaEntity(None, "c2"): {"request_percentage": 50.0},
    }
    assert quotas.produce.quota("CN=a b", "id/1") == 4096.0
    assert quotas.ip_rates == {"1.2.3.4": 7.0}  # what the connection quotas read


def test_a_corrupt_quota_file_stops_the_broker_with_a_clear_error(
    seglog_broker_factory: Callable[..., EmbeddedBroker], tmp_path: Any
) -> None:
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / QUOTA_FILE).write_text('{"version": 1, "entities": {"topics/t": {}}}')
    with pytest.raises(Exception, match="not a client quota file") as e:
        seglog_broker_factory(str(log_dir))
    assert QUOTA_FILE in str(e.value)


# --- seglog configs: kafka-configs.sh's quota forms ------------------------------------------------


def configs(seglog_broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["configs", "--bootstrap-server", seglog_broker.bootstrap_servers, *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.usefixtures("cleared")
def test_seglog_configs_alters_and_describes_quotas(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str]
) -> None:
    alice = ("--entity-type", "users", "--entity-name", "alice")
    added = ("--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert configs(seglog_broker, capsys, "--alter", *alice, *added) == (
        0,
        "Completed updating config for user alice.\n",
        "",
    )
    code, out, _ = configs(
        seglog_broker, capsys, "--alter", *alice, "--entity-type", "clients", "--entity-default", "--add-config",
        "request_percentage=25.5",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating config for user alice.\n")
    code, out, _ = configs(
        seglog_broker, capsys, "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
        "consumer_byte_rate=512",
    )  # fmt: skip
    assert (code, out) == (0, "Completed updating default config for clients in the cluster.\n")
    # what the tool wrote, as a client describes it
    assert describe(admin) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        (("user", "alice"), ("client-id", None)): {"request_percentage": 25.5},
        (("client-id", None),): {"consumer_byte_rate": 512.0},
    }
    assert configs(seglog_broker, capsys, "--describe", *alice)[1] == (
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n"
    )
    out = configs(seglog_broker, capsys, "--describe", *alice, "--entity-type", "clients")[1]
    assert out == "Quota configs for user-principal 'alice', the default client-id are request_percentage=25.5\n"
    out = configs(seglog_broker, capsys, "--describe", "--entity-type", "clients")[1]
    assert out == "Quota configs for the default client-id are consumer_byte_rate=512.0\n"
    assert configs(seglog_broker, capsys, "--alter", *alice, "--delete-config", "consumer_byte_rate")[0] == 0
    assert describe(admin, Component(entity_type="user", match_type=EXACT, match="alice"), strict=True) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0}
    }


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (("--add-config", "retention.ms=1"), "not quota configs: retention.ms"),
        (("--add-config", "producer_byte_rate=fast"), "Cannot parse quota configuration value for producer_byte_rate"),
        (("--delete-config", "consumer_byte_rate"), "Invalid config(s): consumer_byte_rate"),
        (("--add-config", "producer_byte_rate=1.5"), "must be a LONG value"),
    ],
)
def test_seglog_configs_refuses_bad_quota_alterations(
    seglog_broker: EmbeddedBroker, admin: KafkaAdminClient, capsys: pytest.CaptureFixture[str], argv: Any, error: str
) -> None:
    try:
        code, _, said = configs(
            seglog_broker, capsys, "--alter", "--entity-type", "users", "--entity-name", "bob", *argv
        )
        assert code == 1  # the broker's refusal
    except SystemExit as e:  # the tool's own
        said = str(e.code)
    assert error in said
    assert describe(admin) == {}
