"""``seglog acls`` as kafka-acls.sh is used: against a broker with ACLs on (its plaintext clients,
User:ANONYMOUS, a super user), adding, listing and removing, and its mistakes refused."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

import seglog.broker
from seglog.cli import main
from seglog.security import AclBindingFilter, AclOperation, KafkaPrincipal, ResourceType

ALICE = KafkaPrincipal("User", "alice")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    config = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with seglog.broker.start(str(tmp_path_factory.mktemp("acls-cli")), config=config) as running:
        yield running


def acls(capsys: Any, monkeypatch: Any, broker: Any, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["acls", "--bootstrap-server", broker.bootstrap_servers, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def allowed(broker: Any, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    return broker.server.authorizer.acls.authorize(ALICE, "10.1.1.1", operation, resource_type, name)


def test_add_list_and_remove(capsys: Any, monkeypatch: Any, broker: Any) -> None:
    code, out, _ = acls(
        capsys,
        monkeypatch,
        broker,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "orders",
        "--group",
        "billing",
    )
    assert code == 0
    topic = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    read = " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) "
    assert f"Adding ACLs for resource `{topic}`: \n" in out
    assert f"Current ACLs for resource `{topic}`: \n" in out and read in out
    assert allowed(broker, AclOperation.READ, ResourceType.TOPIC, "orders")
    assert allowed(broker, AclOperation.READ, ResourceType.GROUP, "billing")
    assert not allowed(broker, AclOperation.WRITE, ResourceType.TOPIC, "orders")

    code, out, _ = acls(
        capsys, monkeypatch, broker, "--add", "--deny-principal", "User:*", "--deny-host", "10.1.1.1", "--topic", "ord",
        "--resource-pattern-type", "prefixed", "--operation", "Read",
    )  # fmt: skip
    assert code == 0
    assert not allowed(broker, AclOperation.READ, ResourceType.TOPIC, "orders")  # DENY wins

    code, out, _ = acls(capsys, monkeypatch, broker, "--list")
    assert out.count("Current ACLs for resource") == 3
    code, out, _ = acls(capsys, monkeypatch, broker, "--list", "--topic", "orders", "--resource-pattern-type", "match")
    assert "name=orders, patternType=LITERAL" in out and "name=ord, patternType=PREFIXED" in out
    assert "billing" not in out

    # --remove asks first: no answer, nothing removed
    code, out, _ = acls(
        capsys, monkeypatch, broker, "--remove", "--topic", "ord", "--resource-pattern-type", "prefixed"
    )
    assert code == 0 and "Are you sure" in out
    assert not allowed(broker, AclOperation.READ, ResourceType.TOPIC, "orders")
    code, out, _ = acls(
        capsys, monkeypatch, broker, "--remove", "--topic", "ord", "--resource-pattern-type", "prefixed", stdin="y\n"
    )
    assert code == 0
    assert allowed(broker, AclOperation.READ, ResourceType.TOPIC, "orders")
    # one entry of a resource removed, the other kept
    code, out, _ = acls(
        capsys, monkeypatch, broker, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
        "--topic", "orders",
    )  # fmt: skip
    assert code == 0
    assert not allowed(broker, AclOperation.READ, ResourceType.TOPIC, "orders")
    assert allowed(broker, AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")
    assert "operation=DESCRIBE" in out and "operation=READ" not in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--add", "--topic", "t"), "--allow-principal or --deny-principal"),
        (("--add", "--allow-principal", "User:a"), "needs a resource"),
        (("--add", "--allow-principal", "alice", "--topic", "t"), "TYPE:NAME"),
        (("--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"), "--operation"),
        (("--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"), "only supports"),
        (("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "any"), "literal or"),
        (("--add", "--allow-host", "h", "--topic", "t"), "--allow-host goes with"),
        (("--remove", "--force"), "needs a resource"),
    ],
)
def test_mistakes_are_refused_and_change_nothing(
    capsys: Any, monkeypatch: Any, broker: Any, argv: tuple[str, ...], says: str
) -> None:
    before = broker.server.authorizer.describe(AclBindingFilter())
    code, _, err = acls(capsys, monkeypatch, broker, *argv)
    assert code == 2 and says in err
    assert broker.server.authorizer.describe(AclBindingFilter()) == before


def test_a_broker_without_an_authorizer_says_so(capsys: Any, monkeypatch: Any, seglog_broker: Any) -> None:
    code, _, err = acls(capsys, monkeypatch, seglog_broker, "--list")
    assert code == 1 and "No Authorizer is configured on the broker" in err


def test_a_mistyped_operation_is_refused_before_any_broker_is_asked(capsys: Any) -> None:
    # port 1: nothing listens there, so a connection attempt would say "cannot connect"
    code = main(["acls", "--bootstrap-server", "127.0.0.1:1", "--list", "--principal", "alice"])
    assert code == 2 and "TYPE:NAME" in capsys.readouterr().err
    argv = ["--add", "--allow-principal", "User:a", "--operation", "Reed", "--topic", "t"]
    code = main(["acls", "--bootstrap-server", "127.0.0.1:1", *argv])
    assert code == 2 and "unknown AclOperation 'Reed'" in capsys.readouterr().err
