"""Importing the package leaves the process environment alone: what the job needs set (the
allocator's purge delay, the workers' interpreter) is set by the functions that start it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.allocator import PURGE_DELAY_ENV, PURGE_DELAY_MS, set_purge_delay
from streaming.config import load_config
from streaming.runtime.spark_session import spark_conf

IMPORT_EVERY_MODULE = """
import importlib, json, os, pkgutil, sys
before = dict(os.environ)
import streaming
failed = []
for module in pkgutil.walk_packages(streaming.__path__, "streaming."):
    if module.name.endswith(".__main__"):  # importing a __main__ runs the program
        continue
    try:
        importlib.import_module(module.name)
    except ImportError as err:
        failed.append(f"{module.name}: {err}")
after = dict(os.environ)
changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
print(json.dumps({"changed": changed, "failed": failed, "pyarrow": "pyarrow" in sys.modules}))
"""


def test_importing_every_module_sets_nothing_in_the_environment(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != PURGE_DELAY_ENV}
    out = subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["failed"] == []
    assert found["pyarrow"], "the walk reached the modules that load pyarrow"
    assert found["changed"] == []


def test_the_starting_functions_set_the_purge_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PURGE_DELAY_ENV, raising=False)
    set_purge_delay()
    assert os.environ[PURGE_DELAY_ENV] == PURGE_DELAY_MS
    monkeypatch.setenv(PURGE_DELAY_ENV, "0")
    set_purge_delay()
    assert os.environ[PURGE_DELAY_ENV] == "0", "a value the environment has is kept"
    conf = spark_conf(load_config(None, environ={}))
    assert conf[f"spark.executorEnv.{PURGE_DELAY_ENV}"] == PURGE_DELAY_MS
