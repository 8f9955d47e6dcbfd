# -*- coding: utf-8 -*-
"""Where a model path's files are before the server's restart switches its current link (the sglang_model role).

    sglang_allreduce_model_path: "{{ sglang_server_model_path | sglang_model_folder(sglang_model_revisions) }}"

The server loads a verified revision through <models>/<name>/current, which only its restart points at the revision;
what reads the model before that (the canaries' hidden size, the offline model check) reads the revision's folder.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def sglang_model_folder(path, revisions):
    """The folder of the revision whose current link is PATH (REVISIONS: sglang_model_revisions), else PATH."""
    if not isinstance(revisions, dict):
        raise AnsibleFilterError("sglang_model_folder: revisions must be sglang_model_revisions (a mapping), got %r"
                                 % type(revisions).__name__)
    for model in revisions.values():
        if isinstance(model, dict) and path and model.get("current") == path:
            return model["path"]
    return path


class FilterModule(object):
    """Model paths as the server will load them."""

    def filters(self):
        return {"sglang_model_folder": sglang_model_folder}
