"""The direct push's HTTP client: POST alerts to every configured Alertmanager.

Nothing here raises into the job: a failed POST is logged (rate-limited) and counted in the
pusher's stats, and after a failure the push to THAT Alertmanager pauses for a few seconds
so an unreachable one cannot slow every batch by the full timeout. Every alert goes to
every configured member, in parallel, and each member backs off on its own: a dead member of
an HA cluster never delays or drops the alerts for a healthy one. The next successful push
re-sends every open incident, so a pause delays a page but never loses it. (A retry inside
one push, as an HTTP library's retry policy makes, would hold the batch for it instead.)

Basic auth, a bearer token and a CA file are supported; passwords and tokens come from
`{file: PATH}` / `{env: NAME}` references and URLs are logged only through
streaming.redact (no user info).
"""

from __future__ import annotations

import base64
import dataclasses
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
from typing import Any

from streaming.common.repeated_warning import RepeatedWarning, RepeatedWarnings
from streaming.config import AlertPushConfig
from streaming.paging.alerts import build_alerts, most_urgent
from streaming.redact import redact_text, redact_url

LOG = logging.getLogger("kafka_health.alertpush")
# After a failed POST to a member, skip that member for this long (the job keeps running at
# full speed, the other members are pushed as usual).
BACKOFF_SECONDS = 5.0
# The per-push cap, and a member that goes on failing, are warned about at most this often.
CAPPED_LOG_SECONDS = 60.0
FAILING_LOG_SECONDS = 60.0


@dataclass
class PushStats:
    """Counters for the job (and tests): pushes attempted, alerts sent, failures, skips."""

    pushes: int = 0
    alerts_sent: int = 0
    failures: int = 0
    skipped: int = 0
    last_error: str | None = None
    last_failure_at: float = 0.0


@dataclass
class MemberState:
    """One Alertmanager's health. Each member backs off on its own: a dead member of an HA
    pair must never delay or drop the alerts meant for the healthy one."""

    last_error: str | None = None
    failed_at: float = 0.0
    failures: int = 0


@dataclass(frozen=True)
class Request:
    """What every member gets in one push: the body, the auth header, TLS and the timeout."""

    body: bytes
    count: int
    authorization: str | None
    context: ssl.SSLContext | None
    timeout: float


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


def post(url: str, request: Request) -> None:
    """One POST of `request` to the Alertmanager at `url`; raises on any failure."""
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


class AlertPusher:
    """Pushes incidents to the Alertmanagers of `config` and keeps what the pushes learnt:
    each member's back-off, the stats, the kinds already warned about and when the cap was.

    The job's BatchProcessor creates one and hands it to its SignalStages, so the state
    lives as long as the job, across checkpoints. No single thread owns it: the foreachBatch
    thread pushes through it (the early push, SignalStages.page), so does the signals writer
    thread (the incidents push, SignalStages.persist), and each push's POSTs run on
    short-lived worker threads, one per member. Every field is therefore read and written
    under `_lock`, and `stats` hands out a copy.

    `post` sends one request (a benchmark replaces it to time the POSTs)."""

    def __init__(self, config: AlertPushConfig, backoff_seconds: float = BACKOFF_SECONDS,
                 post: Callable[[str, Request], None] = post) -> None:
        self.config = config
        self.backoff_seconds = backoff_seconds
        self.post = post
        self._lock = threading.Lock()
        self._stats = PushStats()
        self._members: dict[str, MemberState] = {}
        self._warned_kinds: set[str] = set()
        self._capped = RepeatedWarning(CAPPED_LOG_SECONDS)
        self._failing = RepeatedWarnings(FAILING_LOG_SECONDS)  # per member

    @property
    def stats(self) -> PushStats:
        with self._lock:
            return dataclasses.replace(self._stats)

    def push(self, incidents: list[dict[str, Any]],
             may_page: Callable[[str], bool] | None = None) -> None:
        """POST one alert per pushed incident to every configured Alertmanager, concurrently,
        skipping only the members still backing off from their own failure. Never raises.
        `may_page` names the clusters that may be paged for (see `bounded`)."""
        config = self.config
        try:
            urls = config.urls()
            if not urls:
                return
            with self._lock:
                warned = set(self._warned_kinds)
            alerts = build_alerts(config, incidents, warned=warned)
            with self._lock:
                self._warned_kinds |= warned
            alerts = self.bounded(alerts, may_page)
            if not alerts:
                return
            due = [url for url in urls if not self._backing_off(url)]
            if not due:
                return
            context = ssl.create_default_context(cafile=config.ca_file) if config.ca_file else None
            request = Request(json.dumps(alerts).encode(), len(alerts), _auth_header(config),
                              context, config.timeout_seconds)
            if len(due) == 1:
                self._push_one(due[0], request)
                return
            with ThreadPoolExecutor(max_workers=len(due), thread_name_prefix="alertpush") as pool:
                list(pool.map(lambda url: self._push_one(url, request), due))
        except Exception as err:  # never into the job
            self._failed("-", err)

    def bounded(self, alerts: list[dict[str, Any]],
                may_page: Callable[[str], bool] | None) -> list[dict[str, Any]]:
        """The alerts a push may carry: only of clusters `may_page` accepts (the clusters the
        exporter holds, or configured: a cluster name made up by a bad record must not wake
        anyone) and at most `max_alerts_per_push` (alerts.most_urgent)."""
        if may_page is not None:
            alerts = [a for a in alerts if may_page(a["labels"]["cluster"])]
        limit = self.config.max_alerts_per_push
        if len(alerts) <= limit:
            return alerts
        with self._lock:
            log = self._capped.due() is not None
        if log:
            LOG.warning("alert push: %d alerts in one push, only the first %d "
                        "(alert_push.max_alerts_per_push) are sent", len(alerts), limit)
        return most_urgent(alerts, limit)

    def _member(self, url: str) -> MemberState:
        return self._members.setdefault(url, MemberState())

    def _backing_off(self, url: str) -> bool:
        """Whether `url` failed less than backoff_seconds ago (counted as a skip)."""
        with self._lock:
            state = self._member(url)
            if (state.last_error is None
                    or time.monotonic() - state.failed_at >= self.backoff_seconds):
                return False
            self._stats.skipped += 1
            return True

    def _push_one(self, url: str, request: Request) -> None:
        try:
            self.post(url, request)
        except Exception as err:  # noqa: BLE001 - any failure is logged and counted
            self._failed(url, err)
            return
        with self._lock:
            self._stats.pushes += 1
            self._stats.alerts_sent += request.count
            state = self._member(url)
            recovered = state.last_error is not None
            state.last_error = None
            self._failing.ended(url)
            self._stats.last_error = next(
                (s.last_error for s in self._members.values() if s.last_error), None)
        if recovered:
            LOG.info("alert push to %s works again", redact_url(url))

    def _failed(self, url: str, err: Exception) -> None:
        now = time.monotonic()
        with self._lock:
            stats = self._stats
            stats.pushes += 1
            stats.failures += 1
            stats.last_failure_at = now
            state = self._member(url)
            state.last_error = stats.last_error = redact_text(f"{type(err).__name__}: {err}")
            state.failed_at = now
            state.failures += 1
            log = self._failing.due(url) is not None
            message, failures = state.last_error, state.failures
        if log:
            LOG.warning("alert push to %s failed (%s); retrying on later batches, %d failure(s) "
                        "so far", redact_url(url), message, failures)
