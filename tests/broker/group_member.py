"""A confluent-kafka group member in a process of its own, for the tests that kill one.

    python group_member.py BOOTSTRAP GROUP TOPIC HISTORY_FILE [key=value ...]

(librdkafka's keys, and ``record.delay.ms``: how long it works on each record.)

It subscribes, and for every record writes ``consumed P O`` to the history file, then
commits offset O+1 synchronously and writes ``committed P O+1`` once the commit is
acknowledged; each assignment and revocation is written as ``assigned P,P`` /
``revoked P,P``. Each line starts with ``time.monotonic_ns()`` (one clock for every
process of the machine), so the members' histories merge into one order of events.
Every line is flushed before the next step: a SIGKILL loses no line of what came before.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from confluent_kafka import Consumer, KafkaException


def main() -> None:
    bootstrap, group, topic, history_path, *extra = sys.argv[1:]
    settings = dict(item.split("=", 1) for item in extra)
    delay = int(settings.pop("record.delay.ms", "0")) / 1000  # ours, not librdkafka's: a slower member
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 50,
        **settings,
    }
    with open(history_path, "a", buffering=1) as history:  # line-buffered: each line written as it ends
        consume(config, topic, history, delay)


def consume(config: dict[str, str | int], topic: str, history: TextIO, delay: float) -> None:
    def note(line: str) -> None:
        history.write(f"{time.monotonic_ns()} {line}\n")

    def partitions(tps: list) -> str:
        return ",".join(str(tp.partition) for tp in tps)

    consumer = Consumer(config)
    consumer.subscribe(
        [topic],
        on_assign=lambda c, tps: note(f"assigned {partitions(tps)}"),
        on_revoke=lambda c, tps: note(f"revoked {partitions(tps)}"),
    )
    while True:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        note(f"consumed {msg.partition()} {msg.offset()}")
        time.sleep(delay)
        try:
            consumer.commit(message=msg, asynchronous=False)
        except KafkaException:  # a rebalance under way: the record may be consumed again
            continue
        note(f"committed {msg.partition()} {msg.offset() + 1}")


if __name__ == "__main__":
    main()
