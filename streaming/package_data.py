"""The data files the package reads at run time, shipped inside it under streaming/_data/:
the metrics_schemas/ folder and the Prometheus rules file the direct push renders alerts from.

In the repository streaming/_data/ holds symbolic links to the top-level metrics_schemas/ and
alerts/kafka-health.rules.yml, the one copy people edit and read; a wheel built from the
repository holds the files themselves (setuptools copies what the links point at). Both are
read through importlib.resources, so a checkout, an editable install and an installed wheel
find them the same way, whatever the working directory.

Standard library only: deploy/spark_main.py asks for the schemas before the job's
dependencies are known to import.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

PACKAGE = "streaming"
DATA = "_data"
SCHEMAS = "metrics_schemas"
# A folder of schemas to read instead of the packaged ones (spark-submit's unpacked
# --archives, an image's copy): streaming.schemas.schemas_dir, deploy/spark_main.py.
SCHEMAS_ENV = "KAFKA_HEALTH_SCHEMAS"
# The marker spark_main and the error messages look for: every schemas folder has it.
SCHEMAS_MARKER = "catalog.yaml"
ALERT_RULES = ("alerts", "kafka-health.rules.yml")


def packaged(*parts: str) -> Traversable:
    """The file or folder `parts` under streaming/_data/. On the file system (a wheel
    installed, a checkout) a resolved Path, so a checkout's links read as the top-level file
    they point at and messages name the file to edit; in a zip on sys.path (spark-submit's
    --py-files) the zip's entry."""
    found = files(PACKAGE) / DATA
    for part in parts:
        found = found / part
    return found.resolve() if isinstance(found, Path) else found


def packaged_schemas() -> Traversable:
    """The metrics_schemas folder the package carries."""
    return packaged(SCHEMAS)


def has_packaged_schemas() -> bool:
    """Whether the package carries its schemas (a --py-files zip built from a checkout
    may not: its links to folders are not followed)."""
    return (packaged_schemas() / SCHEMAS_MARKER).is_file()


def packaged_alert_rules() -> Traversable:
    """The Prometheus rules file the package carries."""
    return packaged(*ALERT_RULES)
