"""A streaming query with the exactly-once sink, run as its own driver process so that a test can
kill it with SIGKILL and start it again from its checkpoint:

    python eos_driver.py BOOTSTRAP INPUT_DIR CHECKPOINT TOPIC

Each parquet file of INPUT_DIR (``key``, ``value``) is a micro-batch, written by two tasks into
TOPIC with ``exactlyOnce``; the query stops when every file is written (availableNow)."""

from __future__ import annotations

import sys

from seglog.demo.pipeline import spark_session


def main(bootstrap: str, source: str, checkpoint: str, topic: str) -> None:
    spark = spark_session()  # local[2], PYSPARK_PYTHON this interpreter, seglog registered
    query = (
        spark.readStream.schema("key binary, value binary")
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .repartition(2)
        .writeStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
