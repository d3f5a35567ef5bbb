"""What client quotas cost the broker: broker CPU per request with no quota set anywhere (the
baseline) beside the same requests counted against quotas the client never reaches
(producer_byte_rate and request_percentage set on its client id: every request's bytes and
handler time recorded, its throttle time computed), in the same run.

One ``seglog broker`` process; one client (seglog's BlockingConnection) sends 1-record
Produce requests (acks=1, 100 bytes) one after another for ROUND_S seconds; ROUNDS pairs of
rounds, one of each mode, alternated ABBA. Per mode: requests/s and the broker's CPU per
request (user + system, /proc/PID/task/*/schedstat), the median of its rounds and its ratio to
the baseline's, and the median of the pairs' own ratios (steadier on a shared machine, whose
load drifts between rounds).

Run: ``.venv/bin/python bench/quotas.py [--rounds N]`` (about 40 s). Figures on a shared
machine are not final.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

from broker import cpu_seconds, create_topic, start_seglog
from seglog.client import BlockingConnection
from seglog.protocol import ApiKey
from seglog.protocol.message_data import AlterClientQuotasRequestData, ProduceRequestData
from seglog.records.batch import build_batch

ROUNDS = 15
ROUND_S = 1.0
CLIENT_ID = "bench"
UNREACHED = {"producer_byte_rate": 1e15, "request_percentage": 1e9}


def set_quotas(conn: BlockingConnection, on: bool) -> None:
    Request = AlterClientQuotasRequestData
    ops = [Request.OpData(key=k, value=v, remove=not on) for k, v in UNREACHED.items()]
    entity = [Request.EntityData(entity_type="client-id", entity_name=CLIENT_ID)]
    answer = conn.request(ApiKey.ALTER_CLIENT_QUOTAS, Request(entries=[Request.EntryData(entity=entity, ops=ops)]))
    assert answer.entries[0].error_code == 0, answer.entries[0].error_message


def produce_round(conn: BlockingConnection, pid: int) -> tuple[float, float]:
    """(requests/s, broker CPU µs a request) of 1-record produces for ROUND_S."""
    data = ProduceRequestData.PartitionProduceData(index=0, records=build_batch([(None, b"v" * 100)]))
    request = ProduceRequestData(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[ProduceRequestData.TopicProduceData(name="quotas", partition_data=[data])],
    )
    count = 0
    cpu = cpu_seconds(pid)
    started = time.monotonic()
    while time.monotonic() - started < ROUND_S:
        answer = conn.request(ApiKey.PRODUCE, request)
        assert answer.throttle_time_ms == 0
        count += 1
    elapsed = time.monotonic() - started
    return count / elapsed, (cpu_seconds(pid) - cpu) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="seglog-bench-quotas-")
    proc, port = start_seglog(data)
    try:
        create_topic(f"127.0.0.1:{port}", "quotas", 1)
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        with BlockingConnection("127.0.0.1", port, CLIENT_ID) as conn:
            produce_round(conn, proc.pid)  # warm-up
            for i in range(args.rounds):
                for on in (False, True) if i % 2 == 0 else (True, False):
                    set_quotas(conn, on)
                    results[on].append(produce_round(conn, proc.pid))
        base_rate = statistics.median(r for r, _ in results[False])
        base_cpu = statistics.median(c for _, c in results[False])
        for on, label in ((False, "no quota set (baseline)"), (True, "quotas counted, never reached")):
            rate = statistics.median(r for r, _ in results[on])
            cpu = statistics.median(c for _, c in results[on])
            print(
                f"{label:32} {rate:8.0f} requests/s ({rate / base_rate:.2f}x)  "
                f"{cpu:6.1f} µs broker CPU a request ({cpu / base_cpu:.2f}x)"
            )
        pairs = [on[1] / off[1] for on, off in zip(results[True], results[False], strict=True)]
        print(f"median of the pairs' CPU ratios: {statistics.median(pairs):.2f}x")
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
