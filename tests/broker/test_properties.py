"""server.properties parsing, --override, listeners, and the broker's config keys."""

from __future__ import annotations

import pytest

from seglog.broker.endpoint import parse_endpoint, parse_endpoints
from seglog.broker.properties import load_config, parse_overrides, parse_properties
from seglog.errors import InvalidConfigurationError


def test_java_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another\n"
        "broker.id=3\n"
        "log.dirs = /a,/b\n"
        "num.partitions: 4\n"
        "listeners PLAINTEXT://:9093\n"
        "log.retention.hours=1\\\n"
        "   68\n"
        "weird\\=key=a\\tb\n"
    )
    props = parse_properties(text)
    assert props == {
        "broker.id": "3",
        "log.dirs": "/a,/b",
        "num.partitions": "4",
        "listeners": "PLAINTEXT://:9093",
        "log.retention.hours": "168",
        "weird=key": "a\tb",
    }


def test_overrides_win_and_unknown_keys_are_ignored(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nnum.partitions=2\nzookeeper.connect=localhost:2181\nlog.dirs=/x\n")
    config = load_config(str(path), ["num.partitions=6", "auto.create.topics.enable=false"])
    assert config["broker.id"] == 1
    assert config["num.partitions"] == 6
    assert config["auto.create.topics.enable"] is False
    assert config.log_dirs == ("/x",)
    assert config["socket.request.max.bytes"] == 100 * 1024 * 1024  # Kafka's default


@pytest.mark.parametrize(
    ("override", "detail"),
    [
        ("num.partitions=0", r"num.partitions.*\[1, 2147483647\]"),
        ("auto.create.topics.enable=maybe", "not a boolean"),
        ("socket.request.max.bytes=x", "socket.request.max.bytes"),
    ],
)
def test_bad_values_name_the_key_and_file(tmp_path, override: str, detail: str) -> None:
    path = tmp_path / "server.properties"
    path.write_text("")
    with pytest.raises(InvalidConfigurationError, match=detail) as e:
        load_config(str(path), [override])
    assert e.value.file == str(path)


def test_bad_override_syntax_and_missing_file(tmp_path) -> None:
    with pytest.raises(InvalidConfigurationError, match="key=value"):
        parse_overrides(["num.partitions"])
    with pytest.raises(InvalidConfigurationError, match="cannot read") as e:
        load_config(str(tmp_path / "nope.properties"))
    assert e.value.file.endswith("nope.properties")


def test_listeners() -> None:
    assert parse_endpoint("PLAINTEXT://:9092") == ("PLAINTEXT", "", 9092)
    assert parse_endpoint("plaintext://127.0.0.1:0") == ("PLAINTEXT", "127.0.0.1", 0)
    assert parse_endpoint("PLAINTEXT://[::1]:9092").host == "::1"
    assert parse_endpoint("mtls://h:9094") == ("MTLS", "h", 9094)  # names upper case, as Kafka's
    for bad in ("localhost:9092", "PLAINTEXT://h:99999", "PLAINTEXT://h"):
        with pytest.raises(InvalidConfigurationError, match="listeners"):
            parse_endpoint(bad)
    with pytest.raises(InvalidConfigurationError, match="different name, not PLAINTEXT twice"):
        parse_endpoints(("PLAINTEXT://:1", "plaintext://:2"))
    with pytest.raises(InvalidConfigurationError, match="different port, not 9092 twice"):
        parse_endpoints(("PLAINTEXT://:9092", "SSL://127.0.0.1:9092"))
    assert len(parse_endpoints(("PLAINTEXT://:0", "SSL://:0"))) == 2  # any free port, twice
