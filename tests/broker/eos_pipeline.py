"""A consume-transform-produce loop in a process of its own, for the test that kills it.

    python eos_pipeline.py BOOTSTRAP TRANSACTIONAL_ID GROUP SEED

It reads every partition of ``in`` (read_committed, from the group's committed offsets)
and in each transaction writes up to five records to ``out`` (the value prefixed with
``T-``, to the same partition), commits the consumer's positions with
``send_offsets_to_transaction`` and commits. Short random pauses between the steps
let a SIGKILL land anywhere in a transaction. A new process with the same
transactional id fences the old one and aborts its open transaction.
"""

from __future__ import annotations

import random
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main() -> None:
    bootstrap, txn_id, group, seed = sys.argv[1:]
    rng = random.Random(int(seed))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    producer.init_transactions(30)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    partitions = consumer.list_topics("in", timeout=30).topics["in"].partitions
    consumer.assign([TopicPartition("in", p) for p in partitions])  # from the committed offsets
    print("ready", flush=True)
    while True:
        records = [m for m in consumer.consume(5, 0.2) if m.error() is None]
        if not records:
            continue
        producer.begin_transaction()
        for m in records:
            producer.produce("out", b"T-" + m.value(), partition=m.partition())
            time.sleep(rng.uniform(0, 0.01))
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        time.sleep(rng.uniform(0, 0.01))
        producer.commit_transaction(30)


if __name__ == "__main__":
    main()
