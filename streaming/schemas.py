"""Table and stream schemas, built from metrics_schemas/tables.yaml (data, not code)."""

from __future__ import annotations

import functools
import os
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from streaming.package_data import SCHEMAS_ENV, packaged_schemas


def schemas_dir() -> Traversable:
    """The metrics_schemas folder: $KAFKA_HEALTH_SCHEMAS first, so spark-submit and images can
    ship their own copy anywhere, else the one the package carries (streaming.package_data)."""
    override = os.environ.get(SCHEMAS_ENV)
    if override:
        return Path(override)
    return packaged_schemas()


@functools.cache
def load_yaml(name: str) -> Any:
    return yaml.safe_load((schemas_dir() / name).read_text())


_ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "double": pa.float64(),
    "long": pa.int64(),
    "int": pa.int32(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
    "map<string,long>": pa.map_(pa.string(), pa.int64()),
    "array<int>": pa.list_(pa.int32()),
    "array<struct<key:string,value:binary>>": pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())])),
}

_SPARK_DDL = {
    "string": "STRING",
    "double": "DOUBLE",
    "long": "BIGINT",
    "int": "INT",
    "boolean": "BOOLEAN",
    "binary": "BINARY",
    "timestamp": "TIMESTAMP",
    "map<string,string>": "MAP<STRING,STRING>",
    "map<string,long>": "MAP<STRING,BIGINT>",
    "array<int>": "ARRAY<INT>",
    "array<struct<key:string,value:binary>>": "ARRAY<STRUCT<key: STRING, value: BINARY>>",
}


def table_spec(table: str) -> dict[str, Any]:
    return load_yaml("tables.yaml")[table]


def _columns(table: str, optional: bool) -> dict[str, str]:
    spec = table_spec(table)
    if not optional:
        return spec["columns"]
    return {**spec["columns"], **(spec.get("optional_columns") or {})}


def arrow_schema(table: str, optional: bool = False) -> pa.Schema:
    """The table's columns; with `optional` its optional ones too (kafka_records' headers)."""
    columns = _columns(table, optional)
    return pa.schema([pa.field(name, _ARROW_TYPES[kind]) for name, kind in columns.items()])


def spark_ddl(table: str, optional: bool = False) -> str:
    """DDL string for Spark; stays a string so this module imports without pyspark."""
    columns = _columns(table, optional)
    return ", ".join(f"`{name}` {_SPARK_DDL[kind]}" for name, kind in columns.items())


def decoded_arrow_schema() -> pa.Schema:
    """The decode stage's output: bronze columns plus the reject reason and raw bytes, and
    whether a sample's cluster is identity.default_cluster for want of any in its data.

    One schema for good and bad rows lets decoding run as a single pass; the job splits
    them (reason null = bronze, else quarantine) and counts the defaulted clusters; the
    bronze table keeps its own columns. It crosses Spark packed (streaming.decode.packing).
    """
    bronze = arrow_schema("bronze")
    return (bronze.append(pa.field("reject_reason", pa.string()))
            .append(pa.field("raw", pa.binary()))
            .append(pa.field("cluster_defaulted", pa.bool_())))
