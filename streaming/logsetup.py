"""Logging for the command line: the job's own messages by default, library chatter on request.

An on-call engineer reading the demo or `kafka-health run` output must see incidents, pages
and the job's warnings, not the INFO lines every library logs while it starts. So the
libraries below are held at WARNING (or hidden) by default, `-v` lets their INFO through,
and `-vv` shows everything at DEBUG.

librdkafka (confluent_kafka) writes straight to stderr unless a client is given a Python
logger: clients built with `kafka_logger()` in their config send their logs here instead,
where the same levels apply. Its connection errors are routine while a broker restarts (the
demo stops brokers on purpose), and the job reports an unreachable source itself
(`kafka_health_pipeline_source_up`, the lag warning), so they are shown from `-v` on.
"""

from __future__ import annotations

import json
import logging
import os
import time

LIBRDKAFKA = "kafka_health.librdkafka"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Logger -> level by verbosity (0, 1, 2+).
NOISY: dict[str, tuple[int, int, int]] = {
    # its expectation registry logs one INFO line per expectation type at import
    "great_expectations": (logging.WARNING, logging.INFO, logging.DEBUG),
    # never DEBUG: py4j's DEBUG traces every command sent to the JVM with its arguments,
    # SparkConf values such as an S3 secret key among them
    "py4j": (logging.WARNING, logging.WARNING, logging.INFO),
    "matplotlib": (logging.WARNING, logging.WARNING, logging.DEBUG),
    "urllib3": (logging.WARNING, logging.WARNING, logging.DEBUG),
    "asyncio": (logging.WARNING, logging.WARNING, logging.DEBUG),
    LIBRDKAFKA: (logging.CRITICAL + 1, logging.WARNING, logging.DEBUG),
}

# The Spark driver JVM's log4j2 levels by verbosity, for local runs (see spark_log_config).
SPARK_LEVELS = ("error", "warn", "info")
SPARK_LEVEL_ENV = "KAFKA_HEALTH_SPARK_LOG_LEVEL"
# The command line's verbosity, for the processes Spark starts from the driver's (the
# streaming source's planner, local Python workers), where configure() never runs.
VERBOSITY_ENV = "KAFKA_HEALTH_VERBOSITY"
# librdkafka's own `log_level` (syslog: 3 error, 4 warning, 7 debug) by verbosity, for the
# clients in those processes: LIBRDKAFKA's levels in NOISY, said to librdkafka itself.
LIBRDKAFKA_LOG_LEVELS = (0, 4, 7)
LOG4J2 = """\
# Written by kafka-health for a local Spark driver: console at {level}, and the
# warnings every local run prints (no native Hadoop library, a loopback hostname) hidden.
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.hadoop_native.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop_native.level = error
logger.spark_utils.name = org.apache.spark.util.Utils
logger.spark_utils.level = error
# PySpark's gateway announces "Setting default log level" unless its logger's level is set
logger.pyspark_gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.pyspark_gateway.level = {level}
# A query that fails: the job logs its cause in one line, and Spark's whole trace (which
# the query's execution logs as well) from -v on
logger.query_failure.name = org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution
logger.query_failure.level = {streaming_level}
"""


class JsonFormatter(logging.Formatter):
    """One JSON object per line (`--log-format json`), for containers and log collectors:
    time (UTC, ISO 8601), level, logger, message, and the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": self.formatTime(record), "level": record.levelname,
                "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z"


def formatter(log_format: str) -> logging.Formatter:
    """The root handler's formatter for `--log-format` (text or json)."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(FORMAT)


class LibraryFilter(logging.Filter):
    """Drops a library's records below its level for the verbosity. Levels on the libraries'
    loggers alone are not enough: great_expectations sets INFO on some of its own loggers
    when it is imported, after the command line has set theirs."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.levels = {name: levels[step] for name, levels in NOISY.items()}

    def filter(self, record: logging.LogRecord) -> bool:
        for name, level in self.levels.items():
            if (record.name == name or record.name.startswith(name + ".")
                    or (record.name == "root" and f"{os.sep}{name}{os.sep}" in record.pathname)):
                # (py4j logs some lines through the root logger: told apart by its file)
                return record.levelno >= level
        return True


def configure(verbosity: int, log_format: str = "text") -> None:
    """Root handler, its format (`text` or `json`) and levels: the project at INFO (DEBUG
    from -v), libraries as NOISY says."""
    step = min(max(verbosity, 0), 2)
    os.environ[VERBOSITY_ENV] = str(step)
    root = logging.DEBUG if step == 2 else logging.INFO
    if not logging.getLogger().handlers:  # tests' capture handlers keep their own format
        handler: logging.Handler = logging.StreamHandler()
        handler.setFormatter(formatter(log_format))
        logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(root)
    logging.getLogger("kafka_health").setLevel(logging.DEBUG if step >= 1 else logging.INFO)
    for name, levels in NOISY.items():
        logging.getLogger(name).setLevel(levels[step])
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, LibraryFilter)]:
            handler.removeFilter(old)
        handler.addFilter(LibraryFilter(step))


def kafka_logger() -> logging.Logger:
    """The logger to pass as a confluent_kafka client's `logger` setting."""
    return logging.getLogger(LIBRDKAFKA)


def spark_process_kafka_settings() -> dict[str, int]:
    """librdkafka settings for a client in a process Spark started (the source's planner, a
    read task), where the job's logging is not set up: its own stderr lines kept to the
    verbosity. While the metrics topics' broker is down, librdkafka writes an error line
    for every reconnect attempt, about 20 a second, and the source reports the outage
    itself (a warning a minute, `kafka_health_pipeline_source_up`). A `logger` setting
    would need the client polled to deliver its lines, which the planner's is not."""
    try:
        step = min(max(int(os.environ.get(VERBOSITY_ENV, "0")), 0), 2)
    except ValueError:
        step = 0
    return {"log_level": LIBRDKAFKA_LOG_LEVELS[step]}


def spark_log_config(verbosity: int) -> None:
    """Point a local Spark driver JVM at a log4j2 config of the verbosity's level.

    Only when no SPARK_CONF_DIR is set: under spark-submit or with an operator's own Spark
    config, their log4j2 settings are the ones to honour. The file is named by the JVM's
    `log4j2.configurationFile` property (through SPARK_SUBMIT_OPTS, which Spark's launcher
    puts on the driver's command line), which log4j2 reads before the JVM logs a line, so
    the startup warnings go too (a level set from Python comes only after them). A folder
    on the class path would do the same, but a class path that holds a non-empty folder
    cannot use the driver's class-data archive (streaming/runtime/class_archive.py).
    """
    if os.environ.get("SPARK_CONF_DIR"):
        return
    level = SPARK_LEVELS[min(max(verbosity, 0), 2)]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(cache, "kafka-health", "spark-log", level)
    os.makedirs(folder, exist_ok=True)
    # replaced whole, so a second run starting at the same moment never reads half a file
    scratch = os.path.join(folder, f".log4j2.properties.{os.getpid()}")
    with open(scratch, "w", encoding="utf-8") as out:
        out.write(LOG4J2.format(level=level,
                                streaming_level="fatal" if level == "error" else level))
    config = os.path.join(folder, "log4j2.properties")
    os.replace(scratch, config)
    option = f"-Dlog4j2.configurationFile=file:{config}"
    kept = [o for o in os.environ.get("SPARK_SUBMIT_OPTS", "").split()
            if not o.startswith("-Dlog4j2.configurationFile=")]
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join([*kept, option])
    # build_spark sets the running context's level too: to this one, not its own default
    os.environ[SPARK_LEVEL_ENV] = level
