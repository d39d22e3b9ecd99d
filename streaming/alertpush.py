"""Direct push of incidents to Alertmanager, for the events where seconds matter.

The normal paging path is exporter -> Prometheus scrape -> rule evaluation -> Alertmanager
-> PagerDuty, which adds a scrape interval plus an evaluation interval (plus any `for`) to
the pipeline's own latency. For data loss (unclean leader election) the job can skip that
and POST the incident straight to Alertmanager's `/api/v2/alerts` from the micro-batch
that computed it.

One fault must still make ONE PagerDuty incident. Alertmanager groups by
(alertname, cluster) (alerts/alertmanager.yml `group_by`) and the PagerDuty `dedup_key`
is a hash of the group, so a pushed alert carries exactly the alertname, severity and
category of the Prometheus rule for the same kind (alerts/kafka-health.rules.yml): it is
routed to the same receiver and lands in the same group as the rule's alert. The
`source="kafka-health-push"` label keeps the two apart in the Alertmanager UI.

Open incidents are re-sent on every batch with `endsAt` a few minutes ahead, so they
stay firing while the job runs and expire on their own if it stops; a resolved incident
is sent with `endsAt = resolved_at` (an explicit resolve). Nothing here raises into the
job: a failed POST is logged (rate-limited) and counted in `STATS`, and after a failure
the push to THAT Alertmanager pauses for a few seconds so an unreachable one cannot slow
every batch by the full timeout. Every alert goes to every configured member, in parallel,
and each member backs off on its own: a dead member of an HA cluster never delays or drops
the alerts for a healthy one. The next successful push re-sends every open incident, so a
pause delays a page but never loses it.

Basic auth, a bearer token and a CA file are supported; passwords and tokens come from
`{file: PATH}` / `{env: NAME}` references and URLs are logged only through
streaming.redact (no user info).
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.config import AlertPushConfig
from streaming.redact import redact_text, redact_url

LOG = logging.getLogger("kafka_health.alertpush")
SOURCE = "kafka-health-push"
# An open incident stays firing in Alertmanager this long after the last push.
OPEN_HOLD = timedelta(minutes=5)
# After a failed POST to a member, skip that member for this long (the job keeps running at
# full speed, the other members are pushed as usual).
BACKOFF_SECONDS = 5.0
# Resolved incidents older than this are not re-sent (Alertmanager already has them).
RESOLVED_RESEND = timedelta(minutes=15)
RUNBOOKS = "https://github.com/kafka-health/kafka-health/blob/main/alerts/runbooks"
CLUSTER_WIDE = "*"


@dataclass(frozen=True)
class AlertSpec:
    """What the Prometheus rule for one incident kind says (kept equal by a unit test)."""

    alertname: str
    category: str
    summary: str
    description: str

    @property
    def runbook_url(self) -> str:
        return f"{RUNBOOKS}/{self.alertname}.md"


# Incident kind -> the critical rule for it. Text mirrors the rule's annotations with
# {cluster}/{broker}/{value} in place of {{ $labels.cluster }}/{{ $labels.broker }}/{{ $value }}.
SPECS: dict[str, AlertSpec] = {
    "unclean_election": AlertSpec(
        "KafkaUncleanLeaderElection", "data_loss",
        "Unclean leader election (data loss) in Kafka cluster {cluster}, reported by broker {broker}",
        "Broker {broker} of cluster {cluster} reported {value} unclean leader election(s) in the "
        "last 5 minutes. An out-of-sync replica became leader, so every record past its log end "
        "was discarded: acknowledged writes are permanently lost. Find the affected partitions "
        "and the producers that wrote to them during the incident.",
    ),
    "under_min_isr": AlertSpec(
        "KafkaUnderMinIsrPartitions", "cluster_fault",
        "Partitions under min.insync.replicas on broker {broker} of Kafka cluster {cluster}",
        "Broker {broker} of cluster {cluster} leads {value} partition(s) whose ISR is smaller "
        "than the effective min.insync.replicas. Producers using acks=all get "
        "NOT_ENOUGH_REPLICAS for them and consumers see nothing new (high watermark frozen) "
        "until the ISR heals.",
    ),
    "offline_partitions": AlertSpec(
        "KafkaOfflinePartitions", "cluster_fault",
        "Offline partitions (no leader) in Kafka cluster {cluster}",
        "The active controller of cluster {cluster} reports {value} offline partition(s): no "
        "replica of the ISR is available to lead them, so they are unreadable and unwritable. "
        "Do not enable unclean leader election to bring them back unless the topic owners "
        "accept losing data.",
    ),
    "controller": AlertSpec(
        "KafkaActiveControllerCountAbnormal", "cluster_fault",
        "Kafka cluster {cluster} has {value} active controllers (expected exactly 1)",
        "The reporting brokers/controllers of cluster {cluster} sum to {value} active "
        "controllers for more than 2 minutes. With 0, no leader elections or ISR changes can "
        "happen; with more than 1, controllers disagree about who leads the metadata quorum.",
    ),
}


@dataclass
class PushStats:
    """Counters for the job (and tests): pushes attempted, alerts sent, failures, skips."""

    pushes: int = 0
    alerts_sent: int = 0
    failures: int = 0
    skipped: int = 0
    last_error: str | None = None
    last_failure_at: float = 0.0
    last_logged_at: float = 0.0


STATS = PushStats()
_LOCK = threading.Lock()
_WARNED_KINDS: set[str] = set()
_CAPPED_LOGGED_AT = [0.0]  # monotonic time the per-push cap was last warned about


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _value(number: Any) -> str:
    if number is None:
        return "?"
    number = float(number)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def build_alerts(config: AlertPushConfig, incidents: list[dict[str, Any]],
                 now: datetime | None = None) -> list[dict[str, Any]]:
    """The Alertmanager v2 alert objects for the incidents whose kind is pushed."""
    now = now or datetime.now(UTC)
    alerts = []
    for incident in incidents:
        kind = incident.get("kind")
        if kind not in config.kinds:
            continue
        spec = SPECS.get(kind)
        if spec is None:
            if kind not in _WARNED_KINDS:
                _WARNED_KINDS.add(kind)
                LOG.warning("alert_push.kinds: %r has no paging rule; it is not pushed "
                            "(pushable: %s)", kind, ", ".join(SPECS))
            continue
        cluster, broker = str(incident["cluster"]), str(incident.get("broker") or CLUSTER_WIDE)
        labels = {"alertname": spec.alertname, "severity": "critical", "team": "kafka",
                  "category": spec.category, "cluster": cluster, "source": SOURCE}
        if broker != CLUSTER_WIDE:  # cluster-wide rules carry no broker label either
            labels["broker"] = broker
        fields = {"cluster": cluster, "broker": broker, "value": _value(incident.get("peak_value"))}
        started = _utc(incident["started_at"])
        resolved = incident.get("resolved_at")
        if resolved is not None:
            ends = _utc(resolved)
            if now - ends > RESOLVED_RESEND:
                continue
        else:
            ends = now + OPEN_HOLD
        alerts.append({
            "labels": labels,
            "annotations": {
                "summary": spec.summary.format(**fields),
                "description": spec.description.format(**fields),
                "runbook_url": spec.runbook_url,
                "incident_id": str(incident.get("incident_id") or ""),
            },
            "startsAt": _rfc3339(started),
            "endsAt": _rfc3339(max(ends, started)),
        })
    return alerts


def opened_in_signals(rows: list[dict[str, Any]], fresh_seconds: float,
                      now: datetime | None = None) -> list[dict[str, Any]]:
    """Open incidents read straight off a batch's broker_signals rows, for an early push.

    The incidents step (a recomputation over the horizon) comes seconds later in the same
    batch and pushes the same alert (same labels, so Alertmanager keeps one) with its id
    and, later, its resolution. Pushing here saves those seconds on the data-loss page.
    Only each broker's newest window in the batch, and only if it ended within
    `fresh_seconds`, is pushed: a late sample that recomputes an old window must not
    re-open an incident that has already been resolved. Windows rank as the exporter ranks
    them (`window_rank`): a window ahead of the wall clock ties with the current one, and
    each of the tied windows is read, so a future-dated sample cannot hide a real fault.
    """
    from streaming.exporter import window_rank
    from streaming.signals.incidents import POSITIVE_BROKER_CONDITIONS

    now = now or datetime.now(UTC)
    newest: dict[tuple[str, str], tuple[datetime, list[dict[str, Any]]]] = {}
    for row in rows:
        key, rank = (row["cluster"], row["broker"]), window_rank(row, now)
        if key not in newest or rank > newest[key][0]:
            newest[key] = (rank, [row])
        elif rank == newest[key][0]:
            newest[key][1].append(row)
    opened = []
    for row in (r for _, tied in newest.values() for r in tied):
        if now - _utc(row["window_end"]) > timedelta(seconds=fresh_seconds):
            continue
        for kind, column in POSITIVE_BROKER_CONDITIONS.items():
            if (row.get(column) or 0) > 0:
                opened.append({"kind": kind, "cluster": row["cluster"], "broker": row["broker"],
                               "started_at": row["window_start"], "resolved_at": None,
                               "peak_value": row[column], "incident_id": None})
    return opened


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _auth_header(config: AlertPushConfig) -> str | None:
    """The Authorization header the config asks for; secrets are read on every push so a
    rotated file takes effect without a restart."""
    if config.bearer_token is not None:
        return "Bearer " + config.bearer_token.read("alert_push.bearer_token")
    if config.username:
        password = config.password.read("alert_push.password") if config.password else ""
        return _basic(config.username, password)
    return None


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """`http://user:pass@host` as the URL without user info (urllib cannot send it) and the
    basic auth header it stands for."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return clean, _basic(urllib.parse.unquote(user), urllib.parse.unquote(password))


@dataclass(frozen=True)
class _Request:
    """What every member gets in one push: the body, the auth header, TLS and the timeout."""

    body: bytes
    count: int
    authorization: str | None
    context: ssl.SSLContext | None
    timeout: float


def _post(url: str, request: _Request) -> None:
    clean, from_url = _split_userinfo(url)
    headers = {"Content-Type": "application/json"}
    authorization = request.authorization or from_url
    if authorization:
        headers["Authorization"] = authorization
    http = urllib.request.Request(clean + "/api/v2/alerts", data=request.body, method="POST",
                                  headers=headers)
    with urllib.request.urlopen(http, timeout=request.timeout,
                                context=request.context) as response:
        if response.status >= 300:
            raise urllib.error.HTTPError(http.full_url, response.status, response.reason,
                                         response.headers, None)


@dataclass
class MemberState:
    """One Alertmanager's health. Each member backs off on its own: a dead member of an HA
    pair must never delay or drop the alerts meant for the healthy one."""

    last_error: str | None = None
    failed_at: float = 0.0
    logged_at: float = 0.0
    failures: int = 0


_MEMBERS: dict[str, MemberState] = {}


def _member(url: str) -> MemberState:
    return _MEMBERS.setdefault(url, MemberState())


def bounded(config: AlertPushConfig, alerts: list[dict[str, Any]],
            may_page: Callable[[str], bool] | None) -> list[dict[str, Any]]:
    """The alerts a push may carry: only of clusters `may_page` accepts (the clusters the
    exporter holds, or configured: a cluster name made up by a bad record must not wake
    anyone) and at most `max_alerts_per_push`, data loss first, open before resolved."""
    if may_page is not None:
        alerts = [a for a in alerts if may_page(a["labels"]["cluster"])]
    if len(alerts) <= config.max_alerts_per_push:
        return alerts
    order = {spec.alertname: i for i, spec in enumerate(SPECS.values())}
    kept = sorted(alerts, key=lambda a: a["endsAt"], reverse=True)  # open ones end latest
    kept.sort(key=lambda a: order.get(a["labels"]["alertname"], len(order)))
    now = time.monotonic()
    if now - _CAPPED_LOGGED_AT[0] > 60:
        _CAPPED_LOGGED_AT[0] = now
        LOG.warning("alert push: %d alerts in one push, only the first %d "
                    "(alert_push.max_alerts_per_push) are sent", len(alerts),
                    config.max_alerts_per_push)
    return kept[:config.max_alerts_per_push]


def push_incidents(config: AlertPushConfig, incidents: list[dict[str, Any]],
                   may_page: Callable[[str], bool] | None = None) -> None:
    """POST one alert per pushed incident to every configured Alertmanager, concurrently,
    skipping only the members still backing off from their own failure. Never raises.
    `may_page` names the clusters that may be paged for (see `bounded`)."""
    try:
        urls = config.urls()
        if not urls:
            return
        alerts = bounded(config, build_alerts(config, incidents), may_page)
        if not alerts:
            return
        due = [url for url in urls if not _backing_off(url)]
        if not due:
            return
        context = ssl.create_default_context(cafile=config.ca_file) if config.ca_file else None
        request = _Request(json.dumps(alerts).encode(), len(alerts), _auth_header(config),
                           context, config.timeout_seconds)
        if len(due) == 1:
            _push_one(due[0], request)
            return
        with ThreadPoolExecutor(max_workers=len(due), thread_name_prefix="alertpush") as pool:
            list(pool.map(lambda url: _push_one(url, request), due))
    except Exception as err:  # never into the job
        _failed("-", err)


def _backing_off(url: str) -> bool:
    """Whether `url` failed less than BACKOFF_SECONDS ago (counted as a skip)."""
    with _LOCK:
        state = _member(url)
        if state.last_error is None or time.monotonic() - state.failed_at >= BACKOFF_SECONDS:
            return False
        STATS.skipped += 1
        return True


def _push_one(url: str, request: _Request) -> None:
    try:
        _post(url, request)
    except Exception as err:  # noqa: BLE001 - any failure is logged and counted
        _failed(url, err)
        return
    with _LOCK:
        STATS.pushes += 1
        STATS.alerts_sent += request.count
        state = _member(url)
        recovered = state.last_error is not None
        state.last_error = None
        STATS.last_error = _any_error()
    if recovered:
        LOG.info("alert push to %s works again", redact_url(url))


def _any_error() -> str | None:
    """A member's error while any member is failing, else None (call under _LOCK)."""
    return next((s.last_error for s in _MEMBERS.values() if s.last_error), None)


def _failed(url: str, err: Exception) -> None:
    now = time.monotonic()
    with _LOCK:
        STATS.pushes += 1
        STATS.failures += 1
        STATS.last_failure_at = now
        state = _member(url)
        first = state.last_error is None
        state.last_error = STATS.last_error = redact_text(f"{type(err).__name__}: {err}")
        state.failed_at = now
        state.failures += 1
        log = first or now - state.logged_at > 60
        if log:
            state.logged_at = STATS.last_logged_at = now
        message, failures = state.last_error, state.failures
    if log:
        LOG.warning("alert push to %s failed (%s); retrying on later batches, %d failure(s) "
                    "so far", redact_url(url), message, failures)


def reset_stats() -> None:
    """For tests."""
    global STATS
    with _LOCK:
        STATS = PushStats()
        _WARNED_KINDS.clear()
        _MEMBERS.clear()
