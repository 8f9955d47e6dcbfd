# -*- coding: utf-8 -*-
"""The ``peer`` model source: another host of the inventory that holds a verified copy of the same revision, pulled
with real rsync over SSH by the host that wants it, every file verified before the revision counts as present.

Who initiates: the receiving host pulls (``rsync -e ssh peer:<dir>/<name>/<revision>/ .partial-<revision>/``). The
sglang_model role gives it a key made for the one transfer on the receiving host (the private key never leaves it
and is removed afterwards) that the peer accepts only for a read-only rsync of its models directory
(``rrsync -ro``, ``restrict``) until the transfer ends, and a known_hosts file holding the peer's host keys as the
controller read them from the peer: host keys are checked (``StrictHostKeyChecking=yes``), never learned. This side
takes the transport as given (``transport``); a test passes a stand-in for ssh as ``rsh``.

For one revision:

1. In place with its record: checked by size (or in full), the peer is not asked (as http and hf).
2. The peer's record (``<peer dir>/<name>/.state/<revision>.json``) is copied first: it must hold together (its
   digest over its files, its revision) and, when the operator pinned ``manifest_sha256``, carry that digest; its
   files are the manifest the copy is checked against. A peer without a record holds no verified copy: refused.
3. Free space for what is still to copy plus the margin, before the first byte (figures in the refusal).
4. rsync copies exactly the manifest's files (``--files-from``) into ``<name>/.partial-<revision>/``, keeping what a
   stopped run left (``--partial``) and resuming each file where it stopped (``--append-verify``: the rest is
   appended and the whole file checked by rsync; a mismatch sends it whole). Progress (bytes in the partial folder,
   rate) goes to the progress file while it runs.
5. Every file is hashed (sha256) against the manifest. A file that differs is removed; if a stopped run had kept
   part of it, it is copied once more from the first byte, else the peer's copy is corrupt: refused, naming the
   file and the peer. Nothing else in the partial folder survives; the folder is renamed into place and recorded.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError

present, refuse_corrupt, result_of, lock_model = (
    ms._present, ms._refuse_corrupt, ms._result, ms._lock)  # pylint: disable=protected-access

# What may go into an ssh command line rsync splits on spaces, and into a remote path the remote shell reads.
SAFE_PATH_RE = re.compile(r"/[A-Za-z0-9._/+@:=-]*\Z")
USER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,31}\Z")
ADDRESS_RE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[?[0-9A-Fa-f:.]+\]?)\Z")
LITERAL_RE = re.compile(r"^Literal data: ([0-9]+)", re.M)
POLL_S = 0.5


HOST_KEY_RE = re.compile(r"(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-[a-z0-9@.-]+) [A-Za-z0-9+/]+=*\Z")


def check_transport(transport, work=None):
    """The transport with its defaults, or ModelError naming what is wrong. host_keys (the peer's host public keys,
    "type base64" each) are checked and written into a known_hosts file in work."""
    if not isinstance(transport, dict):
        raise ModelError("a peer source needs peer_transport (address, port, user, known_hosts; the sglang_model "
                         "role gives it), or peer_probe to only ask whether the revision is here")
    result = {"port": 22, "restricted": False}
    result.update({key: value for key, value in transport.items() if value not in (None, "", [])})
    rsh = result.get("rsh")
    if rsh is not None:
        words = rsh if isinstance(rsh, list) else []
        plain = [isinstance(a, str) and a and not re.search(r"[\s'\"\\]", a) for a in words]
        if not plain or not all(plain):
            raise ModelError("peer_transport.rsh must be a command as a list of words without spaces or quotes")
        return result
    address = result.get("address")
    if not isinstance(address, str) or not ADDRESS_RE.fullmatch(address) or address.startswith("-"):
        raise ModelError("peer_transport.address must be a host name or an IP address, got %r" % (address,))
    port = result.get("port")
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ModelError("peer_transport.port must be 1-65535, got %r" % (port,))
    user = result.get("user")
    if not isinstance(user, str) or not USER_RE.fullmatch(user):
        raise ModelError("peer_transport.user must be a login name on the peer, got %r" % (user,))
    for key in ("identity_file", "known_hosts"):
        value = result.get(key)
        if value is not None and (not isinstance(value, str) or not SAFE_PATH_RE.fullmatch(value)):
            raise ModelError("peer_transport.%s must be an absolute path of letters, digits and ._/+@:=-, got %r"
                             % (key, value))
    if result.get("host_keys") is not None:
        keys = result.pop("host_keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and HOST_KEY_RE.fullmatch(k.strip())
                                                             for k in keys):
            raise ModelError("peer_transport.host_keys must list the peer's host public keys, 'TYPE BASE64' each")
        name = address if port == 22 else "[%s]:%d" % (address.strip("[]"), port)
        result["known_hosts"] = os.path.join(work, "known_hosts")
        with open(result["known_hosts"], "w", encoding="utf-8") as handle:
            handle.write("".join("%s %s\n" % (name, key.strip()) for key in keys))
    if not result.get("known_hosts"):
        raise ModelError("peer_transport.known_hosts (or host_keys) is required: the peer's host keys are checked, "
                         "never learned")
    if not os.path.isfile(result["known_hosts"]):
        raise ModelError("peer_transport.known_hosts %s does not exist on this host" % result["known_hosts"])
    if result.get("identity_file") and not os.path.isfile(result["identity_file"]):
        raise ModelError("peer_transport.identity_file %s does not exist on this host" % result["identity_file"])
    return result


def ssh_command(transport, timeout):
    """rsync's -e: ssh with the host key checked against the given file only, no agent, no password prompt."""
    if transport.get("rsh"):
        return " ".join(transport["rsh"])
    words = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
             "-o", "UserKnownHostsFile=" + transport["known_hosts"], "-o", "GlobalKnownHostsFile=/dev/null",
             "-o", "UpdateHostKeys=no", "-o", "ConnectTimeout=%d" % timeout, "-o", "ServerAliveInterval=15",
             "-o", "ServerAliveCountMax=%d" % max(2, timeout // 15 + 1), "-o", "ForwardAgent=no",
             "-o", "ClearAllForwardings=yes", "-p", str(transport["port"]), "-l", transport["user"]]
    if transport.get("identity_file"):
        words += ["-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-i", transport["identity_file"]]
    return " ".join(words)


def remote(transport, peer_dir, relative):
    """The rsync source for a path under the peer's models directory: relative to it when the peer restricts the key
    to that directory (rrsync), else absolute."""
    path = relative if transport.get("restricted") else peer_dir.rstrip("/") + "/" + relative
    address = transport.get("address") or "peer"
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%s" % (address, path)


def describe(source):
    return "peer %s (%s)" % (source["host"], source["peer_dir"])


def run_rsync(argv, timeout, watch=None, pass_fds=(), deadline=None):
    """Run rsync; returns (exit status, stdout, stderr's last lines). watch() is called every POLL_S while it runs;
    PASS_FDS: descriptors rsync inherits (the folder it writes into). DEADLINE (monotonic): rsync is killed when it
    runs past it (ms.DeadlineError; what arrived is kept)."""
    rsync = shutil.which("rsync")
    if rsync is None:
        raise ModelError("rsync is not installed on this host (apt-get install rsync); the peer needs it too")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([rsync] + argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    pass_fds=tuple(pass_fds))
        except OSError as exc:
            raise ModelError("cannot start rsync: %s" % (exc.strerror or exc))
        while True:
            try:
                proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if watch is not None:
                    watch()
                left = ms.remaining(deadline)
                if left is not None and left <= 0:
                    proc.kill()
                    proc.wait()
                    ms.check_deadline(deadline, "copying from the peer")
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace").strip().splitlines()[-5:])


def base_args(transport, timeout):
    return ["--timeout=%d" % max(timeout, 1), "-e", ssh_command(transport, timeout)]


def peer_record(source, name, revision, transport, timeout, work, deadline=None):
    """The peer's record of the revision, checked; ModelError when it has none or it is not the pinned revision."""
    relative = "%s/%s/%s.json" % (name, ms.STATE_DIR, revision)
    local = os.path.join(work, "record", name, ms.STATE_DIR, revision + ".json")
    os.makedirs(os.path.dirname(local))
    status, _out, tail = run_rsync(base_args(transport, timeout) + [
        remote(transport, source["peer_dir"], relative), local], timeout, deadline=deadline)
    if status != 0 or not os.path.isfile(local):
        raise ModelError("%s holds no verified copy of %s revision %s that it can send (copying its record %s "
                         "failed: rsync exit %s: %s)" % (describe(source), name, revision, relative, status,
                                                         " | ".join(tail) or "no message"))
    record = ms.read_record(os.path.join(work, "record"), name, revision)
    if record is None:
        raise ModelError("%s: its record %s does not hold together (not JSON, a file list that does not match its "
                         "digest, or another revision); nothing copied" % (describe(source), relative))
    pinned = source.get("manifest_sha256")
    if pinned and record["manifest_sha256"] != pinned:
        raise ModelError("%s holds %s revision %s with manifest digest %s, not the pinned manifest_sha256 %s; "
                         "nothing copied" % (describe(source), name, revision, record["manifest_sha256"], pinned))
    expected = source["peer_dir"].rstrip("/") + "/" + name + "/" + revision
    if record.get("path") not in (None, expected):
        raise ModelError("%s: its copy is at %s (a path source there), not under its models directory %s; only a "
                         "copy the peer fetched can be sent" % (describe(source), record.get("path"), expected))
    return record


def _bytes_under(folder):
    total = 0
    for directory, _dirs, names in os.walk(folder):
        for item in names:
            try:
                total += os.lstat(os.path.join(directory, item)).st_size
            except OSError:
                pass
    return total


def _copy(source, name, revision, files, staging, transport, timeout, progress, work, deadline=None):
    """One rsync of the files into the partial folder; ModelError when it stops (what arrived is kept).

    rsync writes below the folder as this side opened it (no link on the way, root's own, nothing in it but regular
    files and folders): it is given the descriptor's /proc/self/fd path, so a folder swapped for a link after the
    check is not where it writes."""
    partial = staging.partial
    listing = os.path.join(work, "files")
    with open(listing, "w", encoding="utf-8") as handle:
        handle.write("".join(entry["name"] + "\n" for entry in files))
    for entry in files:  # a kept file longer than the manifest's cannot be resumed
        if staging.size(entry) > entry["size"]:
            staging.remove(entry)
    with ms.tree(staging.models_dir) as models:
        models.walk(staging.base)  # a link, a FIFO or a device anywhere below is refused, naming it
        folder = models.open_dir(staging.base, owned=True)
    start = _bytes_under(partial)

    def watch():
        now = _bytes_under(partial)
        progress.transferred = max(0, now - start)
        progress.done = now
        progress.tick()

    try:
        status, out, tail = run_rsync(base_args(transport, timeout) + [
            "--files-from=" + listing, "--times", "--partial", "--append-verify", "--stats", "--no-human-readable",
            "--no-links", "--no-devices", "--no-specials",
            remote(transport, source["peer_dir"], "%s/%s/" % (name, revision)), "/proc/self/fd/%d/" % folder],
            timeout, watch, pass_fds=(folder,), deadline=deadline)
    finally:
        os.close(folder)
    watch()
    literal = LITERAL_RE.search(out)
    if status != 0:
        raise ModelError("copying %s revision %s from %s stopped (rsync exit %d: %s); what arrived is kept in %s "
                         "and the next run resumes it" % (name, revision, describe(source), status,
                                                          " | ".join(tail) or "no message", partial))
    return int(literal.group(1)) if literal else progress.transferred


def _tidy(staging, files):
    """Remove from the partial folder everything that is not one of the manifest's files (rsync's temporary files
    of a killed run) and folders left empty, so the folder renamed into place holds exactly the revision; a link
    or anything but a regular file or folder is refused (never removed through), before anything is removed."""
    wanted = {tuple(staging.parts(entry)) for entry in files}
    with ms.tree(staging.models_dir) as models:
        entries = models.walk(staging.base)
        for parts, info in entries:
            if stat.S_ISREG(info.st_mode) and tuple(parts) not in wanted:
                models.unlink(parts)
        for parts, info in reversed(entries):
            if stat.S_ISDIR(info.st_mode) and not models.listdir(parts):
                models.remove_tree(parts)


def ensure_peer(models_dir, name, revision, source, verify="size", margin=0, check_mode=False, timeout=60,
                retries=3, free=ms.free_bytes, transport=None, probe=False, deadline=None):
    """model_store.ensure for a peer source (already checked by model_manifest.check_source)."""
    source = dict(source, peer_dir=source.get("path") or models_dir)
    final, counter = ms.revision_dir(models_dir, name, revision), [0]
    record, problems = present(models_dir, name, revision, verify, counter)
    if record is not None:
        pinned = source.get("manifest_sha256")
        if pinned and record["manifest_sha256"] != pinned:
            raise ModelError("%s is recorded with manifest digest %s, not the pinned manifest_sha256 %s; it is not "
                             "used (remove it to copy the pinned revision)"
                             % (final, record["manifest_sha256"], pinned))
        if problems:
            refuse_corrupt(final, problems)
        return result_of(final, record["files"], verified=verify, hashed_bytes=counter[0], present=True)
    if probe:  # check mode: a real run would copy it (its size is the peer's to tell)
        return result_of(final, None, verified="none", present=False, would_fetch_bytes=None,
                         changed=bool(check_mode))
    work = tempfile.mkdtemp(prefix="sglang-peer-")
    try:
        transport = check_transport(transport, work)
        peer = peer_record(source, name, revision, transport, timeout, work, deadline)
        files = peer["files"]
        extra = {"copied_from": source["host"], "peer_verified_at": peer.get("verified_at")}
        # In place without a record (a run stopped after the rename, or by hand): hashed, if root's alone.
        if ms._folder_in_place(models_dir, name, final, owned=True):  # pylint: disable=protected-access
            problems = mm.verify_dir(final, files, "full", counter)
            if problems:
                refuse_corrupt(final, problems)
            if not check_mode:
                ms.write_record(models_dir, name, revision, files, source, "full", final, extra=extra)
            return result_of(final, files, verified="full", hashed_bytes=counter[0], changed=True, present=True)
        staging = ms.Staging(models_dir, ms.partial_dir(models_dir, name, revision))
        would, needed = ms.would_fetch(staging, files)
        problem = mm.space_problem(needed, free(os.path.join(models_dir, name)), margin)
        if problem:
            raise ModelError(problem)
        if check_mode:
            return result_of(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True,
                             verified="none", present=False)
        staging.create()
        lock = lock_model(models_dir, name)
        try:
            progress = ms.Progress(ms.progress_path(models_dir, name, revision), mm.total_bytes(files),
                                   models_dir=models_dir)
            try:
                copied = _copy_verified(source, name, revision, files, staging, transport, timeout, retries,
                                        progress, counter, work, deadline)
            finally:
                progress.tick(force=True, state="fetching" if progress.done < progress.total else "verified")
            _tidy(staging, files)
            ms.place(staging.partial, final)
            ms.write_record(models_dir, name, revision, files, source, "full", final, extra=extra)
            summary = progress.summary("verified")
        finally:
            lock.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return result_of(final, files, would_fetch=would, would_fetch_bytes=needed, changed=True, verified="full",
                     transferred_bytes=copied, hashed_bytes=counter[0], seconds=summary["seconds"],
                     rate_bytes_per_s=summary["rate_bytes_per_s"], progress_file=progress.path, present=True,
                     copied_from=source["host"])


def _copy_verified(source, name, revision, files, staging, transport, timeout, retries, progress, counter, work,
                   deadline=None):
    """rsync until every file arrived (resuming up to retries times), then every file hashed; a file that differs
    is removed and, when a stopped run had kept part of it, copied once more; else refused by name."""
    todo, again, copied = list(files), True, 0
    while todo:
        kept_before = {entry["name"]: staging.kept(entry) is not None for entry in todo}
        attempt = 0
        while True:
            try:
                copied += _copy(source, name, revision, todo, staging, transport, timeout, progress, work,
                                deadline)
                break
            except ms.DeadlineError:
                raise
            except ModelError:
                attempt += 1
                if attempt > retries:
                    raise
        bad, retry = [], []
        for entry in todo:
            problem = mm.file_problem(staging.path(entry), entry, "full", counter)
            if problem is None:
                continue
            staging.remove(entry)
            if kept_before[entry["name"]] and again:
                retry.append(entry)
            else:
                bad.append(problem)
        if bad:
            raise ModelError("%s from %s, against the peer's own record: the peer's copy is corrupt (check it there "
                             "with sglang_model_verify: full); the file was removed and the revision is not used"
                             % ("; ".join(bad), describe(source)))
        todo, again = retry, False
    return copied
