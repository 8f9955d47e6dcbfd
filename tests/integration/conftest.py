"""Fixtures several integration modules share."""
import pytest

from tests.helpers import wheels


@pytest.fixture(scope="session")
def pcie_ipc_venv(tmp_path_factory):
    """A venv of the real sglang 0.5.23 and flashinfer-python 0.7.2 wheels (--no-deps): PCIe IPC can run there."""
    return wheels.make_venv(str(tmp_path_factory.mktemp("sglang-0.5.23") / "venv"),
                            wheels.wheel("sglang", "0.5.23"), wheels.wheel("flashinfer-python", "0.7.2"))


@pytest.fixture(scope="session")
def pristine_venv_of(tmp_path_factory):
    """pristine_venv_of(("sglang", "0.5.21"), ...): a venv of those real wheels (--no-deps), made once a session (once
    a pytest-xdist worker) for every module that asks for the same wheels. Never changed: a test that changes a venv
    works on its own copy (wheels.copy_venv), which costs a fraction of installing the wheels again."""
    made = {}

    def get(*requirements):
        if requirements not in made:
            folder = tmp_path_factory.mktemp("pristine-" + "-".join("%s-%s" % pair for pair in requirements))
            found = [wheels.wheel(project, version) for project, version in requirements]
            made[requirements] = wheels.make_venv(str(folder / "venv"), *found)
        return made[requirements]
    return get
