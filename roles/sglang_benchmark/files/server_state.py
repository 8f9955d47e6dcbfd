#!/usr/bin/env python3
"""Saves and restores what an SGLang server runs, on the host: the benchmark gate's known-good state.

    server_state.py save    --dir D --link /opt/sglang/current --file PATH... [--glob PATTERN...] [--hold NAME]
    server_state.py restore --dir D [--check]
    server_state.py show    --dir D

`save` copies each file (absent ones are recorded as absent), notes where the `current` symlink points and
whether that venv carries the fusion patch (its .sglang-fusion-patch/state.json), and replaces D as a whole
(new folder, then rename): an interrupted save leaves the previous state intact. With `--hold NAME` it also
writes <venv>/.sglang-keep/NAME.json naming D/state.json, so sglang_venv_prune keeps that venv while the state
still names it.
`restore` puts every file back (atomically, one by one, owner and mode included; files absent at save time are
removed) and points the link back; the fusion patch state is for the caller to restore (the sglang_fusion_patch
module). Prints JSON: what differed and what was done. `--check` only reports. Stdlib only.
"""
import argparse
import datetime
import glob
import hashlib
import json
import os
import shutil
import sys
import tempfile

PATCH_STATE = os.path.join(".sglang-fusion-patch", "state.json")


def _sha(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_atomic(dest, fill, mode, owner=None):
    """Write dest through a temp file next to it (fill(handle) writes the bytes), fsynced, then renamed over."""
    folder = os.path.dirname(dest)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(dest) + ".", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        if owner:
            os.chown(tmp, *owner)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _copy_atomic(src, dest, meta):
    def fill(out):
        with open(src, "rb") as handle:
            shutil.copyfileobj(handle, out)
    _replace_atomic(dest, fill, meta["mode"], (meta["uid"], meta["gid"]))


def _same(old, files, link):
    """Whether the saved state already is what a save would write (then nothing is rewritten)."""
    if old is None or sorted(old["files"]) != sorted(dict.fromkeys(files)):
        return False
    for path, meta in old["files"].items():
        if (meta is None) != (not os.path.isfile(path)):
            return False
        if meta is not None:
            stat = os.stat(path)
            if (_sha(path), stat.st_mode & 0o7777, stat.st_uid, stat.st_gid) != \
                    (meta["sha256"], meta["mode"], meta["uid"], meta["gid"]):
                return False
    if link is None:
        return old.get("link") is None
    target = os.path.realpath(link)
    return old.get("link") == {"path": link, "target": target,
                               "patched": os.path.exists(os.path.join(target, PATCH_STATE))}


def hold(folder, name):
    """Mark the saved venv as held by this state (see sglang_venv_prune). True when the mark was (re)written."""
    link = (load(folder) or {}).get("link")
    if not link:
        return False
    content = json.dumps({"state": os.path.join(os.path.abspath(folder), "state.json")}) + "\n"
    path = os.path.join(link["target"], ".sglang-keep", name + ".json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            if handle.read() == content:
                return False
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    _replace_atomic(path, lambda out: out.write(content.encode()), 0o644)
    return True


def save(args):
    result = _save(args)
    if args.hold and hold(args.dir, args.hold):
        result["changed"] = True
    return result


def _save(args):
    files = list(args.file or [])
    for pattern in args.glob or []:
        files += sorted(glob.glob(pattern))
    if _same(load(args.dir), files, args.link):
        return {"saved": sorted(dict.fromkeys(files)), "link": load(args.dir)["link"], "changed": False}
    parent = os.path.dirname(os.path.abspath(args.dir))
    os.makedirs(parent, mode=0o700, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".state-", dir=parent)
    state = {"saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(), "files": {}, "link": None}
    try:
        os.makedirs(os.path.join(work, "files"))
        for index, path in enumerate(dict.fromkeys(files)):
            if os.path.isfile(path):
                stat = os.stat(path)
                copy = "%03d-%s" % (index, os.path.basename(path))
                shutil.copy2(path, os.path.join(work, "files", copy))
                state["files"][path] = {"copy": copy, "sha256": _sha(path), "mode": stat.st_mode & 0o7777,
                                        "uid": stat.st_uid, "gid": stat.st_gid}
            else:
                state["files"][path] = None
        if args.link:
            target = os.path.realpath(args.link)
            state["link"] = {"path": args.link, "target": target,
                             "patched": os.path.exists(os.path.join(target, PATCH_STATE))}
        with open(os.path.join(work, "state.json"), "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1, sort_keys=True)
        old = args.dir + ".old"
        if os.path.exists(old):
            shutil.rmtree(old)
        if os.path.exists(args.dir):
            os.rename(args.dir, old)
        os.rename(work, args.dir)
        if os.path.exists(old):
            shutil.rmtree(old)
        _fsync_dir(parent)
    finally:
        if os.path.exists(work):
            shutil.rmtree(work)
    return {"saved": sorted(state["files"]), "link": state["link"], "changed": True}


def load(folder):
    path = os.path.join(folder, "state.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def restore(args):
    state = load(args.dir)
    if state is None:
        raise SystemExit("server_state: nothing saved in %s" % args.dir)
    link = state.get("link")
    if link and not os.path.isdir(link["target"]):
        # Checked before anything is touched: no half-restored host.
        raise SystemExit("server_state: the saved venv %s is gone: cannot point %s back to it"
                         % (link["target"], link["path"]))
    actions = []
    for path, meta in sorted(state["files"].items()):
        if meta is None:
            if os.path.lexists(path):
                actions.append({"path": path, "action": "remove"})
                if not args.check:
                    os.unlink(path)
            continue
        if os.path.isfile(path) and _sha(path) == meta["sha256"]:
            continue
        actions.append({"path": path, "action": "restore"})
        if not args.check:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            _copy_atomic(os.path.join(args.dir, "files", meta["copy"]), path, meta)
    if link and os.path.realpath(link["path"]) != link["target"]:
        actions.append({"path": link["path"], "action": "relink", "from": os.path.realpath(link["path"]),
                        "to": link["target"]})
        if not args.check:
            tmp = link["path"] + ".rollback-tmp"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(link["target"], tmp)
            os.replace(tmp, link["path"])
            _fsync_dir(os.path.dirname(link["path"]))
    return {"changed": bool(actions), "actions": actions, "link": link, "saved_at": state["saved_at"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["save", "restore", "show"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--link")
    parser.add_argument("--file", action="append")
    parser.add_argument("--glob", action="append")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--hold", help="mark the saved venv as held by this state (save only)")
    args = parser.parse_args(argv)
    if args.action == "save":
        result = save(args)
    elif args.action == "restore":
        result = restore(args)
    else:
        result = {"changed": False, "state": load(args.dir)}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
