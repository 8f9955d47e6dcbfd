# -*- coding: utf-8 -*-
"""A model revision on a host: <models>/<name>/<revision>/, filled atomically, verified, resumable.

Layout under the models directory (one folder per model name):

    <name>/<revision>/                 the revision's files, exactly the manifest's; only ever renamed into place
    <name>/.partial-<revision>/        a fetch in progress (same filesystem, so the rename is atomic); kept when a
                                       fetch stops, and the next run resumes each file with an HTTP Range request
                                       after hashing again what it kept
    <name>/.state/<revision>.json      the record of a verified revision: the manifest (files, sizes, sha256), its
                                       digest, the source and how it was verified. A revision counts as present only
                                       with this record and every file at its size; sha256 again only on request
    <name>/.state/<revision>.progress.json   bytes, total and rate of the fetch in progress (or the last one)
    <name>/current                     NOT written here: the server's restart path switches it (switch_current)
                                       once the server is to run the revision, never under a running server

``ensure`` does one model (sources ``path`` and ``http`` here, ``hf`` in module_utils/model_hub.py, ``peer`` in
module_utils/model_peer.py);
module_utils/model_manifest.py checks the source spec and the manifest. Tokens: a source names a token file on the
host (``token_file``); its content goes into a request header (http) or the hf client's stdin only, never into a
result, a message, a record or the progress file.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import urllib.error
import urllib.parse

from ansible.module_utils.urls import open_url as ansible_open_url

from ansible.module_utils import model_manifest as mm
from ansible.module_utils.model_manifest import ModelError

STATE_DIR = ".state"
PARTIAL = ".partial-"
CURRENT = "current"
CHUNK = 1024 * 1024
MANIFEST_LIMIT = 16 * 1024 * 1024
PROGRESS_EVERY_S = 2.0


# ------------------------------------------------------------------------------------------------------ layout

def revision_dir(models_dir, name, revision):
    return os.path.join(models_dir, name, revision)


def partial_dir(models_dir, name, revision):
    return os.path.join(models_dir, name, PARTIAL + revision)


def record_path(models_dir, name, revision):
    return os.path.join(models_dir, name, STATE_DIR, revision + ".json")


def progress_path(models_dir, name, revision):
    return os.path.join(models_dir, name, STATE_DIR, revision + ".progress.json")


def file_path(directory, entry):
    return os.path.join(directory, *entry["name"].split("/"))


def write_json(path, data):
    """Write JSON atomically (temporary file in the same folder, fsync, rename)."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_record(models_dir, name, revision):
    """The record of a verified revision, or None when there is none or it does not hold together."""
    try:
        with open(record_path(models_dir, name, revision), encoding="utf-8") as handle:
            record = json.load(handle)
        files = mm.parse_manifest(json.dumps({"files": record["files"]}), "record")
    except (OSError, ValueError, KeyError, TypeError, ModelError):
        return None
    if record.get("manifest_sha256") != mm.manifest_digest(files) or record.get("revision") != revision:
        return None
    record["files"] = files
    return record


def write_record(models_dir, name, revision, files, source, verified, model_path, extra=None):
    record = dict(extra or {})
    record.update({"name": name, "revision": revision, "files": files, "manifest_sha256": mm.manifest_digest(files),
                   "total_bytes": mm.total_bytes(files), "source": mm.public_source(source), "verified": verified,
                   "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "path": model_path})
    write_json(record_path(models_dir, name, revision), record)
    return record


def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem that holds path (or would: its nearest ancestor)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def place(partial, final):
    """Rename a verified PARTIAL directory into place as FINAL, readable by the service user (directories 0755, files
    0644). A link inside it is refused, never followed: the manifest names regular files only, and chmod through a
    link planted in a kept partial directory would change a file outside it."""
    for directory, dirs, names in os.walk(partial):
        for item, mode in [(d, 0o755) for d in dirs] + [(n, 0o644) for n in names]:
            path = os.path.join(directory, item)
            if os.path.islink(path):
                raise ModelError("%s is a symbolic link: a revision holds regular files only; nothing placed" % path)
            os.chmod(path, mode)
    os.chmod(partial, 0o755)
    os.rename(partial, final)


def current_link(models_dir, name):
    """Where the server loads <name> from: <models>/<name>/current, whichever revision it points at."""
    return os.path.join(models_dir, name, CURRENT)


def current_target(models_dir, name, revision, model_path):
    """What the current link holds once it points at this revision, as readlink returns it: the revision's name
    for a revision under the models directory, the folder itself for a path source's copy elsewhere."""
    return revision if model_path == revision_dir(models_dir, name, revision) else model_path


def switch_current(models_dir, name, revision, check_mode=False):
    """Point <models>/<name>/current at <revision> atomically; returns (previous target or None, new target).

    NOT called by the sglang_model role: the server's restart path owns this switch (a running server must never
    see its weights change), exactly as it owns the venv's current link. Refuses a revision without a record or
    whose folder is gone. check_mode: the same answer, nothing written."""
    mm.check_name("name", name)
    mm.check_name("revision", revision)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    record = read_record(models_dir, name, revision)
    model_path = (record or {}).get("path") or ""
    if record is None or not os.path.isdir(model_path):
        raise ModelError("%s revision %s is not a verified revision under %s; current left as it was"
                         % (name, revision, models_dir))
    link = current_link(models_dir, name)
    target = current_target(models_dir, name, revision, model_path)
    previous = os.readlink(link) if os.path.islink(link) else None
    if os.path.lexists(link) and previous is None:
        raise ModelError("%s is not a symbolic link; current left as it was" % link)
    if previous == target or check_mode:
        return previous, target
    tmp = os.path.join(models_dir, name, ".current-%d" % os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)
    return previous, target


# ------------------------------------------------------------------------------------------------------ HTTP

def redact(url):
    """A URL as it may be shown: no user:password part, no query (a signed URL's query is a credential)."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += ":%d" % parts.port
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def file_url(base, entry):
    return base.rstrip("/") + "/" + "/".join(urllib.parse.quote(part) for part in entry["name"].split("/"))


def read_token(token_file):
    if not token_file:
        return None
    try:
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError as exc:
        raise ModelError("cannot read the token file %s: %s" % (token_file, exc.strerror or exc))
    if not token or any(c in token for c in "\r\n"):
        raise ModelError("the token file %s is empty or holds more than one line" % token_file)
    return token


def open_url(url, token, timeout, start=0):
    headers = {}
    if start:
        headers["Range"] = "bytes=%d-" % start
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        return ansible_open_url(url, headers=headers, timeout=timeout, http_agent="gpufleet-sglang-model-fetch")
    except urllib.error.HTTPError as exc:
        raise ModelError("GET %s answered %d %s" % (redact(url), exc.code, exc.reason))
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ModelError("GET %s failed: %s" % (redact(url), reason))


def fetch_manifest(url, token, timeout):
    response = open_url(url, token, timeout)
    try:
        data = response.read(MANIFEST_LIMIT + 1)
    except (OSError, http.client.HTTPException) as exc:
        raise ModelError("reading the manifest %s failed: %s" % (redact(url), exc))
    finally:
        response.close()
    if len(data) > MANIFEST_LIMIT:
        raise ModelError("the manifest %s is larger than %d bytes" % (redact(url), MANIFEST_LIMIT))
    return mm.parse_manifest(data, "manifest %s" % redact(url))


class Progress(object):
    """Bytes fetched and the rate, written to a JSON file at most every PROGRESS_EVERY_S seconds."""

    def __init__(self, path, total, clock=time.monotonic):
        self.path, self.total, self.clock = path, total, clock
        self.done = self.transferred = self.hashed = 0
        self.started = self.last = clock()
        self.current = None

    def rate(self):
        elapsed = self.clock() - self.started
        return int(self.transferred / elapsed) if elapsed > 0 else 0

    def summary(self, state):
        return {"state": state, "file": self.current, "done_bytes": self.done, "total_bytes": self.total,
                "transferred_bytes": self.transferred, "hashed_bytes": self.hashed,
                "seconds": round(self.clock() - self.started, 3), "rate_bytes_per_s": self.rate()}

    def tick(self, force=False, state="fetching"):
        now = self.clock()
        if self.path and (force or now - self.last >= PROGRESS_EVERY_S):
            self.last = now
            try:
                write_json(self.path, self.summary(state))
            except OSError:
                pass  # progress is for people watching; a failed write must not stop the fetch


def _hash_kept(path, kept, digest, progress):
    with open(path, "rb") as handle:
        left = kept
        while left:
            chunk = handle.read(min(CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
            progress.hashed += len(chunk)


def fetch_file(base, entry, dest, token, timeout, progress, retries=3):
    """Fetch one manifest file into dest, resuming what dest already holds (hashed again first); returns when
    dest holds exactly the entry, else raises ModelError naming the file (a wrong file is removed)."""
    url = file_url(base, entry)
    size, attempts, restarted = entry["size"], 0, False
    progress.current = entry["name"]
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    while True:
        if size == 0:
            open(dest, "wb").close()
        kept = os.path.getsize(dest) if os.path.exists(dest) else 0
        if kept > size:
            os.unlink(dest)
            kept = 0
        digest = hashlib.sha256()
        if kept:
            _hash_kept(dest, kept, digest, progress)
        got, failure = kept, None
        if kept < size:
            try:
                response = open_url(url, token, timeout, start=kept)
            except ModelError as exc:
                response, failure = None, str(exc)
            if response is not None:
                try:
                    status = getattr(response, "status", 200)
                    if kept and status == 206:
                        content_range = response.headers.get("Content-Range", "")
                        if not content_range.startswith("bytes %d-" % kept):
                            raise ModelError("%s: the mirror answered a Range request for bytes %d- with %r"
                                             % (entry["name"], kept, content_range))
                        mode = "ab"
                    else:  # a whole file (a server that ignores Range): start again
                        mode, got, digest = "wb", 0, hashlib.sha256()
                    with open(dest, mode) as handle:
                        while got < size:
                            chunk = response.read(min(CHUNK, size - got))
                            if not chunk:
                                break
                            handle.write(chunk)
                            digest.update(chunk)
                            got += len(chunk)
                            progress.transferred += len(chunk)
                            progress.done += len(chunk)
                            progress.tick()
                        handle.flush()
                        os.fsync(handle.fileno())
                except (OSError, http.client.HTTPException, socket.timeout) as exc:
                    failure = "%s: %s" % (type(exc).__name__, exc)
                finally:
                    response.close()
        if got < size:
            attempts += 1
            if attempts > retries:
                raise ModelError("fetching %s stopped at %d of %d bytes (%s); what arrived is kept in %s and the "
                                 "next run resumes it" % (entry["name"], got, size,
                                                          failure or "the connection closed early",
                                                          os.path.dirname(dest)))
            continue
        actual = digest.hexdigest()
        if actual == entry["sha256"]:
            progress.done += kept
            return
        os.unlink(dest)
        if kept and not restarted:  # the kept part may be what is wrong: once more from the first byte
            restarted = True
            continue
        raise ModelError("%s from %s has sha256 %s, the manifest says %s; the file was removed and the revision "
                         "is not used" % (entry["name"], redact(url), actual, entry["sha256"]))


# ------------------------------------------------------------------------------------------------------ one model

def _present(models_dir, name, revision, verify, counter, files=None):
    """(record, problems) of a revision already in place with its record; (None, None) when it is not."""
    record = read_record(models_dir, name, revision)
    if record is None or (files is not None and record["manifest_sha256"] != mm.manifest_digest(files)):
        return None, None
    where = record.get("path") or revision_dir(models_dir, name, revision)
    if not os.path.isdir(where):
        return None, None
    return record, mm.verify_dir(where, record["files"], verify, counter)


def _refuse_corrupt(where, problems):
    raise ModelError("%s does not hold the revision, so it is not used: %s. %s" % (
        where, "; ".join(problems[:5]) + ("; and %d more" % (len(problems) - 5) if len(problems) > 5 else ""),
        "Remove it (no server may run from it) and run again to fetch it anew" if "/" in where else ""))


def _result(model_path, files, **extra):
    result = {"model_path": model_path, "manifest_sha256": mm.manifest_digest(files) if files else None,
              "files": len(files or []), "total_bytes": mm.total_bytes(files or []), "would_fetch": [],
              "would_fetch_bytes": 0, "transferred_bytes": 0, "hashed_bytes": 0, "seconds": 0.0,
              "rate_bytes_per_s": 0, "changed": False}
    result.update(extra)
    return result


def ensure(models_dir, name, revision, source, verify="size", margin=0, check_mode=False, timeout=60,
           retries=3, free=free_bytes, hf_python=None, hf_require_commit=False, peer_transport=None,
           peer_probe=False):
    """Make <models_dir>/<name>/<revision> a verified copy of the revision (or verify a path source in place).

    Returns the module's result (model_path, manifest_sha256, changed, bytes transferred and hashed, would_fetch in
    check mode); raises ModelError with the reason, naming the file that failed. ``free`` gives the free bytes of a
    path (injected by the tests). ``hf_python`` is the interpreter of the venv holding huggingface_hub (hf sources,
    module_utils/model_hub.py); ``hf_require_commit`` refuses an hf revision that is not a 40-hex commit.
    ``peer_transport`` says how to reach a peer (module_utils/model_peer.py); ``peer_probe`` only reports whether a
    peer source's revision is here (``present``), copying nothing."""
    mm.check_name("name", name)
    mm.check_name("revision", revision)
    if verify not in mm.VERIFY_MODES:
        raise ModelError("verify must be one of %s, got %r" % (", ".join(mm.VERIFY_MODES), verify))
    source = mm.check_source(source, revision, require_commit=hf_require_commit)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    if source["type"] == "path":
        return _ensure_path(models_dir, name, revision, source, verify, check_mode)
    if source["type"] == "hf":
        # Imported here: model_hub imports this module.
        from ansible.module_utils import model_hub  # pylint: disable=import-outside-toplevel

        return model_hub.ensure_hf(models_dir, name, revision, source, verify, margin, check_mode, timeout, retries,
                                   free, hf_python)
    if source["type"] == "peer":
        from ansible.module_utils import model_peer  # pylint: disable=import-outside-toplevel

        return model_peer.ensure_peer(models_dir, name, revision, source, verify, margin, check_mode, timeout,
                                      retries, free, peer_transport, peer_probe)
    return _ensure_http(models_dir, name, revision, source, verify, margin, check_mode, timeout, retries, free)


def _ensure_path(models_dir, name, revision, source, verify, check_mode):
    where, counter = source["path"], [0]
    try:
        with open(source["manifest"], "rb") as handle:
            files = mm.parse_manifest(handle.read(MANIFEST_LIMIT + 1), "manifest %s" % source["manifest"])
    except OSError as exc:
        raise ModelError("cannot read the manifest %s: %s" % (source["manifest"], exc.strerror or exc))
    if not os.path.isdir(where):
        raise ModelError("source path %s is not a directory on this host" % where)
    record, problems = _present(models_dir, name, revision, verify, counter, files)
    if record is not None and record.get("path") == where:
        if problems:
            _refuse_corrupt(where, problems)
        return _result(where, files, verified=verify, hashed_bytes=counter[0])
    problems = mm.verify_dir(where, files, "full", counter)
    if problems:
        _refuse_corrupt(where, problems)
    if not check_mode:
        os.makedirs(os.path.join(models_dir, name, STATE_DIR), mode=0o755, exist_ok=True)
        write_record(models_dir, name, revision, files, source, "full", where)
    return _result(where, files, verified="full", hashed_bytes=counter[0], changed=True)


def _lock(models_dir, name):
    state = os.path.join(models_dir, name, STATE_DIR)
    os.makedirs(state, mode=0o755, exist_ok=True)
    handle = open(os.path.join(state, ".lock"), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise ModelError("another fetch of %s holds %s; try again when it ended" % (name, state))
        raise
    return handle


def _ensure_http(models_dir, name, revision, source, verify, margin, check_mode, timeout, retries, free):
    final, counter = revision_dir(models_dir, name, revision), [0]
    # Present and recorded: the mirror is not asked at all (a pinned revision does not change).
    record, problems = _present(models_dir, name, revision, verify, counter)
    if record is not None:
        if problems:
            _refuse_corrupt(final, problems)
        return _result(final, record["files"], verified=verify, hashed_bytes=counter[0])
    token = read_token(source.get("token_file"))
    files = fetch_manifest(source["manifest_url"], token, timeout)
    if os.path.isdir(final):  # in place without a record (an interrupted run, or put there by hand): hash it
        problems = mm.verify_dir(final, files, "full", counter)
        if problems:
            _refuse_corrupt(final, problems)
        if not check_mode:
            write_record(models_dir, name, revision, files, source, "full", final)
        return _result(final, files, verified="full", hashed_bytes=counter[0], changed=True)
    partial = partial_dir(models_dir, name, revision)
    would, needed = [], 0
    for entry in files:
        path = file_path(partial, entry)
        kept = os.path.getsize(path) if os.path.isfile(path) else 0
        if kept != entry["size"] or not os.path.isfile(path):
            would.append({"name": entry["name"], "size": entry["size"], "kept": min(kept, entry["size"])})
            needed += entry["size"] - min(kept, entry["size"])
    problem = mm.space_problem(needed, free(os.path.join(models_dir, name)), margin)
    if problem:
        raise ModelError(problem)
    if check_mode:
        return _result(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="none")
    os.makedirs(partial, mode=0o755, exist_ok=True)
    lock = _lock(models_dir, name)
    try:
        progress = Progress(progress_path(models_dir, name, revision), mm.total_bytes(files))
        try:
            for entry in files:
                fetch_file(source["url"], entry, file_path(partial, entry), token, timeout, progress, retries)
        finally:
            progress.tick(force=True, state="fetching" if progress.done < progress.total else "verified")
        place(partial, final)
        write_record(models_dir, name, revision, files, source, "full", final)
        summary = progress.summary("verified")
    finally:
        lock.close()
    return _result(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="full",
                   transferred_bytes=summary["transferred_bytes"],
                   hashed_bytes=summary["hashed_bytes"] + counter[0], seconds=summary["seconds"],
                   rate_bytes_per_s=summary["rate_bytes_per_s"], progress_file=progress.path)
