# -*- coding: utf-8 -*-
"""Where a client on the server's own host reaches an SGLang server: the one place its URL is built.

    {{ sglang_server_host | sglang_server_address }}                       -> 127.0.0.1, [::1], gpu1.example
    {{ sglang_server_host | sglang_server_url(sglang_server_port) }}       -> http://127.0.0.1:30000
    {{ sglang_server_host | sglang_server_binds_all }}                     -> true for 0.0.0.0, ::, 0, ...

A server bound to every interface answers on loopback too; 127.0.0.1 also reaches one bound to :: (Linux's default
dual-stack sockets), as the roles always did. An IPv6 literal is bracketed.

Every interface has many spellings, and the server takes them all: SGLang hands --host to uvicorn, whose asyncio
server binds all interfaces for an empty host and resolves any other with getaddrinfo(), which reads IPv4 the way
inet_aton() does (0, 0.0, 0x0, 000.0.0.0 are 0.0.0.0), after Python's IDNA encoding (NFKC: fullwidth digits and
dots are ASCII ones). So whether a host binds all interfaces is decided here, once, by parsing it as an address
(ipaddress, after that normalising), never by comparing strings: the sglang_server role's opt-in
(sglang_server_allow_all_interfaces) and the loopback URL both use it.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import unicodedata

from ansible.errors import AnsibleFilterError

LOOPBACK = "127.0.0.1"
# Label separators IDNA (Python's "idna" codec, RFC 3490 3.1) reads as '.'.
IDNA_DOTS = ("\u3002", "\uff0e", "\uff61")


def _inet_aton(text):
    """TEXT as inet_aton() reads an IPv4 address (1 to 4 parts; each decimal, 0x hex or 0-led octal; the last part
    fills the remaining bytes), as an int; None when it reads none."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        if not part or not part.isascii():
            return None
        if part[:2] in ("0x", "0X"):
            value = int(part[2:] or "0", 16) if all(c in "0123456789abcdefABCDEF" for c in part[2:]) else None
        elif part[0] == "0" and len(part) > 1:
            value = int(part[1:], 8) if all(c in "01234567" for c in part[1:]) else None
        else:
            value = int(part, 10) if part.isdigit() else None
        if value is None:
            return None
        values.append(value)
    last_bits = 8 * (5 - len(values))
    if any(v > 255 for v in values[:-1]) or values[-1] >= 1 << last_bits:
        return None
    number = 0
    for value in values[:-1]:
        number = number << 8 | value
    return number << last_bits | values[-1]


def sglang_server_binds_all(host):
    """Whether a server told to listen on HOST listens on every interface: no host, an empty one, '*', or any
    spelling of 0.0.0.0 or :: (an IPv4-mapped ::ffff:0.0.0.0 too), whatever its case, brackets, zone, surrounding
    whitespace, leading zeros or Unicode compatibility forms."""
    if host is None:
        return True
    text = unicodedata.normalize("NFKC", str(host)).strip().lower()
    for dot in IDNA_DOTS:
        text = text.replace(dot, ".")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    text = text.split("%", 1)[0]  # an IPv6 zone (::%eth0) names an interface, not an address
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]  # a fully qualified spelling of the same name
    if text in ("", "*"):
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return _inet_aton(text) == 0
    if address.is_unspecified:
        return True
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped is not None and mapped.is_unspecified


def sglang_server_address(host):
    """The address a local client connects to (IPv6 literals in brackets)."""
    if host is None:
        host = ""
    if not isinstance(host, str):
        raise AnsibleFilterError("sglang_server_address: the host must be a string, got %r" % (host,))
    host = host.strip()
    if sglang_server_binds_all(host):
        return LOOPBACK
    if host.startswith("[") and host.endswith("]"):
        return host
    if ":" in host:
        return "[%s]" % host
    return host


def sglang_server_url(host, port, scheme="http"):
    """scheme://address:port, without a trailing slash."""
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise AnsibleFilterError("sglang_server_url: the port must be a number, got %r" % (port,))
    if not 0 < port < 65536:
        raise AnsibleFilterError("sglang_server_url: port %d is out of range" % port)
    return "%s://%s:%d" % (scheme, sglang_server_address(host), port)


class FilterModule(object):
    """The server's address and URL, built once."""

    def filters(self):
        return {"sglang_server_address": sglang_server_address, "sglang_server_url": sglang_server_url,
                "sglang_server_binds_all": sglang_server_binds_all}
