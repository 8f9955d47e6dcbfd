# -*- coding: utf-8 -*-
"""The ``hf`` model source: a Hugging Face repository at a pinned commit, fetched through the real huggingface_hub
client, every file verified before the revision counts as present.

The client runs in a venv of its own (the sglang_model role makes it; ``hf_python`` is its interpreter) as a child
process running module_utils/hf_client.py. This side decides; the child only talks to the hub:

1. A revision in place with its record (``<name>/.state/<commit>.json``) under a 40-hex commit is checked by size
   (or in full) without asking the hub or starting the client, exactly as the ``http`` source does.
2. Otherwise the client asks ``model_info(files_metadata=True)`` for the revision: its commit (a branch or tag name is
   resolved here and the commit recorded, or refused with ``require_commit``; a 40-hex revision the hub answers with
   another commit is refused) and every file with its size and either its LFS sha256 or its git blob id.
3. Free space for what is still to fetch plus the margin is checked before any byte is fetched.
4. The client fetches each file into ``<name>/.partial-<commit>/`` with its own HEAD and GET (``X-Repo-Commit`` must
   be the commit, the ``ETag`` the file's sha256 or blob id), resuming with HTTP Range from what a stopped run kept,
   hashing the kept part again first. Each file's sha256 and git sha1 are compared here with the metadata (LFS: sha256;
   otherwise: the git blob id), and its size; one that fails is removed and named, and the revision is not used.
5. The folder is renamed to ``<name>/<commit>/`` and recorded (files, sizes, sha256 of every file, the commit, the
   revision asked for).

The token (``token_file``) is read here and handed to the child on its stdin: never in its arguments (``ps``), its
environment, a result, a message or a record.
"""
from __future__ import annotations

import inspect
import json
import os
import shutil
import stat
import subprocess
import tempfile
import threading

from ansible.module_utils import hf_client
from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils import root_trust
from ansible.module_utils.model_manifest import ModelError

# model_store's steps for one revision, shared with the http source.
present, refuse_corrupt, result_of, lock_model = (
    ms._present, ms._refuse_corrupt, ms._result, ms._lock)  # pylint: disable=protected-access

# Variables of the operator's environment the client must not see: a token or a cache of its own would bypass
# token_file, offline mode would refuse every fetch.
DROPPED_ENV = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "HF_HUB_CACHE",
               "HF_HUB_ENABLE_HF_TRANSFER", "HF_XET_HIGH_PERFORMANCE", "HF_ENDPOINT", "PYTHONPATH", "PYTHONHOME")


def client_source():
    """hf_client.py's text (from the module's bundle under Ansible, from the file in a checkout)."""
    try:
        return inspect.getsource(hf_client)
    except (OSError, TypeError):
        with open(hf_client.__file__, encoding="utf-8") as handle:
            return handle.read()


def client_env(endpoint, timeout, home, base=None):
    """The child's environment: the operator's without tokens or caches of its own, HF_ENDPOINT the source's
    endpoint (unset: the client's default hub), a private HF_HOME, plain HTTP downloads (Xet off: the partial file is
    this side's to resume and hash), no progress bars, no telemetry."""
    env = {key: value for key, value in (os.environ if base is None else base).items() if key not in DROPPED_ENV}
    env.update(HF_HOME=home, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_XET="1",
               HF_HUB_DISABLE_IMPLICIT_TOKEN="1", HF_HUB_DOWNLOAD_TIMEOUT=str(timeout),
               HF_HUB_ETAG_TIMEOUT=str(timeout), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    if endpoint:
        env["HF_ENDPOINT"] = endpoint.rstrip("/")
    return env


def client_command(hf_python, script):
    """The child's argv: the interpreter, isolated (-I: no PYTHONPATH, no user site), and the script. Nothing else."""
    return [hf_python, "-I", script]


def scrub(text, token):
    return text.replace(token, "***") if token and isinstance(text, str) else text


def run_client(hf_python, request, endpoint, timeout, on_event=None, pass_fds=(), deadline=None):
    """Run hf_client.py with the request on stdin; returns (events, exit status, stderr's last lines). The request
    may hold the token: it goes through the pipe only, and is scrubbed from everything returned. PASS_FDS: the
    descriptors the child inherits (the .partial- folder it writes below). DEADLINE (monotonic): the child is killed
    when it runs past it (ms.DeadlineError)."""
    token = request.get("token")
    work = tempfile.mkdtemp(prefix="sglang-hf-")
    try:
        os.chmod(work, 0o700)
        script = os.path.join(work, "hf_client.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(client_source())
        home = os.path.join(work, "hf-home")
        os.mkdir(home, 0o700)
        with tempfile.TemporaryFile(dir=work) as errors:
            try:
                proc = subprocess.Popen(client_command(hf_python, script), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=errors, cwd=work,
                                        env=client_env(endpoint, timeout, home), pass_fds=tuple(pass_fds))
            except OSError as exc:
                raise ModelError("cannot start the hf client %s: %s" % (hf_python, exc.strerror or exc))
            events = []
            left = ms.remaining(deadline)
            killer = threading.Timer(max(0.0, left), proc.kill) if left is not None else None
            if killer is not None:
                killer.start()
            try:
                proc.stdin.write(json.dumps(request).encode("utf-8"))
                proc.stdin.close()
                for line in proc.stdout:
                    try:
                        event = json.loads(scrub(line.decode("utf-8", "replace"), token))
                    except ValueError:
                        continue
                    if not isinstance(event, dict):
                        continue
                    events.append(event)
                    if on_event is not None:
                        on_event(event)
            finally:
                proc.stdout.close()
                status = proc.wait()
                if killer is not None:
                    killer.cancel()
            errors.seek(0)
            tail = scrub(errors.read().decode("utf-8", "replace"), token).strip().splitlines()[-5:]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms.check_deadline(deadline, "the hf client")
    return events, status, tail


def _client_failure(events, status, tail, what):
    failed = [event for event in events if event.get("event") == "error"]
    if failed:
        return failed[-1]
    return {"kind": "client", "name": None, "kept": 0,
            "message": "%s: the hf client ended with status %s without an answer%s" % (
                what, status, (": " + " | ".join(tail)) if tail else "")}


def hub_files(listed, where):
    """The revision's files from the client's info: [{name, size, sha256 or None, git_sha1, lfs}] sorted by name;
    ModelError when the hub gave no size or hash for one (files metadata off)."""
    if not isinstance(listed, list) or not listed:
        raise ModelError("%s lists no files" % where)
    result, seen = [], set()
    for item in listed:
        name = item.get("name") if isinstance(item, dict) else None
        problem = mm.check_file_name(name)
        if problem:
            raise ModelError("%s: file name %r %s" % (where, name, problem))
        size, blob, sha256 = item.get("size"), item.get("blob_id"), item.get("lfs_sha256")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ModelError("%s: %s has no size (the hub gave no files metadata)" % (where, name))
        if sha256 is not None and not (isinstance(sha256, str) and mm.SHA256_RE.fullmatch(sha256.lower())):
            raise ModelError("%s: %s has no LFS sha256 (64 hex digits)" % (where, name))
        if sha256 is None and not (isinstance(blob, str) and mm.COMMIT_RE.fullmatch(blob.lower())):
            raise ModelError("%s: %s has neither an LFS sha256 nor a git blob id" % (where, name))
        if name in seen:
            raise ModelError("%s: %s is listed twice" % (where, name))
        seen.add(name)
        result.append({"name": name, "size": size, "sha256": sha256.lower() if sha256 else None,
                       "git_sha1": blob.lower() if isinstance(blob, str) else None, "lfs": sha256 is not None})
    mm.refuse_prefix_clash(seen, where)
    return sorted(result, key=lambda entry: entry["name"])


def etag(entry):
    """What the hub's ETag for the file must be: its sha256 (LFS) or its git blob id."""
    return entry["sha256"] if entry["lfs"] else entry["git_sha1"]


def file_verdict(entry, reported):
    """Why a fetched file is not the revision's (None when it is): its size, then the LFS sha256 or the git blob id."""
    name = entry["name"]
    if reported.get("size") != entry["size"]:
        return "%s has %s bytes, the revision's metadata says %d" % (name, reported.get("size"), entry["size"])
    if entry["lfs"] and reported.get("sha256") != entry["sha256"]:
        return "%s has sha256 %s, the revision's LFS metadata says %s" % (name, reported.get("sha256"),
                                                                          entry["sha256"])
    if not entry["lfs"] and reported.get("git_sha1") != entry["git_sha1"]:
        return "%s has git blob id %s, the revision's metadata says %s" % (name, reported.get("git_sha1"),
                                                                           entry["git_sha1"])
    return None


def hash_both(path, counter=None):
    """(sha256, git sha1) of a file from disk."""
    import hashlib  # pylint: disable=import-outside-toplevel

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelError("%s is not a regular file: it is not read" % path)
        size = info.st_size
        sha256, sha1 = hashlib.sha256(), hashlib.sha1(hf_client.git_blob_header(size))  # noqa: S324 (git's id)
        for chunk in iter(lambda: handle.read(mm.HASH_CHUNK), b""):
            sha256.update(chunk)
            sha1.update(chunk)
            if counter is not None:
                counter[0] += len(chunk)
    return {"size": size, "sha256": sha256.hexdigest(), "git_sha1": sha1.hexdigest()}


def verify_in_place(directory, expected, counter):
    """(manifest files, problems) of a folder against the hub's metadata, every file hashed."""
    files, problems = [], []
    for entry in expected:
        path = ms.file_path(directory, entry)
        info = os.lstat(path) if os.path.lexists(path) else None
        if info is None or not stat.S_ISREG(info.st_mode):
            problems.append("%s is %s" % (entry["name"], "missing" if info is None else "not a regular file"))
            continue
        reported = hash_both(path, counter)
        problem = file_verdict(entry, reported)
        if problem:
            problems.append(problem)
        files.append({"name": entry["name"], "size": reported["size"], "sha256": reported["sha256"]})
    return files, problems


def describe(source, revision):
    return "%s@%s on %s" % (source["repo"], revision, source.get("endpoint") or "the default hub")


def hub_info(hf_python, source, revision, token, timeout, deadline=None):
    """(commit, expected files) for the revision, through the client; ModelError names what the hub refused."""
    request = {"op": "info", "repo": source["repo"], "revision": revision, "endpoint": source.get("endpoint"),
               "token": token, "timeout": timeout}
    events, status, tail = run_client(hf_python, request, source.get("endpoint"), timeout, deadline=deadline)
    answers = [event for event in events if event.get("event") == "info"]
    if status != 0 or not answers:
        failure = _client_failure(events, status, tail, "asking the hub for %s" % describe(source, revision))
        kind = failure.get("kind")
        if kind == "revision":
            raise ModelError("revision %s does not exist in %s (%s)" % (revision, source["repo"],
                                                                        failure.get("message")))
        if kind == "repo":
            raise ModelError("repository %s was not found on %s, or the token cannot read it (%s)" % (
                source["repo"], source.get("endpoint") or "the default hub", failure.get("message")))
        if kind == "auth":
            raise ModelError("%s refused the token (or none was given): %s" % (describe(source, revision),
                                                                               failure.get("message")))
        raise ModelError("asking the hub for %s failed: %s" % (describe(source, revision), failure.get("message")))
    commit = answers[-1].get("commit")
    if not isinstance(commit, str) or not mm.COMMIT_RE.fullmatch(commit):
        raise ModelError("the hub answered %s without a commit hash" % describe(source, revision))
    if mm.COMMIT_RE.fullmatch(revision) and commit != revision:
        raise ModelError("the hub answered %s with commit %s: not the pinned revision, so nothing is fetched"
                         % (describe(source, revision), commit))
    return commit, hub_files(answers[-1].get("files"), "the hub's metadata of %s" % describe(source, commit))


def _fetch_files(hf_python, source, commit, expected, staging, token, timeout, retries, progress, deadline=None):
    """Run the client over the files; returns (reported {name: event}, failure event or None)."""
    completed, base_transferred, base_done = [0], progress.transferred, progress.done

    def on_event(event):
        if event.get("event") == "progress":
            progress.current = event.get("file")
            progress.transferred = base_transferred + int(event.get("transferred") or 0)
            progress.done = base_done + completed[0] + int(event.get("file_bytes") or 0)
        elif event.get("event") == "file":
            completed[0] += int(event.get("size") or 0)
            progress.transferred = base_transferred + int(event.get("total_transferred") or 0)
            progress.done = base_done + completed[0]
        progress.tick()

    with ms.tree(staging.models_dir) as models:
        folder = models.open_dir(staging.base, owned=True)
    try:
        request = {"op": "fetch", "repo": source["repo"], "commit": commit, "endpoint": source.get("endpoint"),
                   "token": token, "timeout": timeout, "retries": retries, "dir_fd": folder,
                   "files": [{"name": entry["name"], "size": entry["size"], "etag": etag(entry)}
                             for entry in expected]}
        events, status, tail = run_client(hf_python, request, source.get("endpoint"), timeout, on_event, (folder,),
                                          deadline)
    finally:
        os.close(folder)
    reported = {event["name"]: event for event in events if event.get("event") == "file" and "name" in event}
    progress.hashed += sum(int(event.get("kept") or 0) for event in reported.values())
    done = [event for event in events if event.get("event") == "done"]
    if status != 0 or not done:
        return reported, _client_failure(events, status, tail, "fetching %s" % describe(source, commit))
    return reported, None


def ensure_hf(models_dir, name, revision, source, verify="size", margin=0, check_mode=False, timeout=60, retries=3,
              free=ms.free_bytes, hf_python=None, deadline=None):
    """model_store.ensure for an hf source (already checked by model_manifest.check_source)."""
    counter = [0]
    pinned = bool(mm.COMMIT_RE.fullmatch(revision))
    if pinned:  # present and recorded under its commit: neither the hub nor the client is asked
        record, problems = present(models_dir, name, revision, verify, counter)
        if record is not None:
            if problems:
                refuse_corrupt(ms.revision_dir(models_dir, name, revision), problems)
            return result_of(ms.revision_dir(models_dir, name, revision), record["files"],
                             verified=verify, hashed_bytes=counter[0], revision=revision,
                             requested_revision=revision)
    if not hf_python or not os.path.isfile(hf_python):
        if check_mode:  # the role makes the client's venv in the real run: nothing can be asked yet
            return result_of(ms.revision_dir(models_dir, name, revision), None, changed=True,
                             verified="none", would_fetch_bytes=None, revision=revision,
                             requested_revision=revision,
                             msg="check mode: the hf client is not installed yet (%s), so the size of %s is not "
                             "known; it would be fetched" % (hf_python, describe(source, revision)))
        raise ModelError("the hf client's Python %s does not exist: the sglang_model role makes its venv "
                         "(sglang_model_hf_venv), or point hf_python at a venv holding huggingface_hub" % hf_python)
    problem = root_trust.interpreter_problem(hf_python, os.geteuid())
    if problem:
        raise ModelError("the hf client's Python %s is not run with the token: %s (root runs only what root alone "
                         "can change, every folder up to / included: make its venv root's, outside the models "
                         "folder, e.g. sglang_model_hf_venv's default)" % (hf_python, problem))
    token = ms.read_token(source.get("token_file"))
    commit, expected = hub_info(hf_python, source, revision, token, timeout, deadline)
    final = ms.revision_dir(models_dir, name, commit)
    extra = {"commit": commit, "requested_revision": revision, "repo": source["repo"]}
    if not pinned:  # a branch or tag: the commit it names now may be in place already
        record, problems = present(models_dir, name, commit, verify, counter)
        if record is not None:
            if problems:
                refuse_corrupt(final, problems)
            return result_of(final, record["files"], verified=verify, hashed_bytes=counter[0],
                             revision=commit, requested_revision=revision)
    # In place without a record (put there by hand, or a run stopped after the rename): hashed, if root's alone.
    if ms._folder_in_place(models_dir, name, final, owned=True):  # pylint: disable=protected-access
        files, problems = verify_in_place(final, expected, counter)
        if problems:
            refuse_corrupt(final, problems)
        if not check_mode:
            ms.write_record(models_dir, name, commit, files, source, "full", final, extra=extra)
        return result_of(final, files, verified="full", hashed_bytes=counter[0], changed=True,
                         revision=commit, requested_revision=revision)
    staging = ms.Staging(models_dir, ms.partial_dir(models_dir, name, commit))
    partial = staging.partial
    would, needed = ms.would_fetch(staging, expected)
    problem = mm.space_problem(needed, free(os.path.join(models_dir, name)), margin)
    if problem:
        raise ModelError(problem)
    if check_mode:
        result = result_of(final, None, would_fetch=would, would_fetch_bytes=needed, changed=True,
                           verified="none", revision=commit, requested_revision=revision)
        result.update(files=len(expected), total_bytes=sum(entry["size"] for entry in expected))
        return result
    staging.create()
    lock = lock_model(models_dir, name)
    try:
        progress = ms.Progress(ms.progress_path(models_dir, name, commit), sum(e["size"] for e in expected),
                               models_dir=models_dir)
        try:
            files = _fetch_verified(hf_python, source, commit, expected, staging, token, timeout, retries, progress,
                                    deadline)
        finally:
            progress.tick(force=True, state="fetching" if progress.done < progress.total else "verified")
        problems = mm.verify_dir(partial, files, "size")
        if problems:  # a file changed under the fetch: never placed
            raise ModelError("%s changed while it was fetched: %s" % (partial, "; ".join(problems)))
        ms.place(partial, final)
        ms.write_record(models_dir, name, commit, files, source, "full", final, extra=extra)
        summary = progress.summary("verified")
    finally:
        lock.close()
    return result_of(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="full",
                     transferred_bytes=summary["transferred_bytes"], hashed_bytes=summary["hashed_bytes"] + counter[0],
                     seconds=summary["seconds"], rate_bytes_per_s=summary["rate_bytes_per_s"],
                     progress_file=progress.path, revision=commit, requested_revision=revision)


def _fetch_verified(hf_python, source, commit, expected, staging, token, timeout, retries, progress,
                    deadline=None):
    """Every file fetched and verified, as manifest entries {name, size, sha256}; a file that fails is removed and,
    when a kept part may be what was wrong, fetched once more from its first byte; otherwise refused by name."""
    todo, again, verified = list(expected), True, {}
    while todo:
        kept_before = {entry["name"]: staging.kept(entry) is not None for entry in todo}
        reported, failure = _fetch_files(hf_python, source, commit, todo, staging, token, timeout, retries, progress,
                                         deadline)
        bad, retry = [], []
        for entry in todo:
            event = reported.get(entry["name"])
            if event is None:
                continue
            problem = file_verdict(entry, event)
            if problem is None:
                verified[entry["name"]] = {"name": entry["name"], "size": entry["size"], "sha256": event["sha256"]}
                continue
            staging.remove(entry)
            progress.done -= entry["size"]
            if kept_before[entry["name"]] and again:
                retry.append(entry)
            else:
                bad.append(problem)
        if bad:
            raise ModelError("%s from %s: the file was removed and the revision is not used" % (
                "; ".join(bad), describe(source, commit)))
        if failure is not None:
            name = failure.get("name")
            if failure.get("kind") == "entry":
                raise ModelError("%s is listed in %s but the hub has no such file (%s); the revision is not used"
                                 % (name, describe(source, commit), failure.get("message")))
            if failure.get("kind") in ("commit", "etag"):
                raise ModelError("%s; the revision is not used" % failure.get("message"))
            raise ModelError("fetching %s stopped%s: %s; what arrived is kept in %s and the next run resumes it" % (
                describe(source, commit), (" at %s (%s bytes kept)" % (name, failure.get("kept", 0))) if name else "",
                failure.get("message"), staging.partial))
        todo, again = retry, False
    return [verified[entry["name"]] for entry in expected]
