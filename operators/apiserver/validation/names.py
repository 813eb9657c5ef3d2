"""Name and label syntax checks, with upstream's error texts."""

from __future__ import annotations

import re

from operators.apiserver.validation.causes import Cause, invalid

_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

C_IDENTIFIER_MSG = ("a valid C identifier must start with alphabetic character or '_', followed by a "
                    "string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
                    "'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')")
NAME_PART_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                 "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                 "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
DNS_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                 "or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
                 "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                     "characters, '-' or '.', and must start and end with an alphanumeric character "
                     "(e.g. 'example.com', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def qualified_name(value: object, field: str) -> list[Cause]:
    """`prefix/name` as label keys, taint keys and gate names are."""
    if not isinstance(value, str) or not value:
        return [invalid(field, value, "name part must be non-empty; " + NAME_PART_MSG)]
    prefix, _, name = value.rpartition("/")
    out: list[Cause] = []
    if "/" in value and not prefix:
        out.append(invalid(field, value, "prefix part must be non-empty"))
    elif prefix and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        out.append(invalid(field, value, "prefix part " + DNS_SUBDOMAIN_MSG))
    if not name:
        out.append(invalid(field, value, "name part must be non-empty"))
    elif len(name) > 63:
        out.append(invalid(field, value, "name part must be no more than 63 bytes"))
    elif not _NAME_PART.match(name):
        out.append(invalid(field, value, NAME_PART_MSG))
    return out


def label_value(value: object, field: str) -> list[Cause]:
    if not isinstance(value, str):
        return [invalid(field, value, LABEL_VALUE_MSG)]
    if len(value) > 63:
        return [invalid(field, value, "must be no more than 63 bytes")]
    if not _LABEL_VALUE.match(value):
        return [invalid(field, value, LABEL_VALUE_MSG)]
    return []


def dns_label(value: object, field: str) -> list[Cause]:
    if not isinstance(value, str):
        return [invalid(field, value, DNS_LABEL_MSG)]
    out = [invalid(field, value, "must be no more than 63 characters")] if len(value) > 63 else []
    if not _DNS1123_LABEL.match(value):
        # a valid subdomain that is no label can only be wrong by its dots
        out.append(invalid(field, value, "must not contain dots" if _DNS1123_SUBDOMAIN.match(value)
                           else DNS_LABEL_MSG))
    return out


def dns_subdomain(value: object, field: str) -> list[Cause]:
    if not isinstance(value, str):
        return [invalid(field, value, DNS_SUBDOMAIN_MSG)]
    out = [invalid(field, value, "must be no more than 253 characters")] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN.match(value):
        out.append(invalid(field, value, DNS_SUBDOMAIN_MSG))
    return out


def object_name(value: object, field: str, label: bool = False, prefix: bool = False) -> list[Cause]:
    """metadata.name (or, with `prefix`, generateName, whose trailing '-' is allowed)."""
    if prefix and isinstance(value, str) and value.endswith("-"):
        value = value[:-1] + "a"
    check = dns_label if label else dns_subdomain
    return check(value, field)


def labels(mapping: object, field: str) -> list[Cause]:
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        return [invalid(field, mapping, "must be a map of strings")]
    out: list[Cause] = []
    for k, v in mapping.items():
        out += qualified_name(k, field)
        out += label_value(v, field)
    return out
