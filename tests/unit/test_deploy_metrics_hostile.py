"""sglang_deploy_metrics as root against folders the service user owns and planted in (tests/helpers/planted.py):
the textfile is written only in a folder root alone can change (a planted link or FIFO there is never reached), and
the records it reads that are a FIFO or a link are refused, naming them, never opened. Nothing outside changes (a
decoy tree hashed before and after)."""
import os

import pytest

from tests.helpers.ansible_run import run_module
from tests.helpers.planted import as_user, fifo_released
from tests.integration.test_deploy_metrics_module import INFO, records


def args(tmp_path, path):
    return dict(records(tmp_path), path=path, info=INFO, allreduce_path="nccl", fused=False,
                deployed_at="2026-12-07T10:45:00+00:00")


@pytest.mark.parametrize("kind", ["symlink", "fifo", "none"])
def test_the_textfile_is_refused_in_a_folder_the_service_user_owns(home, tmp_path, kind):
    path = home.path("sglang_deploy.prom")
    if kind == "symlink":
        as_user(lambda: os.symlink(os.path.join(home.decoy, "config.json"), path))
    elif kind == "fifo":
        as_user(lambda: os.mkfifo(path))
    with fifo_released(path, 30):
        result = run_module("sglang_deploy_metrics", args(tmp_path, path))
    assert result.get("failed") and result["msg"].startswith(
        "sglang_deploy_metrics: %s is owned by uid %d, not 0; root writes the textfile only in a folder that only root "
        "can write" % (os.path.dirname(home.models), home.uid)), result
    assert (os.path.lexists(path)) is (kind != "none")


@pytest.mark.parametrize("record", ["gate_verdict_file", "restarts_log"])
@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_record_it_reads_is_refused_naming_it(home, tmp_path, record, kind):
    given = args(tmp_path, str(tmp_path / "textfile" / "sglang_deploy.prom"))
    planted = home.path(os.path.basename(given[record]))
    as_user((lambda: os.symlink(os.path.join(home.decoy, "keys", "id"), planted)) if kind == "symlink" else
            (lambda: os.mkfifo(planted)))
    given[record] = planted
    with fifo_released(planted, 30):
        result = run_module("sglang_deploy_metrics", given)
    assert result.get("failed") and planted in result["msg"], result
    assert ("symlink" if kind == "symlink" else "not a regular file") in result["msg"], result
    assert not os.path.exists(given["path"])
