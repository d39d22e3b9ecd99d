"""The command line as an operator meets it: --version, help on every subcommand and option,
-v before or after the subcommand, and every usage error an exit 2 that says what to fix
(never a traceback, never a silent exit 0 on a mistyped path)."""

from __future__ import annotations

import argparse
import logging
import socket
from importlib.metadata import version
from pathlib import Path

import pytest

from streaming.cli import build_parser, main
from streaming.logsetup import LIBRDKAFKA, LibraryFilter, configure

REPO = Path(__file__).resolve().parents[2]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_version_is_the_installed_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"kafka-health {version('kafka-health')}"


def test_every_subcommand_and_option_has_help() -> None:
    top = build_parser()
    listed = {a.dest: a.help for a in top._subparsers._group_actions[0]._choices_actions}
    parsers = subcommands()
    assert set(parsers) >= {"demo", "run", "cluster", "simulate", "headroom", "report",
                            "check-config"}
    for name, parser in parsers.items():
        assert listed.get(name), f"{name}: no summary in `kafka-health --help`"
        assert parser.description, f"{name}: no description in `kafka-health {name} --help`"
        for action in parser._actions:
            assert action.help and action.help != argparse.SUPPRESS, (
                f"kafka-health {name} {'/'.join(action.option_strings) or action.dest}: no help")
    for action in top._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert action.help, f"kafka-health {'/'.join(action.option_strings)}: no help"


@pytest.mark.parametrize("argv, verbosity", [
    (["check-config", "c.yaml"], 0),
    (["check-config", "c.yaml", "-v"], 1),
    (["check-config", "-vv", "c.yaml"], 2),
    (["-v", "check-config", "c.yaml", "-v"], 2),
])
def test_verbose_is_accepted_before_and_after_the_subcommand(argv: list[str],
                                                            verbosity: int) -> None:
    args = build_parser().parse_args(argv)
    assert args.verbose + args.verbose_after == verbosity


@pytest.fixture
def restore_levels():  # noqa: ANN201
    names = ["", "kafka_health", "great_expectations", "py4j", LIBRDKAFKA]
    saved = {n: logging.getLogger(n).level for n in names}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)
    for handler in logging.getLogger().handlers:
        for f in [f for f in handler.filters if isinstance(f, LibraryFilter)]:
            handler.removeFilter(f)


@pytest.mark.usefixtures("restore_levels")
def test_library_noise_is_hidden_by_default_and_shown_with_v() -> None:
    great_expectations = logging.getLogger("great_expectations.expectations.registry")
    librdkafka = logging.getLogger(LIBRDKAFKA)
    job = logging.getLogger("kafka_health.job")

    configure(0)
    assert not great_expectations.isEnabledFor(logging.INFO)
    assert not librdkafka.isEnabledFor(logging.ERROR)  # routine while a broker restarts
    assert job.isEnabledFor(logging.INFO) and not job.isEnabledFor(logging.DEBUG)
    configure(1)
    assert great_expectations.isEnabledFor(logging.INFO)
    assert librdkafka.isEnabledFor(logging.WARNING) and not librdkafka.isEnabledFor(logging.INFO)
    assert job.isEnabledFor(logging.DEBUG)
    configure(2)
    assert librdkafka.isEnabledFor(logging.DEBUG)
    py4j = logging.getLogger("py4j.clientserver")
    assert py4j.isEnabledFor(logging.INFO)
    assert not py4j.isEnabledFor(logging.DEBUG), "py4j's DEBUG echoes SparkConf secrets"


def record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "a line", None, None)


def test_a_library_that_sets_its_own_level_is_still_quiet() -> None:
    # great_expectations sets INFO on its data-context logger when imported: only a filter on
    # the handler keeps its "Created temporary directory" line out of the default output
    ge = "great_expectations.data_context.types.base"
    assert not LibraryFilter(0).filter(record(ge, logging.INFO))
    assert LibraryFilter(0).filter(record(ge, logging.WARNING))
    assert LibraryFilter(0).filter(record("kafka_health.job", logging.INFO))
    assert LibraryFilter(0).filter(record("great_expectations_other", logging.INFO))
    assert LibraryFilter(1).filter(record(ge, logging.INFO))
    # py4j logs a failed command's retry through the root logger, with its traceback
    py4j_line = logging.LogRecord("root", logging.INFO, "/venv/site-packages/py4j/java_gateway.py",
                                  1056, "Exception while sending command.", None, None)
    assert not LibraryFilter(0).filter(py4j_line)
    assert not LibraryFilter(1).filter(py4j_line)
    assert LibraryFilter(2).filter(py4j_line)
    assert LibraryFilter(0).filter(record("root", logging.INFO))  # anyone else's root line


@pytest.mark.usefixtures("restore_levels")
def test_configure_keeps_one_library_filter_per_handler() -> None:
    handler = logging.NullHandler()
    logging.getLogger().addHandler(handler)
    try:
        configure(0)
        configure(1)
        filters = [f for f in handler.filters if isinstance(f, LibraryFilter)]
        assert len(filters) == 1
        assert filters[0].filter(record("great_expectations.x", logging.INFO))  # the -v one
    finally:
        logging.getLogger().removeHandler(handler)


def delta_root_with_a_table(tmp_path: Path) -> Path:
    root = tmp_path / "delta"
    (root / "broker_signals" / "_delta_log").mkdir(parents=True)
    return root


USAGE_ERRORS = {
    "simulate-bad-format": (["simulate", "--format", "bogus"], "choose one of: jolokia"),
    "simulate-rf-over-brokers": (["simulate", "--brokers", "2"],
                                 "--replication-factor 3 exceeds --brokers 2"),
    "simulate-zero-brokers": (["simulate", "--brokers", "0"], "'0' is not a whole number >= 1"),
    "headroom-mistyped-delta": (["headroom", "--delta", "{tmp}/nope", "--png", ""],
                                "--delta {tmp}/nope: no such folder"),
    "headroom-default-delta-missing": (["headroom", "--png", ""],
                                       "pass --delta with the job's delta.path"),
    "headroom-png-folder-missing": (["headroom", "--delta", "{delta}", "--png", "{tmp}/no/x.png"],
                                    "--png {tmp}/no/x.png: the folder {tmp}/no does not exist"),
    "report-mistyped-delta": (["report", "--delta", "{tmp}/nope", "--out", "{tmp}/out"],
                              "--delta {tmp}/nope: no such folder"),
    "report-delta-without-tables": (["report", "--delta", "{tmp}", "--out", "{tmp}/out"],
                                    "holds none of the job's Delta tables"),
    "report-out-not-a-folder": (["report", "--delta", "{delta}", "--out", "{tmp}/file/out"],
                                "--out {tmp}/file/out: cannot create the report folder"),
    "report-negative-hours": (["report", "--hours", "-1"], "'-1' is not a finite number of hours > 0"),
    "cluster-negative-brokers": (["cluster", "--brokers", "-1"], "'-1' is not a whole number >= 0"),
    "cluster-ship-without-watched": (["cluster", "--brokers", "0", "--ship", "5"],
                                     "--ship is about the watched cluster, which --brokers 0"),
    "demo-port-out-of-range": (["demo", "--metrics-port", "70000"], "TCP port (1-65535)"),
    "demo-nan-duration": (["demo", "--duration", "nan"],
                          "'nan' is not a finite number of seconds > 0"),
    "demo-inf-fault-period": (["demo", "--simulated", "--fault-period", "inf"],
                              "'inf' is not a finite number of seconds > 0"),
    "demo-real-with-a-simulated-shape": (["demo", "--brokers", "5"],
                                         "--brokers shapes the simulated cluster: add --simulated"),
    "run-without-config": (["run"], "give --config FILE or set KAFKA_HEALTH_CONFIG"),
    "check-config-missing-file": (["check-config", "{tmp}/nope.yaml"], "cannot read"),
}


@pytest.mark.parametrize("argv, expected", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_errors_exit_2_with_the_fix(argv: list[str], expected: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # the default delta.path (data/delta) does not exist here
    (tmp_path / "file").write_text("")
    names = {"tmp": str(tmp_path), "delta": str(delta_root_with_a_table(tmp_path))}
    try:
        code = main([arg.format(**names) for arg in argv])
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected.format(**names) in err
    assert "Traceback" not in err


def test_a_start_that_cannot_write_its_tables_says_why_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Read-only tables at restart ended `run` in a raw traceback from the recovery step,
    once per crash-looping restart."""
    import logging

    import streaming.job

    class Unwritable:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def install_signal_handlers(self) -> None:
            pass

        def start(self) -> None:
            raise OSError("Generic LocalFileSystem error: Read-only file system (os error 30)"
                          "\nsecond line of detail")

    monkeypatch.setattr(streaming.job, "Job", Unwritable)
    monkeypatch.setenv("KAFKA_HEALTH__EXPORTER__ENABLED", "false")
    for verbose in ([], ["-v"]):
        caplog.clear()
        code = main([*verbose, "run", "--config", str(REPO / "deploy" / "config.example.yaml")])
        assert code == 1
        said = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in said] == [
            "not started: OSError: Generic LocalFileSystem error: Read-only file system (os "
            "error 30) (-v shows the traceback)"]
        traced = any(r.exc_info for r in caplog.records if r.levelno == logging.DEBUG)
        assert traced == bool(verbose)


def test_a_tables_folder_that_is_a_file_names_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The file error names only a file; the operator needs the key that put it there."""
    import logging

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # leaves the process's Spark env alone
    (tmp_path / "afile").write_text("not a folder")
    monkeypatch.setenv("KAFKA_HEALTH__EXPORTER__ENABLED", "false")
    monkeypatch.setenv("KAFKA_HEALTH__DELTA__PATH", str(tmp_path / "afile"))
    monkeypatch.setenv("KAFKA_HEALTH__SPARK__CHECKPOINT", str(tmp_path / "checkpoint"))
    code = main(["run", "--config", str(REPO / "deploy" / "config.example.yaml")])
    assert code == 1
    [said] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert said.startswith("not started: ") and "Error" in said
    assert f"(under delta.path: {tmp_path / 'afile'})" in said


def test_a_secret_the_start_cannot_read_is_a_config_error_as_in_check_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("KH_UNSET_SECRET", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("exporter:\n  enabled: false\ndelta:\n  storage_secrets:\n"
                      "    aws_secret_access_key: {env: KH_UNSET_SECRET}\n")
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "config error: " in err and "KH_UNSET_SECRET is not set" in err


def test_run_with_its_metrics_port_taken_refuses_to_start_and_names_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Another process on /metrics' port: a one-line refusal that names the port and the
    key to change, exit 1, before Spark starts (no traceback to read at 3 a.m.)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # leaves the process's Spark env alone
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        monkeypatch.setenv("KAFKA_HEALTH__EXPORTER__PORT", str(port))
        code = main(["run", "--config", str(REPO / "deploy" / "config.example.yaml")])
    err = capsys.readouterr().err
    assert code == 1, err
    assert f"not started: /metrics cannot listen on 127.0.0.1:{port}" in err
    assert "exporter.port" in err
    assert "Traceback" not in err


def test_the_simulated_demos_faults_follow_the_fault_period() -> None:
    """--fault-period sets the simulated demo's cycle as it does the real one's: the steps at
    the same fractions of it, a day of cycles and never an unbounded list."""
    from streaming.testbed.simulated_demo import DEMO_MAX_CYCLES, demo_events

    def first_cycle(period: float) -> list[float]:
        return sorted(e.at for e in demo_events(3, period) if e.at < period)

    assert first_cycle(300) == [30, 60, 120, 150, 210, 240]
    assert first_cycle(120) == pytest.approx([12, 24, 48, 60, 84, 96])
    assert len(demo_events(3, 300)) == 6 * 288
    assert len(demo_events(3, 0.01)) == 6 * DEMO_MAX_CYCLES
    assert demo_events(2, 300) == []
