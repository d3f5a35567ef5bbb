"""The source through brokers that authenticate: Spark's Kafka connector options
``kafka.security.protocol``, ``kafka.sasl.*`` and ``kafka.ssl.*`` (Kafka's client properties,
prefixed) reach each task's connections, over SASL_PLAINTEXT and SASL_SSL with PLAIN against
a real broker; a wrong password is one error, and no password is shown in it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trustme
from pyspark.errors import PySparkException

import seglog.broker

from .brokers import create, produce, read, rows_of

PASSWORD = "spark-pw-3c9d"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_spark="{PASSWORD}";'


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, list[tuple]]]:
    d = tmp_path_factory.mktemp("spark-pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(d / "broker.pem"),
    }
    with seglog.broker.start(str(tmp_path_factory.mktemp("spark-secured")), config=config) as running:
        create(running.bootstrap_servers, "secured", 2)
        produced = produce(running.bootstrap_servers, "secured", 2, 300)
        yield running, str(d / "ca.pem"), produced


def _options(protocol: str, password: str = PASSWORD, **more: str) -> dict[str, str]:
    return {
        "subscribe": "secured",
        "includeHeaders": "true",
        "kafka.security.protocol": protocol,
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="spark" password="{password}";',
        **more,
    }


def test_a_read_over_sasl_plaintext(spark: Any, secured: Any) -> None:
    broker, _, produced = secured
    bootstrap = f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}"
    assert rows_of(read(spark, bootstrap, **_options("SASL_PLAINTEXT"))) == produced


def test_a_read_over_sasl_ssl(spark: Any, secured: Any) -> None:
    broker, ca, produced = secured
    bootstrap = f"127.0.0.1:{broker.server.port_of('SASL_SSL')}"
    tls = {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": ca}
    assert rows_of(read(spark, bootstrap, **_options("SASL_SSL", **tls))) == produced


def test_a_wrong_password_is_one_error_without_the_password(spark: Any, secured: Any) -> None:
    broker, _, _ = secured
    bootstrap = f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}"
    with pytest.raises(PySparkException, match="Authentication failed: Invalid username or password") as e:
        read(spark, bootstrap, **_options("SASL_PLAINTEXT", password="wrong-pw-77a1")).collect()
    assert "wrong-pw-77a1" not in str(e.value)


def test_a_write_over_sasl_ssl_then_read_back_over_it(spark: Any, secured: Any) -> None:
    """The sink takes the same options: its driver's check and each task's producer authenticate."""
    broker, ca, _ = secured
    bootstrap = f"127.0.0.1:{broker.server.port_of('SASL_SSL')}"
    tls = {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": ca}
    security = {k: v for k, v in _options("SASL_SSL", **tls).items() if k.startswith("kafka.")}
    rows = spark.range(500).selectExpr("CAST(id AS STRING) AS key", "CAST(id * 7 AS STRING) AS value")
    writer = rows.write.format("seglog").option("kafka.bootstrap.servers", bootstrap).option("topic", "written")
    for name, value in security.items():
        writer = writer.option(name, value)
    writer.mode("append").save()
    back = read(spark, bootstrap, **{**_options("SASL_SSL", **tls), "subscribe": "written"})
    got = sorted((r.key.decode(), r.value.decode()) for r in back.collect())
    assert got == sorted((str(i), str(i * 7)) for i in range(500))
