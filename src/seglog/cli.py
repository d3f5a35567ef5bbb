"""The ``seglog`` command: a registry of subcommands, each in its own module of
``seglog.tools`` exposing ``add_parser(subparsers)``, which sets ``run``.

Every error is one line, ``error: ...``, never a traceback: exit code 2 for a
mistake in the command line (``tools.arguments``), 1 for an error at run time
(a ``SeglogError``: an unknown topic, an offset out of range; or an OS error
on a path the user gave)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from .console import command as console
from .errors import SeglogError
from .tools import (
    acls,
    broker,
    cluster,
    consume,
    consumer_groups,
    dump_log,
    get_offsets,
    leader_election,
    produce,
    reassign_partitions,
    remote,
    topics,
    transactions,
)
from .tools.arguments import USAGE_EXIT, CommandParser, UsageError

COMMANDS = (dump_log, topics, produce, consume, get_offsets, broker, cluster, console)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="seglog", description="Kafka's storage engine in Python.")
    parser.add_argument("--verbose", "-v", action="count", default=0, help="log more (repeat for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    remote.add_delete_records(sub)  # broker-only commands; the rest take --bootstrap-server too (remote.py)
    remote.add_configs(sub)
    transactions.add_parser(sub)
    acls.add_parser(sub)
    consumer_groups.add_parser(sub)
    leader_election.add_parser(sub)
    reassign_partitions.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = (remote.build_parser() if remote.wants_broker(argv) else build_parser()).parse_args(argv)
    level = logging.WARNING - 10 * args.verbose
    # Kafka's log4j layout ([%d] %p %m (%c)): a broker's log says when each thing happened
    logging.basicConfig(
        level=level,
        format="[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)",
        datefmt="%Y-%m-%d %H:%M:%S",
        stream=sys.stderr,
    )
    try:
        return int(args.run(args))
    except UsageError as e:
        print(f"error: {e} (see seglog {args.command} --help)", file=sys.stderr)
        return USAGE_EXIT
    except SeglogError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # the reader went away (seglog consume | head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a path given that cannot be read or made (permissions, a file in the way)
        print(f"error: {e.strerror or e}{f': {e.filename}' if e.filename else ''}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
