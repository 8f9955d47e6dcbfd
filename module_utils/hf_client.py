# -*- coding: utf-8 -*-
"""The Hugging Face side of the ``hf`` model source: a script run by the hf client venv's Python, not by Ansible.

module_utils/model_hub.py writes this file's source to a private temporary file and runs it with the Python of a venv
that holds ``huggingface_hub`` (the sglang_model role makes that venv). It imports nothing of Ansible, and imports
``huggingface_hub`` only inside its functions, so Ansible can bundle it and this checkout can import it.

Protocol: one JSON request on stdin (the token travels here, never in arguments or the environment), JSON lines on
stdout:

* ``{"op": "info", "repo", "revision", "endpoint", "token", "timeout"}`` -> ``{"event": "info", "commit", "files":
  [{"name", "size", "blob_id", "lfs_sha256"}]}`` from ``HfApi.model_info(files_metadata=True)``.
* ``{"op": "fetch", "repo", "commit", "endpoint", "token", "timeout", "retries", "dir_fd", "files": [{"name",
  "size", "etag"}]}`` -> per file the client's HEAD (``get_hf_file_metadata``: ``X-Repo-Commit``,
  ``X-Linked-Etag``/``ETag``, ``X-Linked-Size``/``Content-Length``, ``Location``), then its ``http_get`` into the file
  ``name`` below the folder ``dir_fd`` (a descriptor the caller opened and passed: every component opened without
  following a link, the file refused unless regular), resuming (HTTP Range) from what it already holds, which is
  hashed again first; ``{"event": "progress", ...}`` every few seconds and
  ``{"event": "file", "name", "size", "sha256", "git_sha1", "kept", "transferred"}`` per file. The caller compares the
  hashes with the revision's metadata (model_hub.py): this script reports, it does not judge.

Any failure is ``{"event": "error", "kind", "message", "name"}`` (kind: repo, revision, entry, auth, commit, etag,
http, io) and exit status 1. The token never reaches a message: the client does not print it, and the caller removes
it from anything it shows all the same.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time

PROGRESS_EVERY_S = 2.0
HASH_CHUNK = 8 * 1024 * 1024
# The client reads a body in chunks of this size before it writes one (its default is 10 MiB): what a cut connection
# loses, and how finely progress moves.
DOWNLOAD_CHUNK = 1024 * 1024


def emit(event, **fields):
    fields["event"] = event
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def git_blob_header(size):
    """What git hashes before a blob's bytes: its object id is sha1(b'blob <size>\\0' + content)."""
    return b"blob %d\x00" % size


class HashingFile(object):
    """The file object the client's http_get writes to: sha256 and git sha1 of the whole file as it grows (the kept
    part hashed first), progress lines, and a restart from zero when the client truncates (a server that ignored
    Range)."""

    def __init__(self, handle, size, kept, name, counter):
        self.handle, self.size, self.name, self.counter = handle, size, name, counter
        self.position = kept
        self.rehash = False
        self._reset()
        if kept:
            handle.seek(0)
            left = kept
            while left:
                chunk = handle.read(min(HASH_CHUNK, left))
                if not chunk:
                    break
                self._update(chunk)
                left -= len(chunk)
            handle.seek(kept)

    def _reset(self):
        self.sha256 = hashlib.sha256()
        self.sha1 = hashlib.sha1(git_blob_header(self.size))  # noqa: S324 (git's object id, not a security hash)

    def _update(self, chunk):
        self.sha256.update(chunk)
        self.sha1.update(chunk)

    def write(self, data):
        self.handle.write(data)
        self._update(data)
        self.position += len(data)
        self.counter["transferred"] += len(data)
        self.counter["file_bytes"] = self.position
        now = time.monotonic()
        if now - self.counter["last"] >= PROGRESS_EVERY_S:
            self.counter["last"] = now
            emit("progress", file=self.name, file_bytes=self.position, transferred=self.counter["transferred"])
        return len(data)

    def tell(self):
        return self.handle.tell()

    def seek(self, offset, whence=0):
        return self.handle.seek(offset, whence)

    def truncate(self, size=None):
        result = self.handle.truncate(size)
        where = self.handle.tell() if size is None else size
        if where == 0:
            self._reset()
        else:  # never done by the client today; hash the file from disk at the end rather than guess
            self.rehash = True
        self.position = where
        return result

    def flush(self):
        return self.handle.flush()


def _kind(exc):
    from huggingface_hub import errors  # pylint: disable=import-outside-toplevel

    for name, kind in (("RevisionNotFoundError", "revision"), ("RemoteEntryNotFoundError", "entry"),
                       ("EntryNotFoundError", "entry"), ("GatedRepoError", "auth"),
                       ("RepositoryNotFoundError", "repo")):
        cls = getattr(errors, name, None)
        if cls is not None and isinstance(exc, cls):
            return kind
    response = getattr(exc, "response", None)
    if getattr(response, "status_code", None) in (401, 403):
        return "auth"
    return "http" if response is not None else "io"


def _message(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, " ".join(line.strip() for line in text[:3]) or repr(exc))


def info(request):
    from huggingface_hub import HfApi  # pylint: disable=import-outside-toplevel

    api = HfApi(endpoint=request.get("endpoint") or None)
    model = api.model_info(request["repo"], revision=request["revision"], files_metadata=True,
                           token=request.get("token") or False, timeout=request.get("timeout"))
    files = []
    for sibling in model.siblings or []:
        lfs = sibling.lfs
        files.append({"name": sibling.rfilename, "size": lfs.size if lfs else sibling.size,
                      "blob_id": sibling.blob_id, "lfs_sha256": lfs.sha256 if lfs else None})
    emit("info", commit=model.sha, files=files)


def open_below(dir_fd, name, create):
    """A descriptor of the regular file NAME ('/'-separated) below the folder DIR_FD (the caller's .partial-
    folder, opened by it), every folder on the way opened without following a link (made when missing, 0755) and
    the file itself opened with O_NOFOLLOW | O_NONBLOCK and refused unless it is a regular file: a link planted in
    the folder is never written through, a FIFO never hangs the client."""
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise OSError("%s is not a plain relative name" % name)
    folder_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, folder_flags, dir_fd=fd)
            except OSError as exc:
                raise OSError("%s: a folder on the way to %s is a symbolic link or not a folder; nothing is written "
                              "through it (%s)" % (part, name, exc.strerror))
            os.close(fd)
            fd = child
        flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            info = os.lstat(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            info = None
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise OSError("%s is not a regular file (a link, a FIFO or a device): it is neither opened nor written "
                          "through" % name)
        if info is None and not create:
            raise FileNotFoundError(name)
        handle = os.open(parts[-1], flags, 0o644, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise OSError("%s is not a regular file: it is not written" % name)
    return handle


def _same_origin(first, second):
    from urllib.parse import urlsplit  # pylint: disable=import-outside-toplevel

    one, two = urlsplit(first), urlsplit(second)
    ports = {"http": 80, "https": 443}
    return ((one.scheme, (one.hostname or "").lower(), one.port or ports.get(one.scheme))
            == (two.scheme, (two.hostname or "").lower(), two.port or ports.get(two.scheme)))


def fetch_one(request, entry, counter):
    from huggingface_hub import constants, get_hf_file_metadata, hf_hub_url  # pylint: disable=import-outside-toplevel
    from huggingface_hub.file_download import http_get  # pylint: disable=import-outside-toplevel
    from huggingface_hub.utils import build_hf_headers  # pylint: disable=import-outside-toplevel

    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, DOWNLOAD_CHUNK)
    token = request.get("token") or False
    url = hf_hub_url(request["repo"], entry["name"], revision=request["commit"],
                     endpoint=request.get("endpoint") or None)
    meta = get_hf_file_metadata(url, token=token, timeout=request.get("timeout"),
                                endpoint=request.get("endpoint") or None)
    if meta.commit_hash != request["commit"]:
        return {"kind": "commit", "message": "the hub answered for %s with commit %s, not %s" % (
            entry["name"], meta.commit_hash, request["commit"])}
    if entry.get("etag") and meta.etag != entry["etag"]:
        return {"kind": "etag", "message": "the hub's ETag for %s is %s, the revision's metadata says %s" % (
            entry["name"], meta.etag, entry["etag"])}
    headers = build_hf_headers(token=token)
    location = meta.location or url
    if not _same_origin(url, location):
        headers.pop("authorization", None)  # a signed CDN address: the token stays with the hub
    size, before = entry["size"], counter["transferred"]
    with os.fdopen(open_below(request["dir_fd"], entry["name"], True), "r+b") as handle:
        kept = os.fstat(handle.fileno()).st_size
        if kept > size:
            handle.truncate(0)
            kept = 0
        handle.seek(kept)
        writer = HashingFile(handle, size, kept, entry["name"], counter)
        counter["hashed"] += kept
        counter["file_bytes"] = kept
        if kept < size:
            http_get(location, writer, resume_size=kept, headers=headers, expected_size=size,
                     displayed_filename=entry["name"])
        handle.flush()
        os.fsync(handle.fileno())
        final_size = os.fstat(handle.fileno()).st_size
        if writer.rehash:
            handle.seek(0)
            sha256, sha1 = hashlib.sha256(), hashlib.sha1(git_blob_header(final_size))  # noqa: S324
            for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
                sha256.update(chunk)
                sha1.update(chunk)
            digests = sha256.hexdigest(), sha1.hexdigest()
        else:
            digests = writer.sha256.hexdigest(), writer.sha1.hexdigest()
    emit("file", name=entry["name"], size=final_size, sha256=digests[0], git_sha1=digests[1], kept=kept,
         transferred=counter["transferred"] - before, total_transferred=counter["transferred"])
    return None


def _kept(request, entry):
    try:
        fd = open_below(request["dir_fd"], entry["name"], False)
    except OSError:
        return 0
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def fetch(request):
    counter = {"transferred": 0, "hashed": 0, "file_bytes": 0, "last": time.monotonic()}
    retries = int(request.get("retries", 3))
    for entry in request["files"]:
        attempt = 0
        while True:
            try:
                problem = fetch_one(request, entry, counter)
            except Exception as exc:  # pylint: disable=broad-except
                kind = _kind(exc) if "huggingface_hub" in sys.modules else "io"
                if kind in ("http", "io") and attempt < retries:
                    attempt += 1
                    time.sleep(min(2 ** attempt, 10) / 10.0)
                    continue
                kept = _kept(request, entry)
                emit("error", kind=kind, name=entry["name"], message=_message(exc), kept=kept)
                return 1
            if problem:
                emit("error", name=entry["name"], kept=0, **problem)
                return 1
            break
    emit("done", transferred=counter["transferred"], hashed=counter["hashed"])
    return 0


def main():
    request = json.loads(sys.stdin.read())
    try:
        if request["op"] == "info":
            info(request)
            return 0
        return fetch(request)
    except Exception as exc:  # pylint: disable=broad-except
        emit("error", kind=_kind(exc) if "huggingface_hub" in sys.modules else "io", message=_message(exc),
             name=None, kept=0)
        return 1


if __name__ == "__main__":
    # A script the hf client venv's Python runs, not a module: its exit status is the protocol's.
    sys.exit(main())  # pylint: disable=ansible-bad-function
