"""Defaults that changed: a config that still names an earlier default means today's.

Configs copied from the example, which showed the defaults of its day as values, name the
earlier defaults; each is read as the default that replaced it.
"""

from __future__ import annotations

# The digits before a separator in a host name: kafka-12.prod:9404 is broker 12. Not a
# port's digits (after a colon): kafka-a:9404 and kafka-b:9404 are no broker 9404. The
# look-behind also starts a match only at a digit run's start, which keeps the search
# linear (without it, quadratic in a long digit run). An IP address's digits name no
# broker either (10.0.0.7 and 10.0.0.8 would both read as 10): with this regex the
# resolver reads no IP address instance, instance_map names its broker. A regex of the
# user's own is applied to IP addresses too (a fleet whose broker ids are the last octet).
DEFAULT_INSTANCE_REGEX = r"(?<![\d:])(\d+)(?:[.:/]|$)"
# The default before it, which read a port's digits.
EARLIER_DEFAULT_INSTANCE_REGEX = r"(?<!\d)(\d+)(?:[.:/]|$)"
# A record key names the broker only as its number, a Kafka broker id: "prod/3" or "3". Other
# keys are how a shipper partitions, not identity: Telegraf's routing_tag (a central
# Telegraf's own host name), routing_key "random" (a UUID), the OpenTelemetry Collector's
# hash of the resource attributes (16 raw bytes); read as a broker they would move every
# sample to a broker of that name. Such a key is passed over for the instance labels.
DEFAULT_KEY_PATTERN = r"^(?:(?P<cluster>[^/]+)/)?(?P<broker>\d+)$"
EARLIER_DEFAULT_KEY_PATTERN = r"^(?:(?P<cluster>[^/]+)/)?(?P<broker>[^/]+)$"

_REPLACED = {EARLIER_DEFAULT_INSTANCE_REGEX: DEFAULT_INSTANCE_REGEX,
             EARLIER_DEFAULT_KEY_PATTERN: DEFAULT_KEY_PATTERN}


def current_default(value: str | None) -> str | None:
    """The value, or the default that replaced it when it is an earlier default."""
    return _REPLACED.get(value, value) if value is not None else None
