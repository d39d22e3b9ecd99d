"""Direct push of incidents to Alertmanager, for the events where seconds matter.

The normal paging path is exporter -> Prometheus scrape -> rule evaluation -> Alertmanager
-> PagerDuty, which adds a scrape interval plus an evaluation interval (plus any `for`) to
the pipeline's own latency. For data loss (unclean leader election) the job can skip that
and POST the incident straight to Alertmanager's `/api/v2/alerts` from the micro-batch
that computed it.

One fault must still make ONE PagerDuty incident. Alertmanager groups by
(alertname, cluster) (alerts/alertmanager.yml `group_by`) and the PagerDuty `dedup_key`
is a hash of the group, so a pushed alert carries exactly the alertname, severity and
category of the Prometheus rule for the same kind: it is routed to the same receiver and
lands in the same group as the rule's alert. The `source="kafka-health-push"` label keeps
the two apart in the Alertmanager UI.

The rules file (alerts/kafka-health.rules.yml) is the single source of what is pushed: only
the kind -> alertname mapping (ALERTNAMES) lives here. On first use the rule of each pushed
kind gives its labels and annotations, the Go templates `{{ $labels.cluster }}`,
`{{ $labels.broker }}` and `{{ $value }}` rendered as Prometheus renders them, and the cause
block (`{{ with printf `kafka_health_metadata_cause_info{...}` ... | query }}{{ range . }}
TEXT{{ .Labels.cause }}TEXT{{ end }}{{ end }}`) rendered from the incident's `cause`, which
the same Admin API poll wrote (streaming.metadata.board): with one, the block's text around
it; without, nothing. Any other template construct (a `humanizePercentage` pipe, another
label, another query) is refused with a ConfigError by `check`, which `kafka-health run`
and `check-config` call when a push is configured. The package carries a copy of the file
(streaming.package_data); `rules_path` says which copy is read.

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
import functools
import json
import logging
import math
import os
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from streaming.config import AlertPushConfig, ConfigError
from streaming.identity import CLUSTER_WIDE
from streaming.package_data import SCHEMAS_ENV, packaged_alert_rules
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


# Incident kind -> the alertname of the Prometheus rule that pages for it. The alert's labels
# and texts are read from that rule (alerts/kafka-health.rules.yml, the single source); the
# order is the push's priority when one push is capped (data loss first).
ALERTNAMES: dict[str, str] = {
    "unclean_election": "KafkaUncleanLeaderElection",
    "under_min_isr": "KafkaUnderMinIsrPartitions",
    "offline_partitions": "KafkaOfflinePartitions",
    "controller": "KafkaActiveControllerCountAbnormal",
}
RULES_ENV = "KAFKA_HEALTH_RULES"
RULES_FILE = Path("alerts") / "kafka-health.rules.yml"
# The Go-template actions a pushed text may hold, as what they become in str.format: the
# series labels the incident carries and the alert's value. Prometheus renders $labels from
# the firing series (not the rule's labels), so no other label can be known here.
PLACEHOLDERS = {"$labels.cluster": "cluster", "$labels.broker": "broker", "$value": "value"}
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# The one query a pushed text may hold: the cause of the alert's cluster, kind and leader,
# with literal text before and after the cause (see the rules file's header).
_CAUSE_BLOCK = re.compile(
    r"\{\{\s*with\s+printf\s+`kafka_health_metadata_cause_info\{[^`]*`[^{}|`]*\|\s*query\s*\}\}"
    r"\{\{\s*range\s+\.\s*\}\}(?P<before>[^{}]*)\{\{\s*\.Labels\.cause\s*\}\}(?P<after>[^{}]*)"
    r"\{\{\s*end\s*\}\}\{\{\s*end\s*\}\}")


class AlertRulesError(ConfigError):
    """The rules file cannot give a pushed kind its alert: missing file or rule, or a
    template construct the push cannot render as Prometheus does."""


@dataclass(frozen=True)
class AlertSpec:
    """The Prometheus rule of one incident kind as the push renders it: the rule's labels
    (severity, team, category) verbatim and its annotations as str.format templates over
    {cluster}/{broker}/{value} and one {causeN} per cause block, whose text around the
    cause is in `causes` (see `translate`)."""

    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    causes: dict[str, tuple[str, str]] = field(default_factory=dict)


def translate(text: str, where: str, causes: dict[str, tuple[str, str]] | None = None) -> str:
    """A rule template as a str.format template: `{{ $labels.cluster }}`, `{{ $labels.broker }}`
    and `{{ $value }}` become {cluster}, {broker} and {value}, each cause block becomes
    {causeN} (its text before and after the cause recorded in `causes`), literal braces are
    escaped, and any other action (pipes such as humanizePercentage, other labels, trim
    markers, `with`) is refused with AlertRulesError naming `where` and the action."""
    causes = {} if causes is None else causes
    out, last = [], 0
    for block in _CAUSE_BLOCK.finditer(text):
        out.append(_translate_actions(text[last:block.start()], where))
        name = f"cause{len(causes)}"
        causes[name] = (block.group("before"), block.group("after"))
        out.append("{" + name + "}")
        last = block.end()
    out.append(_translate_actions(text[last:], where))
    return "".join(out)


def _translate_actions(text: str, where: str) -> str:
    out, last = [], 0
    for match in _ACTION.finditer(text):
        out.append(_escape_braces(text[last:match.start()]))
        field_name = PLACEHOLDERS.get(match.group(1).strip())
        if field_name is None:
            raise AlertRulesError(
                f"{where}: the direct push cannot render the template action {match.group(0)!r} "
                f"(it renders only {', '.join('{{ ' + p + ' }}' for p in PLACEHOLDERS)} "
                "and the cause block described in the rules file's header); "
                "simplify the rule's text or leave this kind to the Prometheus rule "
                "(remove it from alert_push.kinds)")
        out.append("{" + field_name + "}")
        last = match.end()
    rest = text[last:]
    if "{{" in rest:
        raise AlertRulesError(f"{where}: unterminated template action at {rest[rest.index('{{'):][:40]!r}")
    out.append(_escape_braces(rest))
    return "".join(out)


def _escape_braces(literal: str) -> str:
    return literal.replace("{", "{{").replace("}", "}}")


def rules_path() -> Traversable:
    """The Prometheus rules file: $KAFKA_HEALTH_RULES; else alerts/ beside the folder
    $KAFKA_HEALTH_SCHEMAS names (/opt/kafka-health in the image, spark-submit's unpacked
    archives), so a shipped copy of the schemas comes with the rules of the same version;
    else the copy the package carries (streaming.package_data). Refused (AlertRulesError)
    when none is a file."""
    override = os.environ.get(RULES_ENV)
    candidates: list[Traversable]
    if override:
        candidates = [Path(override)]
    else:
        schemas = os.environ.get(SCHEMAS_ENV)
        candidates = [*([Path(schemas).parent / RULES_FILE] if schemas else []),
                      packaged_alert_rules()]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise AlertRulesError(
            f"alert_push: the Prometheus rules file {RULES_FILE} (the pushed alerts' labels and "
            f"texts) was not found (looked at {', '.join(map(str, candidates))}); set "
            f"{RULES_ENV} to the file, or ship alerts/ beside the folder {SCHEMAS_ENV} names")
    return found


@functools.cache
def _specs_in(path: Traversable) -> dict[str, AlertSpec | str]:
    """Every pushable kind's spec from the rules file at `path`, or why it has none."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        rules = [r for g in document["groups"] for r in g["rules"] if "alert" in r]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as err:
        raise AlertRulesError(f"alert_push: cannot read the alert rules in {path}: "
                              f"{type(err).__name__}: {err}") from err
    specs: dict[str, AlertSpec | str] = {}
    for kind, alertname in ALERTNAMES.items():
        try:
            specs[kind] = _spec(kind, alertname, [r for r in rules if r["alert"] == alertname], path)
        except AlertRulesError as err:
            specs[kind] = str(err)
    return specs


def _spec(kind: str, alertname: str, found: list[dict[str, Any]], path: Traversable) -> AlertSpec:
    if len(found) != 1:
        raise AlertRulesError(f"alert_push.kinds {kind!r}: {path} has {len(found)} rules named "
                              f"{alertname}; the push renders exactly one")
    [rule] = found
    labels = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
    for name, value in labels.items():
        if "{{" in value:
            raise AlertRulesError(f"alert_push.kinds {kind!r}: {alertname} label {name} is a "
                                  f"template ({value!r}); the push carries static labels only")
    causes: dict[str, tuple[str, str]] = {}
    annotations = {str(name): translate(str(text), f"alert_push.kinds {kind!r}: {path} "
                                                   f"{alertname} annotation {name}", causes)
                   for name, text in (rule.get("annotations") or {}).items()}
    return AlertSpec(alertname, labels, annotations, causes)


def spec_for(kind: str) -> AlertSpec:
    """The alert spec of a pushable kind (one of ALERTNAMES), read from the rules file on first
    use; AlertRulesError when the rules file cannot give it."""
    found = _specs_in(rules_path())[kind]
    if isinstance(found, str):
        raise AlertRulesError(found)
    return found


def check(config: AlertPushConfig) -> None:
    """Refuse (AlertRulesError, a ConfigError) a push config with a kind that has no paging
    rule (a misspelt kind would never page) or whose rule the rules file cannot give:
    `kafka-health run` and `check-config` call it, so the job stops at start instead of
    silently not paging. Without an Alertmanager URL nothing is pushed, and nothing checked."""
    if not config.urls():
        return
    for i, kind in enumerate(config.kinds):
        if kind not in ALERTNAMES:
            raise AlertRulesError(f"alert_push.kinds[{i}]: {kind!r} is not a kind with a "
                                  f"paging rule; one of: {', '.join(ALERTNAMES)}")
        spec_for(kind)


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


def go_value(number: Any) -> str:
    """`{{ $value }}` as Prometheus prints it: Go's %v of a float64 (the shortest digits that
    read back, in exponent form below 1e-4 and from 1e6 on: 1.234567e+06, 1e-05)."""
    if number is None:
        return "?"
    number = float(number)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    if number == 0:
        return sign + "0"
    _, digit_tuple, exponent = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # the value is 0.<digits> * 10**point
    if not -4 <= point - 1 < 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{point - 1:+03d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def build_alerts(config: AlertPushConfig, incidents: list[dict[str, Any]],
                 now: datetime | None = None) -> list[dict[str, Any]]:
    """The Alertmanager v2 alert objects for the incidents whose kind is pushed."""
    now = now or datetime.now(UTC)
    alerts = []
    specs: dict[str, AlertSpec | None] = {}  # the rules file is located once per call
    for incident in incidents:
        kind = incident.get("kind")
        if kind not in config.kinds:
            continue
        if kind not in specs:
            specs[kind] = _spec_or_warn(kind)
        spec = specs[kind]
        if spec is None:
            continue
        cluster, broker = str(incident["cluster"]), str(incident.get("broker") or CLUSTER_WIDE)
        labels = {"alertname": spec.alertname, **spec.labels, "cluster": cluster, "source": SOURCE}
        if broker != CLUSTER_WIDE:  # cluster-wide rules carry no broker label either
            labels["broker"] = broker
        # what the rule's templates see: the series labels (a missing one renders empty)
        fields = {"cluster": cluster, "broker": labels.get("broker", ""),
                  "value": go_value(incident.get("peak_value"))}
        cause = incident.get("cause")
        fields.update({name: f"{before}{cause}{after}" if cause else ""
                       for name, (before, after) in spec.causes.items()})
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
                **{name: text.format(**fields) for name, text in spec.annotations.items()},
                "incident_id": str(incident.get("incident_id") or ""),
            },
            "startsAt": _rfc3339(started),
            "endsAt": _rfc3339(max(ends, started)),
        })
    return alerts


def _spec_or_warn(kind: str) -> AlertSpec | None:
    """The spec of a pushed kind, or None (warned about once per kind) when it has no paging
    rule or the rules file cannot give one (`check` refuses the latter at start)."""
    try:
        if kind in ALERTNAMES:
            return spec_for(kind)
        problem = f"alert_push.kinds: {kind!r} has no paging rule; it is not pushed " \
                  f"(pushable: {', '.join(ALERTNAMES)})"
    except AlertRulesError as err:
        problem = f"{err}; it is not pushed"
    if kind not in _WARNED_KINDS:
        _WARNED_KINDS.add(kind)
        LOG.warning("%s", problem)
    return None


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
    from streaming.signals.incidents import CLUSTER_EVENT_CONDITIONS, POSITIVE_BROKER_CONDITIONS

    now = now or datetime.now(UTC)
    newest: dict[tuple[str, str], tuple[datetime, list[dict[str, Any]]]] = {}
    for row in rows:
        key, rank = (row["cluster"], row["broker"]), window_rank(row, now)
        if key not in newest or rank > newest[key][0]:
            newest[key] = (rank, [row])
        elif rank == newest[key][0]:
            newest[key][1].append(row)
    opened = []
    # A cluster event (every controller counts it) opens one incident per cluster, its
    # peak the highest broker count, as the rule's `max without (broker)` reads it.
    cluster_events: dict[tuple[str, str], dict[str, Any]] = {}
    for row in (r for _, tied in newest.values() for r in tied):
        if now - _utc(row["window_end"]) > timedelta(seconds=fresh_seconds):
            continue
        for kind, column in POSITIVE_BROKER_CONDITIONS.items():
            if (row.get(column) or 0) > 0:
                opened.append({"kind": kind, "cluster": row["cluster"], "broker": row["broker"],
                               "started_at": row["window_start"], "resolved_at": None,
                               "peak_value": row[column], "incident_id": None})
        for kind, column in CLUSTER_EVENT_CONDITIONS.items():
            count = row.get(column) or 0
            if count > 0:
                event = cluster_events.setdefault((row["cluster"], kind), {
                    "kind": kind, "cluster": row["cluster"], "broker": CLUSTER_WIDE,
                    "started_at": row["window_start"], "resolved_at": None,
                    "peak_value": count, "incident_id": None})
                event["started_at"] = min(event["started_at"], row["window_start"])
                event["peak_value"] = max(event["peak_value"], count)
    return opened + list(cluster_events.values())


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
    order = {alertname: i for i, alertname in enumerate(ALERTNAMES.values())}
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
