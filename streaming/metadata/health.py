"""Whether a cluster's Admin API answers, and if not, why, in a word.

A failing poll is reported as state (per-cluster `up` and an error class from a fixed
set, for a gauge whose cardinality stays bounded), never raised: the metadata view is an
addition to the metrics pipeline, and one unreachable or locked-down cluster must not
stop it or the other clusters' polls. The class is derived from librdkafka's error code
only; the client configuration, which holds the secrets, never reaches this module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import KafkaError, KafkaException

from streaming.kafka_client import POLLER_NEEDS, security_advice
from streaming.redact import redact_text

UNREACHABLE = "unreachable"    # no broker answers: DNS, connection refused, TLS, network
UNAUTHORIZED = "unauthorized"  # login refused, an ACL denies a describe, or nothing visible
TIMEOUT = "timeout"            # brokers connected but a request did not finish in time
MISCONFIGURED = "misconfigured"  # the client cannot be built from its settings
ERROR = "error"                # anything else
ERROR_CLASSES = (UNREACHABLE, UNAUTHORIZED, TIMEOUT, MISCONFIGURED, ERROR)

_CODES = {
    UNAUTHORIZED: {
        KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.UNSUPPORTED_SASL_MECHANISM,
        KafkaError.ILLEGAL_SASL_STATE, KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
    },
    UNREACHABLE: {
        KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
        KafkaError._SSL, KafkaError.NETWORK_EXCEPTION, KafkaError.BROKER_NOT_AVAILABLE,
    },
    TIMEOUT: {KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT_QUEUE},
    MISCONFIGURED: {KafkaError._INVALID_ARG, KafkaError._INVALID_TYPE},
}
# When a request only timed out, an error the client reported meanwhile says why better
# (a refused connection or a failed SASL handshake surfaces as a timeout of the request).
_SHARPER = (UNAUTHORIZED, UNREACHABLE)
# The classes an error the client reported can sharpen. A transport failure is one of them:
# a broker that refuses the login (wrong password, unknown user) closes the connection, and
# librdkafka fails the request with _TRANSPORT while its error callback carries the cause,
# _AUTHENTICATION (seen on a real SASL/PLAIN broker, tests/real_kafka/
# test_metadata_unauthorized.py). The fix then is the credentials, not the network.
_VAGUE = (TIMEOUT, ERROR, UNREACHABLE)


def kafka_error(exc: BaseException | KafkaError) -> KafkaError | None:
    """The KafkaError an exception carries, if any."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def code_class(code: int) -> str:
    return next((name for name, codes in _CODES.items() if code in codes), ERROR)


def classify(exc: BaseException, reported: Iterable[KafkaError] = ()) -> str:
    """The error class of a failed poll: from the exception's Kafka error code, sharpened
    by the errors the client `reported` during the poll when the request only timed out
    or failed in transport (an authentication failure the client reported is then the
    cause). (A client that cannot be built at all is `misconfigured`: the poller knows
    that case, since it is where the exception came from.)"""
    error = kafka_error(exc)
    if error is None:
        return ERROR
    sharper = sharpening(exc, reported)
    return code_class((sharper or error).code())


def sharpening(exc: BaseException, reported: Iterable[KafkaError]) -> KafkaError | None:
    """The error the client reported that says better than `exc` why the poll failed, if
    any: what the operator should read first (the login refused, not the transport)."""
    error = kafka_error(exc)
    if error is None or code_class(error.code()) not in _VAGUE:
        return None
    by_class: dict[str, KafkaError] = {}
    for reported_error in reported:  # the last of a class, or one that says what to fix
        kind = code_class(reported_error.code())
        if kind not in by_class or _advice(reported_error) or not _advice(by_class[kind]):
            by_class[kind] = reported_error
    return next((by_class[c] for c in _SHARPER if c in by_class), None)


def _advice(error: KafkaError) -> str | None:
    """What to fix for a refused login, certificate or ACL, for a watched cluster."""
    return security_advice(error.name(), error.str(), "metadata.clusters.<cluster>",
                           POLLER_NEEDS)


def describe(exc: BaseException | KafkaError, client_settings: bool = False) -> str:
    """A short, loggable account of the failure: the Kafka error name and message with
    URL user info masked, or the exception type alone.

    With `client_settings` (the client could not be built from them) only the name of
    the property librdkafka refused is kept: its message quotes the refused value, which
    may be a secret. Non-Kafka errors are named by type for the same reason.
    """
    error = kafka_error(exc)
    if error is None:
        return type(exc).__name__
    if client_settings:
        named = _PROPERTY.search(error.str())
        where = f" (property {named.group(1)})" if named else ""
        return f"{error.name()}: the client settings are refused{where}"
    said = f"{error.name()}: {redact_text(error.str())[:300]}"
    # a refused login, certificate or ACL: the setting to fix or the right to grant
    advice = None if "grant" in error.str() else _advice(error)
    return f"{said}. To fix: {advice}" if advice else said


_PROPERTY = re.compile(r'configuration property:?\s*"?([A-Za-z0-9._-]+)')


@dataclass(frozen=True)
class PollerHealth:
    """A cluster's poller state after its latest attempt. `up` is None before the first
    attempt; `error` is one of ERROR_CLASSES while failing, None while up."""

    cluster: str
    up: bool | None = None
    error: str | None = None
    error_code: str | None = None  # the Kafka error name (e.g. _TRANSPORT), never text
    last_attempt_at: datetime | None = None
    last_success_at: datetime | None = None
    consecutive_failures: int = 0
    polls: int = 0
    failures: int = 0
