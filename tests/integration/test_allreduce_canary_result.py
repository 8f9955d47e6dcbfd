"""A canary result that is not JSON (the canary killed while writing it) is a failed canary recorded with a message
of its own, not a template error: fusion stays off and the next run keeps that verdict for its key. The fixture and
the stand-in are test_allreduce_fusion_canary's (a real sglang 0.5.23 venv, no GPU)."""
import json

import pytest

from tests.helpers.ansible_run import failure
from tests.integration.test_allreduce_fusion_canary import calls, deploy, host, patched  # noqa: F401 (host: fixture)

pytestmark = pytest.mark.wheels


def test_a_result_cut_short_is_a_failed_canary_said_as_such(host):  # noqa: F811 (the fixture imported above)
    (host["standin"] / "VERDICT").write_text("garbled")
    rc, report = deploy(host)
    assert rc == 0, failure(report)
    record = json.loads(host["record"].read_text())
    assert record["passed"] is False
    assert record["summary"].startswith("fusion canary's result is not JSON (rc 0): {\"tool\": \"fusion_canary\"")
    assert "key" in record and not patched(host)
    assert deploy(host)[0] == 0 and len(calls(host)) == 1  # the failure stands for that key
