# -*- coding: utf-8 -*-
"""Old model revisions removed once the server runs another (the sglang_model role's entry point prune).

Kept: the revision <name>/current points at (what the server loads), and the revisions asked to be kept (the ones
this deploy wants). Removed, for every other revision this store recorded: its folder (only one under the models
directory; a path source's own folder is never touched), its record and its progress file; and every .partial-
folder of a revision not kept (a fetch that will not be resumed). Anything the store did not make stays. Folders go
by a descriptor-relative walk that never follows a link (module_utils/safe_files.py); a link in the place of a
revision or a .partial- folder, a record named as no revision, a current link that names no recorded revision: each
is refused, and nothing is pruned.
"""
from __future__ import annotations

import os

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from ansible.module_utils.safe_files import UnsafeFile

RECORD_SUFFIX = ".json"
PROGRESS_SUFFIX = ".progress.json"


def current_revision(models_dir, name):
    """The revision the current link points at (see _current_revision), or None."""
    try:
        models = ms.tree(models_dir)
    except FileNotFoundError:
        return None
    with models:
        return _current_revision(models, models_dir, name)


def _current_revision(models, models_dir, name):
    """The revision the current link points at (a path source's by its record), or None. The link's target is
    taken as the revision only when it names one plainly: `./r1`, `r1/` or `m/../m/r1` stand for r1 too, so any
    target is normalised, and one that names no revision folder of this model keeps every revision (refused)."""
    target = ms.read_current(models, name)
    if target is None:
        return None
    model_dir = os.path.join(os.path.abspath(models_dir), name)
    resolved = os.path.normpath(os.path.join(model_dir, target))
    if os.path.dirname(resolved) == model_dir and not mm.revision_problem("revision", os.path.basename(resolved)):
        return os.path.basename(resolved)
    for revision in recorded_revisions(models, name):
        record = ms.read_record(models_dir, name, revision) or {}
        if isinstance(record.get("path"), str) and os.path.normpath(record["path"]) == resolved:
            return revision
    raise ModelError("%s points at %s, which is no revision this store recorded: nothing is pruned while what the "
                     "server loads is unknown" % (ms.current_link(models_dir, name), target))


def recorded_revisions(models, name):
    """The revisions recorded under <name>/.state (a record whose name is no plain revision is refused)."""
    found = []
    for entry in models.listdir([name, ms.STATE_DIR], owned=True):
        if not entry.endswith(RECORD_SUFFIX) or entry.endswith(PROGRESS_SUFFIX) or entry.startswith("."):
            continue
        revision = entry[:-len(RECORD_SUFFIX)]
        problem = mm.revision_problem("the record's revision", revision)
        if problem:
            raise ModelError("%s: %s; nothing is pruned" % (os.path.join(models.root, name, ms.STATE_DIR, entry),
                                                            problem))
        found.append(revision)
    return sorted(found)


def plan(models_dir, name, keep):
    """The paths a prune removes, in order (folders first, then records): [] when nothing is to go."""
    mm.check_name("name", name)
    for revision in keep:
        mm.check_revision("keep", revision)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    try:
        models = ms.tree(models_dir)
    except FileNotFoundError:
        return []
    with models:
        try:
            return _plan(models, models_dir, name, keep)
        except UnsafeFile as exc:
            raise ModelError("%s; nothing was removed" % exc)


def _plan(models, models_dir, name, keep):
    kept = set(keep) | {_current_revision(models, models_dir, name)}
    folders, records = [], []
    for revision in recorded_revisions(models, name):
        if revision in kept:
            continue
        if models.kind([name, revision]) == "folder":
            folders.append(ms.revision_dir(models_dir, name, revision))
        records += [path for path in (ms.progress_path(models_dir, name, revision),
                                      ms.record_path(models_dir, name, revision))
                    if models.stat(ms.relative(models_dir, path)) is not None]
    for entry in models.listdir([name], owned=True) if models.kind([name]) == "folder" else []:
        revision = entry[len(ms.PARTIAL):]
        if entry.startswith(ms.PARTIAL) and revision not in kept and not mm.revision_problem("", revision):
            models.kind([name, entry])  # a link or a FIFO in a .partial-'s place is refused, never removed through
            folders.append(os.path.join(models_dir, name, entry))
    return folders + records


def prune(models_dir, name, keep, check_mode=False):
    """Remove what plan() names (nothing in check mode); returns the paths removed (or that would be). Folders are
    removed by a descriptor-relative walk that never follows a link; records are unlinked in their folder."""
    doomed = plan(models_dir, name, keep)
    if not check_mode and doomed:
        try:
            with ms.tree(models_dir) as models:
                for path in doomed:
                    parts = ms.relative(models_dir, path)
                    if models.kind(parts) == "folder":
                        models.remove_tree(parts)
                    else:
                        models.unlink(parts)
        except UnsafeFile as exc:
            raise ModelError("%s; what was removed before stays removed" % exc)
    return doomed
