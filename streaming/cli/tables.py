"""`kafka-health report` and `kafka-health status`: the job's Delta tables read for people
on call; and the Delta root every reading command resolves."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from streaming.cli.options import usage_error


def delta_root(args: argparse.Namespace, config: Any) -> str:
    """The Delta root to read: --delta, else the config's delta.path; a local one must hold
    at least one of the job's tables, so a mistyped path is a usage error (exit 2), not an
    empty report. Remote roots (s3://, abfss://, ...) are left to the reader."""
    root = str(args.delta or config.delta.path)
    if "://" in root:
        return root
    if args.delta:
        named, fix = f"--delta {root}", "give the job's delta.path"
    else:
        named = f"delta.path {root} (from {args.config or 'the defaults'})"
        fix = "pass --delta with the job's delta.path, or --config with the job's config"
    fix += " (the folder holding bronze/, broker_signals/, incidents/, ...)"
    folder = Path(root)
    if not folder.is_dir():
        usage_error(args, f"{named}: no such folder; {fix}")
    if not any((child / "_delta_log").is_dir() for child in folder.iterdir()):
        usage_error(args, f"{named}: holds none of the job's Delta tables; {fix}")
    return root


def cmd_report(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.report import write_report

    root = delta_root(args, load_config(args.config))
    try:
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        usage_error(args, f"--out {args.out}: cannot create the report folder "
                    f"({err.strerror}); give a writable folder")
    index = write_report(root, args.out, hours=args.hours, cluster=args.cluster)
    print(f"report: {index}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from streaming.config import load_config
    from streaming.report.status import format_status, read_status, status_json

    config = load_config(args.config)
    signals = config.signals
    stale_after = signals.stale_after_intervals * signals.scrape_interval_seconds
    status = read_status(delta_root(args, config), cluster=args.cluster,
                         stale_after_seconds=stale_after)
    print(status_json(status) if args.output == "json" else format_status(status, stale_after))
    return 0 if status.known else 1  # a section unknown is no all-clear
