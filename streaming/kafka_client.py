"""Kafka client settings, built in one place for every client of the project.

The metrics source (both engines), the metadata poller, the lag probe, `peek`, `simulate`
and the test bed's shipper all take their settings from here: the bootstrap servers, the
plain settings of a config section (`kafka`), and its secrets (`secrets`, each a
`{file: PATH}` or `{env: NAME}` reference) read at the last moment, where the client is made.
The command line's `--command-config` adds a Kafka client properties file on top
(`read_properties`, `with_properties`), as Kafka's own tools take one.

The Python data source receives the references, never the values: Spark hands a data
source its options as strings that show in its plan, UI and event log, so the secrets go
as one JSON option of file paths and variable names (`SECRETS_OPTION`) that each read task
resolves itself. Spark also lowercases a Python data source's option keys
(`pyspark.sql.datasource.CaseInsensitiveDict`), which is why the secrets' names travel in a
value, not in keys, and why every option is looked up here in any case.

Spark's own kafka source (engine "spark") runs the Java client, which takes the values
themselves; `java_options` turns librdkafka's login settings into the Java client's
(`sasl.jaas.config`, a PEM trust store) so one config serves both engines. Spark masks
an option in its UI and logs when its key or value matches `spark.redaction.regex`, as a
JAAS line with its `password=` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import javaproperties

from streaming.config import ConfigError, SecretRef

# The Python source's option naming each secret's reference: {"sasl.password": {"env": "X"}}.
SECRETS_OPTION = "kafkaSecretRefs"
# librdkafka's SASL mechanisms -> the Java client's login module for a user and password.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka's client certificate files, which the Java client has no setting for: its PEM
# key store takes the key and chain as values (ssl.keystore.key, .certificate.chain).
NO_JAVA_FILE = ("ssl.certificate.location", "ssl.key.location")


def client_settings(bootstrap_servers: str, kafka: Mapping[str, Any],
                    secrets: Mapping[str, SecretRef], path: str) -> dict[str, str]:
    """librdkafka settings: the bootstrap servers, the plain settings, then the secrets
    read now (a key under both `kafka` and `secrets` takes the secret); `path` is the
    section's dotted key, which names a secret that cannot be read. Never log the result."""
    conf = {"bootstrap.servers": bootstrap_servers, **{k: str(v) for k, v in kafka.items()}}
    for key, ref in secrets.items():
        conf[key] = ref.read(f"{path}.secrets.{key}")
    return conf


def secret_references(secrets: Mapping[str, SecretRef]) -> str:
    """The `SECRETS_OPTION` value: where each secret lives, as JSON (no value in it)."""
    return json.dumps({key: {"file": ref.file} if ref.file else {"env": ref.env}
                       for key, ref in secrets.items()}, sort_keys=True)


def _option(options: Mapping[str, str], name: str) -> str | None:
    """An option by its name in any case (a CaseInsensitiveDict, or a plain dict as given)."""
    wanted = name.lower()
    return next((value for key, value in options.items() if key.lower() == wanted), None)


def source_client_settings(options: Mapping[str, str]) -> dict[str, str]:
    """The Python source's client settings from its options: `kafka.*` options pass
    through (librdkafka's names are lowercase, so Spark's lowercasing loses nothing), and
    the secrets named in `SECRETS_OPTION` are read here, on the driver or in a read task."""
    kafka = {key[len("kafka."):].lower(): value for key, value in options.items()
             if key.lower().startswith("kafka.")}
    bootstrap = kafka.pop("bootstrap.servers", None)
    if not bootstrap:
        raise ValueError("kafka_health_kafka source: option kafka.bootstrap.servers is required")
    refs = json.loads(_option(options, SECRETS_OPTION) or "{}")
    secrets = {key: SecretRef(**ref) for key, ref in refs.items()}
    return client_settings(bootstrap, kafka, secrets, "source")


# Every consumer the project makes, by what it is for: its group and the settings its job
# fixes. None joins its group or commits offsets (they are assigned partitions or only ask
# for metadata), but librdkafka looks up the group's coordinator, so a broker with ACLs
# wants Describe on the group (docs/security.md names them).
CONSUMERS: dict[str, dict[str, Any]] = {
    # the Python source's read tasks: assigned offsets; a start that is gone reads from the
    # log start, which the task then reports as data loss
    "reader": {"group.id": "kafka-health-reader", "enable.auto.commit": False,
               "enable.partition.eof": False, "auto.offset.reset": "earliest"},
    # the Python source's offsets and topic listings, on the driver
    "metadata": {"group.id": "kafka-health-metadata", "enable.auto.commit": False},
    # the job's source-lag probe
    "lag": {"group.id": "kafka-health-lag", "enable.auto.commit": False},
    # the durability probe's read-back: assigned partitions from its own start offsets;
    # from the log start when a position is gone (a log truncated by an unclean election:
    # re-read records keep their offsets and are not counted twice)
    "probe": {"group.id": "kafka-health-probe", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
              "enable.partition.eof": False},
    # `kafka-health peek`
    "peek": {"group.id": "kafka-health-peek", "enable.auto.commit": False,
             "enable.partition.eof": False},
    # `check-config`'s look at the settings: made and closed, never connected
    "check-config": {"group.id": "kafka-health-check-config"},
}


def consumer_config(purpose: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A consumer's librdkafka configuration for `purpose` (a CONSUMERS key): `settings`
    (the client settings, callbacks, tuning) with the purpose's own settings on top. Never
    log the result."""
    return {**settings, **CONSUMERS[purpose]}


def _jaas_quoted(value: str) -> str:
    """A JAAS option value in double quotes (Kafka's parser takes backslash escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_options(bootstrap_servers: str, kafka: Mapping[str, Any],
                 secrets: Mapping[str, SecretRef], path: str) -> dict[str, str]:
    """Spark's kafka source's `kafka.*` options, secrets read: the Java client's names pass
    through; librdkafka's `sasl.username`/`sasl.password` become a `sasl.jaas.config` of the
    mechanism's login module, and `ssl.ca.location` a PEM trust store. A client
    certificate for the Java client is given with its own names (`ssl.keystore.*`)."""
    conf = client_settings(bootstrap_servers, kafka, secrets, path)
    untranslated = [key for key in NO_JAVA_FILE if key in conf]
    if untranslated:
        raise ConfigError(
            f"{path}.kafka: {', '.join(untranslated)} are librdkafka's names, which Spark's "
            "kafka source (engine 'spark', the Java client) does not read; give the client "
            "certificate as ssl.keystore.type (PKCS12 or PEM), ssl.keystore.location and "
            f"{path}.secrets.ssl.keystore.password")
    username = conf.pop("sasl.username", None)
    password = conf.pop("sasl.password", None)
    if username is not None and "sasl.jaas.config" not in conf:
        mechanism = conf.get("sasl.mechanism", "PLAIN").upper()
        if mechanism not in LOGIN_MODULES:
            raise ConfigError(f"{path}.kafka.sasl.mechanism: {mechanism} takes no user name "
                              "and password in the Java client; give sasl.jaas.config under "
                              f"{path}.secrets instead")
        if password is None:
            raise ConfigError(f"{path}.secrets.sasl.password: {path}.kafka.sasl.username "
                              "is set but no password")
        conf["sasl.jaas.config"] = (
            f"{LOGIN_MODULES[mechanism]} required username={_jaas_quoted(username)} "
            f"password={_jaas_quoted(password)};")
    ca = conf.pop("ssl.ca.location", None)
    if ca is not None and "ssl.truststore.location" not in conf:
        conf.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": ca})
    return {f"kafka.{key}": value for key, value in conf.items()}


# A JAAS option: name="value" with backslash escapes (as _jaas_quoted writes it).
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
# The Java client's trust store settings: librdkafka takes the CA as a PEM file instead.
_JAVA_TRUST_STORE = "ssl.truststore."


def read_properties(path: str | Path) -> dict[str, str]:
    """A Kafka client properties file (`--command-config`, as kafka-topics.sh and kcat -F
    take): Java properties syntax, comments, continued lines and escapes included."""
    with open(path, encoding="utf-8") as text:
        return javaproperties.load(text)


def with_properties(conf: Mapping[str, str], properties: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings `conf` with a properties file's settings on top. A Java
    client's file works as it is where it can: its `sasl.jaas.config` of a user and password
    becomes librdkafka's sasl.username and sasl.password; a Java trust store, which
    librdkafka cannot read, is a ConfigError naming librdkafka's setting. Never log the
    result."""
    merged = {**conf, **properties}
    jaas = merged.pop("sasl.jaas.config", None)
    if jaas is not None:
        options = {name: re.sub(r"\\(.)", r"\1", value)
                   for name, value in _JAAS_OPTION.findall(jaas)}
        if "username" not in options or "password" not in options:
            raise ConfigError("--command-config: sasl.jaas.config holds no username and "
                              "password; give sasl.username and sasl.password instead")
        merged["sasl.username"] = options["username"]
        merged["sasl.password"] = options["password"]
    stores = sorted(key for key in properties if key.startswith(_JAVA_TRUST_STORE))
    if stores:
        raise ConfigError(f"--command-config: {', '.join(stores)} set the Java client's trust "
                          "store, which librdkafka cannot read; give the CA as a PEM file in "
                          "ssl.ca.location")
    return merged


# What each client's principal needs, for the advice on an ACL refusal (docs/security.md).
SOURCE_NEEDS = "Read and Describe on the metrics topics (source.topics)"
POLLER_NEEDS = "Describe on the cluster, and Describe and DescribeConfigs on every topic"
_LOGIN_REFUSED = ("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED", "ILLEGAL_SASL_STATE",
                  "UNSUPPORTED_SASL_MECHANISM")
_ACL_REFUSED = ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
                "GROUP_AUTHORIZATION_FAILED")


def security_advice(name: str, text: str, path: str, needs: str) -> str | None:
    """What to fix when a Kafka client's error `name` (a KafkaError's name, `text` its
    message) is a refused login, a failed TLS handshake or an ACL refusal, naming the
    settings under `path` (the config section); None for any other error. `needs` says
    what the section's principal must be granted."""
    lowered = text.lower()
    if name in _LOGIN_REFUSED:
        return (f"the broker refused the login: check {path}.kafka.sasl.username and "
                f"sasl.mechanism, and the password {path}.secrets.sasl.password names (the "
                "user needs a credential of that mechanism on the cluster)")
    if "alert" in lowered and ("certificate" in lowered or "unknown ca" in lowered):
        # the broker's TLS alert: it checked this client's certificate and refused it
        return (f"the broker refused this client's certificate "
                f"({path}.kafka.ssl.certificate.location): it must be signed by a CA the "
                "broker's listener trusts and be valid now (not expired)")
    if name == "_SSL" or "ssl handshake" in lowered:
        if "expired" in lowered:
            return (f"a certificate has expired: renew the client's "
                    f"({path}.kafka.ssl.certificate.location) or ask for the broker's")
        if "verify failed" in lowered or "could not be verified" in lowered:
            return (f"the broker's certificate is not trusted: {path}.kafka.ssl.ca.location "
                    "must hold the CA that signed it, and the certificate must be valid "
                    "now and name the host in bootstrap_servers")
        return (f"the TLS handshake failed: the broker may refuse this client's certificate "
                f"({path}.kafka.ssl.certificate.location: signed by a CA its listener "
                f"trusts, not expired), or the port is no TLS listener ({path}."
                f"bootstrap_servers, {path}.kafka.security.protocol)")
    if name in _ACL_REFUSED:
        return f"an ACL refuses it: grant the principal {needs} (docs/security.md)"
    return None
