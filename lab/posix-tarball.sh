#!/usr/bin/env bash
# STAND-IN for `ansible-galaxy collection download 'ansible.posix:>=1.6.0,<3.0.0' -p .` (Galaxy is unreachable
# here): builds ansible-posix-<version>.tar.gz into OUT_DIR from the ansible package's copy of ansible.posix, which
# keeps its MANIFEST.json but not every file its FILES.json lists, so it is rebuilt with `ansible-galaxy collection
# build` from a galaxy.yml made of that MANIFEST.json's collection_info.
#   lab/posix-tarball.sh OUT_DIR      (the Python of the checkout's .venv, which holds the ansible package)
set -euo pipefail
out=$1
here="$(cd "$(dirname "$0")/.." && pwd)"
python="$here/.venv/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" - "$work/posix" <<'PY'
import json, os, shutil, sys
import ansible_collections.ansible.posix as posix
import yaml
source, dest = posix.__path__[0], sys.argv[1]
shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "MANIFEST.json", "FILES.json"))
with open(os.path.join(source, "MANIFEST.json"), encoding="utf-8") as handle:
    info = json.load(handle)["collection_info"]
keys = ("namespace", "name", "version", "readme", "authors", "description", "license", "license_file", "tags",
        "dependencies", "repository", "documentation", "homepage", "issues")
galaxy = {key: info[key] for key in keys if info.get(key) not in (None, [], {}, "")}
with open(os.path.join(dest, "galaxy.yml"), "w", encoding="utf-8") as handle:
    yaml.safe_dump(galaxy, handle)
PY
"$here/.venv/bin/ansible-galaxy" collection build --force --output-path "$out" "$work/posix" >/dev/null
ls "$out"/ansible-posix-*.tar.gz
