"""The command line's habits from Kafka's own tools: --bootstrap-server (with --bootstrap
kept), --command-config properties files, check-config's one line, exit 1 for a Kafka
that does not answer, files written only where told, -o json, --metrics-port, --log-format
json, and help with an example for every command."""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
from pathlib import Path

import pytest

from streaming.cli import build_parser, main
from streaming.cli.options import kafka_client
from streaming.config import ConfigError, load_config
from streaming.kafka_client import read_properties, with_properties
from streaming.logsetup import JsonFormatter

REPO = Path(__file__).resolve().parents[2]
PROPERTIES = r"""# a Java client's file, as kafka-topics.sh --command-config takes it
! both comment markers
security.protocol = SASL_SSL
sasl.mechanism: SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
    username="alice" \
    password="pa\\\"ss";
client.id kafka-health-peek
"""


def subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions
                  if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_properties_file_is_read_as_java_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(PROPERTIES)
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="alice" password="pa\\"ss";',
        "client.id": "kafka-health-peek"}


def test_a_java_login_becomes_librdkafkas_user_and_password(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(PROPERTIES)
    merged = with_properties({"bootstrap.servers": "k:9092", "client.id": "x"},
                             read_properties(path))
    assert merged == {"bootstrap.servers": "k:9092", "client.id": "kafka-health-peek",
                      "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "alice", "sasl.password": 'pa"ss'}


@pytest.mark.parametrize("properties, said", [
    ({"ssl.truststore.location": "/t.jks", "ssl.truststore.password": "p"},
     "ssl.truststore.location, ssl.truststore.password set the Java client's trust store"),
    ({"sasl.jaas.config": "com.example.TokenLoginModule required;"},
     "sasl.jaas.config holds no username and password"),
])
def test_what_librdkafka_cannot_take_is_a_config_error(properties: dict[str, str],
                                                      said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        with_properties({}, properties)


@pytest.mark.parametrize("command", [["peek", "--topic", "t"], ["simulate"],
                                     ["run", "--config", "c.yaml"]])
@pytest.mark.parametrize("flag", ["--bootstrap-server", "--bootstrap"])
def test_bootstrap_server_and_its_old_name_on_every_command_that_talks_to_kafka(
        command: list[str], flag: str) -> None:
    args = build_parser().parse_args([*command, flag, "k1:9092,k2:9092"])
    assert args.bootstrap_server == "k1:9092,k2:9092"


def test_the_client_is_the_config_then_the_properties_then_the_bootstrap_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH__SOURCE__KAFKA", '{"client.id": "from-config", '
                       '"socket.timeout.ms": "1000"}')
    path = tmp_path / "client.properties"
    path.write_text(PROPERTIES)
    args = build_parser().parse_args(["peek", "--topic", "t", "--command-config", str(path),
                                      "--bootstrap-server", "k9:9093"])
    client = kafka_client(args, load_config(None))
    assert client["bootstrap.servers"] == "k9:9093"
    assert client["client.id"] == "kafka-health-peek"  # the file over the config
    assert client["socket.timeout.ms"] == "1000"
    assert client["sasl.username"] == "alice"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_unreadable_command_config_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["peek", "--topic", "t", "--command-config",
                        str(tmp_path / "nope.properties")], capsys)
    assert code == 2 and "--command-config" in err and "cannot read" in err


def test_peek_at_a_kafka_that_does_not_answer_fails_at_run_time(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["peek", "--bootstrap-server", f"127.0.0.1:{closed_port()}",
                        "--topic", "t", "--timeout", "1"], capsys)
    assert code == 1, err
    assert err.startswith("peek: Kafka at 127.0.0.1:") and "--bootstrap-server" in err
    assert "Traceback" not in err and "usage:" not in err


def test_simulate_whose_records_kafka_never_takes_fails_at_run_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "client.properties"
    path.write_text("message.timeout.ms=500\n")
    code, out, err = run(["simulate", "--bootstrap-server", f"127.0.0.1:{closed_port()}",
                          "--command-config", str(path), "--duration", "5",
                          "--brokers", "3", "--topics", "1", "--partitions", "1"], capsys)
    assert code == 1, out + err
    assert "records not delivered to kafka-metrics" in err and "produced" not in out


def delta_root(tmp_path: Path) -> Path:
    root = tmp_path / "delta"
    (root / "broker_signals" / "_delta_log").mkdir(parents=True)
    return root


def test_headroom_writes_no_file_unless_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = delta_root(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, _ = run(["headroom", "--delta", str(root)], capsys)
    assert code == 0 and "No partition headroom rows" in out
    code, out, _ = run(["headroom", "--delta", str(root), "-o", "json"], capsys)
    assert code == 0
    assert json.loads(out) == {"brokers": [], "clusters": [], "chart": None}
    assert list(work.iterdir()) == []


def test_report_writes_only_into_the_folder_it_is_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["report", "--delta", str(delta_root(tmp_path))], capsys)
    assert code == 2 and "--out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["delta"]


def test_metrics_port_is_the_jobs_metrics_port_wherever_it_is_taken(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name, parser in subcommands().items():
        for action in parser._actions:
            if "--metrics-port" in action.option_strings:
                assert "port of the job's Prometheus /metrics" in action.help, name
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # leaves the process's Spark env alone
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, _, err = run(["run", "--config", str(REPO / "deploy" / "config.example.yaml"),
                            "--metrics-port", str(port)], capsys)
    assert code == 1, err
    assert f"/metrics cannot listen on 127.0.0.1:{port}" in err


@pytest.mark.parametrize("argv", [["--log-format", "json", "check-config", "c.yaml"],
                                  ["check-config", "c.yaml", "--log-format", "json"]])
def test_log_format_before_or_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).log_format == "json"
    assert build_parser().parse_args(["check-config", "c.yaml"]).log_format == "text"


def test_a_json_log_line_is_one_object_with_its_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("kafka_health.job", logging.ERROR, __file__, 1,
                                   "batch %d failed", (7,), sys.exc_info())
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "ERROR" and parsed["logger"] == "kafka_health.job"
    assert parsed["message"] == "batch 7 failed" and "ValueError: boom" in parsed["exception"]
    assert parsed["time"].endswith("Z")


def test_the_command_logs_json_lines(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """What `run` logs, as a container's log collector reads it (a start that fails, with
    the job stubbed: no Spark)."""
    import streaming.job

    class Unwritable:
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def install_signal_handlers(self) -> None:
            pass

        def start(self) -> None:
            raise OSError("Read-only file system")

    monkeypatch.setattr(streaming.job, "Job", Unwritable)
    monkeypatch.setenv("KAFKA_HEALTH__EXPORTER__ENABLED", "false")
    root = logging.getLogger()
    kept, level = root.handlers[:], root.level
    root.handlers.clear()  # pytest's capture handlers: the command adds its own
    try:
        code = main(["--log-format", "json", "run", "--config",
                     str(REPO / "deploy" / "config.example.yaml")])
    finally:
        for handler in root.handlers[:]:
            root.removeHandler(handler)
        root.handlers.extend(kept)
        root.setLevel(level)
    err = capsys.readouterr().err
    assert code == 1
    said = [json.loads(line) for line in err.splitlines()]
    assert {"level": "ERROR", "logger": "kafka_health"}.items() <= said[-1].items()
    assert said[-1]["message"].startswith("not started: OSError: Read-only file system")


def test_every_commands_help_says_what_it_is_for_with_an_example() -> None:
    for name, parser in subcommands().items():
        assert parser.epilog and parser.epilog.startswith("example:"), name
        assert f"kafka-health {name}" in parser.epilog, name
        assert f"kafka-health {name}" in parser.format_help(), name
