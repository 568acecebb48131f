"""The four string formats elicitation allows, checked strictly, as a jsonschema `FormatChecker`.

- `date`: RFC 3339 `full-date` (`2024-01-31`), by jsonschema's own checker;
- `date-time`: RFC 3339 `date-time` (`2024-01-31T09:30:00Z`, `...T09:30:00.5+02:00`): the
  offset is required, `T` and `Z` may be lower case, and a leap second is accepted only at
  23:59:60 UTC;
- `email`: an RFC 5321 mailbox: a dot-atom or quoted local part of at most 64 characters, `@`,
  and a domain of LDH labels or an address literal (`[192.0.2.1]`, `[IPv6:2001:db8::1]`);
- `uri`: an RFC 3986 `URI` (absolute, with a scheme; no spaces, no raw non-ASCII, well-formed
  percent escapes and IP literals).

Why not jsonschema's checkers for the last three: without optional packages it checks
`date-time` and `uri` not at all and `email` only for an `@`; its `date-time` package pulls in
`six`, and its `uri` packages are GPL (`rfc3987`) or accept a trailing newline
(`rfc3986-validator` anchors its pattern with `$`). Each check here is a full match against
the RFC's grammar.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable

from jsonschema import FormatChecker

__all__ = ["FORMATS", "is_date_time", "is_email", "is_uri"]

# ---------------------------------------------------------------------------- date-time

_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


def is_date_time(value: str) -> bool:
    """Whether *value* is an RFC 3339 `date-time`."""
    found = _DATE_TIME.fullmatch(value)
    if found is None:
        return False
    day, hour, minute, second, sign, offset_hours, offset_minutes = found.groups()
    try:
        datetime.date.fromisoformat(day)  # month and day in range; year 0 has no date
    except ValueError:
        return False
    h, m, s = int(hour), int(minute), int(second)
    oh, om = int(offset_hours or 0), int(offset_minutes or 0)
    if h > 23 or m > 59 or s > 60 or oh > 23 or om > 59:
        return False
    if s == 60:  # a leap second happens at 23:59:60 UTC only
        offset = (oh * 60 + om) * (-1 if sign == "-" else 1)
        return (h * 60 + m - offset) % (24 * 60) == 23 * 60 + 59
    return True


# -------------------------------------------------------------------------------- email

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_LOCAL = re.compile(rf'{_ATEXT}+(?:\.{_ATEXT}+)*|"(?:[ !#-\[\]-~]|\\[ -~])*"', re.ASCII)
_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)


def is_email(value: str) -> bool:
    """Whether *value* is an RFC 5321 mailbox (`local-part@domain`)."""
    local, at, domain = value.rpartition("@")
    if not at or len(value) > 254 or len(local) > 64 or _LOCAL.fullmatch(local) is None:
        return False
    if domain.startswith("[") and domain.endswith("]"):
        literal = domain[1:-1]
        if literal[:5].lower() == "ipv6:":
            return _is_ip(ipaddress.IPv6Address, literal[5:])
        return _is_ip(ipaddress.IPv4Address, literal)
    return all(_LABEL.fullmatch(label) for label in domain.split("."))


def _is_ip(kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address], text: str) -> bool:
    if "%" in text:  # a zone id: RFC 3986 and RFC 5321 have no syntax for it
        return False
    try:
        kind(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------- uri

_PCHAR = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})"
_URI = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:"  # scheme
    r"(?:"
    r"//(?:(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*@)?"  # authority: userinfo
    r"(?:\[(?P<literal>[^\]]*)\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)"  # host
    r"(?::[0-9]*)?"  # port
    rf"(?:/{_PCHAR}*)*"  # path-abempty
    rf"|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"  # path-absolute
    rf"|{_PCHAR}+(?:/{_PCHAR}*)*"  # path-rootless
    r"|)"  # path-empty
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"  # query
    rf"(?:#(?:{_PCHAR}|[/?])*)?",  # fragment
    re.ASCII,
)
_IP_FUTURE = re.compile(r"[Vv][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+", re.ASCII)


def is_uri(value: str) -> bool:
    """Whether *value* is an RFC 3986 `URI` (absolute: it has a scheme)."""
    found = _URI.fullmatch(value)
    if found is None:
        return False
    literal = found.group("literal")
    if literal is None or _IP_FUTURE.fullmatch(literal):
        return True
    return _is_ip(ipaddress.IPv6Address, literal)


def _strings_only(check: Callable[[str], bool]) -> Callable[[object], bool]:
    """*check* as a format checker: values of other types are the `type` keyword's business."""
    return lambda instance: not isinstance(instance, str) or check(instance)


#: The format checker form content is validated with.
FORMATS = FormatChecker(formats=("date",))
FORMATS.checks("date-time")(_strings_only(is_date_time))
FORMATS.checks("email")(_strings_only(is_email))
FORMATS.checks("uri")(_strings_only(is_uri))
