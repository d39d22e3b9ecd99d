"""The job's tables by name in Spark's catalog (`delta.catalog`): each registered as an
external Delta table at its path under delta.path, so `SELECT * FROM
kafka_health.broker_signals` finds what the job writes.

Why a namespace and external tables: the tables stay where delta.path puts them, and
every write stays addressed by path, so delta-rs (which knows no catalog) and delta-spark
write exactly as without a catalog, and `status`, `report` and `headroom` read the same
files by path. The name is an entry pointing there, added beside the tables, never a
second copy; dropping it (`DROP TABLE` of an external table) leaves the data. One key
names the namespace, `schema` or `catalog.schema`, Spark's own multi-part names; which
catalog that is, and where its metastore runs, is Spark's configuration (spark.conf),
not a second one of ours.

Registration runs on a thread of its own, never in a batch's way: at the start every
table that exists, then, until every table is named, a look every LOOK_SECONDS for those
created since (the Admin API pollers' and the clients' tables appear at their first
write, or never when those are off). `CREATE TABLE IF NOT EXISTS` makes a restart's
registration a no-op. A catalog that fails (a metastore down, a namespace refused) is
said once, with the settings to look at, and tried again every RETRY_SECONDS; the job
writes and pages all the while.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streaming.common.background import BackgroundLoop
from streaming.locations import S3_SCHEMES, is_local, local_path, scheme
from streaming.sinks.base import DeltaSink

LOG = logging.getLogger("kafka_health.catalog")
LOOK_SECONDS = 10.0  # how often tables not yet named are looked for
RETRY_SECONDS = 60.0  # how often a failing catalog is tried again
SETTINGS = ("delta.catalog, and the catalog's own settings in spark.conf "
            "(spark.sql.catalogImplementation, spark.hadoop.hive.metastore.uris or "
            "spark.sql.catalog.<name>.*)")


def table_name(namespace: str, table: str) -> str:
    """The name a table is registered under: `namespace.table`."""
    return f"{namespace}.{table}"


def quoted(name: str) -> str:
    """A dotted name as Spark SQL, every part in backquotes (the config allows only
    letters, digits and underscores in a part, so none holds a backquote)."""
    return ".".join(f"`{part}`" for part in name.split("."))


def spark_location(path: str) -> str:
    """A table's location as Spark's catalog records it: a local path absolute, as a
    file: URI (the catalog outlives the job's working directory); s3:// and s3n:// as
    s3a://, Hadoop's S3 connector, through which Spark reads a table delta-rs wrote."""
    if is_local(path):
        return Path(os.path.abspath(local_path(path))).as_uri()
    if scheme(path) in S3_SCHEMES:
        return "s3a" + path[path.index(":"):]
    return path


def _same_location(registered: str, wanted: str) -> bool:
    if is_local(registered) and is_local(wanted):
        return (os.path.normpath(local_path(registered))
                == os.path.normpath(local_path(wanted)))
    return registered.rstrip("/") == wanted.rstrip("/")


def _sql_string(text: str) -> str:
    """`text` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


class CatalogTables(BackgroundLoop):
    """Registers the tables of `tables` (name -> the job's table) under `namespace` in
    the catalog of `spark`, each once it exists. With no namespace (delta.catalog unset)
    it does nothing.

    Owner: its own thread, from follow() to stop(); `registered` may be read by others.
    """

    def __init__(self, namespace: str | None, spark: Any) -> None:
        super().__init__("kafka-health-catalog")
        self.namespace = namespace
        self.spark = spark
        self.tables: Mapping[str, DeltaSink] = {}
        self.registered: set[str] = set()
        self._session: Any = None  # made on the registration's thread, at its first use
        self._namespace_made = False
        self._failing = False

    @property
    def join_seconds(self) -> float:
        # A metastore that does not answer holds the call for its client's timeouts; the
        # thread is a daemon, and a stop does not wait for it.
        return 5.0

    def follow(self, tables: Mapping[str, DeltaSink]) -> CatalogTables:
        """Start registering `tables` (the job's, as opened for this run)."""
        self.tables = dict(tables)
        self._stop.clear()  # a job started again after a stop
        if self.namespace:
            if self._session_catalog_in_memory():
                LOG.warning("delta.catalog: Spark's catalog is in memory "
                            "(spark.sql.catalogImplementation): the names under %s last as "
                            "long as this job's Spark session, and no other reader sees "
                            "them; name a metastore in spark.conf", self.namespace)
            self.start()
        return self

    def _session_catalog_in_memory(self) -> bool:
        """Whether the namespace is in Spark's session catalog and that one is in memory
        (a catalog.schema whose catalog is configured, spark.sql.catalog.<name>, is not)."""
        first = self.namespace.split(".")[0] if self.namespace else ""
        conf = self.spark.conf
        if ("." in (self.namespace or "") and first != "spark_catalog"
                and conf.get(f"spark.sql.catalog.{first}", None)):
            return False
        return conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory"

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                left = self.register_present()
            except Exception as err:  # noqa: BLE001 - the job goes on without names
                if self._stop.is_set():
                    return  # the session stopped under the call
                self._failed(err)
                self._stop.wait(RETRY_SECONDS)
                continue
            if not left:
                return
            self._stop.wait(LOOK_SECONDS)

    def register_present(self) -> list[str]:
        """Register every table that exists and is not registered yet; returns the names
        of those still missing. A catalog error is raised (the caller says it)."""
        assert self.namespace
        left = []
        for name, table in self.tables.items():
            if name in self.registered:
                continue
            if not table.exists():
                left.append(name)
                continue
            self._register(name, table.path)
        if self._failing:
            LOG.info("delta.catalog: the catalog answers again; tables registered under %s",
                     self.namespace)
            self._failing = False
        return left

    def _sql(self, text: str) -> Any:
        """Run a statement in a session of the job's SparkContext tuned for Delta's work
        (streaming.sinks.delta_spark.delta_session): a registration reads the table's log,
        which with Delta's defaults takes 50 tasks a table."""
        if self._session is None:
            from streaming.sinks.delta_spark import delta_session  # imports delta-spark

            self._session = delta_session(self.spark)
        return self._session.sql(text)

    def _register(self, name: str, path: str) -> None:
        assert self.namespace
        if not self._namespace_made:
            self._sql(f"CREATE NAMESPACE IF NOT EXISTS {quoted(self.namespace)}")
            self._namespace_made = True
        full, location = table_name(self.namespace, name), spark_location(path)
        self._sql(f"CREATE TABLE IF NOT EXISTS {quoted(full)} USING delta "
                  f"LOCATION {_sql_string(location)}")
        registered = self.location(full)
        if registered is not None and not _same_location(registered, location):
            # another job's table, or this one's before delta.path moved: not ours to drop
            LOG.warning("delta.catalog: %s is registered at %s, not at this job's %s: it "
                        "stays as it is, and reads by that name do not see this job's "
                        "table. Drop it (DROP TABLE %s: an external table's data stays) "
                        "or choose another delta.catalog", full, registered, location, full)
        else:
            LOG.info("delta.catalog: %s names the table at %s", full, location)
        self.registered.add(name)

    def location(self, full: str) -> str | None:
        """Where the catalog says table `full` is (None: it does not say)."""
        for row in self._sql(f"DESCRIBE TABLE EXTENDED {quoted(full)}").collect():
            if row[0] == "Location":
                return str(row[1])
        return None

    def _failed(self, err: Exception) -> None:
        if self._failing:
            LOG.debug("delta.catalog: still failing: %s", _first_line(err))
            return
        self._failing = True
        LOG.warning("delta.catalog: the tables cannot be registered under %s in Spark's "
                    "catalog (%s). The job writes and reads them by path meanwhile, and "
                    "tries again every %.0f s; check %s", self.namespace, _first_line(err),
                    RETRY_SECONDS, SETTINGS)
