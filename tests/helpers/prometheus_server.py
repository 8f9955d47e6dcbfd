"""A real Prometheus (Debian's package, as promtool) serving series a test writes: the OpenMetrics text becomes TSDB
blocks (`promtool tsdb create-blocks-from openmetrics`) in the test's folder, and `prometheus` serves them on a free
127.0.0.1 port with no scrape targets. The series are the test's own made-up values; the storage, the query engine
and the HTTP API are the real ones the controller-side tools talk to.
"""
import contextlib
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.helpers.promtool import INSTALL_HINT, run as promtool

READY_WITHIN_S = 120  # a safety bound for a loaded machine, not an expectation


def openmetrics(families):
    """OpenMetrics text of FAMILIES [(name, type, [(labels, [(unix_seconds, value)...])...])...]; a counter's
    samples carry the family's name with _total."""
    lines = []
    for name, kind, series in families:
        family = name[:-len("_total")] if kind == "counter" else name
        lines.append("# TYPE %s %s" % (family, kind))
        for labels, samples in series:
            text = ",".join('%s="%s"' % (key, value) for key, value in sorted(labels.items()))
            lines += ["%s{%s} %s %d" % (name, text, repr(float(value)), moment) for moment, value in samples]
    return "\n".join(lines + ["# EOF"]) + "\n"


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ready(url):
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serving(folder, text):
    """The URL of a Prometheus serving the OpenMetrics TEXT from a TSDB under FOLDER (a pathlib.Path); the process
    is stopped when the block ends, whatever happens in it."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(INSTALL_HINT)
    (folder / "series.om").write_text(text)
    made = promtool("tsdb", "create-blocks-from", "openmetrics", str(folder / "series.om"), str(folder / "tsdb"))
    assert made.returncode == 0, made.stdout + made.stderr
    (folder / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    port = _free_port()
    url = "http://127.0.0.1:%d" % port
    with open(str(folder / "prometheus.log"), "wb") as log:
        process = subprocess.Popen(  # pylint: disable=consider-using-with
            [binary, "--config.file=%s" % (folder / "prometheus.yml"), "--storage.tsdb.path=%s" % (folder / "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % port, "--storage.tsdb.retention.time=3650d"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while not _ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("prometheus did not become ready: %s" % (folder / "prometheus.log").read_text()[-3000:])
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
