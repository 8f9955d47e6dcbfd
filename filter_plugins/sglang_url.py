# -*- coding: utf-8 -*-
"""Where a client on the server's own host reaches an SGLang server: the one place its URL is built.

    {{ sglang_server_host | sglang_server_address }}                       -> 127.0.0.1, [::1], gpu1.example
    {{ sglang_server_host | sglang_server_url(sglang_server_port) }}       -> http://127.0.0.1:30000

A server bound to every interface (0.0.0.0, ::, or no host at all) answers on loopback too; 127.0.0.1 also reaches
one bound to :: (Linux's default dual-stack sockets), as the roles always did. An IPv6 literal is bracketed.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

WILDCARDS = ("", "0.0.0.0", "::", "[::]")
LOOPBACK = "127.0.0.1"


def sglang_server_address(host):
    """The address a local client connects to (IPv6 literals in brackets)."""
    if host is None:
        host = ""
    if not isinstance(host, str):
        raise AnsibleFilterError("sglang_server_address: the host must be a string, got %r" % (host,))
    host = host.strip()
    if host in WILDCARDS:
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
        return {"sglang_server_address": sglang_server_address, "sglang_server_url": sglang_server_url}
