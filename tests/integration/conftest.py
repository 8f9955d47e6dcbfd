"""Fixtures several integration modules share."""
import pytest

from tests.helpers import wheels


@pytest.fixture(scope="session")
def pcie_ipc_venv(tmp_path_factory):
    """A venv of the real sglang 0.5.23 and flashinfer-python 0.7.2 wheels (--no-deps): PCIe IPC can run there."""
    return wheels.make_venv(str(tmp_path_factory.mktemp("sglang-0.5.23") / "venv"),
                            wheels.wheel("sglang", "0.5.23"), wheels.wheel("flashinfer-python", "0.7.2"))
