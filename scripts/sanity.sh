#!/usr/bin/env bash
# ansible-test sanity on the collection, built from this checkout (as make collection does) and installed from its
# tarball under an ansible_collections/ path (as ansible-test requires), with this venv's ansible-test and
# Python 3.11; no containers.
# ansible-test keeps its per-test venvs under its HOME (.cache/ansible-test-home): the second run reuses them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
tarball=$(python scripts/build_collection.py | sed -n 's/^tarball: //p')
installed=$(mktemp -d)
trap 'rm -rf "$installed"' EXIT
ansible-galaxy collection install --force "$tarball" -p "$installed" > /dev/null

# ansible-test bootstraps pip in each venv with get-pip.py from ci-files.testing.ansible.com, which is not reachable
# here: scripts/ansible-test/get_pip.py stands in for it (Python's ensurepip, then pip from PyPI).
home="$PWD/.cache/ansible-test-home"
pip_version=$(python -c 'from ansible_test._internal.python_requirements import get_venv_packages as g
from ansible_test._internal.host_configs import NativePythonConfig as P
print(g(P(version="3.11", path="python"))["pip"])')
mkdir -p "$home/.ansible/test/cache"
cp scripts/ansible-test/get_pip.py "$home/.ansible/test/cache/get_pip_${pip_version//./_}.py"

cd "$installed/ansible_collections/gpufleet/sglang"
HOME="$home" ansible-test sanity --local --python 3.11 --color no "$@"
