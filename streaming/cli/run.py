"""`kafka-health run`: the production job."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

from streaming.cli.options import require_config_file
from streaming.logsetup import spark_log_config
from streaming.refusal import NotStarted

LOG = logging.getLogger("kafka_health")


def overrides(args: argparse.Namespace) -> dict[str, str]:
    """The environment the config loads with: the process's, then the command line's
    overrides, which win as the later word."""
    environ = dict(os.environ)
    if args.bootstrap_server:
        environ["KAFKA_HEALTH__SOURCE__BOOTSTRAP_SERVERS"] = args.bootstrap_server
    if args.metrics_port is not None:
        environ["KAFKA_HEALTH__EXPORTER__PORT"] = str(args.metrics_port)
    return environ


def cmd_run(args: argparse.Namespace) -> int:
    from streaming import paging
    from streaming.config import ConfigError, load_config, redacted
    from streaming.exporter import Exporter
    from streaming.job import Job

    environ = overrides(args)
    require_config_file(args, environ)
    config = load_config(args.config, environ=environ)
    paging.check(config.alert_push)  # a rule the push cannot render: refused before start
    if (config.spark.master or "").startswith("local"):
        spark_log_config(args.verbosity)
    exporter = None
    if config.exporter.enabled:
        exporter = Exporter(config=config.exporter)
        exporter.start(config.exporter.bind, config.exporter.port)
    try:
        job = Job(config, exporter=exporter)  # opens the tables: one may be unreadable
        job.install_signal_handlers()
        job.start()
    except (NotStarted, ConfigError):  # said by main(); a config error exits 2 as at load
        raise
    except Exception as err:  # noqa: BLE001 - said in one line; the traceback from -v on
        # A start that cannot write its tables (read-only, full, permissions) or recover
        # what the last run owed: the pod restarts and KafkaHealthPipelineDown pages, and
        # the line that says why must not be buried in a traceback.
        LOG.debug("the start failed", exc_info=True)
        first = str(err).strip().splitlines()
        LOG.error("not started: %s%s%s (-v shows the traceback)", type(err).__name__,
                  f": {first[0]}" if first else "", _paths_hint(err, config))
        return 1
    shown = redacted(config)
    source = shown["source"]
    LOG.info("kafka-health running: reading %s from %s, checkpoint %s, tables in %s; metrics "
             "on %s:%d", f"topics matching {source['subscribe_pattern']!r}"
             if source["subscribe_pattern"] else
             "topics " + ", ".join(t["name"] for t in source["topics"]),
             source["bootstrap_servers"], shown["spark"]["checkpoint"], shown["delta"]["path"],
             config.exporter.bind, config.exporter.port)
    code = job.run_until_stopped()
    LOG.info("kafka-health stopped%s", f" (exit {code})" if code else "")
    return code


def _paths_hint(err: Exception, config: Any) -> str:
    """Which setting a file error's path comes from: the error names only the file."""
    filename = getattr(err, "filename", None) if isinstance(err, OSError) else None
    if not isinstance(filename, str):
        return ""
    path = Path(filename).absolute()
    for setting, root in (("delta.path", config.delta.path),
                          ("spark.checkpoint", config.spark.checkpoint)):
        folder = Path(root).absolute()
        if path == folder or folder in path.parents:
            return f" (under {setting}: {root})"
    return ""
