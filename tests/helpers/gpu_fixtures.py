"""GPU test data: the shared real captures (read in place, never copied) and our constructed lab profiles."""
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.normpath(os.path.join(REPO, "..", "shared", "fixtures", "gpu"))
PROFILES = os.path.join(REPO, "lab", "gpu-profiles")
STANDIN = os.path.join(REPO, "lab", "standins", "nvidia-smi")
MAKE_H200 = os.path.join(REPO, "lab", "make-h200-profile.py")
MARKER = "# ----- BEGIN VERBATIM OUTPUT"
PROFILE_FILES = ("q-x.xml", "query-gpu.csv", "topo-m.txt", "topo-p2p-r.txt")


def shared(*parts):
    """Path of a shared fixture; the test is skipped, saying where it looked, when it is absent."""
    path = os.path.join(SHARED, *parts)
    if not os.path.exists(path):
        pytest.skip("shared GPU capture %s is absent: the real nvidia-smi outputs live outside the repo, in "
                    "<repo>/../shared/fixtures/gpu/, and are read in place, never copied" % path)
    return path


def read_shared(*parts):
    with open(shared(*parts), encoding="utf-8", newline="") as handle:
        return handle.read()


def public_output(*parts):
    """A public/ file's tool output: its '# ' header lines, up to and including the marker line, removed."""
    text = read_shared("public", *parts)
    head, found, rest = text.partition(MARKER)
    assert found, "no %r marker in public/%s" % (MARKER, "/".join(parts))
    assert all(line.startswith("# ") for line in head.splitlines()), "header lines must start with '# '"
    return rest.partition("\n")[2]


def profile(name, filename):
    with open(os.path.join(PROFILES, name, filename), encoding="utf-8", newline="") as handle:
        return handle.read()


def committed_profiles():
    return sorted(entry for entry in os.listdir(PROFILES) if os.path.isdir(os.path.join(PROFILES, entry))
                  and os.path.exists(os.path.join(PROFILES, entry, "q-x.xml")) and entry != "h200-2x-nvlink")
