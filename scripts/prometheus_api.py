"""Prometheus' HTTP query API (/api/v1/query, /api/v1/query_range) with urllib only, for the controller-side tools
scripts/prometheus_series.py and scripts/dashboard_picture.py. Every failure (an address that does not answer, an
answer that is not Prometheus' JSON, a query Prometheus refuses) is a PrometheusError with a message, never another
exception."""
from __future__ import annotations

import http.client
import json
import math
import urllib.error
import urllib.parse
import urllib.request


class PrometheusError(Exception):
    """A query that got no usable answer; the message says why."""


def _endpoint(url, path, params):
    try:
        parsed = urllib.parse.urlsplit(url)
    except ValueError:
        parsed = urllib.parse.SplitResult("", "", "", "", "")
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise PrometheusError("%r is not an http(s) URL of a Prometheus (e.g. http://127.0.0.1:9090)" % url)
    return "%s/api/v1/%s?%s" % (url.rstrip("/"), path, urllib.parse.urlencode(params))


def _get(url, path, params, timeout):
    """The `data` of Prometheus' JSON answer to GET /api/v1/PATH?PARAMS."""
    endpoint = _endpoint(url, path, params)
    try:
        with urllib.request.urlopen(endpoint, timeout=timeout) as response:  # nosec: the operator's own URL
            body = response.read()
    except urllib.error.HTTPError as error:
        body = error.read()  # Prometheus answers a bad query with 400 and its JSON error
        if not body:
            raise PrometheusError("%s answered HTTP %d" % (url, error.code)) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        raise PrometheusError("cannot reach Prometheus at %s: %s" % (url, getattr(error, "reason", error))) from None
    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise PrometheusError("%s did not answer with Prometheus' JSON (is it a Prometheus?)" % url) from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise PrometheusError("Prometheus at %s refused %r: %s" % (url, params.get("query"), error or answer))
    data = answer.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusError("%s answered without a result list" % url)
    return data


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise PrometheusError("a sample value %r is not a number" % (text,)) from None
    return value


def _series(result, kind):
    """[(labels, [(time, value)...])...] of a vector or matrix RESULT."""
    series = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
            raise PrometheusError("an answer's series is not an object: %r" % (item,))
        pairs = [item.get("value")] if kind == "vector" else item.get("values")
        if not isinstance(pairs, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise PrometheusError("an answer's samples are not [time, value] pairs: %r" % (item,))
        samples = [(_number(time), _number(value)) for time, value in pairs]
        series.append(({str(key): str(value) for key, value in item.get("metric", {}).items()}, samples))
    return series


def instant(url, query, time=None, timeout=10.0):
    """QUERY at TIME (Unix seconds; None: Prometheus' now): [(labels, [(time, value)])...]."""
    params = {"query": query}
    if time is not None:
        params["time"] = "%.3f" % time
    data = _get(url, "query", params, timeout)
    if data.get("resultType") == "scalar":
        return [({}, [(_number(data["result"][0]), _number(data["result"][1]))])]
    if data.get("resultType") != "vector":
        raise PrometheusError("%r is not an instant vector query (result %s)" % (query, data.get("resultType")))
    return _series(data["result"], "vector")


def query_range(url, query, start, end, step, timeout=30.0):
    """QUERY from START to END (Unix seconds) every STEP seconds: [(labels, [(time, value)...])...]."""
    if not all(math.isfinite(value) for value in (start, end, step)) or step <= 0 or end < start:
        raise PrometheusError("a range needs start <= end and a positive step (got %s, %s, %s)" % (start, end, step))
    params = {"query": query, "start": "%.3f" % start, "end": "%.3f" % end, "step": "%g" % step}
    data = _get(url, "query_range", params, timeout)
    if data.get("resultType") != "matrix":
        raise PrometheusError("%r did not give a range (result %s)" % (query, data.get("resultType")))
    return _series(data["result"], "matrix")
