"""The log manager (Kafka's LogManager): every partition log under ``log.dirs``.

Each log dir is owned by one process at a time through an exclusive lock on
its ``.lock`` file, and holds, beside the partition directories::

    meta.properties                    version, broker.id / node.id, cluster.id
    recovery-point-offset-checkpoint   per partition: flushed up to here
    log-start-offset-checkpoint        per partition: the log start offset
    replication-offset-checkpoint      per partition: the high watermark
    .kafka_cleanshutdown               present only while no process runs the dir
    topic-configs.json                 seglog's own: per-topic overrides

(Kafka keeps topic configs in its metadata quorum; seglog, having none yet,
keeps them in a file that Kafka ignores, since Kafka only looks at
directories.) On start-up the clean-shutdown marker decides between trusting
the checkpoints and recovering every partition from its recovery point;
partitions load in parallel.
"""

from __future__ import annotations

import base64
import errno
import fcntl
import functools
import json
import logging
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..common import TopicPartition
from ..config import BrokerConfig, LogConfig, validate_topic_config
from ..errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    LogDirLockedError,
    SeglogError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from ..records.limits import INT32_MAX, INT32_MIN
from . import checkpoint, fileio
from .checkpoint import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT
from .cleaner import CleanerStats
from .cleaner_manager import CleaningState, LogCleanerManager
from .log import PartitionLog
from .naming import (
    deleted_dir_name,
    parse_deleted_dir,
    parse_partition_dir,
    partition_dir_name,
    validate_topic,
)
from .retention import RetentionResult, enforce_retention
from .scheduler import Scheduler

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
TOPIC_CONFIGS_FILE = "topic-configs.json"
PARTITION_METADATA = "partition.metadata"


class LogDir:
    """One directory of ``log.dirs``, locked for the lifetime of the manager."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        self.path = os.path.abspath(path)
        if read_only:
            if not os.path.isdir(self.path):
                raise KafkaStorageError("log dir does not exist", file=self.path)
            self._lock_fd = -1  # readers share the dir with its owner
        else:
            fileio.make_dirs(self.path)
            self._lock_fd = self._lock()

    def _lock(self) -> int:
        lock_path = os.path.join(self.path, LOCK_FILE)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open the lock file: {e.strerror}", file=lock_path) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise LogDirLockedError(
                    f"log dir {self.path} is in use by another process (pid {owner}); stop it or use another directory",
                    file=lock_path,
                ) from None
            raise KafkaStorageError(f"cannot lock the log dir: {e.strerror}", file=lock_path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def unlock(self) -> None:
        if self._lock_fd >= 0:
            os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)  # closing the fd releases the flock
            self._lock_fd = -1

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)


def read_meta_properties(path: str) -> dict[str, str]:
    """Kafka's meta.properties, v0 (broker.id) or v1 (node.id, KRaft). A file that cannot
    be parsed is a KafkaStorageError naming it: the dir's identity is unknown."""
    props: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as e:
        raise KafkaStorageError(
            f"cannot parse meta.properties: byte {e.start} is not UTF-8", file=path, position=e.start
        ) from None
    except OSError as e:
        raise KafkaStorageError(f"cannot read meta.properties: {e.strerror}", file=path) from None
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    if props.get("version") not in ("0", "1"):
        raise KafkaStorageError(f"unsupported meta.properties version {props.get('version')!r}", file=path)
    for key in ("broker.id", "node.id"):
        if key in props and not _is_int32(props[key]):
            raise KafkaStorageError(f"cannot parse meta.properties: {key} {props[key]!r} is not an int32", file=path)
    return props


def _is_int32(text: str) -> bool:
    try:
        return INT32_MIN <= int(text) <= INT32_MAX
    except ValueError:
        return False


def _read_topic_id(partition_dir: str) -> str | None:
    """The ``topic_id`` line of a partition's ``partition.metadata`` (``version: 0``), if any."""
    try:
        with open(os.path.join(partition_dir, PARTITION_METADATA), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "topic_id" and value.strip():
                    return value.strip()
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _new_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class _PartitionLogs(dict[TopicPartition, PartitionLog]):
    """The partition logs by topic-partition, with each topic's partition numbers kept beside
    them, so that a topic's partitions are found without a scan of every log (a standalone
    broker leads each topic at start: a scan each made that O(topics x logs), seconds at
    10,000 topics). The manager changes it through these three only: dict's other mutators would
    pass the numbers by."""

    def __init__(self) -> None:
        super().__init__()
        self._of: dict[str, set[int]] = {}

    def __setitem__(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        super().__setitem__(tp, partition_log)
        self._of.setdefault(tp.topic, set()).add(tp.partition)

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        held = self._of[tp.topic]
        held.discard(tp.partition)
        if not held:
            del self._of[tp.topic]

    def discard(self, tp: TopicPartition) -> None:
        if tp in self:
            del self[tp]

    def topics(self) -> list[str]:
        return sorted(self._of)

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(self._of.get(topic, ()))


class LogManager:
    """Every partition log of a set of log dirs. Use ``seglog.open``."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Callable[[], int] | None = None,
        background: bool = True,
        read_only: bool = False,
        standalone: bool,
    ) -> None:
        """``standalone``: no broker replicates these partitions and this manager's owner
        (the command line, Spark, ``seglog.open``) owns their high watermarks, which stay
        at their log ends; else a broker's replica manager moves them."""
        self.config = config
        self.read_only = read_only
        self.standalone = standalone
        self._clock = clock
        self._lock = threading.RLock()
        self._logs = _PartitionLogs()
        self._topic_configs: dict[str, dict[str, Any]] = {}
        self._topic_ids: dict[str, str] = {}
        # a log dir's path -> topic -> (topic id, overrides): the entries its topic-config file holds
        # as last written, so that a new partition's log rewrites the file only when it says more
        # (the overrides' dicts are shared with _topic_configs: a change replaces them, never edits)
        self._written_configs: dict[str, dict[str, tuple[str | None, dict[str, Any]]]] = {}
        self._dirs: list[LogDir] = []
        self._closed = False
        self.cluster_id: str | None = None  # meta.properties' cluster.id (written when missing)
        self._scheduler: Scheduler | None = None  # none while loading: leftovers found then go at once
        try:
            for path in config.log_dirs:
                self._dirs.append(LogDir(path, read_only))
            if not read_only:
                self._check_meta_properties()
            self._load_all()
        except BaseException:
            for d in self._dirs:
                d.unlock()
            raise
        self._cleaner = LogCleanerManager(
            config, [d.path for d in self._dirs], self.logs, self._now, on_retention=self._retain
        )
        self._scheduler = Scheduler() if background and not read_only else None
        if self._scheduler is not None:
            self._schedule_background_tasks(self._scheduler)

    # --- start-up -----------------------------------------------------------------------------

    def _check_meta_properties(self) -> None:
        configured = self.config["broker.id"] if self.config.is_set("broker.id") else None
        cluster_id = None
        for d in self._dirs:
            props = read_meta_properties(d.file(META_PROPERTIES))
            if not props:
                continue
            stored = props.get("broker.id", props.get("node.id"))
            if configured is not None and stored is not None and int(stored) != configured:
                raise InvalidConfigurationError(
                    f"configured broker.id {configured} does not match the stored id {stored}",
                    file=d.file(META_PROPERTIES),
                )
            cluster_id = cluster_id or props.get("cluster.id")
        cluster_id = cluster_id or _new_id()
        self.cluster_id = cluster_id
        broker_id = configured if configured is not None else self.config["broker.id"]
        for d in self._dirs:
            if not os.path.exists(d.file(META_PROPERTIES)):
                text = f"#\n#Written by seglog\nversion=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n"
                fileio.write_atomically(d.file(META_PROPERTIES), text.encode())

    def _load_all(self) -> None:
        jobs: list[tuple[LogDir, str, TopicPartition, dict]] = []
        for d in self._dirs:
            clean = os.path.exists(d.file(CLEAN_SHUTDOWN_FILE))
            recovery = checkpoint.read_offsets_or_empty(d.file(RECOVERY_POINT_CHECKPOINT))
            starts = checkpoint.read_offsets_or_empty(d.file(LOG_START_OFFSET_CHECKPOINT))
            hws = checkpoint.read_offsets_or_empty(d.file(REPLICATION_OFFSET_CHECKPOINT))
            self._load_topic_configs(d)
            for name in sorted(os.listdir(d.path)):
                path = d.file(name)
                if not os.path.isdir(path):
                    continue
                if parse_deleted_dir(name):
                    if not self.read_only:
                        self._remove_dir_later(path, 0)
                    continue
                tp = parse_partition_dir(name)
                if tp is None:
                    log.warning("ignoring directory %s: not a topic-partition name", path)
                    continue
                kw = {
                    "recovery_point": recovery.get(tp, 0),
                    "log_start_offset": starts.get(tp, 0),
                    "high_watermark": hws.get(tp),
                    # a partition missing from the recovery checkpoint was never flushed
                    "had_clean_shutdown": clean and tp in recovery,
                }
                jobs.append((d, path, tp, kw))
        threads = max(1, self.config["num.recovery.threads.per.data.dir"] * len(self._dirs))
        with ThreadPoolExecutor(threads, thread_name_prefix="seglog-recovery") as pool:
            loaded = list(pool.map(lambda job: (job[2], self._open_log(job[1], job[2], **job[3])), jobs))
        for tp, partition_log in loaded:
            if tp in self._logs:
                raise KafkaStorageError(f"partition {tp[0]}-{tp[1]} found in two log dirs", file=partition_log.dir)
            self._logs[tp] = partition_log
        if not self.read_only:
            for d in self._dirs:
                fileio.unlink(d.file(CLEAN_SHUTDOWN_FILE))  # from here on a crash is an unclean shutdown

    def _load_topic_configs(self, d: LogDir) -> None:
        path = d.file(TOPIC_CONFIGS_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                stored = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            raise KafkaStorageError(f"cannot read topic configs: {e}", file=path) from None
        topics = stored.get("topics", {}) if isinstance(stored, dict) else None
        if not isinstance(topics, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("config", {}), dict) for e in topics.values()
        ):
            raise KafkaStorageError("cannot read topic configs: not a map of topics", file=path)
        for topic, entry in topics.items():
            try:
                self._topic_configs.setdefault(topic, validate_topic_config(entry.get("config", {})))
            except InvalidConfigurationError as e:
                raise e.at(file=path) from None
            if entry.get("topic_id"):
                self._topic_ids.setdefault(topic, entry["topic_id"])

    def _log_config(self, topic: str) -> LogConfig:
        return LogConfig(self.config, self._topic_configs.get(topic, {}))

    def _open_log(self, path: str, tp: TopicPartition, **kw: Any) -> PartitionLog:
        return PartitionLog(
            path,
            tp[0],
            tp[1],
            self._log_config(tp[0]),
            clock=self._clock,
            scheduler_delete=self._delete_later,
            read_only=self.read_only,
            standalone=self.standalone,
            producer_id_expiration_ms=self.config["producer.id.expiration.ms"],
            **kw,
        )

    # --- topics ---------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        with self._lock:
            return self._logs.topics()

    def partitions(self, topic: str) -> list[int]:
        with self._lock:
            found = self._logs.partitions_of(topic)
        if not found:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return found

    def partition(self, topic: str, partition: int) -> PartitionLog:
        try:
            return self._logs[TopicPartition(topic, partition)]
        except KeyError:
            known = self._logs.partitions_of(topic)
            detail = f"topic {topic!r} has partitions {known}" if known else f"unknown topic {topic!r}"
            raise UnknownTopicOrPartitionError(f"no partition {topic}-{partition}: {detail}") from None

    def logs(self) -> list[PartitionLog]:
        with self._lock:
            return list(self._logs.values())

    def topic_config(self, topic: str) -> LogConfig:
        # a topic holding logs here has its entry (its overrides, maybe none): the scan of every log
        # that ``partitions`` makes is left to the others (per topic, it made a DescribeConfigs of
        # 1,000 topics x 5 partitions take the broker 2 s)
        return LogConfig(self.config, self.topic_overrides(topic))

    def topic_overrides(self, topic: str) -> dict[str, Any]:
        """A topic's own settings (validated), without resolving the others (see topic_config)."""
        if topic not in self._topic_configs:
            self.partitions(topic)
        return self._topic_configs.get(topic, {})

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None) -> None:
        """Create a topic with ``partitions`` partitions (default num.partitions)."""
        validate_topic(name)
        count = self.config["num.partitions"] if partitions is None else partitions
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= INT32_MAX:
            raise InvalidPartitionsError(
                f"a topic's partition count is an int32 of at least 1, not {count!r}", file=self._dirs[0].path
            )
        overrides = validate_topic_config(config or {})
        with self._lock:
            self._check_writable()
            existing = self.topics()
            if name in existing:
                raise TopicExistsError(f"topic {name!r} already exists")
            collision = [t for t in existing if t.replace(".", "_") == name.replace(".", "_")]
            if collision:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {collision[0]!r} "
                    f"('.' and '_' are the same in metric names)"
                )
            self._topic_configs[name] = overrides
            self._topic_ids[name] = _new_id()
            created: list[PartitionLog] = []
            try:
                for p in range(count):
                    created.append(self._create_partition(name, p))
                self._write_topic_configs()
            except BaseException:
                # all or nothing: a reopened dir must not find a ghost of the topic
                self._undo_created(name, created)
                self._topic_configs.pop(name, None)
                self._topic_ids.pop(name, None)
                raise

    def topic_id(self, topic: str) -> str:
        """The topic's id as ``partition.metadata`` holds it (URL-safe base64 of a UUID, Kafka's form)."""
        first = self.partitions(topic)[0]
        with self._lock:
            found = self._topic_ids.get(topic)
            if found is None:  # a dir Kafka wrote keeps it in partition.metadata only; an old one has none
                first_log = self._logs[TopicPartition(topic, first)]
                found = self._topic_ids[topic] = _read_topic_id(first_log.dir) or _new_id()
            return found

    def create_partitions(self, topic: str, count: int) -> None:
        """Grow ``topic`` to ``count`` partitions (Kafka's CreatePartitions): never fewer."""
        with self._lock:
            self._check_writable()
            # partitions are numbered 0 to n-1 even where this dir holds only some of them
            current = self.partitions(topic)[-1] + 1
            if isinstance(count, bool) or not isinstance(count, int) or not current < count <= INT32_MAX:
                raise InvalidPartitionsError(
                    f"topic {topic!r} has {current} partitions; the new count must be larger "
                    f"(and an int32), not {count!r}"
                )
            self.topic_id(topic)
            created: list[PartitionLog] = []
            try:
                for p in range(current, count):
                    created.append(self._create_partition(topic, p))
            except BaseException:
                self._undo_created(topic, created)  # all or nothing, as a topic's creation
                raise
            self._write_topic_configs()

    def get_or_create_log(
        self, topic: str, partition: int, topic_id: str, config: Mapping[str, Any] | None = None
    ) -> PartitionLog:
        """Kafka's ``getOrCreateLog``: the log of a replica the controller placed here, made when
        missing, with the cluster's topic id (from its topic znode) and overrides."""
        validate_topic(topic)
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= INT32_MAX:
            raise InvalidPartitionsError(f"a partition index is an int32 of at least 0, not {partition!r}")
        with self._lock:
            found = self._logs.get(TopicPartition(topic, partition))
            if found is not None:
                return found
            self._check_writable()
            overrides = self._topic_configs.get(topic, {}) if config is None else config
            self._topic_configs[topic] = validated = validate_topic_config(overrides)
            self._topic_ids[topic] = topic_id = topic_id or self._topic_ids.get(topic) or _new_id()
            created = self._create_partition(topic, partition)
            # the file of its dir already holding this topic's entry (as the controller makes a topic's
            # partitions one LeaderAndIsr entry at a time), rewriting and fsyncing it for each was
            # a third of a follower's CPU in making a topic of 1,000 partitions
            if self._written_configs.get(os.path.dirname(created.dir), {}).get(topic) != (topic_id, validated):
                self._write_topic_configs()
            return created

    def delete_partition_logs(self, partitions: Iterable[tuple[str, int]]) -> dict[TopicPartition, Exception]:
        """StopReplica with delete (Kafka's ``LogManager.asyncDelete`` of a set): each
        partition's dir renamed ``*-delete`` now, removed after file.delete.delay.ms; a topic's
        config and id go with its last partition. The dirs' fsyncs, the topic configs and the
        checkpoints are written once for them all: deleting a topic of n partitions one at a
        time rewrote files that list every log, n times. Returns the error of each partition
        not deleted (UnknownTopicOrPartitionError: none here); the others are."""
        errors: dict[TopicPartition, Exception] = {}
        with self._lock:
            self._check_writable()
            deleted: list[tuple[PartitionLog, str]] = []
            for topic, partition in partitions:
                tp = TopicPartition(topic, partition)
                try:
                    deleted.append(self._rename_deleted(tp))
                except Exception as e:  # (as Kafka's error handler: each partition answers its own)
                    errors[tp] = e
            if not deleted:
                return errors
            for topic in {pl.topic for pl, _ in deleted} - set(self._logs.topics()):  # (their last partition gone)
                self._topic_configs.pop(topic, None)
                self._topic_ids.pop(topic, None)
            for parent in sorted({os.path.dirname(target) for _, target in deleted}):
                fileio.fsync_dir(parent)
            for doomed, target in deleted:
                self._remove_dir_later(target, doomed.config.file_delete_delay_ms)
            self._write_topic_configs()
            self.checkpoint()
        return errors

    def _rename_deleted(self, tp: TopicPartition) -> tuple[PartitionLog, str]:
        """One partition of ``delete_partition_logs``: its dir renamed (the new path returned),
        its log closed and dropped."""
        doomed = self.partition(*tp)
        self._cleaner.abort(doomed)
        target = os.path.join(os.path.dirname(doomed.dir), deleted_dir_name(tp.topic, tp.partition))
        fileio.rename(doomed.dir, target)
        doomed.close_without_flush()
        del self._logs[tp]
        return doomed, target

    def _next_dir(self) -> LogDir:
        """Kafka's ``nextLogDirs``: the dir holding the fewest partitions, counted only when there
        is a choice (a topic of n partitions in one dir is made in O(n), not O(n²))."""
        if len(self._dirs) == 1:
            return self._dirs[0]
        held = Counter(os.path.dirname(pl.dir) for pl in self._logs.values())
        return min(self._dirs, key=lambda d: held[d.path])

    def _create_partition(self, topic: str, partition: int) -> PartitionLog:
        path = self._next_dir().file(partition_dir_name(topic, partition))
        fileio.make_dirs(path)
        try:
            metadata = f"version: 0\ntopic_id: {self._topic_ids[topic]}\n"
            fileio.write_atomically(os.path.join(path, PARTITION_METADATA), metadata.encode())
            partition_log = self._open_log(path, TopicPartition(topic, partition), had_clean_shutdown=True)
        except BaseException:
            self._discard_dir(path)
            raise
        self._logs[TopicPartition(topic, partition)] = partition_log
        return partition_log

    def _undo_created(self, topic: str, created: list[PartitionLog]) -> None:
        """Forget and remove the partitions a creation made before it failed."""
        for partition_log in created:
            self._logs.discard(TopicPartition(topic, partition_log.partition))
            partition_log.close_without_flush()
            self._discard_dir(partition_log.dir)

    def _discard_dir(self, path: str) -> None:
        """Remove a partition dir made by a creation that failed; a failure to remove it
        is logged, not raised over the error that made the creation fail."""
        try:
            fileio.remove_tree(path)
            fileio.fsync_dir(os.path.dirname(path))
        except KafkaStorageError as e:
            log.error("cannot remove %s after a failed creation: %s", path, e)

    def delete_topic(self, name: str) -> None:
        """Delete a topic: its directories are renamed ``*-delete`` now and removed
        after file.delete.delay.ms."""
        with self._lock:
            self._check_writable()
            doomed = [self._logs[TopicPartition(name, p)] for p in self.partitions(name)]
            for partition_log in doomed:
                self._cleaner.abort(partition_log)
            # every dir is renamed before any log is dropped, so a failing rename changes nothing
            renamed: list[tuple[str, str]] = []
            try:
                for partition_log in doomed:
                    target = os.path.join(
                        os.path.dirname(partition_log.dir), deleted_dir_name(name, partition_log.partition)
                    )
                    fileio.rename(partition_log.dir, target)
                    renamed.append((partition_log.dir, target))
            except BaseException:
                for source, target in reversed(renamed):
                    fileio.rename(target, source)
                raise
            # from here on the topic is gone, whatever fails: a -delete dir goes at the next open
            for partition_log in doomed:
                partition_log.close_without_flush()
                self._logs.discard(TopicPartition(name, partition_log.partition))
            self._topic_configs.pop(name, None)
            self._topic_ids.pop(name, None)
            for parent in sorted({os.path.dirname(target) for _, target in renamed}):
                fileio.fsync_dir(parent)
            for partition_log, (_, target) in zip(doomed, renamed, strict=True):
                self._remove_dir_later(target, partition_log.config.file_delete_delay_ms)
            self._write_topic_configs()
            self.checkpoint()

    def alter_topic_config(
        self, topic: str, set: Mapping[str, Any] | None = None, delete: Iterable[str] = ()
    ) -> LogConfig:
        """Change a topic's overrides; every partition log sees them at once."""
        with self._lock:
            self._check_writable()
            self.partitions(topic)
            overrides = dict(self._topic_configs.get(topic, {}))
            for key in delete:
                overrides.pop(key, None)
            overrides.update(validate_topic_config(set or {}))
            config = LogConfig(self.config, overrides)
            self._topic_configs[topic] = overrides
            for p in self.partitions(topic):
                self._logs[TopicPartition(topic, p)].config = config
            self._write_topic_configs()
            return config

    def _write_topic_configs(self) -> None:
        """Each dir's ``topic-configs.json``: the topics it holds a partition of. It is rewritten
        whole at each topic created, deleted or altered, so in one line by json's C encoder
        (``indent`` takes the pure-Python one), as Kafka's topic config znodes are written."""
        for d in self._dirs:
            if len(self._dirs) == 1:
                here: Container[str] = self._topic_configs
            else:
                here = {t for (t, _), pl in self._logs.items() if pl.dir.startswith(d.path + os.sep)}
            entries = {t: (self._topic_ids.get(t), c) for t, c in sorted(self._topic_configs.items()) if t in here}
            body = {
                "version": 1,
                "topics": {
                    t: {"topic_id": topic_id, "config": {k: _jsonable(v) for k, v in c.items()}}
                    for t, (topic_id, c) in entries.items()
                },
            }
            self._written_configs.pop(d.path, None)  # unknown until the write succeeds
            fileio.write_atomically(d.file(TOPIC_CONFIGS_FILE), json.dumps(body).encode())
            self._written_configs[d.path] = entries

    # --- checkpoints and background work ------------------------------------------------------

    def _by_dir(self) -> Iterator[tuple[LogDir, list[PartitionLog]]]:
        logs = self.logs()
        for d in self._dirs:
            yield d, [pl for pl in logs if pl.dir.startswith(d.path + os.sep)]

    def checkpoint_recovery_points(self) -> None:
        for d, logs in self._by_dir():
            checkpoint.write_offsets(
                d.file(RECOVERY_POINT_CHECKPOINT),
                {TopicPartition(pl.topic, pl.partition): pl.recovery_point for pl in logs},
            )

    def checkpoint_log_start_offsets(self) -> None:
        for d, logs in self._by_dir():
            checkpoint.write_offsets(
                d.file(LOG_START_OFFSET_CHECKPOINT),
                {TopicPartition(pl.topic, pl.partition): pl.log_start_offset for pl in logs},
            )

    def checkpoint_high_watermarks(self) -> None:
        for d, logs in self._by_dir():
            checkpoint.write_offsets(
                d.file(REPLICATION_OFFSET_CHECKPOINT),
                {TopicPartition(pl.topic, pl.partition): pl.high_watermark for pl in logs},
            )

    def checkpoint(self) -> None:
        """Write all three offset checkpoints now."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def flush_due(self) -> None:
        # each second, so only the logs with a flush.ms are visited: taking 10,000 logs' locks for
        # nothing was most of an idle broker's CPU (Kafka runs no flusher unless
        # log.flush.scheduler.interval.ms is set)
        for partition_log in self.logs():
            if partition_log.flushes_by_time:
                partition_log.flush_if_due()

    def remove_expired_producers(self) -> None:
        """Partitions forget producers idle producer.id.expiration.ms (Kafka's task of the
        same interval, producer.id.expiration.check.interval.ms)."""
        for partition_log in self.logs():
            partition_log.remove_expired_producers(self._now())

    def _schedule_background_tasks(self, s: Scheduler) -> None:
        c = self.config
        s.schedule(
            "recovery-point-checkpoint",
            self.checkpoint_recovery_points,
            c["log.flush.offset.checkpoint.interval.ms"],
            c["log.flush.offset.checkpoint.interval.ms"],
        )
        s.schedule(
            "log-start-offset-checkpoint",
            self.checkpoint_log_start_offsets,
            c["log.flush.start.offset.checkpoint.interval.ms"],
            c["log.flush.start.offset.checkpoint.interval.ms"],
        )
        s.schedule(
            "high-watermark-checkpoint",
            self.checkpoint_high_watermarks,
            c["replica.high.watermark.checkpoint.interval.ms"],
            c["replica.high.watermark.checkpoint.interval.ms"],
        )
        s.schedule("flush", self.flush_due, 1000, 1000)
        expiration_interval = c["producer.id.expiration.check.interval.ms"]
        s.schedule("producer-expiration", self.remove_expired_producers, expiration_interval, expiration_interval)
        retention_interval = c["log.retention.check.interval.ms"]
        s.schedule("log-retention", self._retention_task, min(30_000, retention_interval), retention_interval)
        if c["log.cleaner.enable"]:
            self._cleaner.start()

    # --- retention, DeleteRecords, compaction ----------------------------------------------------

    def _now(self) -> int:
        return self._clock() if self._clock is not None else time.time_ns() // 1_000_000

    def _retain(self, partition_log: PartitionLog) -> RetentionResult | None:
        result = enforce_retention(partition_log, self._now())
        if result is not None:
            self._checkpoint_log_start_offsets_soon()
        return result

    def _checkpoint_log_start_offsets_soon(self) -> None:
        # checkpoint files are written by one thread: the scheduler's when it runs
        if self._scheduler is not None:
            self._scheduler.schedule("log-start-offset-checkpoint-now", self.checkpoint_log_start_offsets, 0)
        else:
            self.checkpoint_log_start_offsets()

    def enforce_retention(self) -> list[RetentionResult]:
        """One retention pass over every log (the background task runs it every
        log.retention.check.interval.ms): see retention.py for the rules. A log being
        compacted is left to its cleaner, which runs the pass when its round ends. The
        log-start-offset-checkpoint is rewritten if a log start offset moved."""
        if self.read_only or self._closed:
            return []
        now = self._now()
        results = []
        for partition_log in self.logs():
            if partition_log.closed:
                continue
            result = self._cleaner.retain(partition_log, functools.partial(enforce_retention, partition_log, now))
            if isinstance(result, RetentionResult):
                results.append(result)
        if results:
            self._checkpoint_log_start_offsets_soon()
        return results

    def _retention_task(self) -> None:
        self.enforce_retention()

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """DeleteRecords on one partition (see ``PartitionLog.delete_records``), then a
        retention pass on it, so the segments wholly below the new log start offset go
        now. Returns the new log start offset."""
        with self._lock:
            self._check_writable()
            partition_log = self.partition(topic, partition)
        start = partition_log.delete_records(before_offset)
        self._cleaner.retain(partition_log, lambda: enforce_retention(partition_log, self._now()))
        self._checkpoint_log_start_offsets_soon()
        return start

    def clean(
        self, topic: str | None = None, partition: int | None = None, *, force: bool = False
    ) -> list[CleanerStats]:
        """Compact now, in this thread (the background cleaners run the same rounds):
        every log (of ``topic``, of ``partition``) whose cleanup.policy has compact and whose
        dirty ratio is above its min.cleanable.dirty.ratio, until none is. ``force`` cleans
        them all whatever their ratio, including their clean section. Returns each round's
        stats."""
        self._check_writable()
        if topic is not None:
            self.partitions(topic)

        def only(pl: PartitionLog) -> bool:
            return (topic is None or pl.topic == topic) and (partition is None or pl.partition == partition)

        return self._cleaner.clean(only, force=force)

    def cleaning_state(self, topic: str, partition: int) -> CleaningState:
        """Log start offset, dirty ratio and the cleaner's last result of a partition."""
        return self._cleaner.cleaning_state(self.partition(topic, partition))

    @property
    def cleaner(self) -> LogCleanerManager:
        return self._cleaner

    def _delete_later(self, fn: Callable[[], None], delay_ms: float) -> None:
        if self._scheduler is None or delay_ms <= 0:
            fn()
        else:
            self._scheduler.schedule("delete-files", fn, delay_ms)

    def _remove_dir_later(self, path: str, delay_ms: float) -> None:
        self._delete_later(lambda: fileio.remove_tree(path), delay_ms)

    def _check_writable(self) -> None:
        if self._closed:
            raise KafkaStorageError("the log manager is closed")
        if self.read_only:
            raise KafkaStorageError("the log dirs are open read-only")

    # --- shutdown ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush and close every log, write the checkpoints and the
        clean-shutdown marker, release the locks. Close always finishes: a partition that
        fails to close is logged and the others still close and checkpoint; the marker is
        written only when all closed cleanly (else the next start recovers), and the first
        failure is raised once the locks are released."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._scheduler is not None:
            self._scheduler.shutdown()
        self._cleaner.shutdown()
        failures: list[SeglogError] = []
        try:
            for partition_log in self.logs():
                try:
                    partition_log.close()
                except SeglogError as e:
                    # the others still close and checkpoint; this one recovers at the next start
                    log.error("%s: close failed: %s", partition_log.name, e)
                    failures.append(e)
                    partition_log.close_without_flush()
            if not self.read_only:
                self._checkpoint_at_close(failures)
        finally:
            for d in self._dirs:
                d.unlock()
        if failures:
            raise failures[0]  # close finished all the same; the first failure is the caller's to see

    def _checkpoint_at_close(self, failures: list[SeglogError]) -> None:
        for write in (
            self.checkpoint_recovery_points,
            self.checkpoint_log_start_offsets,
            self.checkpoint_high_watermarks,
        ):
            try:
                write()
            except SeglogError as e:
                log.error("checkpoint at close failed: %s", e)
                failures.append(e)
        if not failures:  # else the next start recovers from the recovery points
            for d in self._dirs:
                fileio.write_atomically(d.file(CLEAN_SHUTDOWN_FILE), b'{"version":0,"brokerEpoch":-1}')

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LogManager(dirs={[d.path for d in self._dirs]}, partitions={len(self._logs)})"


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return ",".join(value)
    return value
