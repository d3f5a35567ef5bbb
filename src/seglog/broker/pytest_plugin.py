"""pytest plugin (entry point ``pytest11``): a real Kafka broker as a fixture.

    def test_produce(seglog_broker):
        producer = confluent_kafka.Producer({"bootstrap.servers": seglog_broker.bootstrap_servers})

``seglog_broker`` is one embedded broker per test module over a fresh temporary dir
(starting one takes milliseconds, but topics then carry over between the tests of a
module: name them per test). ``seglog_broker_config`` (module scope) gives it broker
keys; override it in a test module or conftest.py. ``seglog_broker_factory`` starts
more, each stopped at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the broker is imported when a test asks for it, not whenever pytest starts
    from .embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    """Broker keys for ``seglog_broker`` (Kafka's names); override to change them."""
    return {}


@pytest.fixture(scope="module")
def seglog_broker(
    tmp_path_factory: pytest.TempPathFactory, seglog_broker_config: dict[str, Any]
) -> Iterator[EmbeddedBroker]:
    """A running broker for the test module; ``.bootstrap_servers`` is its address."""
    from .embedded import start

    with start(str(tmp_path_factory.mktemp("seglog-broker")), config=seglog_broker_config) as broker:
        yield broker


@pytest.fixture
def seglog_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., EmbeddedBroker]]:
    """``factory(log_dir=None, **start_kwargs)`` starts a broker stopped after the test."""
    from .embedded import start

    started: list[EmbeddedBroker] = []

    def factory(log_dir: str | None = None, **kwargs: Any) -> EmbeddedBroker:
        broker = start(log_dir or str(tmp_path_factory.mktemp("seglog-broker")), **kwargs)
        started.append(broker)
        return broker

    yield factory
    for broker in reversed(started):
        broker.stop()
