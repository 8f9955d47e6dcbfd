# -*- coding: utf-8 -*-
"""What a model revision is: its source spec, its manifest, and whether a directory holds it.

Pure Python, no I/O beyond reading the files it is asked to check (the sglang_model_fetch module and
module_utils/model_store.py use it):

* ``check_source``: the operator's source spec for one model, validated (``peer``: an inventory host holding a
  verified copy, module_utils/model_peer.py).
* ``parse_manifest``: a manifest (JSON ``{"files": [{"name", "size", "sha256"}, ...]}``) validated, with file
  names that cannot leave the revision's directory; ``manifest_digest`` is one sha256 over it (name, size, sha256
  of every file, sorted), the value a deployment records and compares; ``manifest_text`` the file's text as
  module_utils/model_manifest_writer.py writes it.
* ``verify_dir``: every file of a manifest in a directory, by size (a stat) or in full (sha256), and the first
  problem named.
* ``space_problem``: whether the bytes still to fetch plus a margin fit the free space, with the figures.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_module
import urllib.parse

SOURCE_TYPES = ("path", "http", "hf", "peer")
SUPPORTED_SOURCES = ("path", "http", "hf", "peer")
VERIFY_MODES = ("size", "full")
# Names of models and revisions become directory names under the models directory.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}\Z")
# A Hugging Face repository id, owner/name (it goes into the hub's URLs).
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")
# Which fields each source type takes (the rest must be empty), and which it needs.
SOURCE_FIELDS = {
    "path": {"required": ("path", "manifest"), "optional": ()},
    "http": {"required": ("url",), "optional": ("manifest_url", "token_file")},
    # A Hugging Face repository at a revision (a 40-hex commit, or a branch or tag name resolved to its commit and
    # recorded); endpoint is HF_ENDPOINT (an internal mirror); the token is read from a file on the host, never
    # passed as an argument.
    "hf": {"required": ("repo",), "optional": ("endpoint", "token_file")},
    # Another inventory host holding a verified copy of the same revision (rsync over SSH): path is its models
    # directory (this host's without it), manifest_sha256 the digest its record must carry (pinned by the operator).
    "peer": {"required": ("host",), "optional": ("path", "manifest_sha256")},
}
ALL_FIELDS = ("type", "path", "manifest", "url", "manifest_url", "token_file", "repo", "endpoint", "host",
              "manifest_sha256")
# An inventory host name: no whitespace, control characters, quotes or '/'.
HOST_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,252}\Z")
# A peer's models directory goes into a remote path its shell reads: plain characters only.
PEER_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+@=-]*\Z")
HASH_CHUNK = 8 * 1024 * 1024


# Names a revision may not take: the link the server loads through, and the suffixes of the files kept beside the
# records (<revision>.progress.json would be the progress file of <revision>).
RESERVED_REVISIONS = ("current",)
RESERVED_SUFFIXES = (".progress", ".lock", ".json")


class ModelError(Exception):
    """A model, its source or its manifest is not what it must be; the message says which and why."""


def check_name(what, value):
    if not isinstance(value, str) or not NAME_RE.fullmatch(value) or value in (".", ".."):
        raise ModelError("%s must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit "
                         "(it names a directory), got %r" % (what, value))
    return value


def revision_problem(what, value):
    """Why VALUE cannot name a revision folder (None when it can): a plain name, not 'current' and not ending in
    the suffix of a file kept beside the records."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value) or value in (".", ".."):
        return ("%s must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (it names a "
                "directory), got %r" % (what, value))
    if value.lower() in RESERVED_REVISIONS:
        return "%s %r is reserved: <name>/current is the link the server loads through" % (what, value)
    for suffix in RESERVED_SUFFIXES:
        if value.lower().endswith(suffix):
            return "%s %r ends in %s, reserved for the files kept beside the records" % (what, value, suffix)
    return None


def check_revision(what, value):
    problem = revision_problem(what, value)
    if problem:
        raise ModelError(problem)
    return value


def check_source(source, revision, require_commit=False):
    """The source spec with only the fields its type takes; ModelError names what is wrong."""
    if not isinstance(source, dict):
        raise ModelError("source must be a mapping with a type (one of %s), got %r"
                         % (", ".join(SOURCE_TYPES), type(source).__name__))
    kind = source.get("type")
    if kind not in SOURCE_TYPES:
        raise ModelError("source.type must be one of %s, got %r" % (", ".join(SOURCE_TYPES), kind))
    unknown = sorted(set(source) - set(ALL_FIELDS))
    if unknown:
        raise ModelError("source has unknown fields: %s" % ", ".join(unknown))
    fields = SOURCE_FIELDS[kind]
    given = {key: value for key, value in source.items() if key != "type" and value not in (None, "")}
    missing = [key for key in fields["required"] if key not in given]
    if missing:
        raise ModelError("source type %s needs %s" % (kind, ", ".join(missing)))
    extra = sorted(set(given) - set(fields["required"]) - set(fields["optional"]))
    if extra:
        raise ModelError("source type %s does not take %s" % (kind, ", ".join(extra)))
    for key, value in given.items():
        if not isinstance(value, str):
            raise ModelError("source.%s must be a string" % key)
    if kind == "http":
        for key in ("url", "manifest_url"):
            if key in given and not re.fullmatch(r"https?://[^\s/]+\S*", given[key]):
                raise ModelError("source.%s must be an http:// or https:// URL without whitespace" % key)
    if kind == "hf":
        if not REPO_RE.fullmatch(given["repo"]) or ".." in given["repo"]:
            raise ModelError("source.repo must be a Hugging Face repository id, owner/name, got %r" % given["repo"])
        if "endpoint" in given and not re.fullmatch(r"https?://[^\s/?#@]+(/[^\s?#]*)?", given["endpoint"]):
            raise ModelError("source.endpoint must be an http:// or https:// URL without whitespace, query or "
                             "fragment (the hub's HF_ENDPOINT)")
        if require_commit and not COMMIT_RE.fullmatch(revision or ""):
            raise ModelError("source type hf needs revision to be a 40-hex commit hash here (hf_require_commit is "
                             "on: a branch or tag moves), got %r" % revision)
    if kind == "peer":
        if not HOST_RE.fullmatch(given["host"]):
            raise ModelError("source.host must be an inventory host name, got %r" % given["host"])
        if "path" in given and (not PEER_PATH_RE.fullmatch(given["path"]) or "/../" in given["path"] + "/"):
            raise ModelError("source.path (the peer's models directory) must be an absolute path of letters, "
                             "digits and ._/+@=-, got %r" % given["path"])
        if "manifest_sha256" in given:
            if not SHA256_RE.fullmatch(given["manifest_sha256"]):
                raise ModelError("source.manifest_sha256 must be 64 lowercase hex digits (the digest the peer's "
                                 "record must carry), got %r" % given["manifest_sha256"])
    if kind not in SUPPORTED_SOURCES:
        raise ModelError("source type %s is not yet supported (this release fetches from %s)"
                         % (kind, " and ".join(SUPPORTED_SOURCES)))
    result = dict(given, type=kind)
    if kind == "http":
        result.setdefault("manifest_url", result["url"].rstrip("/") + "/manifest.json")
    return result


URL_FIELDS = ("url", "manifest_url", "endpoint")


def redact_url(url):
    """A URL without what may be a credential: the user:password part, the query and the fragment."""
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.hostname or ""
        if ":" in netloc:
            netloc = "[%s]" % netloc
        if parts.port:
            netloc += ":%d" % parts.port
    except ValueError:
        return "(a URL that cannot be parsed)"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def url_secrets(url):
    """The parts of a URL that may be credentials (password, user, query, fragment), to be masked wherever shown."""
    try:
        parts = urllib.parse.urlsplit(url)
        found = [parts.password, parts.username, parts.query, parts.fragment]
    except ValueError:
        return [url]
    return [value for value in found if value]


def public_source(source):
    """The source as it may be shown and recorded (a token file's path is fine; no token is ever held here; URLs
    without user:password, query or fragment)."""
    return {key: redact_url(value) if key in URL_FIELDS and isinstance(value, str) else value
            for key, value in source.items() if key in ALL_FIELDS}


def check_file_name(name):
    """A manifest file name: relative, '/'-separated, no empty, '.' or '..' part, no control characters."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return "must be a relative '/'-separated path"
    if re.search(r"[\x00-\x1f\x7f]", name):
        return "holds control characters"
    if re.search(r"[\ud800-\udfff]", name):
        return "holds a lone surrogate (not a Unicode file name)"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return "has an empty, '.' or '..' part"
    return None


def parse_manifest(data, where="manifest"):
    """[{name, size, sha256}] sorted by name from a manifest's bytes or text; ModelError names the bad entry."""
    try:
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        doc = json.loads(data)
    except ValueError as exc:
        raise ModelError("%s is not JSON: %s" % (where, str(exc)[:200]))
    except RecursionError:
        raise ModelError("%s is nested too deeply to be a manifest" % where)
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not files:
        raise ModelError('%s must be {"files": [{"name", "size", "sha256"}, ...]} with at least one file' % where)
    seen, result = set(), []
    for index, entry in enumerate(files):
        if not isinstance(entry, dict):
            raise ModelError("%s: files[%d] is not a mapping" % (where, index))
        name, size, digest = entry.get("name"), entry.get("size"), entry.get("sha256")
        problem = check_file_name(name)
        if problem:
            raise ModelError("%s: files[%d] name %r %s" % (where, index, name, problem))
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ModelError("%s: %s has no size in bytes (a whole number, 0 or more)" % (where, name))
        if not isinstance(digest, str) or not SHA256_RE.fullmatch(digest.lower()):
            raise ModelError("%s: %s has no sha256 (64 hex digits)" % (where, name))
        if name in seen:
            raise ModelError("%s: %s is listed twice" % (where, name))
        seen.add(name)
        result.append({"name": name, "size": size, "sha256": digest.lower()})
    refuse_prefix_clash(seen, where)
    return sorted(result, key=lambda entry: entry["name"])


def refuse_prefix_clash(names, where):
    """ModelError when one name is a file and also a folder of another (``a`` and ``a/c``, whatever sorts between)."""
    names = set(names)
    folders = set()
    for name in names:
        parts = name.split("/")
        folders.update("/".join(parts[:index]) for index in range(1, len(parts)))
    clash = sorted(names & folders)
    if clash:
        inside = sorted(name for name in names if name.startswith(clash[0] + "/"))
        raise ModelError("%s: %s is both a file and a folder of %s" % (where, clash[0], inside[0]))


def manifest_digest(files):
    """One sha256 over the manifest's content (independent of its formatting and order)."""
    canon = json.dumps([[f["name"], f["size"], f["sha256"]] for f in sorted(files, key=lambda f: f["name"])],
                       separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def manifest_text(files):
    """The manifest's text for FILES: the JSON parse_manifest reads, sorted by name, one key per line."""
    entries = [{"name": f["name"], "size": f["size"], "sha256": f["sha256"]}
               for f in sorted(files, key=lambda f: f["name"])]
    return json.dumps({"files": entries}, indent=1)


def total_bytes(files):
    return sum(entry["size"] for entry in files)


def sha256_path(path, counter=None):
    """sha256 of a file, read in chunks; counter (a one-item list) adds the bytes hashed."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat_module.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        while True:
            chunk = handle.read(HASH_CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            if counter is not None:
                counter[0] += len(chunk)
    return digest.hexdigest()


def file_problem(path, entry, mode, counter=None):
    """Why the file at path is not the manifest's entry (None when it is): missing, size, or sha256 in full mode."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "%s is missing" % entry["name"]
    except OSError as exc:
        return "%s cannot be read: %s" % (entry["name"], exc.strerror or exc)
    if not stat_module.S_ISREG(info.st_mode):
        return "%s is not a regular file" % entry["name"]
    if info.st_size != entry["size"]:
        return "%s has %d bytes, the manifest says %d" % (entry["name"], info.st_size, entry["size"])
    if mode == "full":
        try:
            actual = sha256_path(path, counter)
        except OSError as exc:
            return "%s cannot be read: %s" % (entry["name"], exc.strerror or exc)
        if actual != entry["sha256"]:
            return "%s has sha256 %s, the manifest says %s" % (entry["name"], actual, entry["sha256"])
    return None


def verify_dir(directory, files, mode, counter=None):
    """Every problem of the directory against the manifest, in name order ([] when it holds the revision)."""
    if mode not in VERIFY_MODES:
        raise ModelError("verify must be one of %s, got %r" % (", ".join(VERIFY_MODES), mode))
    problems = []
    for entry in files:
        problem = file_problem(os.path.join(directory, *entry["name"].split("/")), entry, mode, counter)
        if problem:
            problems.append(problem)
    return problems


def space_problem(needed, free, margin):
    """A refusal with the figures when needed + margin bytes exceed free, else None."""
    if needed + margin <= free:
        return None
    return ("not enough free space: %s to fetch + %s margin = %s needed, %s free (%s short); free some space, "
            "or lower the margin" % (human(needed), human(margin), human(needed + margin), human(free),
                                     human(needed + margin - free)))


def human(count):
    """Bytes for a person, with the exact figure: '1.5 GiB (1610612736 bytes)'."""
    value, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            break
        value /= 1024
    if unit == "B":
        return "%d bytes" % count
    return "%.1f %s (%d bytes)" % (value, unit, count)
