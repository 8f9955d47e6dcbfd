"""Stand-in for ansible-test's pip bootstrap script (get-pip.py from ci-files.testing.ansible.com).

ansible-test creates each sanity venv without pip and runs a cached get-pip.py in it to install the pinned pip.
That host is not reachable from here (PyPI is), so this bootstrap takes the pip bundled with Python (ensurepip)
and lets it install the version ansible-test asks for from PyPI. scripts/sanity.sh puts it where ansible-test
looks (~/.ansible/test/cache/get_pip_<version>.py under the project's own ansible-test HOME).
"""
import subprocess
import sys

# ansible-test runs us with get-pip.py's options: pip options, the pinned packages, --no-setuptools/--no-wheel.
GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")

# ensurepip in its own process: in-process it sets PIP_CONFIG_FILE=/dev/null, which would hide the machine's pip
# configuration (its CA bundle, its index) from the install below.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade"]
                         + [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]))
