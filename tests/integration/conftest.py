"""Fixtures several integration modules share."""
import fcntl
import json
import os
import shutil

import pytest

from tests.helpers import wheels

PCIE_IPC = (("sglang", "0.5.23"), ("flashinfer-python", "0.7.2"))


def _shared_root(tmp_path_factory):
    """A folder every pytest-xdist worker of this run sees (the run's base temporary folder; each worker's own is
    inside it), or this run's own without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def pristine_venv_of(tmp_path_factory):
    """pristine_venv_of(("sglang", "0.5.21"), ...): a venv of those real wheels (--no-deps), made once a run for
    every module that asks for the same wheels, whichever pytest-xdist worker asks first (the others wait for it).
    Never changed, as workers read it at the same time: a test that changes a venv works on its own copy
    (wheels.copy_venv, whose site-packages files are hard links to these), which costs a fraction of installing the
    wheels again. At the end each worker checks that no file of the venvs it used was written or chmod-ed."""
    root = _shared_root(tmp_path_factory) / "pristine-venvs"
    root.mkdir(exist_ok=True)
    used = {}

    def get(*requirements):
        folder = root / "-".join("%s-%s" % pair for pair in requirements)
        venv = folder / "venv"
        with open(str(root / ".lock"), "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "stats.json").exists():
                found = [wheels.wheel(project, version) for project, version in requirements]
                shutil.rmtree(str(folder), ignore_errors=True)  # a worker that failed half-way left it
                folder.mkdir()
                wheels.make_venv(str(venv), *found)
                (folder / "stats.json").write_text(json.dumps(wheels.file_stats(str(venv))))
        used[str(venv)] = folder / "stats.json"
        return str(venv)
    yield get
    for venv, stats in used.items():
        made = {path: tuple(info) for path, info in json.loads(stats.read_text()).items()}
        now = wheels.file_stats(venv)
        changed = sorted(path for path in set(made) | set(now) if made.get(path) != now.get(path))
        assert not changed, "the shared pristine venv %s was changed (a test wrote into it, or through a hard link " \
            "of wheels.copy_venv): %s" % (venv, changed[:20])


@pytest.fixture(scope="session")
def pcie_ipc_venv(pristine_venv_of):
    """A venv of the real sglang 0.5.23 and flashinfer-python 0.7.2 wheels (--no-deps): PCIe IPC can run there.
    The shared pristine venv: read only."""
    return pristine_venv_of(*PCIE_IPC)


@pytest.fixture(scope="session")
def once_a_run(tmp_path_factory):
    """once_a_run(name, make): make()'s result (JSON), made by whichever pytest-xdist worker asks first and read by
    the others from the run's shared folder: for what several modules measure the same way (a baseline)."""
    root = _shared_root(tmp_path_factory) / "once-a-run"
    root.mkdir(exist_ok=True)

    def get(name, make):
        kept = root / (name + ".json")
        with open(str(root / ".lock"), "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not kept.exists():
                made = make()
                kept.write_text(json.dumps(made))
        return json.loads(kept.read_text())
    return get
