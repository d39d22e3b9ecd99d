"""Direct push of incidents to Alertmanager, for the events where seconds matter.

The normal paging path is exporter -> Prometheus scrape -> rule evaluation -> Alertmanager
-> PagerDuty, which adds a scrape interval plus an evaluation interval (plus any `for`) to
the pipeline's own latency. For data loss (unclean leader election) the job can skip that
and POST the incident straight to Alertmanager's `/api/v2/alerts` from the micro-batch
that computed it.

- `rules`: the Prometheus rules file (alerts/kafka-health.rules.yml) as the single source
  of each pushed kind's labels and texts; `check` refuses at start what it cannot give.
- `templates`: the rules' Go templates rendered as Prometheus renders them.
- `alerts`: incidents as Alertmanager alerts, and the most urgent of them when capped.
- `opened`: open incidents read off a batch's broker rows, for the early push.
- `client`: `AlertPusher`, the HTTP client with each member's back-off and the stats.
"""

from streaming.paging.alerts import SOURCE, build_alerts
from streaming.paging.client import AlertPusher, PushStats
from streaming.paging.opened import opened_in_signals
from streaming.paging.rules import ALERTNAMES, RULES_ENV, check, rules_path, spec_for
from streaming.paging.templates import AlertRulesError, go_value

__all__ = ["ALERTNAMES", "RULES_ENV", "SOURCE", "AlertPusher", "AlertRulesError", "PushStats",
           "build_alerts", "check", "go_value", "opened_in_signals", "rules_path", "spec_for"]
