"""``LocalCluster.stop`` against three ``seglog broker`` processes and a real ZooKeeper: brokers
stopped one after another, the controller's last, so each controlled shutdown but the last can move
its leaders to a broker still running (stopped at once, they left each other nowhere to go)."""

from __future__ import annotations

import re

from confluent_kafka.admin import AdminClient, NewTopic

from seglog.tools.cluster import LocalCluster

from .conftest import wait_until
from .test_brokers import metadata, partitions


def test_stop_rolls_the_brokers_with_the_controller_last(chroot: str, tmp_path) -> None:
    overrides = ["controlled.shutdown.retry.backoff.ms=100"]
    local = LocalCluster(tmp_path, 3, zookeeper=chroot, port=None, overrides=overrides)
    local.start()
    try:
        admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})
        admin.create_topics([NewTopic("t", 6, 3)], operation_timeout=30)["t"].result(60)
        wait_until(lambda: all(len(partitions(b.address, "t")) == 6 for b in local.brokers.values()), what="t known")
        controller = metadata(local.brokers[1].address).controller_id
    finally:
        local.stop()
    for broker in local.brokers.values():
        output = broker.output.read_text()
        found = re.findall(r"controlled shutdown of broker \d+ (done|did not finish)", output)
        # the last one leads every partition and has no broker left to take them, in Kafka as here:
        # it asks controlled.shutdown.max.retries (3) times and backs off between two asks only
        retries = re.findall(r"Retrying controlled shutdown \((\d+) retries remaining\)", output)
        last = broker.broker_id == controller
        assert (found, retries) == ((["did not finish"], ["2", "1"]) if last else (["done"], [])), broker.broker_id
