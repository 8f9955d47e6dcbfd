# -*- coding: utf-8 -*-
"""Prometheus scrape targets for the hosts a deploy reached, as file_sd JSON (``file_sd_configs``).

``targets(hosts, group)`` gives one list of target groups per scrape job: ``node`` (node_exporter, which serves the
deploy's and the drift check's textfiles) for every host, and ``sglang`` (the server's own ``/metrics``) for every
host whose server listens beyond loopback (at the host's address when it listens on every interface, else at the
address it listens on): a server on loopback (the roles' default) is left out of ``sglang`` and named in
``loopback`` instead. ``render(groups)`` is the file's text. Each target group holds
one host, labelled ``host`` (its inventory name) and ``group`` (the inventory group deployed). Pure logic, no I/O.
"""
from __future__ import annotations

import ipaddress
import json
import re

_LABEL_PART = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(r"(?=.{1,253}\Z)%s(?:\.%s)*\.?" % (_LABEL_PART, _LABEL_PART))
_LABEL = re.compile(r"[A-Za-z0-9_.:@-]{1,200}")
JOBS = ("node", "sglang")


class TargetError(Exception):
    """A host that cannot be a scrape target; the message names it."""


def _address(value, what):
    """VALUE as a target's host part (an IPv6 address in brackets), or TargetError."""
    if not isinstance(value, str):
        raise TargetError("%s must be a host name or IP address, got %r" % (what, value))
    try:
        ip = ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        if not _HOSTNAME.fullmatch(value):
            raise TargetError("%s is not a host name or IP address: %r" % (what, value))
        return value
    return "[%s]" % ip if ip.version == 6 else str(ip)


def _port(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise TargetError("%s must be a port number from 1 to 65535, got %r" % (what, value))
    return value


def _label(value, what):
    if not isinstance(value, str) or not _LABEL.fullmatch(value):
        raise TargetError("%s must be 1 to 200 letters, digits or _.:@-, got %r" % (what, value))
    return value


def loopback(listen):
    """Whether a server listening on LISTEN answers only on its own host."""
    if listen == "localhost":
        return True
    try:
        return ipaddress.ip_address(listen).is_loopback
    except ValueError:
        return False


def binds_all(listen):
    """Whether a server listening on LISTEN answers on every interface (empty, 0.0.0.0, ::, ::ffff:0.0.0.0)."""
    if listen == "":
        return True
    try:
        ip = ipaddress.ip_address(listen.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_unspecified or bool(mapped and mapped.is_unspecified)


def targets(hosts, group, node_port=9100):
    """{"node": [...], "sglang": [...], "loopback": [names]} for HOSTS, a list of mappings with ``name`` (inventory
    name), ``address`` (where Prometheus reaches the host), ``listen`` (sglang_server_host: the server's listen
    address, empty for every interface) and ``port`` (the server's port). TargetError on anything that cannot be
    written."""
    group = _label(group, "the group")
    _port(node_port, "the node exporter's port")
    if not isinstance(hosts, list):
        raise TargetError("hosts must be a list, got %r" % (hosts,))
    out = {"node": [], "sglang": [], "loopback": []}
    seen = set()
    for index, host in enumerate(hosts):
        if not isinstance(host, dict):
            raise TargetError("hosts[%d] must be a mapping, got %r" % (index, host))
        name = _label(host.get("name"), "hosts[%d].name" % index)
        if name in seen:
            raise TargetError("host %s is listed twice" % name)
        seen.add(name)
        address = _address(host.get("address"), "%s's address" % name)
        labels = {"host": name, "group": group}
        out["node"].append({"targets": ["%s:%d" % (address, node_port)], "labels": labels})
        listen = host.get("listen")
        if not isinstance(listen, str):
            raise TargetError("%s's listen address must be text, got %r" % (name, listen))
        port = _port(host.get("port"), "%s's server port" % name)
        if loopback(listen):
            out["loopback"].append(name)
            continue
        # Every interface: the host's own address; one address: that one.
        server = address if binds_all(listen) else _address(listen, "%s's listen address" % name)
        out["sglang"].append({"targets": ["%s:%d" % (server, port)], "labels": dict(labels)})
    return out


def render(groups):
    """The file_sd JSON of target GROUPS (one job's list), stable from run to run."""
    return json.dumps(sorted(groups, key=lambda g: g["labels"]["host"]), indent=2, sort_keys=True) + "\n"
