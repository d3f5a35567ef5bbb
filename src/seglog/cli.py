"""The ``seglog`` command: a registry of subcommands, each in its own module of
``seglog.tools`` exposing ``add_parser(subparsers)``, which sets ``run``.

Every error is one line, ``error: ...``, never a traceback: exit code 2 for a
mistake in the command line (``tools.arguments``), 1 for an error at run time
(a ``SeglogError``: an unknown topic, an offset out of range; or an OS error
on a path the user gave)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from .errors import SeglogError
from .tools.arguments import USAGE_EXIT, CommandParser, UsageError

# each subcommand: the module that adds its parser, and the function that does (in --help's
# order). A command line imports only its command's module: the broker's and the console's pull
# in hundreds of modules a `seglog dump-log` has no use for.
SUBCOMMANDS = {
    "dump-log": ("seglog.tools.dump_log", "add_parser"),
    "topics": ("seglog.tools.topics", "add_parser"),
    "produce": ("seglog.tools.produce", "add_parser"),
    "consume": ("seglog.tools.consume", "add_parser"),
    "get-offsets": ("seglog.tools.get_offsets", "add_parser"),
    "broker": ("seglog.tools.broker", "add_parser"),
    "cluster": ("seglog.tools.cluster", "add_parser"),
    "console": ("seglog.console.command", "add_parser"),
    # broker-only commands; the rest take --bootstrap-server too (remote.py)
    "delete-records": ("seglog.tools.remote", "add_delete_records"),
    "configs": ("seglog.tools.remote", "add_configs"),
    "transactions": ("seglog.tools.transactions", "add_parser"),
    "acls": ("seglog.tools.acls", "add_parser"),
    "consumer-groups": ("seglog.tools.consumer_groups", "add_parser"),
    "leader-election": ("seglog.tools.leader_election", "add_parser"),
    "reassign-partitions": ("seglog.tools.reassign_partitions", "add_parser"),
}
# the commands with a form against a running broker (--bootstrap-server): tools.remote's parser
REMOTE_COMMANDS = ("topics", "produce", "consume", "get-offsets", "delete-records", "configs")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``command`` alone when it is one of ours, else of every subcommand (for
    --help, and for argparse's own error naming the choices)."""
    parser = CommandParser(prog="seglog", description="Kafka's storage engine in Python.")
    parser.add_argument("--verbose", "-v", action="count", default=0, help="log more (repeat for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in [command] if command in SUBCOMMANDS else SUBCOMMANDS:
        module, adder = SUBCOMMANDS[name]
        getattr(importlib.import_module(module), adder)(sub)
    return parser


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    command = next((a for a in argv if not a.startswith("-")), None)  # --verbose is the only option before it
    if command in REMOTE_COMMANDS and any(a.split("=")[0] == "--bootstrap-server" for a in argv):
        from .tools import remote  # (its forms against a running broker)

        return remote.build_parser()
    return build_parser(command)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser(argv).parse_args(argv)
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
