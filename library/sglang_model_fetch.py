#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible shell around module_utils/model_store.py, model_manifest.py, model_hub.py (hf) and model_peer.py (peer)."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_fetch
short_description: Put one pinned model revision on the host, verified against its manifest, or verify one in place
version_added: "0.2.0"
description:
  - Makes C(<models_dir>/<name>/<revision>/) hold exactly the files of the revision's manifest (name, size and
    sha256 per file), or, for a C(path) source, verifies a copy already on the host where it is.
  - An C(http) source is a mirror serving the files under I(source.url) and a manifest at I(source.manifest_url), JSON
    holding a list C(files) with the C(name), C(size) and C(sha256) of each file. Files are fetched into
    C(<name>/.partial-<revision>/) (same filesystem), each hashed as it arrives, and the folder is renamed into place
    only when every file matched; a fetch that stops keeps what arrived, and the next run hashes that again and
    resumes each file with an HTTP Range request.
  - Before fetching, the free space must hold what is still to fetch plus I(space_margin_mb); otherwise the module
    refuses with the figures.
  - A verified revision is recorded in C(<name>/.state/<revision>.json) (the manifest and its digest). A revision in
    place with its record is checked by size alone (I(verify=size), no download, no hashing, the mirror is not
    asked); I(verify=full) hashes every file again. A copy that fails is never used, and the message names the file.
  - Root never follows a link in the models tree, nor opens a FIFO or device there; folders it writes into
    (C(.state), C(.partial-<revision>)) must be its own and not writable by group or others. Such a path is refused
    with a message naming it and the rule (see C(module_utils/safe_files.py)).
  - Credentials in a URL (C(user:password@), a query, a fragment) are never recorded nor returned; the bearer token
    is sent only to the origin (scheme, host, port) it was given for, never across a redirect to another one.
  - Bytes, total and rate of a fetch in progress are written to C(<name>/.state/<revision>.progress.json) every few
    seconds, and returned at the end.
  - The C(current) link of a model is not switched here; the server's restart path owns it
    (C(model_store.switch_current)).
  - An C(hf) source is a Hugging Face repository I(source.repo) fetched through the real C(huggingface_hub) client
    of the venv whose interpreter is I(hf_python) (the sglang_model role makes it), with I(source.endpoint) as
    C(HF_ENDPOINT) (an internal mirror) and the token read from I(source.token_file). The token is handed to the
    client on its stdin, never in a process's arguments or environment, a result, a message or a record.
  - For C(hf), I(revision) is a 40-hex commit, or a branch or tag name the hub's API resolves to its commit at each
    run (refused with I(hf_require_commit)); the revision is placed and recorded under the commit, and the result's
    C(revision) is the commit. The hub's metadata (C(model_info) with files metadata) gives every file's size and its
    LFS sha256 or git blob id; each fetched file is checked against them (sha256 for LFS files, the git blob sha1
    otherwise) and its size, a stopped fetch resumes with HTTP Range after hashing what it kept, and a file that
    fails is removed and named. A 40-hex revision in place with its record asks neither the hub nor the client.
  - A C(peer) source is another inventory host I(source.host) holding a verified copy of the same revision under its
    models directory I(source.path) (this host's I(models_dir) without it). This host pulls it with the real C(rsync)
    over SSH as I(peer_transport) says (address, port, user, the key, the known_hosts file holding the peer's host
    keys, checked and never learned); the sglang_model role makes a key for the one transfer and removes it. The peer's
    record C(<name>/.state/<revision>.json) is copied first and gives the manifest (its digest must be
    I(source.manifest_sha256) when that is given); the files are copied into C(<name>/.partial-<revision>/) with
    C(--partial --append-verify) (a stopped copy resumes where it stopped), every file is hashed against the
    manifest, and a file that differs is removed and named (the peer's copy is corrupt). I(peer_probe) only reports
    whether the revision is here (C(present)), copying nothing.
author:
  - gpufleet sglang maintainers (@gpufleet)
options:
  name:
    description: The model's name, a directory under I(models_dir) (letters, digits, C(.), C(_), C(-)).
    type: str
    required: true
  revision:
    description: The pinned revision (a directory name; a 40-hex commit for C(hf)).
    type: str
    required: true
  models_dir:
    description: Absolute path of the folder that holds every model.
    type: path
    required: true
  source:
    description: Where the revision comes from.
    type: dict
    required: true
    suboptions:
      type:
        description: The kind of source.
        type: str
        required: true
        choices: [path, http, hf, peer]
      path:
        description: C(path) the folder on the host that holds the model; C(peer) the peer's models directory.
        type: path
      manifest:
        description: C(path) the manifest file on the host.
        type: path
      url:
        description: C(http) the base URL the files are served under (C(<url>/<file name>)).
        type: str
      manifest_url:
        description: C(http) the manifest's URL; defaults to C(<url>/manifest.json).
        type: str
      token_file:
        description:
          - C(http), C(hf) a file on the host holding a bearer token. Only the file's path is an argument; the token
            goes into a request header only, never into a result, a message or a record.
        type: path
      repo:
        description: C(hf) the repository, C(owner/name).
        type: str
      endpoint:
        description: C(hf) the hub endpoint (C(HF_ENDPOINT), an internal mirror); the client's default hub without it.
        type: str
      host:
        description: C(peer) the inventory host that holds a verified copy.
        type: str
      manifest_sha256:
        description: C(peer) the manifest digest the peer's record must carry (pinned by the operator); any without it.
        type: str
  verify:
    description: How a revision already in place is checked again, C(size) (a stat per file) or C(full) (sha256).
    type: str
    choices: [size, full]
    default: size
  space_margin_mb:
    description: MiB that must stay free on top of what is to be fetched.
    type: int
    default: 1024
  timeout:
    description: Seconds a connection to the mirror may stay silent.
    type: int
    default: 60
  file_deadline:
    description:
      - C(http) seconds one file may take, however steadily its bytes arrive (a mirror that sends a byte now and
        then is stopped); what arrived is kept and the next run resumes it. C(0) for no limit.
    type: int
    default: 7200
  fetch_deadline:
    description:
      - Seconds the whole fetch may take (C(http) the manifest and every file; C(hf) the client, killed past it;
        C(peer) rsync, killed past it). What arrived is kept. C(0) for no limit.
    type: int
    default: 86400
  retries:
    description: How many times one run resumes a file whose transfer stopped.
    type: int
    default: 3
  hf_python:
    description:
      - C(hf) the interpreter of a venv holding C(huggingface_hub) (the sglang_model role's C(sglang_model_hf_venv)).
      - It, its venv and every folder above them up to C(/) must be root's alone (not writable by group or others),
        or the module refuses to run it with the token.
      - In check mode before it exists, the revision is reported as to be fetched, its size not known.
    type: path
  hf_require_commit:
    description: C(hf) refuse a revision that is not a 40-hex commit instead of resolving a branch or tag name.
    type: bool
    default: false
  peer_transport:
    description:
      - C(peer) how this host reaches the peer with rsync over SSH (the sglang_model role fills it in from the
        inventory). Without it, a revision not in place is refused unless I(peer_probe) is on.
    type: dict
    suboptions:
      address:
        description: The peer's address as this host reaches it.
        type: str
      port:
        description: The peer's SSH port.
        type: int
        default: 22
      user:
        description: The login on the peer.
        type: str
      identity_file:
        description: The private key on this host the peer accepts (without it, ssh's own identities).
        type: path
      known_hosts:
        description: A known_hosts file holding the peer's host keys (this or I(host_keys); C(StrictHostKeyChecking=yes)).
        type: path
      host_keys:
        description: The peer's host public keys (C(TYPE BASE64) each), checked and written into a known_hosts file of
          the transfer's own.
        type: list
        elements: str
      restricted:
        description: The peer restricts the key to its models directory (C(rrsync -ro)); paths are sent relative to it.
        type: bool
        default: false
      rsh:
        description: A command to use instead of ssh (a test's stand-in), as a list of words without spaces.
        type: list
        elements: str
  peer_probe:
    description: C(peer) only report whether the revision is in place and verified (C(present)); copy nothing.
    type: bool
    default: false
notes:
  - Supports check mode (what would be fetched and its size, with the free-space check; nothing is written) and
    diff mode (the revision absent before, present after).
"""

EXAMPLES = r"""
- name: Fetch the model from the fleet's mirror
  sglang_model_fetch:
    name: Kimi-K2.5
    revision: v3
    models_dir: /var/lib/sglang-models
    source:
      type: http
      url: http://mirror.internal/models/Kimi-K2.5/v3
      token_file: /etc/sglang/mirror-token

- name: Fetch a model from an internal Hugging Face mirror at a pinned commit
  sglang_model_fetch:
    name: Kimi-K2.5
    revision: 0123456789abcdef0123456789abcdef01234567
    models_dir: /var/lib/sglang-models
    hf_python: /opt/sglang-hf-client/venv/bin/python
    source:
      type: hf
      repo: moonshotai/Kimi-K2.5
      endpoint: https://hf-mirror.internal
      token_file: /etc/sglang/hf-token

- name: Copy a model from another host's verified copy (the sglang_model role fills in the transport)
  sglang_model_fetch:
    name: Kimi-K2.5
    revision: v3
    models_dir: /var/lib/sglang-models
    source:
      type: peer
      host: gpu01
      manifest_sha256: 9f2c0d0e6c1f2e3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a
    peer_transport:
      address: 10.0.0.11
      user: deploy
      identity_file: /root/.sglang-peer-x1/key
      known_hosts: /root/.sglang-peer-x1/known_hosts
      restricted: true

- name: Verify a copy on a shared filesystem, hashing every file
  sglang_model_fetch:
    name: draft
    revision: v1
    models_dir: /var/lib/sglang-models
    verify: full
    source:
      type: path
      path: /shared/models/draft-v1
      manifest: /shared/models/draft-v1.manifest.json
"""

RETURN = r"""
model_path: {description: "The verified revision's folder (the path source's own folder).", returned: success, type: str}
manifest_sha256: {description: "sha256 over the manifest (name, size, sha256 of every file).", returned: success, type: str}
files: {description: Number of files in the revision., returned: success, type: int}
total_bytes: {description: Size of the revision., returned: success, type: int}
would_fetch: {description: "Files still to fetch: name, size, bytes already kept.", returned: success, type: list, elements: dict}
would_fetch_bytes: {description: "Bytes still to fetch (null in check mode for hf before its client is installed).", returned: success, type: int}
transferred_bytes: {description: Bytes downloaded by this run., returned: success, type: int}
hashed_bytes: {description: "Bytes hashed from disk by this run (files already there; not those hashed as they arrived).", returned: success, type: int}
seconds: {description: Seconds the fetch took., returned: success, type: float}
rate_bytes_per_s: {description: Average download rate., returned: success, type: int}
verified: {description: "How the revision was checked: size, full, or none (check mode before a fetch).", returned: success, type: str}
model:
  description:
    - "What the role publishes of this model: name, revision (hf: the commit), path, manifest_sha256, models_dir,
      in_place (false only in check mode, for a revision the real run would still fetch), current (the link the
      server loads it through) and current_target (what that link holds once the server's restart points it at
      this revision)."
  returned: success
  type: dict
revision: {description: "hf: the commit the revision is placed and recorded under (a branch or tag resolved).", returned: hf sources, type: str}
requested_revision: {description: "hf: the revision as asked (a commit, branch or tag).", returned: hf sources, type: str}
progress_file: {description: Where the fetch wrote its progress., returned: when files were fetched, type: str}
present: {description: "peer: whether the revision is in place and verified after this run (false: probe or check mode).", returned: peer sources, type: bool}
copied_from: {description: "peer: the host the files were copied from.", returned: when a peer's files were copied, type: str}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils import model_store
# model_store imports the hf and peer sources inside ensure() (each imports model_store): imported here as well, so
# that a runner which ships only the imports it finds at the top (Mitogen's strategy) ships them too.
from ansible.module_utils import model_hub  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils import model_peer  # noqa: F401  pylint: disable=unused-import
from ansible.module_utils import model_manifest
from ansible.module_utils.model_manifest import ModelError
from ansible.module_utils import param_checks

SOURCE_OPTIONS = dict(
    type=dict(type="str", required=True, choices=["path", "http", "hf", "peer"]),
    path=dict(type="path"), manifest=dict(type="path"), url=dict(type="str"), manifest_url=dict(type="str"),
    token_file=dict(type="path", no_log=False), repo=dict(type="str"), endpoint=dict(type="str"),
    host=dict(type="str"), manifest_sha256=dict(type="str"),
)
TRANSPORT_OPTIONS = dict(
    address=dict(type="str"), port=dict(type="int", default=22), user=dict(type="str"),
    identity_file=dict(type="path", no_log=False), known_hosts=dict(type="path"),
    restricted=dict(type="bool", default=False), rsh=dict(type="list", elements="str"),
    host_keys=dict(type="list", elements="str", no_log=False),
)


def url_secrets(source):
    """What may be a credential in the source's URLs (user, password, query, fragment): masked in every output."""
    found = []
    for key in ("url", "manifest_url", "endpoint"):
        value = (source or {}).get(key)
        if isinstance(value, str):
            found += [part for part in model_manifest.url_secrets(value) if len(part) > 2]
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True), revision=dict(type="str", required=True),
            models_dir=dict(type="path", required=True),
            source=dict(type="dict", required=True, options=SOURCE_OPTIONS),
            verify=dict(type="str", choices=["size", "full"], default="size"),
            space_margin_mb=dict(type="int", default=1024), timeout=dict(type="int", default=60),
            file_deadline=dict(type="int", default=7200), fetch_deadline=dict(type="int", default=86400),
            retries=dict(type="int", default=3), hf_python=dict(type="path"),
            hf_require_commit=dict(type="bool", default=False),
            peer_transport=dict(type="dict", options=TRANSPORT_OPTIONS),
            peer_probe=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    refused = param_checks.refusal("sglang_model_fetch", module.argument_spec, module.params)
    if refused:
        module.fail_json(msg=refused, invocation={"module_args": param_checks.printable(module.params)})
    params = module.params
    for secret in url_secrets(params["source"]):
        module.no_log_values.add(secret)
    for key in ("space_margin_mb", "retries", "file_deadline", "fetch_deadline"):
        if params[key] < 0:
            module.fail_json(msg="%s must be 0 or more, got %d" % (key, params[key]), changed=False)
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be 1 or more seconds, got %d" % params["timeout"], changed=False)
    source = {key: value for key, value in params["source"].items() if value is not None}
    target = os.path.join(params["models_dir"] or "", params["name"] or "", params["revision"] or "")
    try:
        result = model_store.ensure(params["models_dir"], params["name"], params["revision"], source,
                                    verify=params["verify"], margin=params["space_margin_mb"] * 1024 * 1024,
                                    check_mode=module.check_mode, timeout=params["timeout"],
                                    retries=params["retries"], hf_python=params["hf_python"],
                                    hf_require_commit=params["hf_require_commit"],
                                    peer_transport=params["peer_transport"], peer_probe=params["peer_probe"],
                                    file_deadline=params["file_deadline"] or None,
                                    fetch_deadline=params["fetch_deadline"] or None)
    except ModelError as exc:
        module.fail_json(msg=param_checks.printable("%s revision %s: %s" % (params["name"], params["revision"], exc)),
                         changed=False)
    except OSError as exc:
        module.fail_json(msg=param_checks.printable("%s revision %s: %s (%s); a partial copy is never used" % (
            params["name"], params["revision"], exc.strerror or exc, exc.filename or target)), changed=False)
    revision = result.get("revision") or params["revision"]
    result["model"] = {"name": params["name"], "revision": revision, "path": result["model_path"],
                       "manifest_sha256": result["manifest_sha256"], "models_dir": params["models_dir"],
                       # False only in check mode, for a revision the real run would still fetch or copy
                       "in_place": os.path.isdir(result["model_path"]),
                       "current": model_store.current_link(params["models_dir"], params["name"]),
                       "current_target": model_store.current_target(params["models_dir"], params["name"], revision,
                                                                    result["model_path"])}
    if module._diff:
        absent = result["changed"] and source["type"] != "path"
        target = result["model_path"] if source["type"] != "path" else target
        result["diff"] = {"before": "" if absent else "%s\n" % result["model_path"],
                          "after": "%s (%s)\n" % (result["model_path"], result["manifest_sha256"]),
                          "before_header": target, "after_header": target}
    module.exit_json(**param_checks.printable(result))


if __name__ == "__main__":
    main()
