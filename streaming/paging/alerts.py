"""Incidents as Alertmanager v2 alerts, and which of them one push carries.

One fault must make ONE PagerDuty incident. Alertmanager groups by (alertname, cluster)
(alerts/alertmanager.yml `group_by`) and the PagerDuty `dedup_key` is a hash of the group,
so a pushed alert carries exactly the alertname, severity and category of the Prometheus
rule for the same kind (streaming.paging.rules): it is routed to the same receiver and lands
in the same group as the rule's alert. The `source="kafka-health-push"` label keeps the two
apart in the Alertmanager UI.

Open incidents are sent with `endsAt` a few minutes ahead, so they stay firing while the job
re-sends them every batch and expire on their own if it stops; a resolved incident is sent
with `endsAt = resolved_at` (an explicit resolve).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.config import AlertPushConfig
from streaming.identity import CLUSTER_WIDE
from streaming.paging.rules import ALERTNAMES, AlertSpec, spec_for
from streaming.paging.templates import AlertRulesError, go_value

LOG = logging.getLogger("kafka_health.alertpush")
SOURCE = "kafka-health-push"
# An open incident stays firing in Alertmanager this long after the last push.
OPEN_HOLD = timedelta(minutes=5)
# Resolved incidents older than this are not re-sent (Alertmanager already has them).
RESOLVED_RESEND = timedelta(minutes=15)


def utc(value: datetime | str) -> datetime:
    """A timestamp as an aware UTC datetime: ISO text is parsed, a naive one is UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_alerts(config: AlertPushConfig, incidents: list[dict[str, Any]],
                 now: datetime | None = None, warned: set[str] | None = None
                 ) -> list[dict[str, Any]]:
    """The Alertmanager v2 alert objects for the incidents whose kind is pushed. A pushed
    kind that cannot be rendered is skipped with a warning, once per kind for a caller that
    keeps the kinds already warned about in `warned`."""
    now = now or datetime.now(UTC)
    warned = set() if warned is None else warned
    alerts = []
    specs: dict[str, AlertSpec | None] = {}  # the rules file is located once per call
    for incident in incidents:
        kind = incident.get("kind")
        if kind not in config.kinds:
            continue
        if kind not in specs:
            specs[kind] = _spec_or_warn(kind, warned)
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
        elr = incident.get("elr_enabled")  # as kafka_health_elr_enabled: 1, 0 or unknown
        fields.update({name: on if elr == 1.0 else off if elr == 0.0 else ""
                       for name, (on, off) in spec.elr.items()})
        started = utc(incident["started_at"])
        resolved = incident.get("resolved_at")
        if resolved is not None:
            ends = utc(resolved)
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


def _spec_or_warn(kind: str, warned: set[str]) -> AlertSpec | None:
    """The spec of a pushed kind, or None (warned about unless `kind` is in `warned`) when
    it has no paging rule or the rules file cannot give one (`check` refuses the latter at
    start)."""
    try:
        if kind in ALERTNAMES:
            return spec_for(kind)
        problem = f"alert_push.kinds: {kind!r} has no paging rule; it is not pushed " \
                  f"(pushable: {', '.join(ALERTNAMES)})"
    except AlertRulesError as err:
        problem = f"{err}; it is not pushed"
    if kind not in warned:
        warned.add(kind)
        LOG.warning("%s", problem)
    return None


def most_urgent(alerts: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most `limit` of `alerts`: data loss first (the order of ALERTNAMES), open before
    resolved."""
    if len(alerts) <= limit:
        return alerts
    order = {alertname: i for i, alertname in enumerate(ALERTNAMES.values())}
    kept = sorted(alerts, key=lambda a: a["endsAt"], reverse=True)  # open ones end latest
    kept.sort(key=lambda a: order.get(a["labels"]["alertname"], len(order)))
    return kept[:limit]
