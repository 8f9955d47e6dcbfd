"""sglang_benchmark_verdict as root against a folder the service user owns and planted in
(tests/helpers/planted.py): the verdict is written only in a folder root alone can change, so a link planted on the
way is never followed; a verdict or fingerprint that is a FIFO or a link is refused, naming it, never opened. Nothing
outside changes (a decoy tree hashed before and after)."""
import os

import pytest

from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user, fifo_released
from tests.integration.test_benchmark_verdict_module import paths


def recorded(base):
    return dict(base, state="recorded", fingerprint="abc123", passed=True, summary="passed: 140 tok/s")


def test_a_verdict_behind_a_planted_folder_link_is_refused(home, tmp_path):
    as_user(lambda: os.symlink(home.decoy, home.path("state")))
    verdict = home.path("state", "config.json")  # the decoy's own file, reached through the link
    result = run_module("sglang_benchmark_verdict", recorded(dict(paths(tmp_path), verdict_file=verdict)))
    assert result.get("failed") and "%s is owned by uid %d, not 0; root writes and removes a record only in a folder " \
        "that only root can change" % (os.path.dirname(home.models), home.uid) in result["msg"], result


@pytest.mark.parametrize("record", ["verdict_file", "config_file"])
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_verdict_or_fingerprint_is_refused_naming_it(home, tmp_path, record, kind):
    planted = home.path(record + ".json")
    as_user((lambda: os.symlink(os.path.join(home.decoy, "keys", "id"), planted)) if kind == "symlink" else
            (lambda: os.mkfifo(planted)))
    with fifo_released(planted, 30):
        result = run_module("sglang_benchmark_verdict", dict(paths(tmp_path), **{record: planted}))
    assert result.get("failed") and planted in result["msg"], result
    assert ("is a symlink" if kind == "symlink" else "not a regular file") in result["msg"], result
