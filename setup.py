"""The C parts of seglog, each beside the Python that owns it.

records/ holds the format's C (the per-record loops, CRC32C) and the headers every
extension includes as records' C interface (the batch header layout, the record
parser, varints, CRC32C, Arrow binary columns): hence the include path src/seglog,
from which an extension includes "records/_record.h".
"""

from setuptools import Extension, setup

_FLAGS = ["-O3", "-std=c11", "-Wall", "-Wno-unused-function"]
_HEADERS = [
    f"src/seglog/records/{name}"
    for name in ("_arrow_binary.h", "_batch_layout.h", "_crc32c.h", "_record.h", "_varint.h")
]


def _extension(name: str) -> Extension:
    """The extension seglog.<name>, built from src/seglog/<name as a path>.c."""
    return Extension(
        f"seglog.{name}",
        sources=[f"src/seglog/{name.replace('.', '/')}.c"],
        depends=_HEADERS,
        include_dirs=["src/seglog"],
        extra_compile_args=_FLAGS,
    )


setup(
    ext_modules=[
        _extension("records._codec"),  # the format: records decoded, encoded, checked; CRC32C
        _extension("storage._scan"),  # appends checked, recovery, index search, lookups by time
        _extension("storage._map"),  # memory maps that hold no fd: a broker's active indexes (see _map.c)
        _extension("storage._compact"),  # the log cleaner's offset map and filter, producer state's skim
        _extension("spark._columns"),  # records into Arrow columns for the Spark source
        _extension("_partitioner"),  # Kafka's murmur2 partition of a column of keys, for the Spark sink
        _extension("_locks"),  # the produce path's reentrant lock, whose calls parse no arguments
    ],
)
