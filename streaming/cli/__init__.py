"""kafka-health: the command line (`kafka-health`, `python -m streaming.cli`).

The parser is streaming/cli/parser.py; each command lives in a module of its own (or of
its group). main() runs one and turns what it raises into an exit status: 0 done, 1 failed
at run time, 2 a usage or config error.
"""

from __future__ import annotations

import sys

from streaming.allocator import set_purge_delay
from streaming.cli.options import CommandFailed
from streaming.cli.parser import build_parser
from streaming.logsetup import configure
from streaming.refusal import NotStarted

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    # before anything loads pyarrow, which reads it once (streaming/allocator.py)
    set_purge_delay()
    args = build_parser().parse_args(argv)
    # imported after parsing: --help and usage errors need only the standard library, so
    # the wrapper scripts print help before anything is installed
    from streaming.config import ConfigError

    args.verbosity = args.verbose + args.verbose_after
    configure(args.verbosity, args.log_format)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"config error: {err}", file=sys.stderr)
        return 2
    except NotStarted as err:
        print(f"not started: {err}", file=sys.stderr)
        return 1
    except CommandFailed as err:
        print(f"{args.command}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
