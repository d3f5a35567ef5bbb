"""Names on disk: topic names, partition directories, segment file names.

A segment's files are named after its base offset, zero-padded to 20 digits
(``00000000000000000042.log``), so that a directory listing sorts in offset
order. A partition's directory is ``<topic>-<partition>``; a deleted one is
renamed ``<topic>-<partition>.<uuid>-delete`` until it is removed.
Topic names become directory names, so they are validated before anything
touches the filesystem.
"""

from __future__ import annotations

import re
import uuid

from ..common import TopicPartition
from ..errors import InvalidTopicError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

MAX_TOPIC_LENGTH = 249
_MAX_FILE_NAME = 255  # bytes of a file name on most filesystems (the topic is ASCII)
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_DELETE_DIR = re.compile(r"^(.+)-(\d+)\.[0-9a-f]{32}-delete$")


def validate_topic(name: str) -> str:
    """Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_LENGTH}")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'"
        )
    return name


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """(topic, partition) of a live partition directory name, else None."""
    m = _PARTITION_DIR.match(name)
    if m is None or name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        return None
    topic = m.group(1)
    try:
        validate_topic(topic)
    except InvalidTopicError:
        return None
    return TopicPartition(topic, int(m.group(2)))


def parse_deleted_dir(name: str) -> TopicPartition | None:
    m = _DELETE_DIR.match(name)
    return TopicPartition(m.group(1), int(m.group(2))) if m else None


def deleted_dir_name(topic: str, partition: int) -> str:
    """Kafka's LocalLog.logDeleteDirName: the topic is cut short so that the name stays
    within 255 characters (a legal 249-character topic would make it too long)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: _MAX_FILE_NAME - len(suffix)] + suffix


def offset_file_name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def parse_offset_file(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name such as '00..042.log.swap'."""
    stem, dot, suffix = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), "." + suffix
