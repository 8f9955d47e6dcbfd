# -*- coding: utf-8 -*-
"""Old model revisions removed once the server runs another (the sglang_model role's entry point prune).

Kept: the revision <name>/current points at (what the server loads), and the revisions asked to be kept (the ones
this deploy wants). Removed, for every other revision this store recorded: its folder (only one under the models
directory; a path source's own folder is never touched), its record and its progress file; and every .partial-
folder of a revision not kept (a fetch that will not be resumed). Anything the store did not make stays.
"""
from __future__ import annotations

import os
import shutil

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError

RECORD_SUFFIX = ".json"
PROGRESS_SUFFIX = ".progress.json"


def current_revision(models_dir, name):
    """The revision the current link points at (a path source's by its record), or None."""
    link = ms.current_link(models_dir, name)
    if not os.path.islink(link):
        return None
    target = os.readlink(link)
    if "/" not in target:
        return target
    for revision in recorded_revisions(models_dir, name):
        record = ms.read_record(models_dir, name, revision) or {}
        if record.get("path") == target:
            return revision
    return None


def recorded_revisions(models_dir, name):
    state = os.path.join(models_dir, name, ms.STATE_DIR)
    try:
        names = os.listdir(state)
    except FileNotFoundError:
        return []
    return sorted(entry[:-len(RECORD_SUFFIX)] for entry in names
                  if entry.endswith(RECORD_SUFFIX) and not entry.endswith(PROGRESS_SUFFIX))


def plan(models_dir, name, keep):
    """The paths a prune removes, in order (folders first, then records): [] when nothing is to go."""
    mm.check_name("name", name)
    for revision in keep:
        mm.check_name("keep", revision)
    if not os.path.isabs(models_dir):
        raise ModelError("models_dir must be an absolute path, got %r" % models_dir)
    kept = set(keep) | {current_revision(models_dir, name)}
    folders, records = [], []
    for revision in recorded_revisions(models_dir, name):
        if revision in kept:
            continue
        folder = ms.revision_dir(models_dir, name, revision)
        if os.path.isdir(folder) and not os.path.islink(folder):
            folders.append(folder)
        records += [path for path in (ms.progress_path(models_dir, name, revision),
                                      ms.record_path(models_dir, name, revision)) if os.path.lexists(path)]
    model_dir = os.path.join(models_dir, name)
    for entry in sorted(os.listdir(model_dir)) if os.path.isdir(model_dir) else []:
        if entry.startswith(ms.PARTIAL) and entry[len(ms.PARTIAL):] not in kept:
            folders.append(os.path.join(model_dir, entry))
    return folders + records


def prune(models_dir, name, keep, check_mode=False):
    """Remove what plan() names (nothing in check mode); returns the paths removed (or that would be)."""
    doomed = plan(models_dir, name, keep)
    if not check_mode:
        for path in doomed:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
    return doomed
