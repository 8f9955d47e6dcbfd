#!/usr/bin/env bash
# STAND-IN for `ansible-galaxy collection download 'ansible.posix:>=1.6.0,<3.0.0' -p .` (Galaxy is unreachable
# here): ansible-posix-<version>.tar.gz into OUT_DIR, built as the tests build it (tests/helpers/operator_guide.py,
# posix_standin_tarball: the ansible package's copy rebuilt by ansible-galaxy from its MANIFEST.json).
#   lab/posix-tarball.sh OUT_DIR      (run with the checkout's .venv, which holds the ansible package)
set -euo pipefail
out=$(realpath "$1")
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tarball=$(.venv/bin/python -c 'import sys; from tests.helpers.operator_guide import posix_standin_tarball as t
print(t(sys.argv[1]))' "$work")
mv "$tarball" "$out/"
ls "$out/$(basename "$tarball")"
