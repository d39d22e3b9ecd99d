"""Render test/local variants of alerts/alertmanager.yml.

The committed config points PagerDuty at the real Events API v2 and reads the routing
key from /etc/alertmanager/secrets/pagerduty-routing-key. Tests (and a local stack)
need the same routing, grouping and inhibition with a different ``url:`` and key file,
so this rewrites those fields structurally instead of keeping a second config by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ALERTMANAGER_YML = REPO / "alerts" / "alertmanager.yml"
WARNING_RECEIVER = "kafka-health-warnings"
HEARTBEAT_RECEIVER = "kafka-health-heartbeat"


class _NoAliasDumper(yaml.SafeDumper):
    """Write merged/shared mappings out in full: the rendered file stays greppable."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def load_alertmanager_config(path: Path = ALERTMANAGER_YML) -> dict[str, Any]:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def render_alertmanager_config(
    *,
    pagerduty_url: str | None = None,
    routing_key_file: str | Path | None = None,
    warning_webhook_url: str | None = None,
    heartbeat_url: str | None = None,
    source: Path = ALERTMANAGER_YML,
) -> str:
    """Return alertmanager.yml text with every PagerDuty ``url`` / ``routing_key_file``
    replaced (when given), optionally a webhook attached to the warnings receiver and the
    heartbeat receiver's webhook pointed at ``heartbeat_url``. Routing, grouping,
    inhibition and templates stay exactly as committed."""
    cfg = load_alertmanager_config(source)
    found = 0
    for receiver in cfg.get("receivers", []):
        for pd in receiver.get("pagerduty_configs", []) or []:
            found += 1
            if pagerduty_url is not None:
                pd["url"] = pagerduty_url
            if routing_key_file is not None:
                pd["routing_key_file"] = str(routing_key_file)
        if warning_webhook_url is not None and receiver["name"] == WARNING_RECEIVER:
            receiver["webhook_configs"] = [{"url": warning_webhook_url, "send_resolved": True}]
        if heartbeat_url is not None and receiver["name"] == HEARTBEAT_RECEIVER:
            for hook in receiver["webhook_configs"]:
                hook["url"] = heartbeat_url
    if not found:
        raise ValueError(f"{source}: no pagerduty_configs found")
    return yaml.dump(cfg, Dumper=_NoAliasDumper, sort_keys=False, width=1000)


def write_alertmanager_config(dest: Path, **kwargs: Any) -> Path:
    dest.write_text(render_alertmanager_config(**kwargs), encoding="utf-8")
    return dest
