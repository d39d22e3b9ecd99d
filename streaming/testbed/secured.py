"""A secured test bed: SCRAM-SHA-512 over TLS, a mutual-TLS listener, ACLs on.

`SecuredKafka` secures a `KafkaCluster` (streaming.testbed.kafka) the way a production
cluster commonly is:

- SASL_SSL listener (the bootstrap port): SCRAM-SHA-512 logins, the users' credentials
  written into the metadata log when the storage is formatted (`--add-scram`);
- MTLS listener (SSL, `ssl.client.auth=required`): the client certificate's CN is the
  principal (`ssl.principal.mapping.rules`), so `CN=kh-poller` is `User:kh-poller`, the same
  principal, with the same ACLs, as the SCRAM user of that name;
- the controller listener and the inter-broker traffic over mutual TLS too, the nodes
  authenticating as `User:broker` with their own certificate: KRaft does not take SCRAM on
  the controller listener, and with an authorizer a broker's registration needs
  ClusterAction, which an anonymous connection would not have;
- KRaft's StandardAuthorizer with `allow.everyone.if.no.acl.found=false`: a user may do
  only what an ACL grants (`grant`, and `COMPONENT_ACLS` per component).

The certificates are made here with `openssl`: a CA, the nodes' certificate (SAN IP
127.0.0.1 and DNS localhost, in a PKCS12 key store), and per mTLS user a certificate with
an encrypted PEM key. Everything lives under the cluster's folder; the passwords are
written to its server.properties and key files, nowhere else. TEST BED ONLY.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRAM = "SCRAM-SHA-512"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
BROKER_PRINCIPAL = "broker"
SUPER_USER = "admin"
# Listener names: the SASL_SSL one is the bootstrap port (KafkaNode.port).
SASL_LISTENER, MTLS_LISTENER, CONTROLLER = "SASL_SSL", "MTLS", "CONTROLLER"
CERT_DAYS = 2


class CertificateError(RuntimeError):
    """openssl refused to make a certificate; the message carries what it said."""


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=60)
    if result.returncode != 0:
        raise CertificateError(f"openssl {args[0]} failed: {result.stderr[-800:]}")


@dataclass(frozen=True)
class ClientCertificate:
    """A client's PEM files for mutual TLS, its key encrypted with `key_password_file`'s
    content (librdkafka's ssl.certificate.location, ssl.key.location, ssl.key.password)."""

    certificate: Path
    key: Path
    key_password_file: Path


def make_ca(directory: Path, name: str = "ca") -> tuple[Path, Path]:
    """A self-signed CA: (its certificate, its key), PEM."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key.name,
             "-out", cert.name, "-days", str(CERT_DAYS), "-subj", f"/CN=kafka-health {name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    return cert, key


def _signed(directory: Path, name: str, subject: str, ca: tuple[Path, Path],
            extensions: str) -> tuple[Path, Path]:
    """A key and a certificate for `subject` signed by `ca`: (certificate, key), PEM."""
    key, csr, cert = (directory / f"{name}.key", directory / f"{name}.csr",
                      directory / f"{name}.pem")
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key.name, "-out", csr.name,
             "-subj", subject, cwd=directory)
    _openssl("x509", "-req", "-in", csr.name, "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-out", cert.name, "-days", str(CERT_DAYS),
             "-extfile", ext.name, cwd=directory)
    return cert, key


def make_client_certificate(directory: Path, user: str, ca: tuple[Path, Path]
                            ) -> ClientCertificate:
    """A client certificate with CN `user`, signed by `ca`, its key encrypted (PKCS#8)."""
    cert, plain_key = _signed(directory, f"client-{user}", f"/CN={user}", ca,
                              "extendedKeyUsage=clientAuth\n")
    password = directory / f"client-{user}.key.password"
    password.write_text(secrets.token_urlsafe(18) + "\n")
    password.chmod(0o600)
    key = directory / f"client-{user}.encrypted.key"
    _openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", plain_key.name, "-out", key.name,
             "-passout", f"file:{password.name}", cwd=directory)
    plain_key.unlink()
    return ClientCertificate(cert, key, password)


@dataclass
class SecuredKafka:
    """SCRAM-SHA-512 over SASL_SSL plus a mutual-TLS listener on every node of a cluster.

    `users`: SCRAM user -> password (the super user `admin` is added with a random one if
    missing); `mtls_users`: the users that also get a client certificate. `prepare(folder)`
    makes the certificates (KafkaCluster.start calls it)."""

    users: dict[str, str] = field(default_factory=dict, repr=False)
    mtls_users: tuple[str, ...] = ()
    directory: Path | None = None
    ca: tuple[Path, Path] | None = None
    keystore: Path | None = None
    client_certs: dict[str, ClientCertificate] = field(default_factory=dict)
    store_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)

    def __post_init__(self) -> None:
        self.users.setdefault(SUPER_USER, secrets.token_urlsafe(18))

    @property
    def ca_file(self) -> Path:
        assert self.ca is not None, "prepare() makes the CA"
        return self.ca[0]

    def prepare(self, directory: Path) -> None:
        """Make the CA, the nodes' key store and the mTLS users' certificates once."""
        if self.ca is not None:
            return
        tls = directory / "tls"
        tls.mkdir(parents=True, exist_ok=True)
        self.directory = tls
        self.ca = make_ca(tls)
        cert, key = _signed(tls, "node", f"/CN={BROKER_PRINCIPAL}", self.ca,
                            "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                            "extendedKeyUsage=serverAuth,clientAuth\n")
        self.keystore = tls / "node.p12"
        _openssl("pkcs12", "-export", "-in", cert.name, "-inkey", key.name, "-certfile",
                 self.ca[0].name, "-name", "node", "-out", self.keystore.name,
                 "-passout", f"pass:{self.store_password}", cwd=tls)
        for user in self.mtls_users:
            self.client_certs[user] = make_client_certificate(tls, user, self.ca)

    def node_properties(self, port: int, mtls_port: int, controller_port: int,
                        controller: bool) -> dict[str, str]:
        """A node's listeners and security settings for server.properties."""
        assert self.keystore is not None and self.ca is not None, "prepare() first"
        listeners = [f"{SASL_LISTENER}://127.0.0.1:{port}",
                     f"{MTLS_LISTENER}://127.0.0.1:{mtls_port}"]
        advertised = ",".join(listeners)
        if controller:
            listeners.append(f"{CONTROLLER}://127.0.0.1:{controller_port}")
        return {
            "listeners": ",".join(listeners),
            "advertised.listeners": advertised,
            "listener.security.protocol.map":
                f"{SASL_LISTENER}:SASL_SSL,{MTLS_LISTENER}:SSL,{CONTROLLER}:SSL",
            "inter.broker.listener.name": MTLS_LISTENER,
            "controller.listener.names": CONTROLLER,
            "sasl.enabled.mechanisms": SCRAM,
            f"listener.name.{SASL_LISTENER.lower()}.{SCRAM.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.store_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca[0]),
            f"listener.name.{MTLS_LISTENER.lower()}.ssl.client.auth": "required",
            f"listener.name.{CONTROLLER.lower()}.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            "authorizer.class.name": AUTHORIZER,
            "super.users": f"User:{SUPER_USER};User:{BROKER_PRINCIPAL}",
            "allow.everyone.if.no.acl.found": "false",
        }

    def format_arguments(self) -> list[str]:
        """kafka-storage format's arguments that write the SCRAM users into the metadata
        log's bootstrap records."""
        return [arg for user, password in self.users.items()
                for arg in ("--add-scram", f"{SCRAM}=[name={user},password={password}]")]

    def client_settings(self, user: str | None = None) -> dict[str, str]:
        """librdkafka settings that log in with SCRAM as `user` (the super user by default)
        over the SASL_SSL listener."""
        user = user or SUPER_USER
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM,
                "sasl.username": user, "sasl.password": self.users[user],
                "ssl.ca.location": str(self.ca_file)}

    def mtls_settings(self, user: str) -> dict[str, str]:
        """librdkafka settings of `user`'s certificate over the MTLS listener (the key's
        password read from its file)."""
        cert = self.client_certs[user]
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_file),
                "ssl.certificate.location": str(cert.certificate),
                "ssl.key.location": str(cert.key),
                "ssl.key.password": cert.key_password_file.read_text().strip()}


# What each component may do, and nothing more: (resource type, name, pattern type,
# operation). `{topics}` stands for each metrics topic. The names are confluent_kafka's
# ResourceType / ResourcePatternType / AclOperation members.
COMPONENT_ACLS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    # the job's source: reads the metrics topics by assignment (no group membership, no
    # commits), asks their offsets and topic ids. librdkafka still looks up the
    # coordinator of the consumer's group.id (kafka-health-reader, -metadata, -peek), which
    # needs Describe on the group; without it the broker logs a denial on every read.
    "job": (("TOPIC", "{topics}", "LITERAL", "READ"), ("TOPIC", "{topics}", "LITERAL", "DESCRIBE"),
            ("GROUP", "kafka-health-", "PREFIXED", "DESCRIBE")),
    # the metadata poller: Metadata, DescribeCluster, DescribeConfigs on the watched cluster
    # (confluent_kafka names Kafka's Cluster resource BROKER; its one name is kafka-cluster)
    "poller": (("BROKER", "kafka-cluster", "LITERAL", "DESCRIBE"),
               ("TOPIC", "*", "LITERAL", "DESCRIBE"),
               ("TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS")),
    # the shipper and `simulate`: produce to the metrics topics
    "shipper": (("TOPIC", "{topics}", "LITERAL", "WRITE"),
                ("TOPIC", "{topics}", "LITERAL", "DESCRIBE")),
    # the durability probe: its topic created, extended, written and read back; preferred
    # leaders elected (Alter on the cluster); the reader's group.id coordinator looked up
    "probe": (("TOPIC", "kafka-health-probe", "LITERAL", "CREATE"),
              ("TOPIC", "kafka-health-probe", "LITERAL", "DESCRIBE"),
              ("TOPIC", "kafka-health-probe", "LITERAL", "ALTER"),
              ("TOPIC", "kafka-health-probe", "LITERAL", "WRITE"),
              ("TOPIC", "kafka-health-probe", "LITERAL", "READ"),
              ("BROKER", "kafka-cluster", "LITERAL", "ALTER"),
              ("GROUP", "kafka-health-", "PREFIXED", "DESCRIBE")),
    # the consumer-group poller: every group, its topics' offsets and cleanup.policy
    "groups": (("GROUP", "*", "LITERAL", "DESCRIBE"),
               ("TOPIC", "*", "LITERAL", "DESCRIBE"),
               ("TOPIC", "*", "LITERAL", "DESCRIBE_CONFIGS")),
    # `peek`: reads a sample by assignment
    "peek": (("TOPIC", "{topics}", "LITERAL", "READ"), ("TOPIC", "{topics}", "LITERAL", "DESCRIBE"),
             ("GROUP", "kafka-health-", "PREFIXED", "DESCRIBE")),
}


def component_bindings(component: str, user: str, topics: Iterable[str]) -> list[Any]:
    """The AclBindings that give `user` what `component` needs (COMPONENT_ACLS)."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    out = []
    for kind, name, pattern, operation in COMPONENT_ACLS[component]:
        for resource in (topics if name == "{topics}" else [name]):
            out.append(AclBinding(ResourceType[kind], resource, ResourcePatternType[pattern],
                                  f"User:{user}", "*", AclOperation[operation],
                                  AclPermissionType.ALLOW))
    return out


def grant(admin_settings: Mapping[str, str], bindings: list[Any], timeout: float = 30.0) -> None:
    """Create the ACLs as the super user (kafka-acls --add does the same CreateAcls)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(dict(admin_settings))
    for future in admin.create_acls(bindings, request_timeout=timeout).values():
        future.result(timeout=timeout + 5)


def revoke(admin_settings: Mapping[str, str], bindings: list[Any], timeout: float = 30.0) -> None:
    """Delete exactly these ACLs (their filters match themselves)."""
    from confluent_kafka.admin import AclBindingFilter, AdminClient

    admin = AdminClient(dict(admin_settings))
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host,
                                b.operation, b.permission_type) for b in bindings]
    for future in admin.delete_acls(filters, request_timeout=timeout).values():
        future.result(timeout=timeout + 5)


# The principal each component runs as on the secured test bed.
COMPONENT_USERS = {"job": "kh-job", "poller": "kh-poller", "shipper": "kh-shipper",
                   "peek": "kh-peek"}


def metrics_security() -> SecuredKafka:
    """The metrics cluster's users: the job, the shipper and peek by SCRAM, the job also by
    certificate."""
    return SecuredKafka(users={COMPONENT_USERS[c]: secrets.token_urlsafe(18)
                               for c in ("job", "shipper", "peek")},
                        mtls_users=(COMPONENT_USERS["job"],))


def watched_security() -> SecuredKafka:
    """The watched cluster's user: the metadata poller, by SCRAM and by certificate."""
    return SecuredKafka(users={COMPONENT_USERS["poller"]: secrets.token_urlsafe(18)},
                        mtls_users=(COMPONENT_USERS["poller"],))


def grant_components(metrics: Any, topics: Iterable[str], watched: Any | None = None) -> None:
    """Each component's ACLs (COMPONENT_ACLS) for its user on a started secured bed."""
    topics = list(topics)
    grant(metrics.client_config(), [
        binding for component in ("job", "shipper", "peek")
        for binding in component_bindings(component, COMPONENT_USERS[component], topics)])
    if watched is not None:  # the probe and the group poller log in as the poller does
        bindings = [binding for component in ("poller", "probe", "groups")
                    for binding in component_bindings(component, COMPONENT_USERS["poller"], ())]
        # an ACL two components share is granted once (Kafka refuses duplicates in a call)
        grant(watched.client_config(), list({
            (b.restype, b.name, b.resource_pattern_type, b.operation): b
            for b in bindings}.values()))


def secret_file(directory: Path, name: str, value: str) -> Path:
    """`value` in a file only its owner reads, for a `{file: PATH}` secret reference."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return path


def client_sections(metrics: Any, topics: list[str], watched: Any | None, cluster: str,
                    directory: Path) -> dict[str, Any]:
    """The job's config sections for a secured bed, secrets as files under `directory`:
    the source logs in by SCRAM, the poller by its certificate."""
    sec: SecuredKafka = metrics.secured
    job = COMPONENT_USERS["job"]
    config: dict[str, Any] = {"source": {
        "bootstrap_servers": metrics.bootstrap,
        "topics": [{"name": topic} for topic in topics],
        "kafka": {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM,
                  "sasl.username": job, "ssl.ca.location": str(sec.ca_file)},
        "secrets": {"sasl.password": {"file": str(secret_file(
            directory, f"{job}.password", sec.users[job]))}},
    }}
    if watched is not None:
        poller = COMPONENT_USERS["poller"]
        cert = watched.secured.client_certs[poller]
        config["metadata"] = {"enabled": True, "clusters": {cluster: {
            "bootstrap_servers": watched.mtls_bootstrap,
            "kafka": {"security.protocol": "SSL", "ssl.ca.location": str(watched.secured.ca_file),
                      "ssl.certificate.location": str(cert.certificate),
                      "ssl.key.location": str(cert.key)},
            "secrets": {"ssl.key.password": {"file": str(cert.key_password_file)}},
        }}}
    return config
