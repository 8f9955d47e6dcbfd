"""Fixtures of the SGLang server stand-in's tests (tests/unit/test_sglang_standin_*.py); the helpers they share are
in tests/helpers/sglang_standin.py."""
import zipfile

import pytest

from tests.helpers import wheels
from tests.helpers.planted import Home
from tests.helpers.sglang_standin import Standin


@pytest.fixture
def standin(tmp_path):
    """Makes stand-ins (not started); stops every one at the end."""
    made = []

    def make(config=None, args=(), **kwargs):
        folder = tmp_path / ("s%d" % len(made))
        folder.mkdir()
        made.append(Standin(folder, config, args, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def sglang_0521_site(tmp_path):
    """A site-packages with sglang 0.5.21's argument definitions (from the real wheel, cached), nothing else."""
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    # Fetched here, not only found: under pytest-xdist this file may run before the integration tests download it.
    with zipfile.ZipFile(wheels.wheel("sglang", "0.5.21")) as wheel:
        for name in wheel.namelist():
            if name == "sglang/srt/server_args.py" or name.startswith("sglang/srt/arg_groups/") \
                    or name == "sglang-0.5.21.dist-info/METADATA":
                wheel.extract(name, str(site))
    return str(site)


@pytest.fixture
def home():
    """A planted home (tests/helpers/planted.py): a folder the unprivileged user owns and fills, and a decoy tree
    outside it that must end the test byte for byte as it began. A test file may define its own."""
    planted = Home()
    yield planted
    assert planted.decoy_unchanged()
    planted.close()
