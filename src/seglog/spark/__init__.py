"""The ``seglog`` PySpark data source: Spark's Kafka source and sink over log dirs.

import seglog.spark
seglog.spark.register(spark)
df = spark.read.format("seglog").option("path", "data").option("subscribe", "events").load()
"""

from __future__ import annotations

from typing import Any

from .metrics import offsets_behind
from .source import SeglogDataSource


def register(spark: Any) -> None:
    """Make ``format("seglog")`` available in a SparkSession."""
    spark.dataSource.register(SeglogDataSource)


__all__ = ["SeglogDataSource", "offsets_behind", "register"]
