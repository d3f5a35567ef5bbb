"""Config keys against Kafka's types and ranges (LogConfig, ServerLogConfigs, CleanerConfig):
every key refuses a value out of its range and a value of the wrong type, naming the key
and what it takes, wherever a config comes in."""

from __future__ import annotations

import dataclasses
import os

import pytest

import seglog
from seglog.broker.endpoint import broker_listeners
from seglog.config import BROKER_KEYS, TOPIC_KEYS, BrokerConfig, validate_topic_config
from seglog.errors import InvalidConfigurationError

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1

# key -> (a value out of its range, a value of the wrong type, a fragment of the allowed range);
# ranges from Kafka's ConfigDef of each key (INT is an int32, LONG an int64)
TOPIC_CASES = {
    "segment.bytes": (2**31, "1g", "[14, 2147483647]"),
    "segment.ms": (0, "7d", "[1, 9223372036854775807]"),
    "segment.jitter.ms": (-1, 1.5, "[0, 9223372036854775807]"),
    "segment.index.bytes": (3, "big", "[4, 2147483647]"),
    "index.interval.bytes": (2**31, 4096.0, "[0, 2147483647]"),
    "flush.messages": (0, "often", "[1, 9223372036854775807]"),
    "flush.ms": (2**63, True, "[0, 9223372036854775807]"),
    "retention.ms": (-2, "forever", "[-1, 9223372036854775807]"),
    "retention.bytes": (-(2**63) - 1, "1GB", "[-9223372036854775808, 9223372036854775807]"),
    "max.message.bytes": (-1, "1m", "[0, 2147483647]"),
    "cleanup.policy": ("compact,shred", 7, "delete, compact"),
    "delete.retention.ms": (-1, "1 day", "[0, 9223372036854775807]"),
    "min.compaction.lag.ms": (-1, [1], "[0, 9223372036854775807]"),
    "max.compaction.lag.ms": (0, "never", "[1, 9223372036854775807]"),
    "min.cleanable.dirty.ratio": (1.01, "half", "[0, 1]"),
    "file.delete.delay.ms": (-1, None, "[0, 9223372036854775807]"),
    "compression.type": ("none", 3, "producer, uncompressed, gzip, snappy, lz4, zstd"),
    "message.timestamp.type": ("createtime", 0, "CreateTime, LogAppendTime"),
    "message.timestamp.before.max.ms": (-1, "1h", "[0, 9223372036854775807]"),
    "message.timestamp.after.max.ms": (2**63, "1h", "[0, 9223372036854775807]"),
    "min.insync.replicas": (0, "two", "[1, 2147483647]"),
    "unclean.leader.election.enable": ("sometimes", 0, "true or false"),
}

BROKER_CASES = {
    "log.dirs": ([""], None, "not empty"),
    "log.dir": ("", "  ", "not empty"),
    "broker.id": (2**31, "one", "[-1, 2147483647]"),
    "num.partitions": (0, "3.5", "[1, 2147483647]"),
    "num.recovery.threads.per.data.dir": (2**31, "x", "[1, 2147483647]"),
    "log.flush.offset.checkpoint.interval.ms": (2**31, "1m", "[0, 2147483647]"),
    "log.flush.start.offset.checkpoint.interval.ms": (-1, "1m", "[0, 2147483647]"),
    "replica.high.watermark.checkpoint.interval.ms": (-1, "5s", "[0, 9223372036854775807]"),
    "log.retention.check.interval.ms": (0, "5m", "[1, 9223372036854775807]"),
    "log.cleaner.enable": ("yes", 1, "true or false"),
    "log.cleaner.threads": (2**31, "two", "[0, 2147483647]"),
    "log.cleaner.dedupe.buffer.size": (-1, "128m", "[0, 9223372036854775807]"),
    "log.cleaner.io.buffer.size": (2**31, "512k", "[0, 2147483647]"),
    "log.cleaner.io.buffer.load.factor": (1.5, "nan", "[0, 1]"),
    "log.cleaner.io.max.bytes.per.second": (-1.0, "fast", "[0, inf]"),
    "log.cleaner.backoff.ms": (-1, "15s", "[0, 9223372036854775807]"),
    # the broker synonyms of topic keys; those counted in hours or minutes are INTs
    "log.segment.bytes": (2**31, "1g", "[14, 2147483647]"),
    "log.roll.ms": (0, "1d", "[1, 9223372036854775807]"),
    "log.roll.hours": (2**31, "1d", "[1, 2147483647]"),
    "log.roll.jitter.ms": (-1, "1h", "[0, 9223372036854775807]"),
    "log.roll.jitter.hours": (2**31, "1h", "[0, 2147483647]"),
    "log.index.size.max.bytes": (3, "10m", "[4, 2147483647]"),
    "log.index.interval.bytes": (-1, "4k", "[0, 2147483647]"),
    "log.flush.interval.messages": (0, "many", "[1, 9223372036854775807]"),
    "log.flush.interval.ms": (-1, "1s", "[0, 9223372036854775807]"),
    "log.flush.scheduler.interval.ms": (-1, "1s", "[0, 9223372036854775807]"),
    "log.retention.ms": (-2, "7d", "[-1, 9223372036854775807]"),
    "log.retention.minutes": (2**31, "7d", "[-1, 2147483647]"),
    "log.retention.hours": (2**31, "7d", "[-1, 2147483647]"),
    "log.retention.bytes": (2**63, "1g", "[-9223372036854775808, 9223372036854775807]"),
    "message.max.bytes": (2**31, "1m", "[0, 2147483647]"),
    "log.cleanup.policy": ("archive", 3, "delete, compact"),
    "log.cleaner.delete.retention.ms": (-1, "1d", "[0, 9223372036854775807]"),
    "log.cleaner.min.compaction.lag.ms": (-1, "0s", "[0, 9223372036854775807]"),
    "log.cleaner.max.compaction.lag.ms": (0, "1d", "[1, 9223372036854775807]"),
    "log.cleaner.min.cleanable.ratio": (-0.1, "half", "[0, 1]"),
    "log.segment.delete.delay.ms": (-1, "1m", "[0, 9223372036854775807]"),
    "compression.type": ("brotli", 1, "producer, uncompressed"),
    "log.message.timestamp.type": ("AppendTime", 1, "CreateTime, LogAppendTime"),
    "log.message.timestamp.before.max.ms": (-1, "1h", "[0, 9223372036854775807]"),
    "log.message.timestamp.after.max.ms": (-1, "1h", "[0, 9223372036854775807]"),
    "min.insync.replicas": (2**31, "two", "[1, 2147483647]"),
    "unclean.leader.election.enable": ("no", 2, "true or false"),
    # the cluster's keys
    "zookeeper.connect": ("", None, "a string"),
    "zookeeper.session.timeout.ms": (2**31, "18s", "an int32"),
    "zookeeper.connection.timeout.ms": (2**31, "18s", "an int32"),
    "broker.rack": ("", None, "a string"),
    "controlled.shutdown.enable": ("maybe", 3, "true or false"),
    "controlled.shutdown.max.retries": (2**31, "three", "an int32"),
    "controlled.shutdown.retry.backoff.ms": (2**63, "5s", "an int64"),
    "auto.leader.rebalance.enable": ("maybe", 3, "true or false"),
    "delete.topic.enable": ("maybe", 3, "true or false"),
    "auto.create.topics.enable": ("maybe", 3, "true or false"),
    # lists of NAME://host:port: their form is checked where the broker parses them (broker/endpoint.py)
    "listeners": (None, None, "a comma-separated list"),
    "advertised.listeners": (None, None, "a comma-separated list"),
    "socket.request.max.bytes": (0, "100MB", "[1, 2147483647]"),
    # the listeners' protocols and TLS: names and files are checked where the broker reads them
    # (broker/endpoint.py, broker/tls.py)
    "listener.security.protocol.map": (None, None, "a comma-separated list"),
    "inter.broker.listener.name": ("", None, "a string"),
    "security.inter.broker.protocol": ("TLS", 1, "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    "ssl.keystore.type": ("P12", 1, "JKS, PKCS12, PEM"),
    "ssl.keystore.location": ("", None, "a string"),
    "ssl.keystore.password": ("", None, "a string"),
    "ssl.keystore.certificate.chain": ("", None, "a string"),
    "ssl.keystore.key": ("", None, "a string"),
    "ssl.key.password": ("", None, "a string"),
    "ssl.truststore.type": ("P12", 1, "JKS, PKCS12, PEM"),
    "ssl.truststore.location": ("", None, "a string"),
    "ssl.truststore.password": ("", None, "a string"),
    "ssl.truststore.certificates": ("", None, "a string"),
    "ssl.client.auth": ("true", 1, "none, requested, required"),
    "ssl.enabled.protocols": ("TLSv1.2,SSLv3", None, "TLSv1.2, TLSv1.3"),
    "ssl.cipher.suites": (None, None, "a comma-separated list"),
    "ssl.principal.mapping.rules": ("", None, "a string"),
    # SASL: mechanisms and JAAS configs are checked where the broker reads them (broker/sasl.py)
    "sasl.enabled.mechanisms": (None, None, "a comma-separated list"),
    "sasl.mechanism.inter.broker.protocol": ("", None, "a string"),
    "sasl.jaas.config": ("", None, "a string"),
    "connections.max.reauth.ms": (-1, "1h", "[0, 9223372036854775807]"),
    "connection.failed.authentication.delay.ms": (-1, "100ms", "[0, 2147483647]"),
    # ACLs: only Kafka's AclAuthorizer (or none) names an authorizer seglog has
    "authorizer.class.name": ("kafka.security.authorizer.Other", 3, "kafka.security.authorizer.AclAuthorizer"),
    "super.users": ("", None, "a string"),
    "allow.everyone.if.no.acl.found": ("maybe", 2, "true or false"),
    "num.io.threads": (2**31, "eight", "an int32"),
    "connections.max.idle.ms": (2**63, "10m", "[-9223372036854775808, 9223372036854775807]"),
    "max.connections.per.ip": (-1, "many", "[0, 2147483647]"),
    "max.connections.per.ip.overrides": ("10.0.0.1:-1", "10.0.0.1=5", "host:count pairs"),
    "max.connections": (-1, "many", "[0, 2147483647]"),
    "max.connection.creation.rate": (2**31, "fast", "[0, 2147483647]"),
    "quota.window.num": (0, "eleven", "[1, 2147483647]"),
    "quota.window.size.seconds": (0, "1s", "[1, 2147483647]"),
    "leader.imbalance.per.broker.percentage": (2**31, "10%", "an int32"),
    "leader.imbalance.check.interval.seconds": (0, "5m", "[1, 9223372036854775807]"),
    "replica.lag.time.max.ms": (0, "30s", "[1, 9223372036854775807]"),
    "default.replication.factor": (2**31, "one", "an int32"),
    "num.replica.fetchers": (2**31, "one", "an int32"),
    "replica.fetch.max.bytes": (-1, "1m", "[0, 2147483647]"),
    "replica.fetch.response.max.bytes": (-1, "10m", "[0, 2147483647]"),
    "replica.fetch.wait.max.ms": (2**31, "500ms", "an int32"),
    "replica.fetch.min.bytes": (2**31, "one", "an int32"),
    "replica.fetch.backoff.ms": (-1, "1s", "[0, 2147483647]"),
    "replica.socket.timeout.ms": (2**31, "30s", "an int32"),
    "controller.socket.timeout.ms": (2**31, "30s", "an int32"),
    "request.timeout.ms": (-1, "30s", "[0, 2147483647]"),
    "offsets.topic.replication.factor": (2**15, "3.0", "an int16 in [1, 32767]"),
    "transaction.state.log.replication.factor": (0, "three", "an int16 in [1, 32767]"),
    "transaction.state.log.min.isr": (0, "two", "[1, 2147483647]"),
    # the group and transaction coordinators' keys
    "offsets.topic.num.partitions": (0, "fifty", "[1, 2147483647]"),
    "offsets.topic.segment.bytes": (2**31, "100m", "[1, 2147483647]"),
    "offsets.retention.minutes": (0, "7d", "[1, 2147483647]"),
    "offsets.retention.check.interval.ms": (0, "10m", "[1, 9223372036854775807]"),
    "offset.metadata.max.bytes": (2**31, "4k", "an int32"),
    "offsets.commit.timeout.ms": (0, "5s", "[1, 2147483647]"),
    "offsets.topic.compression.codec": (5, "lz4", "[0, 4]"),
    "group.initial.rebalance.delay.ms": (2**31, "3s", "an int32"),
    "group.min.session.timeout.ms": (2**31, "6s", "an int32"),
    "group.max.session.timeout.ms": (2**31, "30m", "an int32"),
    "group.max.size": (0, "many", "[1, 2147483647]"),
    "transaction.state.log.num.partitions": (0, "fifty", "[1, 2147483647]"),
    "transaction.state.log.segment.bytes": (0, "100m", "[1, 2147483647]"),
    "transaction.max.timeout.ms": (0, "15m", "[1, 2147483647]"),
    "transactional.id.expiration.ms": (2**31, "7d", "[1, 2147483647]"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (0, "10s", "[1, 2147483647]"),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (0, "1h", "[1, 2147483647]"),
    "producer.id.expiration.ms": (0, "1d", "[1, 2147483647]"),
    "producer.id.expiration.check.interval.ms": (0, "10m", "[1, 2147483647]"),
}


def test_the_tables_cover_every_key():
    assert set(TOPIC_CASES) == set(TOPIC_KEYS)
    assert set(BROKER_CASES) == set(BROKER_KEYS)


def _refused(check, name: str, value: object, allowed: str) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        check({name: value})
    assert e.value.error_code == 40
    assert name in str(e.value) and allowed in str(e.value), str(e.value)


@pytest.mark.parametrize("name", sorted(TOPIC_CASES))
def test_topic_key_out_of_range_or_of_the_wrong_type(name):
    out_of_range, wrong_type, allowed = TOPIC_CASES[name]
    _refused(validate_topic_config, name, out_of_range, allowed)
    _refused(validate_topic_config, name, wrong_type, allowed)
    validate_topic_config({name: TOPIC_KEYS[name].default})  # the default itself is in range


@pytest.mark.parametrize("name", sorted(BROKER_CASES))
def test_broker_key_out_of_range_or_of_the_wrong_type(name):
    out_of_range, wrong_type, allowed = BROKER_CASES[name]
    if allowed == "a string":  # a free-form string: any value is in range
        assert BrokerConfig({name: "x"})[name] == "x"
        return
    if allowed == "a comma-separated list":
        assert BrokerConfig({name: "a, b"})[name] == ("a", "b")
        return
    _refused(BrokerConfig, name, out_of_range, allowed)
    if wrong_type is not None:
        _refused(BrokerConfig, name, wrong_type, allowed)


def test_the_edges_of_a_range_are_taken():
    assert validate_topic_config({"segment.bytes": 14, "segment.index.bytes": 4})["segment.bytes"] == 14
    assert validate_topic_config({"segment.bytes": INT32_MAX})["segment.bytes"] == INT32_MAX
    assert validate_topic_config({"retention.ms": -1, "flush.ms": INT64_MAX})["flush.ms"] == INT64_MAX
    assert validate_topic_config({"min.cleanable.dirty.ratio": "1"})["min.cleanable.dirty.ratio"] == 1.0
    assert validate_topic_config({"segment.bytes": "1048576"})["segment.bytes"] == 1 << 20  # strings, as Kafka


def test_segment_bytes_past_int32_refused_at_open_create_and_alter(tmp_path):
    with pytest.raises(InvalidConfigurationError, match=r"log.segment.bytes.*\[14, 2147483647\]"):
        seglog.open(str(tmp_path / "a"), {"log.segment.bytes": 2**31}, background=False)
    assert not (tmp_path / "a").exists()  # refused before the dir was made
    with seglog.open(str(tmp_path / "b"), background=False) as logs:
        with pytest.raises(InvalidConfigurationError, match=r"segment.bytes.*\[14, 2147483647\]"):
            logs.create_topic("t", 1, {"segment.bytes": 2**31})
        assert logs.topics() == [] and not (tmp_path / "b" / "t-0").exists()
        logs.create_topic("t", 1)
        with pytest.raises(InvalidConfigurationError, match=r"segment.bytes.*\[14, 2147483647\]"):
            logs.alter_topic_config("t", {"segment.bytes": 2**31})
        assert logs.topic_config("t").segment_bytes == 1 << 30
    with seglog.open(str(tmp_path / "b"), background=False) as logs:
        assert "segment.bytes" not in logs.topic_config("t").overrides


def test_an_empty_log_dir_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for dirs in ("", [""], [str(tmp_path / "x"), " "]):
        with pytest.raises(InvalidConfigurationError, match=r"log\.dirs"):
            seglog.open(dirs, background=False)
    assert os.listdir(tmp_path) == []  # the current dir did not become a log dir


def test_open_takes_paths_and_refuses_what_is_no_path_or_mapping(tmp_path):
    with seglog.open(tmp_path / "a", background=False) as logs:  # a pathlib.Path
        logs.create_topic("t", 1)
        for bad in ([("segment.bytes", 1024)], "segment.bytes=1024"):
            with pytest.raises(InvalidConfigurationError, match="mapping"):
                logs.create_topic("u", 1, bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidConfigurationError, match="mapping"):
                logs.alter_topic_config("t", bad)  # type: ignore[arg-type]
        assert logs.topics() == ["t"]
    with seglog.open([tmp_path / "a"], background=False) as logs:
        assert logs.topics() == ["t"]
    with pytest.raises(InvalidConfigurationError, match="log_dirs"):
        seglog.open(5, background=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigurationError, match="mapping"):
        seglog.open(str(tmp_path / "b"), [("log.segment.bytes", 1024)], background=False)  # type: ignore[arg-type]


# --- listeners and their per-listener keys ---------------------------------------------------------


def test_a_listener_overrides_ssl_keys_for_itself_only():
    config = BrokerConfig({"ssl.client.auth": "requested", "listener.name.MTLS.ssl.client.auth": "required"})
    assert config.for_listener("MTLS", "ssl.client.auth") == "required"  # the prefix's name is lowercased
    assert config.listener_key("mtls", "ssl.client.auth") == "listener.name.mtls.ssl.client.auth"
    assert config.for_listener("SSL", "ssl.client.auth") == "requested"
    assert config.for_listener("SSL", "ssl.enabled.protocols") == ("TLSv1.2", "TLSv1.3")
    with pytest.raises(InvalidConfigurationError, match=r"listener\.name\.mtls\.ssl\.client\.auth.*none, requested"):
        BrokerConfig({"listener.name.mtls.ssl.client.auth": "always"})
    for unknown in ("listener.name.mtls.log.dirs", "listener.name.mtls.ssl.nonsense", "listener.name..ssl.client.auth"):
        with pytest.raises(InvalidConfigurationError, match="unknown broker config"):
            BrokerConfig({unknown: "x"})


def test_a_secret_is_never_shown():
    key = BROKER_KEYS["ssl.key.password"]
    assert key.secret and key.shown("hunter2") == "[hidden]"
    assert not BROKER_KEYS["ssl.client.auth"].secret
    secret_int = dataclasses.replace(BROKER_KEYS["num.io.threads"], secret=True)
    with pytest.raises(InvalidConfigurationError) as e:
        secret_int.coerce("hunter2")
    assert "hunter2" not in str(e.value) and "[hidden]" in str(e.value) and "num.io.threads" in str(e.value)


def _listeners(values):
    return broker_listeners(BrokerConfig(values))


def test_listeners_named_mapped_and_advertised():
    found = _listeners(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://:9093,MTLS://127.0.0.1:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
            "advertised.listeners": "SSL://broker.example:19093",
            "inter.broker.listener.name": "mtls",
        }
    )
    assert [(x.name, x.protocol) for x in found.listeners] == [
        ("PLAINTEXT", "PLAINTEXT"),
        ("SSL", "SSL"),
        ("MTLS", "SSL"),
    ]
    assert found.named("SSL").advertised == ("SSL", "broker.example", 19093)
    assert found.named("MTLS").advertised == found.named("MTLS").bound  # not advertised: its own address
    assert found.inter_broker == "MTLS"
    assert _listeners({"listeners": "SSL://:0", "security.inter.broker.protocol": "SSL"}).inter_broker == "SSL"


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"listeners": "MTLS://:9094"}, r"listeners: listener MTLS has no security protocol in listener\.security"),
        ({"listeners": "PLAINTEXT://:1", "listener.security.protocol.map": "PLAINTEXT"}, "NAME:PROTOCOL"),
        ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "maps PLAINTEXT to TLS, not a security protocol"),
        ({"listener.security.protocol.map": "A:SSL,a:SSL,PLAINTEXT:PLAINTEXT"}, "maps A twice"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners: each listener must have a different port"),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "listeners: each listener must have a different name"),
        ({"listeners": ""}, "listeners is empty"),
        ({"advertised.listeners": "SSL://h:1"}, r"advertised\.listeners: listener SSL is not among the listeners"),
        ({"advertised.listeners": "PLAINTEXT://0.0.0.0:1"}, r"advertised\.listeners cannot use .*0\.0\.0\.0"),
        ({"listeners": "SSL://:1"}, r"security\.inter\.broker\.protocol is PLAINTEXT, which must name a listener"),
        ({"inter.broker.listener.name": "SSL"}, r"inter\.broker\.listener\.name is SSL, which must name a listener"),
        ({"inter.broker.listener.name": "X"}, r"inter\.broker\.listener\.name: listener X is not in listener"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
    ],
)
def test_bad_listeners_are_refused_naming_the_key(values, error):
    with pytest.raises(InvalidConfigurationError, match=error):
        _listeners(values)


def test_max_connections_per_ip_overrides_read_as_kafka_s_map():
    overrides = BrokerConfig({"max.connections.per.ip.overrides": "10.0.0.1:5, localhost:0,::1:2"})
    assert overrides["max.connections.per.ip.overrides"] == {"10.0.0.1": 5, "localhost": 0, "::1": 2}
    assert BrokerConfig()["max.connections.per.ip.overrides"] == {}
