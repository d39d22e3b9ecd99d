"""delta.catalog without a JVM: the key's form, the session it asks for, the locations the
catalog records, and the registration's rounds over real delta-rs tables against a stand-in
catalog (one that fails, one that answers): a table is named once it exists, each once, a
failing catalog said once and never raised. tests/integration/test_catalog_tables.py runs
it against Spark's Hive metastore."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

from streaming.config import load_config
from streaming.config.errors import ConfigError
from streaming.pipeline.catalog_tables import CatalogTables, quoted, spark_location
from streaming.runtime.jvm_jars import required_components
from streaming.runtime.spark_session import DELTA_SPARK_CONF, hive_support, spark_conf
from streaming.sinks.engines import open_table
from tests.conftest import wait_for


def catalog_config(value: str, **more: str) -> Any:
    return load_config(None, environ={"KAFKA_HEALTH__DELTA__CATALOG": value, **more})


@pytest.mark.parametrize("value", ["kafka_health", "main.kafka_health", "_x.y2"])
def test_a_schema_or_catalog_schema_is_accepted(value: str) -> None:
    assert catalog_config(value).delta.catalog == value


@pytest.mark.parametrize("value", ["a.b.c", "1x", "kafka-health", "a.", "a b", "ä"])
def test_anything_else_is_refused_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match=r"delta\.catalog: .* is not schema or catalog\.schema"):
        catalog_config(value)


def test_a_catalog_asks_for_delta_and_hive_in_the_session(monkeypatch) -> None:
    monkeypatch.setattr("streaming.runtime.spark_session.session_jars", lambda config: [])
    conf = spark_conf(catalog_config("kh"))
    assert {key: conf.get(key) for key in DELTA_SPARK_CONF} == DELTA_SPARK_CONF
    assert conf.get("spark.sql.catalogImplementation") == ("hive" if hive_support() else None)
    mine = spark_conf(catalog_config("kh", KAFKA_HEALTH__SPARK__CONF=(
        '{"spark.sql.catalogImplementation": "in-memory"}')))
    assert mine["spark.sql.catalogImplementation"] == "in-memory"  # spark.conf wins
    assert "spark.sql.catalogImplementation" not in spark_conf(load_config(None, environ={}))


def test_a_catalog_needs_deltas_jars_and_on_s3_hadoops() -> None:
    assert list(required_components(catalog_config("kh"))) == ["delta"]
    on_s3 = required_components(catalog_config("kh", KAFKA_HEALTH__DELTA__PATH="s3://b/d"))
    assert list(on_s3) == ["delta", "hadoop-aws"]


def test_the_catalog_records_absolute_locations_and_s3_as_s3a(tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert spark_location("data/delta/bronze") == (tmp_path / "data/delta/bronze").as_uri()
    assert spark_location("file:///srv/d/bronze") == "file:///srv/d/bronze"
    assert spark_location("s3://bucket/d/bronze") == "s3a://bucket/d/bronze"
    assert spark_location("abfss://c@a.dfs.core.windows.net/d") == (
        "abfss://c@a.dfs.core.windows.net/d")
    assert quoted("main.kafka_health.bronze") == "`main`.`kafka_health`.`bronze`"


class Conf(dict):
    """SparkSession.conf's get and set."""

    def set(self, key: str, value: str) -> None:
        self[key] = value


class StandInCatalog:
    """What the registration asks of a Spark session, over a dict of names: `down` makes
    every statement fail as an unreachable metastore does."""

    def __init__(self, implementation: str = "hive") -> None:
        self.tables: dict[str, str] = {}
        self.statements: list[str] = []
        self.down = False
        self.conf = Conf({"spark.sql.catalogImplementation": implementation})
        self.sparkContext = type("Context", (), {"defaultParallelism": 2})()

    def newSession(self) -> StandInCatalog:  # noqa: N802 - SparkSession's name
        return self

    def sql(self, text: str) -> Any:
        self.statements.append(text)
        if self.down:
            raise RuntimeError("MetaException: Could not connect to meta store\n\tat ...")
        rows: list[tuple[str, str]] = []
        created = re.match(r"CREATE TABLE IF NOT EXISTS (\S+) USING delta LOCATION '(.*)'$",
                           text)
        if created:
            self.tables.setdefault(created[1], created[2])
        described = re.match(r"DESCRIBE TABLE EXTENDED (\S+)$", text)
        if described:
            rows = [("Location", self.tables[described[1]])]
        return type("Result", (), {"collect": lambda _self: rows})()


def test_a_table_is_named_once_it_exists_and_once_only(tmp_path: Path) -> None:
    tables = {name: open_table("delta-rs", str(tmp_path), name, "app")
              for name in ("bronze", "cluster_metadata")}
    tables["bronze"].ensure()
    catalog = StandInCatalog()
    registration = CatalogTables("kh", catalog)
    registration.tables = tables
    assert registration.register_present() == ["cluster_metadata"]
    assert catalog.tables == {"`kh`.`bronze`": (tmp_path / "bronze").as_uri()}
    tables["cluster_metadata"].ensure()  # a poller's first write
    assert registration.register_present() == []
    assert set(catalog.tables) == {"`kh`.`bronze`", "`kh`.`cluster_metadata`"}
    creates = [s for s in catalog.statements if s.startswith("CREATE TABLE")]
    assert len(creates) == 2  # bronze was not asked for again
    assert catalog.statements[0] == "CREATE NAMESPACE IF NOT EXISTS `kh`"

    restarted = CatalogTables("kh", catalog)  # a restart asks again, and changes nothing
    restarted.tables = tables
    assert restarted.register_present() == []
    assert set(catalog.tables) == {"`kh`.`bronze`", "`kh`.`cluster_metadata`"}


def test_a_failing_catalog_is_said_once_with_the_setting_and_the_job_goes_on(
        tmp_path: Path, caplog, monkeypatch) -> None:
    monkeypatch.setattr("streaming.pipeline.catalog_tables.RETRY_SECONDS", 0.05)
    table = open_table("delta-rs", str(tmp_path), "bronze", "app")
    table.ensure()
    catalog = StandInCatalog()
    catalog.down = True
    registration = CatalogTables("kh", catalog)
    with caplog.at_level(logging.INFO, logger="kafka_health.catalog"):
        registration.follow({"bronze": table})  # returns at once: the rounds are its thread's
        wait_for(lambda: len(catalog.statements) >= 3, 10, "three failed rounds")
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, warnings
        assert "delta.catalog" in warnings[0] and "spark.conf" in warnings[0]
        assert "Could not connect to meta store" in warnings[0]
        assert "\tat" not in warnings[0]  # the error's first line, not its trace

        catalog.down = False  # the metastore is back: the next round registers
        wait_for(lambda: "bronze" in registration.registered, 10, "bronze registered")
        wait_for(lambda: not registration.running, 10, "the loop to end: every table named")
    assert "`kh`.`bronze`" in catalog.tables
    assert any("answers again" in r.getMessage() for r in caplog.records)
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


def test_a_name_taken_at_another_location_is_left_and_said(tmp_path: Path, caplog) -> None:
    table = open_table("delta-rs", str(tmp_path), "bronze", "app")
    table.ensure()
    catalog = StandInCatalog()
    catalog.tables["`kh`.`bronze`"] = "file:/elsewhere/bronze"
    registration = CatalogTables("kh", catalog)
    registration.tables = {"bronze": table}
    with caplog.at_level(logging.WARNING, logger="kafka_health.catalog"):
        assert registration.register_present() == []
    assert catalog.tables["`kh`.`bronze`"] == "file:/elsewhere/bronze"
    assert "registered at file:/elsewhere/bronze" in caplog.text
    assert "DROP TABLE kh.bronze" in caplog.text


def test_an_in_memory_catalog_is_said_to_last_the_session(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_health.catalog"):
        CatalogTables("kh", StandInCatalog("in-memory")).follow({}).stop()
    assert "in memory" in caplog.text
    caplog.clear()
    named = StandInCatalog("in-memory")
    named.conf["spark.sql.catalog.main"] = "some.CatalogPlugin"
    with caplog.at_level(logging.WARNING, logger="kafka_health.catalog"):
        CatalogTables("main.kh", named).follow({}).stop()
    assert caplog.text == ""
