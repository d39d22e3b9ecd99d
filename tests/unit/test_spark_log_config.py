"""The local Spark driver's log4j2 config by verbosity: a failed query's trace, which the
job sums up in one line (`the query stopped: ...`), only from -v on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streaming.logsetup import SPARK_LEVEL_ENV, spark_log_config


def written(verbosity: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m")
    monkeypatch.delenv(SPARK_LEVEL_ENV, raising=False)
    spark_log_config(verbosity)
    option = next(o for o in os.environ["SPARK_SUBMIT_OPTS"].split()
                  if o.startswith("-Dlog4j2.configurationFile=file:"))
    text = Path(option.split("file:", 1)[1]).read_text()
    return dict(line.split(" = ", 1) for line in text.splitlines()
                if " = " in line and not line.startswith("#"))


@pytest.mark.parametrize(("verbosity", "root", "streaming"),
                         [(0, "error", "fatal"), (1, "warn", "warn"), (2, "info", "info")])
def test_a_failed_querys_trace_shows_from_v_on(
        verbosity: int, root: str, streaming: str, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    config = written(verbosity, monkeypatch, tmp_path)
    assert config["rootLogger.level"] == root
    name = next(k for k, v in config.items()
                if k.endswith(".name") and v.endswith(".streaming.runtime.MicroBatchExecution"))
    assert config[name.replace(".name", ".level")] == streaming
