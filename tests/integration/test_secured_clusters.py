"""The whole pipeline against secured clusters, and no secret anywhere it speaks.

Two secured test beds (streaming.testbed.secured, fresh random passwords each run): the
metrics cluster (one node) and a watched cluster of one combined node and two broker-only
nodes (so two brokers can stop with the controller quorum whole), both with SCRAM-SHA-512
over SASL_SSL, a mutual-TLS listener and ACLs on, each component logging in as its own
least-privilege user (docs/security.md). The shipper carries the watched brokers' Jolokia
reads into the metrics cluster as `kh-shipper`.

- The job (`kafka-health run -vv`, Python source) reads the metrics cluster as `kh-job`
  (password in a file) and polls the watched cluster by certificate as `kh-poller` (key
  password in an environment variable); stopping both followers of an RF 3, min ISR 2
  topic opens leader 1's under-min-ISR incident with the Admin API's cause, on the
  incident row and on /metrics.
- `simulate` writes as `kh-shipper` (password in a variable), `peek` reads as `kh-peek`
  (password in a file), and the job on Spark's own kafka source reads as `kh-job`
  (password in a variable).
- A wrong password, a broker certificate the client does not trust, a client certificate
  the broker does not trust and a user without ACLs: the Python source (the real reader
  class, on the driver's side) stops or warns with the setting to fix or the right to
  grant, the source's probe exports kafka_health_pipeline_source_error with the class,
  and so does the poller.

Every log line (the job at -vv, librdkafka's security debug lines), Spark's event log, its
SQL plans and environment over the UI's REST API, and /metrics are searched for every
password and key password of both beds.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient
from pyspark.sql.datasource import CaseInsensitiveDict

from streaming.config import load_config
from streaming.exporter import Exporter
from streaming.metadata import MetadataPoller, PollerSettings
from streaming.metadata.health import UNAUTHORIZED, UNREACHABLE
from streaming.metric_names import PIPELINE_SOURCE_ERROR
from streaming.runtime.lag_probe import LagProbe
from streaming.runtime.progress import ProgressListener
from streaming.source.data_source import KafkaHealthKafkaSource
from streaming.source.errors import KafkaUnavailableError
from streaming.source.reader import python_source_options
from streaming.testbed import faults
from streaming.testbed.demo import targets
from streaming.testbed.kafka import KafkaCluster, create_topic, free_port, metrics_cluster
from streaming.testbed.secured import (
    COMPONENT_USERS,
    ClientCertificate,
    SecuredKafka,
    client_sections,
    grant_components,
    make_ca,
    make_client_certificate,
    metrics_security,
    secret_file,
    watched_security,
)
from streaming.testbed.shipper import Shipper
from tests.conftest import wait_for
from tests.integration.helpers import count, exit_code, table

pytestmark = pytest.mark.integration
CLUSTER = "secured"
ORDERS = "orders"
CAUSE = "brokers 2 and 3 out of ISR"
NOBODY = "kh-nobody"  # a user of both clusters without any ACL


def secret_values(*beds: SecuredKafka) -> dict[str, str]:
    """Every secret of the beds by a name for the failure message: passwords, client key
    passwords, key store passwords."""
    found: dict[str, str] = {}
    for number, bed in enumerate(beds):
        found.update({f"bed {number} user {user}": pw for user, pw in bed.users.items()})
        found.update({f"bed {number} {user}'s key password":
                      cert.key_password_file.read_text().strip()
                      for user, cert in bed.client_certs.items()})
        found[f"bed {number} key store password"] = bed.store_password
    return found


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    root = tmp_path_factory.mktemp("secured")
    topic = f"jolokia-{uuid.uuid4().hex[:6]}"
    metrics_bed, watched_bed = metrics_security(), watched_security()
    for security in (metrics_bed, watched_bed):
        security.users[NOBODY] = uuid.uuid4().hex
    with metrics_cluster(secured=metrics_bed) as metrics, \
            KafkaCluster(1, broker_only=2, name="watched-secured", secured=watched_bed) as watched:
        create_topic(metrics.bootstrap, topic, partitions=2, client_config=metrics.client_config())
        # leader 1, the node that is also the controller: stopping 2 and 3 leaves it alone
        create_topic(watched.bootstrap, ORDERS, config={"min.insync.replicas": "2"},
                     assignment=[[1, 2, 3]], client_config=watched.client_config())
        grant_components(metrics, [topic], watched)
        # the broker applies an ACL from the metadata log a moment after CreateAcls returns
        reader = AdminClient(metrics.client_config(COMPONENT_USERS["job"]))
        wait_for(lambda: topic in reader.list_topics(timeout=10).topics, 30,
                 "the broker applying kh-job's Describe")
        shipper = Shipper(targets(watched), CLUSTER, metrics.bootstrap, topic, None,
                          interval=1.0, client=metrics.client_config(COMPONENT_USERS["shipper"]))
        with shipper:
            yield SimpleNamespace(metrics=metrics, watched=watched, topic=topic, root=root,
                                  secrets=secret_values(metrics.secured, watched.secured))


def job_config(bed: SimpleNamespace, directory: Path, engine: str) -> tuple[Path, dict[str, str]]:
    """A config for `kafka-health run` under `directory` with Spark's UI and event log on,
    and the environment its secrets by variable need."""
    sections = client_sections(bed.metrics, [bed.topic], bed.watched, CLUSTER, directory)
    source = sections["source"]
    source.update(engine=engine, topics=[{"name": bed.topic, "format": "jolokia"}],
                  max_offsets_per_trigger=5000)
    env: dict[str, str] = {}
    if engine == "python":
        source["kafka"]["debug"] = "security"  # librdkafka's login lines, searched too
        poller = sections["metadata"]["clusters"][CLUSTER]
        key_password = Path(poller["secrets"]["ssl.key.password"]["file"]).read_text().strip()
        poller["secrets"]["ssl.key.password"] = {"env": "KH_TEST_POLLER_KEY_PASSWORD"}
        env["KH_TEST_POLLER_KEY_PASSWORD"] = key_password
        sections["metadata"].update(interval_seconds=2, timeout_seconds=1.5)
        # the durability probe and the group poller log in as the poller does (its
        # metadata.clusters settings), with the ACLs docs/security.md lists for them
        sections["probe"] = {"enabled": True, "interval_seconds": 1, "window_seconds": 5,
                             "timeout_seconds": 4, "topic_check_seconds": 5}
        sections["consumer_groups"] = {"enabled": True, "interval_seconds": 2,
                                       "timeout_seconds": 1.5}
    else:
        del sections["metadata"]
        password = bed.metrics.secured.users[COMPONENT_USERS["job"]]
        source["secrets"]["sasl.password"] = {"env": "KH_TEST_JOB_PASSWORD"}
        env["KH_TEST_JOB_PASSWORD"] = password
    config = {
        **sections,
        "spark": {"checkpoint": str(directory / "checkpoint"), "trigger_seconds": 1,
                  "conf": {"spark.ui.enabled": "true", "spark.ui.port": str(free_port()),
                           "spark.port.maxRetries": "0",
                           "spark.eventLog.enabled": "true",
                           "spark.eventLog.dir": (directory / "events").as_uri()}},
        "delta": {"path": str(directory / "delta")},
        "signals": {"window_seconds": 5, "watermark_seconds": 20,
                    "scrape_interval_seconds": 1, "stale_after_intervals": 15},
        "quality": {"max_timestamp_skew_seconds": 86400},
        "exporter": {"port": free_port()},
    }
    (directory / "events").mkdir(parents=True, exist_ok=True)
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, env


def start(path: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "-vv", "--config", str(path)],
        stdout=open(log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
        env={**os.environ, **env}, start_new_session=True)


def get(url: str) -> str:
    return urllib.request.urlopen(url, timeout=60).read().decode()


def metrics_text(config: Path) -> str:
    port = yaml.safe_load(config.read_text())["exporter"]["port"]
    try:
        return get(f"http://127.0.0.1:{port}/metrics")
    except OSError:
        return ""


def spark_pages(config: Path) -> str:
    """What Spark's UI shows over its REST API: every SQL execution with its plans, and the
    environment tab (Spark's settings, the JVM's properties)."""
    port = yaml.safe_load(config.read_text())["spark"]["conf"]["spark.ui.port"]
    api = f"http://127.0.0.1:{port}/api/v1/applications"
    (app,) = json.loads(get(api))
    pages = [get(f"{api}/{app['id']}/sql?details=true&planDescription=true&length=1000"),
             get(f"{api}/{app['id']}/environment")]
    assert "numOutputRows" in pages[0] or "planDescription" in pages[0], pages[0][:500]
    return "\n".join(pages)


def stop(job: subprocess.Popen[bytes], log: Path) -> str:
    job.send_signal(signal.SIGTERM)
    code = exit_code(job, 120, log, "the job stopping")
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    return text


def assert_no_secret(bed: SimpleNamespace, where: dict[str, str]) -> None:
    for place, text in where.items():
        assert text, f"{place} is empty: searching it proves nothing"
        for name, value in bed.secrets.items():
            assert value not in text, f"{name} appears in {place}"


def event_logs(directory: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in (directory / "events").rglob("*")
                     if p.is_file())


def isr(cluster: KafkaCluster, topic: str) -> list[int]:
    live = ",".join(n.bootstrap for n in cluster.nodes if n.running())
    admin = AdminClient({**cluster.client_config(), "bootstrap.servers": live})
    return sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs)


def open_cause(delta: Path) -> list[Any]:
    if count(delta, "incidents") == 0:
        return []
    rows = table(delta, "incidents")
    rows = rows[(rows.kind == "under_min_isr") & (rows.broker == "1")
                & (rows.cluster == CLUSTER)]
    return sorted({str(r.cause) for r in rows.itertuples()})


def test_python_source_and_poller_page_a_fault_with_its_cause_and_no_secret(
        bed: SimpleNamespace, tmp_path: Path) -> None:
    path, env = job_config(bed, tmp_path, "python")
    log = tmp_path / "job.log"
    delta = tmp_path / "delta"
    job = start(path, env, log)
    try:
        wait_for(lambda: job.poll() is None and count(delta, "bronze") > 0
                 and f'kafka_health_metadata_up{{cluster="{CLUSTER}"}} 1.0' in metrics_text(path),
                 150, "bronze rows read as kh-job and the watched cluster polled by certificate")
        wait_for(lambda: job.poll() is None and all(
            f'{name}{{cluster="{CLUSTER}"}} 1.0' in metrics_text(path)
            for name in ("kafka_health_probe_up", "kafka_health_consumer_groups_up"))
            and count(delta, "probe_windows") > 0, 90,
            "the probe's acks=all writes and the groups read by certificate")
        faults.stop_broker(bed.watched, 3, "clean")
        faults.stop_broker(bed.watched, 2, "clean")
        wait_for(lambda: isr(bed.watched, ORDERS) == [1], 60, "leader 1 alone in the ISR")
        cause = f'cause="{CAUSE}"'
        wait_for(lambda: job.poll() is None and any(
            line.startswith("kafka_health_metadata_cause_info") and cause in line
            and 'kind="under_min_isr"' in line and f'cluster="{CLUSTER}"' in line
            for line in metrics_text(path).splitlines()), 90,
            "the under-min-ISR cause on /metrics")
        wait_for(lambda: open_cause(delta) == [CAUSE], 120,
                 "leader 1's under-min-ISR incident with its cause")
        exported = metrics_text(path)
        pages = spark_pages(path)
    finally:
        for broker in (2, 3):
            faults.start_broker(bed.watched, broker)
        logs = stop(job, log)
    assert "SASL" in logs and "SSL" in logs, "librdkafka's security lines (else no search)"
    assert_no_secret(bed, {"the job's log": logs, "/metrics": exported,
                           "Spark's UI": pages, "Spark's event log": event_logs(tmp_path)})


def test_simulate_peek_and_the_spark_engine_log_in(bed: SimpleNamespace, tmp_path: Path
                                                   ) -> None:
    path, env = job_config(bed, tmp_path, "spark")
    # simulate as kh-shipper, its password in a variable
    shipper = bed.metrics.secured.users[COMPONENT_USERS["shipper"]]
    simulate_config = tmp_path / "simulate.yaml"
    source = yaml.safe_load(path.read_text())["source"]
    simulate_config.write_text(yaml.safe_dump({"source": {
        "bootstrap_servers": source["bootstrap_servers"],
        "kafka": {**source["kafka"], "sasl.username": COMPONENT_USERS["shipper"]},
        "secrets": {"sasl.password": {"env": "KH_TEST_SHIPPER_PASSWORD"}}}}))
    simulated = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "simulate", "--config", str(simulate_config),
         "--topic", bed.topic, "--duration", "60", "--cluster", "simulated"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "KH_TEST_SHIPPER_PASSWORD": shipper})
    assert simulated.returncode == 0, simulated.stderr[-2000:]
    # peek as kh-peek, its password in a file
    peek_config = tmp_path / "peek.yaml"
    peek_password = secret_file(tmp_path, "peek.password",
                                bed.metrics.secured.users[COMPONENT_USERS["peek"]])
    peek_config.write_text(yaml.safe_dump({"source": {
        "bootstrap_servers": source["bootstrap_servers"],
        "kafka": {**source["kafka"], "sasl.username": COMPONENT_USERS["peek"]},
        "secrets": {"sasl.password": {"file": str(peek_password)}}}}))
    peeked = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "peek", "--config", str(peek_config),
         "--topic", bed.topic, "-n", "5", "--from-beginning"],
        capture_output=True, text=True, timeout=120)
    assert peeked.returncode == 0, peeked.stderr[-2000:]
    assert "5 record(s) of" in peeked.stdout, peeked.stdout

    # the job on Spark's kafka source as kh-job, its password in a variable
    log = tmp_path / "job.log"
    delta = tmp_path / "delta"
    job = start(path, env, log)
    try:
        wait_for(lambda: job.poll() is None and count(delta, "bronze") > 0
                 and {"simulated", CLUSTER} <= set(table(delta, "bronze")["cluster"]), 300,
                 "what simulate and the shipper wrote, read by Spark's kafka source as kh-job")
        exported = metrics_text(path)
        pages = spark_pages(path)
    finally:
        logs = stop(job, log)
    assert_no_secret(bed, {"the job's log": logs, "/metrics": exported,
                           "Spark's UI": pages, "Spark's event log": event_logs(tmp_path),
                           "simulate's output": simulated.stdout + simulated.stderr,
                           "peek's output": peeked.stdout + peeked.stderr})


def expired_client_certificate(directory: Path, user: str, ca: tuple[Path, Path]
                               ) -> ClientCertificate:
    """A client certificate for `user` from the cluster's own CA that expired yesterday
    (openssl 3.0's x509 cannot date one in the past), its key encrypted as the test
    bed's are."""
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(ca[0].read_bytes())
    ca_key = serialization.load_pem_private_key(ca[1].read_bytes(), password=None)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=10)).not_valid_after(now - timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    password = uuid.uuid4().hex
    paths = ClientCertificate(directory / f"expired-{user}.pem",
                              directory / f"expired-{user}.key",
                              directory / f"expired-{user}.key.password")
    paths.certificate.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode())))
    paths.key_password_file.write_text(password + "\n")
    return paths


CASES = {
    # case: (its error class, what the log line must name)
    "wrong password": (UNAUTHORIZED, "secrets.sasl.password"),
    "untrusted broker certificate": (UNREACHABLE, "kafka.ssl.ca.location"),
    "client certificate from an unknown CA": (UNREACHABLE, "kafka.ssl.certificate.location"),
    "expired client certificate": (UNREACHABLE, "kafka.ssl.certificate.location"),
    "no ACL": (UNAUTHORIZED, "grant"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_login_certificate_or_acl_is_said_with_its_fix_and_exported(
        bed: SimpleNamespace, tmp_path: Path, caplog: pytest.LogCaptureFixture,
        case: str) -> None:
    caplog.set_level(logging.INFO)
    error, named = CASES[case]
    sections = client_sections(bed.metrics, [bed.topic], bed.watched, CLUSTER, tmp_path)
    source = sections["source"]
    poller = {"bootstrap_servers": bed.watched.bootstrap,
              "kafka": {**source["kafka"], "ssl.ca.location": str(bed.watched.secured.ca_file),
                        "sasl.username": COMPONENT_USERS["poller"]},
              "secrets": {"sasl.password": {"file": str(secret_file(
                  tmp_path, "poller.password",
                  bed.watched.secured.users[COMPONENT_USERS["poller"]]))}}}
    wrong = str(secret_file(tmp_path, "wrong.password", uuid.uuid4().hex))
    if case == "wrong password":
        for section in (source, poller):
            section["secrets"]["sasl.password"] = {"file": wrong}
    elif case == "untrusted broker certificate":
        foreign, _ = make_ca(tmp_path / "foreign")
        for section in (source, poller):
            section["kafka"]["ssl.ca.location"] = str(foreign)
    elif case in ("client certificate from an unknown CA", "expired client certificate"):
        # over the mutual-TLS listeners
        foreign = make_ca(tmp_path / "foreign")
        for section, cluster, component in ((source, bed.metrics, "job"),
                                            (poller, bed.watched, "poller")):
            user = COMPONENT_USERS[component]
            cert = (make_client_certificate(tmp_path / "foreign", user, foreign)
                    if case == "client certificate from an unknown CA"
                    else expired_client_certificate(tmp_path / cluster.name, user,
                                                    cluster.secured.ca))
            section.update(bootstrap_servers=cluster.mtls_bootstrap, kafka={
                "security.protocol": "SSL", "ssl.ca.location": str(cluster.secured.ca_file),
                "ssl.certificate.location": str(cert.certificate),
                "ssl.key.location": str(cert.key)},
                secrets={"ssl.key.password": {"file": str(cert.key_password_file)}})
    else:
        for section, cluster in ((source, bed.metrics), (poller, bed.watched)):
            section["kafka"]["sasl.username"] = NOBODY
            section["secrets"]["sasl.password"] = {"file": str(secret_file(
                tmp_path, f"{cluster.name}-nobody.password", cluster.secured.users[NOBODY]))}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "source": {**source, "topics": [{"name": bed.topic, "format": "jolokia"}]},
        "spark": {"checkpoint": str(tmp_path / "checkpoint")},
        "metadata": {"enabled": True, "interval_seconds": 4, "timeout_seconds": 2,
                     "clusters": {CLUSTER: poller}}}))
    config = load_config(path, environ={})

    # the Python source as Spark runs it: its options with the keys lowercased
    options = CaseInsensitiveDict(python_source_options(config, parallelism=1))
    reader = KafkaHealthKafkaSource(options).streamReader(None)
    try:
        if case == "no ACL":  # the query runs, reads nothing, and says why
            assert reader.latestOffset() == {}
            said = [r.getMessage() for r in caplog.records if "nothing to read" in r.getMessage()]
            assert len(said) == 1 and "authorization failed" in said[0].lower() \
                and "To fix: grant" in said[0], said
        else:  # before its first offsets it stops, with the reason
            with pytest.raises(KafkaUnavailableError, match=f"To fix: .*{named}"):
                reader.latestOffset()
    finally:
        reader.stop()

    exporter, probe = Exporter(), LagProbe(config)
    listener = ProgressListener(None, exporter, probe, printer=None)  # type: ignore[arg-type]
    try:
        listener.onQueryStarted(None)
        listener.onQueryIdle(None)
    finally:
        probe.close()
    assert exporter.registry.get_sample_value(PIPELINE_SOURCE_ERROR, {"error": error}) == 1
    probe_lines = [r.getMessage() for r in caplog.records if r.name == "kafka_health.lag"]
    assert any(named in line for line in probe_lines), probe_lines

    settings = config.metadata.clusters[CLUSTER].client_config(f"metadata.clusters.{CLUSTER}")
    result = MetadataPoller(CLUSTER, settings, PollerSettings(4, 2)).poll_once()
    assert (result.health.up, result.health.error) == (False, error), result.health
    failed = [r.getMessage() for r in caplog.records if "poll failed" in r.getMessage()]
    assert len(failed) == 1 and (named in failed[0] or "grant" in failed[0]), failed
    for name, value in bed.secrets.items():
        assert value not in caplog.text, f"{name} logged"
