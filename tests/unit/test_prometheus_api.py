"""scripts/prometheus_api.py on answers a real Prometheus does not give: a stand-in HTTP server on 127.0.0.1 answers
each path with a fixed status and body (the real Prometheus' answers: tests/integration/test_prometheus_tools.py).
Every one is a PrometheusError with a message."""
import http.server
import json
import threading

import pytest

from tests.helpers.script_module import load_file

api = load_file("scripts/prometheus_api.py", "prometheus_api_under_test")

ANSWERS = {
    "/not-json": (200, b"<html>Grafana</html>"),
    "/error": (400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode()),
    "/empty-error": (502, b""),
    "/list": (200, b"[1, 2]"),
    "/no-result": (200, json.dumps({"status": "success", "data": {"resultType": "vector"}}).encode()),
    "/matrix": (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()),
    "/bad-sample": (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": "a"}, "value": [1, "not a number"]}]}}).encode()),
    "/bad-pair": (200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {}, "values": [[1]]}]}}).encode()),
    "/good": (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"instance": "a"}, "value": [1700000000.5, "3"]}]}}).encode()),
    "/scalar": (200, json.dumps({"status": "success",
                                 "data": {"resultType": "scalar", "result": [1700000000, "42"]}}).encode()),
}


class _StandIn(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # pylint: disable=invalid-name
        status, body = ANSWERS[self.path.split("/api/v1/")[0]]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # pylint: disable=arguments-differ
        pass


@pytest.fixture(scope="module")
def stand_in():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:%d" % server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path, says", [
    ("/not-json", "did not answer with Prometheus' JSON"),
    ("/error", "refused 'up': parse error"),
    ("/empty-error", "answered HTTP 502"),
    ("/list", "refused 'up'"),
    ("/no-result", "without a result list"),
    ("/matrix", "is not an instant vector query"),
    ("/bad-sample", "is not a number"),
])
def test_a_bad_instant_answer_is_a_message(stand_in, path, says):
    with pytest.raises(api.PrometheusError, match=says):
        api.instant(stand_in + path, "up")


def test_a_bad_range_answer_is_a_message(stand_in):
    with pytest.raises(api.PrometheusError, match=r"not \[time, value\] pairs"):
        api.query_range(stand_in + "/bad-pair", "up", 0, 60, 15)
    with pytest.raises(api.PrometheusError, match="did not give a range"):
        api.query_range(stand_in + "/good", "up", 0, 60, 15)
    with pytest.raises(api.PrometheusError, match="positive step"):
        api.query_range(stand_in + "/good", "up", 0, 60, 0)


def test_good_answers(stand_in):
    assert api.instant(stand_in + "/good", "up", time=1700000000.5) == [({"instance": "a"}, [(1700000000.5, 3.0)])]
    assert api.instant(stand_in + "/scalar", "time()") == [({}, [(1700000000.0, 42.0)])]


@pytest.mark.parametrize("url, says", [("127.0.0.1:9090", "not an http"), ("http://", "not an http"),
                                       ("http://127.0.0.1:1", "cannot reach Prometheus"),
                                       ("http://[::1", "not an http")])
def test_a_bad_url_is_a_message(url, says):
    with pytest.raises(api.PrometheusError, match=says):
        api.instant(url, "up")
