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

Every path below the models directory is reached through module_utils/safe_files.py: no link followed, no FIFO or
device opened, writes only into folders root alone can change (``<name>``, ``.state``, ``.partial-<revision>``),
records read only from such folders; anything else is refused with a message naming the path and the rule.

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
import stat
import time
import urllib.error
import urllib.parse

from ansible.module_utils.urls import open_url as ansible_open_url

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import safe_files
from ansible.module_utils.model_manifest import ModelError
from ansible.module_utils.safe_files import UnsafeFile

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


def tree(models_dir, create=False):
    """The models directory as a safe_files.Tree: every path below it is reached through no link. FileNotFoundError
    when it does not exist (and not CREATE: made 0755)."""
    return safe_files.Tree(models_dir, create=create)


def relative(models_dir, path):
    """PATH's components below MODELS_DIR (UnsafeFile when it is not below it)."""
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(models_dir))
    return safe_files.parts_of(rel.split(os.sep))


def json_bytes(data):
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8")


def write_json(path, data, models_dir=None):
    """Write JSON atomically (temporary file in the same folder, fsync, rename), through no link below
    MODELS_DIR (default: the file's folder is the trusted root)."""
    root = models_dir or os.path.dirname(os.path.abspath(path))
    with tree(root, create=True) as models:
        models.write_atomic(relative(root, path), json_bytes(data))


def load_json(data, where):
    """JSON from bytes; ModelError (never a traceback) for bad UTF-8, bad JSON or nesting too deep."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except (ValueError, RecursionError) as exc:
        raise ModelError("%s is not JSON this module reads: %s" % (where, str(exc)[:200] or type(exc).__name__))


def read_record(models_dir, name, revision):
    """The record of a verified revision, or None when there is none or it does not hold together. A record that
    is a link or not a regular file, or a .state or model folder that is one or that root does not own alone, is
    refused (ModelError naming it): what decides is only ever what root alone could write."""
    path = record_path(models_dir, name, revision)
    try:
        with tree(models_dir) as models:
            fd = models.open_file([name, STATE_DIR, revision + ".json"], owned=True)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MANIFEST_LIMIT + 1)
    except FileNotFoundError:
        return None
    except UnsafeFile as exc:
        raise ModelError(str(exc))
    except OSError:
        return None
    try:
        record = load_json(data, path)
        files = mm.parse_manifest(json.dumps({"files": record["files"]}), "record")
    except (ValueError, KeyError, TypeError, ModelError, RecursionError):
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
    with tree(models_dir, create=True) as models:
        models.write_atomic([name, STATE_DIR, revision + ".json"], json_bytes(record))
    return record


def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem that holds path (or would: its nearest ancestor)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def place(partial, final):
    """Rename a verified PARTIAL directory into place as FINAL, readable by the service user (directories 0755, files
    0644). A link or anything but a regular file or folder inside it is refused, never followed, before any mode
    changes: the manifest names regular files only, and chmod through a link planted in a kept partial directory
    would change a file outside it. Modes are set through descriptors; the rename is renameat in their folder."""
    folder = os.path.dirname(os.path.abspath(partial))
    if folder != os.path.dirname(os.path.abspath(final)):
        raise ModelError("%s and %s are not in one folder; nothing placed" % (partial, final))
    try:
        with safe_files.Tree(folder) as here:
            name = os.path.basename(os.path.abspath(partial))
            os.close(here.open_dir([name], owned=True))
            here.chmod_tree([name])
            here.rename([], name, os.path.basename(os.path.abspath(final)))
    except UnsafeFile as exc:
        raise ModelError("%s; nothing placed" % exc)


def current_link(models_dir, name):
    """Where the server loads <name> from: <models>/<name>/current, whichever revision it points at."""
    return os.path.join(models_dir, name, CURRENT)


def current_target(models_dir, name, revision, model_path):
    """What the current link holds once it points at this revision, as readlink returns it: the revision's name
    for a revision under the models directory, the folder itself for a path source's copy elsewhere."""
    return revision if model_path == revision_dir(models_dir, name, revision) else model_path


def read_current(models, name):
    """What <name>/current holds (readlink, through no link on the way), or None; ModelError when it is not a
    link."""
    info = models.stat([name, CURRENT])
    if info is None:
        return None
    if not stat.S_ISLNK(info.st_mode):
        raise ModelError("%s is not a symbolic link (it is %s); current left as it was"
                         % (models.shown([name, CURRENT]), safe_files.kind_of(info.st_mode)))
    fd = models.open_dir([name])
    try:
        return os.readlink(CURRENT, dir_fd=fd)
    finally:
        os.close(fd)


def switch_current(models_dir, name, revision, check_mode=False):
    """Point <models>/<name>/current at <revision> atomically; returns (previous target or None, new target).

    NOT called by the sglang_model role: the server's restart path owns this switch (a running server must never
    see its weights change), exactly as it owns the venv's current link. Refuses a revision without a record or
    whose folder is gone. check_mode: the same answer, nothing written."""
    mm.check_name("name", name)
    mm.check_revision("revision", revision)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    try:
        models = tree(models_dir)
    except FileNotFoundError:
        raise ModelError("%s revision %s is not a verified revision under %s (no such folder); current left as it "
                         "was" % (name, revision, models_dir))
    try:
        with models:
            record = read_record(models_dir, name, revision)
            model_path = (record or {}).get("path") or ""
            inside = model_path == revision_dir(models_dir, name, revision)
            if record is None or not (models.kind([name, revision]) == "folder" if inside
                                      else os.path.isdir(model_path)):
                raise ModelError("%s revision %s is not a verified revision under %s; current left as it was"
                                 % (name, revision, models_dir))
            target = current_target(models_dir, name, revision, model_path)
            previous = read_current(models, name)
            if previous == target or check_mode:
                return previous, target
            fd = models.open_dir([name], owned=True)
            try:
                tmp = ".current-%d" % os.getpid()
                try:
                    os.unlink(tmp, dir_fd=fd)
                except FileNotFoundError:
                    pass
                os.symlink(target, tmp, dir_fd=fd)
                os.rename(tmp, CURRENT, src_dir_fd=fd, dst_dir_fd=fd)
            finally:
                os.close(fd)
            return previous, target
    except UnsafeFile as exc:
        raise ModelError("%s; current left as it was" % exc)


# ------------------------------------------------------------------------------------------------------ HTTP

redact = mm.redact_url  # a URL as it may be shown: no user:password, query or fragment


def origin(url):
    """(scheme, host, port) of a URL, the port filled in from the scheme."""
    parts = urllib.parse.urlsplit(url)
    return (parts.scheme.lower(), (parts.hostname or "").lower(),
            parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower()))


def file_url(base, entry):
    return base.rstrip("/") + "/" + "/".join(urllib.parse.quote(part) for part in entry["name"].split("/"))


def read_token(token_file):
    """The bearer token in TOKEN_FILE: one line of UTF-8 that is also Latin-1 (it goes into an HTTP header). The
    file is opened without blocking and must be a regular file (a FIFO would hang the module)."""
    if not token_file:
        return None
    try:
        data = safe_files.read_regular(token_file, 64 * 1024)
    except UnsafeFile as exc:
        raise ModelError("the token file %s" % exc)
    except OSError as exc:
        raise ModelError("cannot read the token file %s: %s" % (token_file, exc.strerror or exc))
    if len(data) > 64 * 1024:
        raise ModelError("the token file %s is larger than 64 KiB: not a token" % token_file)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ModelError("the token file %s is not UTF-8 text" % token_file)
    if not token or any(c in token for c in "\r\n"):
        raise ModelError("the token file %s is empty or holds more than one line" % token_file)
    try:
        token.encode("latin-1")
    except UnicodeEncodeError:
        raise ModelError("the token in %s holds characters an HTTP header cannot carry (not Latin-1)" % token_file)
    if any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ModelError("the token in %s holds control characters" % token_file)
    return token


REDIRECTS = 10


def remaining(deadline):
    return None if deadline is None else deadline - time.monotonic()


def check_deadline(deadline, what, got=None, size=None):
    left = remaining(deadline)
    if left is not None and left <= 0:
        raise DeadlineError("%s took longer than its deadline%s; what arrived is kept and the next run resumes it"
                            % (what, "" if got is None else " (stopped at %d of %d bytes)" % (got, size)))


class DeadlineError(ModelError):
    """A file or a whole fetch ran past its deadline (a mirror that answers too slowly, byte by byte)."""


def open_url(url, token, timeout, start=0, deadline=None):
    """GET URL (from byte START), following up to REDIRECTS redirects by hand: the bearer token goes only to the
    origin (scheme, host, port) it was given for, never to another one a redirect names."""
    first = origin(url)
    for _hop in range(REDIRECTS + 1):
        check_deadline(deadline, "GET %s" % redact(url))
        headers = {}
        if start:
            headers["Range"] = "bytes=%d-" % start
        if token and origin(url) == first:
            headers["Authorization"] = "Bearer " + token
        left = remaining(deadline)
        wait = timeout if left is None else max(0.05, min(timeout, left))
        try:
            return ansible_open_url(url, headers=headers, timeout=wait, http_agent="gpufleet-sglang-model-fetch",
                                    follow_redirects="none", use_netrc=False)
        except urllib.error.HTTPError as exc:
            location = exc.headers.get("Location") if exc.code in (301, 302, 303, 307, 308) else None
            exc.close()
            if not location:
                raise ModelError("GET %s answered %d %s" % (redact(url), exc.code, exc.reason))
            url = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                raise ModelError("GET answered a redirect to %s, not an http:// or https:// URL" % redact(url))
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise ModelError("GET %s failed: %s" % (redact(url), reason))
    raise ModelError("GET %s: more than %d redirects" % (redact(url), REDIRECTS))


def read_some(response, count, deadline, timeout):
    """Up to COUNT bytes, as soon as any arrive (b'' at the end), never blocking past the deadline by more than one
    socket wait: a mirror that sends a byte now and then is stopped by the deadline, not only by the idle timeout."""
    left = remaining(deadline)
    if left is not None:
        sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
        if sock is not None:
            sock.settimeout(max(0.05, min(timeout, left)))
    reader = getattr(response, "read1", None) or response.read
    return reader(count)


def fetch_manifest(url, token, timeout, deadline=None):
    response = open_url(url, token, timeout, deadline=deadline)
    chunks, total = [], 0
    try:
        while total <= MANIFEST_LIMIT:
            check_deadline(deadline, "reading the manifest %s" % redact(url))
            chunk = read_some(response, MANIFEST_LIMIT + 1 - total, deadline, timeout)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except (OSError, http.client.HTTPException) as exc:
        check_deadline(deadline, "reading the manifest %s" % redact(url))
        raise ModelError("reading the manifest %s failed: %s" % (redact(url), exc))
    finally:
        response.close()
    if total > MANIFEST_LIMIT:
        raise ModelError("the manifest %s is larger than %d bytes" % (redact(url), MANIFEST_LIMIT))
    return mm.parse_manifest(b"".join(chunks), "manifest %s" % redact(url))


class Progress(object):
    """Bytes fetched and the rate, written to a JSON file at most every PROGRESS_EVERY_S seconds (through no link
    below MODELS_DIR)."""

    def __init__(self, path, total, clock=time.monotonic, models_dir=None):
        self.path, self.total, self.clock, self.models_dir = path, total, clock, models_dir
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
                write_json(self.path, self.summary(state), self.models_dir)
            except OSError:
                pass  # progress is for people watching; a failed write must not stop the fetch


class Staging(object):
    """The files of a revision's .partial- folder, each reached through no link from the models directory: sizes,
    reads, writes and removals refuse a link, a FIFO or anything but a regular file (UnsafeFile naming it), and the
    folders must be root's own."""

    def __init__(self, models_dir, partial):
        self.models_dir, self.partial = models_dir, partial
        self.base = relative(models_dir, partial)

    def parts(self, entry):
        return self.base + entry["name"].split("/")

    def path(self, entry):
        return file_path(self.partial, entry)

    def size(self, entry):
        """Bytes the partial folder keeps of ENTRY (0 when none; a folder or link there is refused)."""
        return self.kept(entry) or 0

    def kept(self, entry):
        """Bytes the partial folder keeps of ENTRY, None when it has no such file (a folder or link there is
        refused, as is a partial folder root does not own alone)."""
        try:
            models = tree(self.models_dir)
        except FileNotFoundError:
            return None
        with models:
            try:
                os.close(models.open_dir(self.base, owned=True))
            except FileNotFoundError:
                return None
            info = models.stat(self.parts(entry))
            if info is None:
                return None
            models.refuse_kind(self.parts(entry), info, "file")
            return info.st_size

    def create(self):
        with tree(self.models_dir, create=True) as models:
            os.close(models.open_dir(self.base, create=True, owned=True))

    def open(self, entry, flags):
        with tree(self.models_dir) as models:
            return models.open_file(self.parts(entry), flags, owned=True, create_dirs=True)

    def remove(self, entry):
        with tree(self.models_dir) as models:
            models.unlink(self.parts(entry))


def _hash_kept(handle, kept, digest, progress):
    left = kept
    while left:
        chunk = handle.read(min(CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
        progress.hashed += len(chunk)


def fetch_file(base, entry, staging, token, timeout, progress, retries=3, deadline=None):
    """Fetch one manifest file into the staging folder, resuming what it already holds (hashed again first);
    returns when the file holds exactly the entry, else raises ModelError naming the file (a wrong file is
    removed)."""
    url = file_url(base, entry)
    size, attempts, restarted = entry["size"], 0, False
    progress.current = entry["name"]
    dest = staging.path(entry)
    while True:
        kept = staging.size(entry)
        if kept > size:
            staging.remove(entry)
            kept = 0
        digest = hashlib.sha256()
        with os.fdopen(staging.open(entry, os.O_RDWR | os.O_CREAT), "r+b") as handle:
            if kept:
                _hash_kept(handle, kept, digest, progress)
        got, failure = kept, None
        if kept < size:
            try:
                response = open_url(url, token, timeout, start=kept, deadline=deadline)
            except DeadlineError:
                raise
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
                        flags = os.O_WRONLY | os.O_APPEND
                    else:  # a whole file (a server that ignores Range): start again
                        flags, got, digest = os.O_WRONLY | os.O_TRUNC, 0, hashlib.sha256()
                    with os.fdopen(staging.open(entry, flags), "wb") as handle:
                        while got < size:
                            check_deadline(deadline, "fetching %s" % entry["name"], got, size)
                            chunk = read_some(response, min(CHUNK, size - got), deadline, timeout)
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
                    check_deadline(deadline, "fetching %s" % entry["name"], got, size)
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
        staging.remove(entry)
        if kept and not restarted:  # the kept part may be what is wrong: once more from the first byte
            restarted = True
            continue
        raise ModelError("%s from %s has sha256 %s, the manifest says %s; the file was removed and the revision "
                         "is not used" % (entry["name"], redact(url), actual, entry["sha256"]))


# ------------------------------------------------------------------------------------------------------ one model

def _folder_in_place(models_dir, name, where, owned=False):
    """Whether WHERE is a folder: inside the models directory reached through no link (a link or a FIFO there is
    refused, and with OWNED a folder root does not own alone), elsewhere (a path source's folder) as given."""
    if os.path.dirname(os.path.abspath(where)) != os.path.join(os.path.abspath(models_dir), name):
        return os.path.isdir(where)
    try:
        models = tree(models_dir)
    except FileNotFoundError:
        return False
    with models:
        parts = relative(models_dir, where)
        if models.kind(parts) != "folder":
            return False
        if owned:
            os.close(models.open_dir(parts, owned=True))
        return True


def _present(models_dir, name, revision, verify, counter, files=None):
    """(record, problems) of a revision already in place with its record; (None, None) when it is not."""
    record = read_record(models_dir, name, revision)
    if record is None or (files is not None and record["manifest_sha256"] != mm.manifest_digest(files)):
        return None, None
    where = record.get("path") or revision_dir(models_dir, name, revision)
    if not isinstance(where, str) or not os.path.isabs(where) or not _folder_in_place(models_dir, name, where):
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
           peer_probe=False, file_deadline=None, fetch_deadline=None):
    """Make <models_dir>/<name>/<revision> a verified copy of the revision (or verify a path source in place).

    Returns the module's result (model_path, manifest_sha256, changed, bytes transferred and hashed, would_fetch in
    check mode); raises ModelError with the reason, naming the file that failed, for any input (a link or a FIFO
    planted in the models tree included: see module_utils/safe_files.py). ``free`` gives the free bytes of a
    path (injected by the tests). ``hf_python`` is the interpreter of the venv holding huggingface_hub (hf sources,
    module_utils/model_hub.py); ``hf_require_commit`` refuses an hf revision that is not a 40-hex commit.
    ``peer_transport`` says how to reach a peer (module_utils/model_peer.py); ``peer_probe`` only reports whether a
    peer source's revision is here (``present``), copying nothing. ``file_deadline`` and ``fetch_deadline``: seconds
    one file (http) and the whole fetch (http, hf, peer: the client or rsync is killed) may take, however steadily
    bytes arrive (None: no limit)."""
    mm.check_name("name", name)
    mm.check_revision("revision", revision)
    if verify not in mm.VERIFY_MODES:
        raise ModelError("verify must be one of %s, got %r" % (", ".join(mm.VERIFY_MODES), verify))
    source = mm.check_source(source, revision, require_commit=hf_require_commit)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    try:
        if source["type"] == "path":
            return _ensure_path(models_dir, name, revision, source, verify, check_mode)
        if source["type"] == "hf":
            # Imported here: model_hub imports this module.
            from ansible.module_utils import model_hub  # pylint: disable=import-outside-toplevel

            return model_hub.ensure_hf(models_dir, name, revision, source, verify, margin, check_mode, timeout,
                                       retries, free, hf_python, Deadlines(None, fetch_deadline).fetch())
        if source["type"] == "peer":
            from ansible.module_utils import model_peer  # pylint: disable=import-outside-toplevel

            return model_peer.ensure_peer(models_dir, name, revision, source, verify, margin, check_mode, timeout,
                                          retries, free, peer_transport, peer_probe,
                                          Deadlines(None, fetch_deadline).fetch())
        deadlines = Deadlines(file_deadline, fetch_deadline)
        return _ensure_http(models_dir, name, revision, source, verify, margin, check_mode, timeout, retries, free,
                            deadlines)
    except UnsafeFile as exc:
        raise ModelError("%s; nothing was written through it" % exc)
    except RecursionError:
        raise ModelError("a manifest or record is nested too deeply to be one; nothing was written")


class Deadlines(object):
    """Absolute (monotonic) deadlines: one for the whole fetch, one for each file started."""

    def __init__(self, per_file=None, per_fetch=None):
        self.per_file = per_file
        self.end = None if per_fetch is None else time.monotonic() + per_fetch

    def fetch(self):
        return self.end

    def next_file(self):
        ends = [end for end in (self.end, None if self.per_file is None else time.monotonic() + self.per_file)
                if end is not None]
        return min(ends) if ends else None


def _ensure_path(models_dir, name, revision, source, verify, check_mode):
    where, counter = source["path"], [0]
    try:
        data = safe_files.read_regular(source["manifest"], MANIFEST_LIMIT)
    except UnsafeFile as exc:
        raise ModelError("the manifest %s" % exc)
    except OSError as exc:
        raise ModelError("cannot read the manifest %s: %s" % (source["manifest"], exc.strerror or exc))
    files = mm.parse_manifest(data, "manifest %s" % source["manifest"])
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
        write_record(models_dir, name, revision, files, source, "full", where)
    return _result(where, files, verified="full", hashed_bytes=counter[0], changed=True)


def _lock(models_dir, name):
    """The model's lock (<name>/.state/.lock, held with flock), its folder root's own and reached through no link."""
    state = os.path.join(models_dir, name, STATE_DIR)
    with tree(models_dir, create=True) as models:
        fd = models.open_file([name, STATE_DIR, ".lock"], os.O_RDWR | os.O_CREAT, owned=True, create_dirs=True)
    handle = os.fdopen(fd, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise ModelError("another fetch of %s holds %s; try again when it ended" % (name, state))
        raise
    return handle


def would_fetch(staging, files):
    """(files still to fetch with the bytes kept of each, bytes still to fetch) of a staging folder."""
    would, needed = [], 0
    for entry in files:
        kept = staging.kept(entry)
        if kept != entry["size"]:
            kept = kept or 0
            would.append({"name": entry["name"], "size": entry["size"], "kept": min(kept, entry["size"])})
            needed += entry["size"] - min(kept, entry["size"])
    return would, needed


def _ensure_http(models_dir, name, revision, source, verify, margin, check_mode, timeout, retries, free,
                 deadlines=None):
    deadlines = deadlines or Deadlines()
    final, counter = revision_dir(models_dir, name, revision), [0]
    # Present and recorded: the mirror is not asked at all (a pinned revision does not change).
    record, problems = _present(models_dir, name, revision, verify, counter)
    if record is not None:
        if problems:
            _refuse_corrupt(final, problems)
        return _result(final, record["files"], verified=verify, hashed_bytes=counter[0])
    token = read_token(source.get("token_file"))
    files = fetch_manifest(source["manifest_url"], token, timeout, deadlines.fetch())
    # In place without a record (an interrupted run, or put there by hand): hashed, if root alone could write it.
    if _folder_in_place(models_dir, name, final, owned=True):
        problems = mm.verify_dir(final, files, "full", counter)
        if problems:
            _refuse_corrupt(final, problems)
        if not check_mode:
            write_record(models_dir, name, revision, files, source, "full", final)
        return _result(final, files, verified="full", hashed_bytes=counter[0], changed=True)
    staging = Staging(models_dir, partial_dir(models_dir, name, revision))
    would, needed = would_fetch(staging, files)
    problem = mm.space_problem(needed, free(os.path.join(models_dir, name)), margin)
    if problem:
        raise ModelError(problem)
    if check_mode:
        return _result(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="none")
    staging.create()
    lock = _lock(models_dir, name)
    try:
        progress = Progress(progress_path(models_dir, name, revision), mm.total_bytes(files), models_dir=models_dir)
        try:
            for entry in files:
                fetch_file(source["url"], entry, staging, token, timeout, progress, retries, deadlines.next_file())
        finally:
            progress.tick(force=True, state="fetching" if progress.done < progress.total else "verified")
        place(staging.partial, final)
        write_record(models_dir, name, revision, files, source, "full", final)
        summary = progress.summary("verified")
    finally:
        lock.close()
    return _result(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="full",
                   transferred_bytes=summary["transferred_bytes"],
                   hashed_bytes=summary["hashed_bytes"] + counter[0], seconds=summary["seconds"],
                   rate_bytes_per_s=summary["rate_bytes_per_s"], progress_file=progress.path)
