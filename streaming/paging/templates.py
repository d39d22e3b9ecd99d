"""The Go templates of a Prometheus rule's annotations, rendered as Prometheus renders them.

A pushed alert must read exactly as the rule's alert does, yet the job has no Go template
engine: the few actions a pushed text may hold are translated into a str.format template
once, and filled per incident. The actions are `{{ $labels.cluster }}`, `{{ $labels.broker }}`
and `{{ $value }}` (Prometheus renders $labels from the firing series, so no other label can
be known here) and the cause block

    {{ with printf `kafka_health_metadata_cause_info{...}` ... | query }}{{ range . }}
    TEXT{{ .Labels.cause }}TEXT{{ end }}{{ end }}

rendered from the incident's `cause`: with one, the block's text around it; without, nothing;
and the eligible-leader-replicas block

    {{ with printf `kafka_health_elr_enabled{...}` ... | query }}{{ range . }}
    {{ if eq .Value 1.0 }}ON{{ else }}OFF{{ end }}{{ end }}{{ end }}

rendered from the incident's `elr_enabled`: ON for 1, OFF for 0, nothing when unknown.
Any other construct (a `humanizePercentage` pipe, another label, another query, trim markers)
is refused with AlertRulesError.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from streaming.config import ConfigError

# The Go-template actions a pushed text may hold, as what they become in str.format.
PLACEHOLDERS = {"$labels.cluster": "cluster", "$labels.broker": "broker", "$value": "value"}
_ACTION = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
# The one query a pushed text may hold: the cause of the alert's cluster, kind and leader,
# with literal text before and after the cause (see the rules file's header).
_CAUSE_BLOCK = re.compile(
    r"\{\{\s*with\s+printf\s+`kafka_health_metadata_cause_info\{[^`]*`[^{}|`]*\|\s*query\s*\}\}"
    r"\{\{\s*range\s+\.\s*\}\}(?P<before>[^{}]*)\{\{\s*\.Labels\.cause\s*\}\}(?P<after>[^{}]*)"
    r"\{\{\s*end\s*\}\}\{\{\s*end\s*\}\}")
# Whether the alert's cluster had eligible leader replicas on: one text for on, one for off.
_ELR_BLOCK = re.compile(
    r"\{\{\s*with\s+printf\s+`kafka_health_elr_enabled\{[^`]*`[^{}|`]*\|\s*query\s*\}\}"
    r"\{\{\s*range\s+\.\s*\}\}\{\{\s*if\s+eq\s+\.Value\s+1\.0\s*\}\}(?P<on>[^{}]*)"
    r"\{\{\s*else\s*\}\}(?P<off>[^{}]*)\{\{\s*end\s*\}\}\{\{\s*end\s*\}\}\{\{\s*end\s*\}\}")


class AlertRulesError(ConfigError):
    """The rules file cannot give a pushed kind its alert: missing file or rule, or a
    template construct the push cannot render as Prometheus does."""


def translate(text: str, where: str, causes: dict[str, tuple[str, str]] | None = None,
              elr: dict[str, tuple[str, str]] | None = None) -> str:
    """A rule template as a str.format template: `{{ $labels.cluster }}`, `{{ $labels.broker }}`
    and `{{ $value }}` become {cluster}, {broker} and {value}, each cause block becomes
    {causeN} (its text before and after the cause recorded in `causes`), each ELR block
    {elrN} (its texts for on and off recorded in `elr`), literal braces are escaped, and
    any other action (pipes such as humanizePercentage, other labels, trim markers, `with`)
    is refused with AlertRulesError naming `where` and the action."""
    causes = {} if causes is None else causes
    elr = {} if elr is None else elr
    blocks = sorted([*_CAUSE_BLOCK.finditer(text), *_ELR_BLOCK.finditer(text)],
                    key=lambda block: block.start())
    out, last = [], 0
    for block in blocks:
        out.append(_translate_actions(text[last:block.start()], where))
        if block.re is _ELR_BLOCK:
            name = f"elr{len(elr)}"
            elr[name] = (block.group("on"), block.group("off"))
        else:
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
