"""The one redaction rule for anything shown or logged: config dumps, URLs, error text.

A key is secret-looking when its name says so (password, secret, token, credential, jaas,
oauthbearer, or a `key` segment such as `ssl.key.password` or `fs.s3a.secret.key`); its
value is masked wherever it appears in the config, including passthrough maps
(`source.kafka`, `spark.conf`) whose keys this project does not know in advance. URLs keep
scheme, host and path but lose their user info (`http://user:pass@host` shows as
`http://***@host`). A `{file: PATH}` / `{env: NAME}` secret reference says where a secret
lives, not what it is, so it stays visible: that is what an operator needs to debug it.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
# Substrings that make a key secret-looking wherever they occur in its name.
SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "jaas", "oauthbearer",
                "apikey", "api_key", "private")
# `key` alone is too common to match as a substring (identity.key_pattern is not a secret),
# so it counts only as a whole dotted/dashed segment or a segment's `_key` suffix.
_KEY_SEGMENT = re.compile(r"(?:^|[.\-])(?:[a-z0-9_]*_)?key(?:$|[.\-])")
# scheme://userinfo@ : everything up to the authority's last '@' (a raw '@' in a password
# must not leave its tail visible).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#]+@")
REF_KEYS = frozenset({"file", "env"})


def is_secret_key(name: str) -> bool:
    """Whether a config key's value must never be shown, judged by its name alone."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS) or bool(_KEY_SEGMENT.search(lowered))


def redact_url(url: str) -> str:
    """The URL without its user info, so it can be logged; scheme, host and path stay."""
    return _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", url)


def redact_text(text: str) -> str:
    """Free text (an error message, a log line) with every URL's user info masked."""
    return redact_url(text)


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and set(value) <= REF_KEYS


def redact_tree(value: Any, secret: bool = False) -> Any:
    """A copy of a config tree (dicts, lists, scalars) safe to print or log.

    `secret` says the enclosing key is secret-looking: every scalar under it is masked,
    except secret references, which only name where the secret lives.
    """
    if _is_ref(value):
        return dict(value)
    if isinstance(value, dict):
        return {k: redact_tree(v, secret or is_secret_key(str(k))) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, secret) for v in value]
    if value is None:
        return None
    if secret:
        return MASK
    if isinstance(value, str):
        return redact_url(value)
    return value
