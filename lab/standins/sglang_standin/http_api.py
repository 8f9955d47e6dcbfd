"""SGLang 0.5.21's HTTP API (entrypoints/http_server.py) as the stand-in answers it: the real paths, status codes
and JSON shapes, the API key check, uvicorn's access log. The OpenAI-compatible endpoints are in openai_api.py,
/metrics in metrics.py."""
import json
import socket
import sys
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sglang_standin.config import STANDIN
from sglang_standin.generation import Generation, run_batch
from sglang_standin.logs import log, ulog
from sglang_standin.metrics import render_metrics
from sglang_standin.openai_api import OpenAIRoutes, error_response
from sglang_standin.server import model_config_value
from sglang_standin.speculation import average_accept_length

WARMUP_HEADER = "X-Sglang-Standin-Warmup"


class Handler(OpenAIRoutes, BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    standin = None  # Server, set in main()

    # ---- plumbing

    def log_message(self, fmt, *args):  # noqa: A003  (BaseHTTPRequestHandler API)
        pass

    def log_request(self, code="-", size="-"):
        if not self.standin.cfg["access_log"]:
            return
        try:
            phrase = self.responses[int(code)][0]
        except (KeyError, ValueError):
            phrase = ""
        host, port = self.client_address[0], self.client_address[1]
        ulog('%s:%s - "%s" %s %s' % (host, port, self.requestline, code, phrase))

    def _send(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else (
            body.encode("utf-8") if isinstance(body, str) else json.dumps(body).encode("utf-8"))
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _empty(self, status):
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def _start_stream(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

    def _chunk(self, data):
        raw = data.encode("utf-8")
        self.wfile.write(b"%x\r\n%s\r\n" % (len(raw), raw))
        self.wfile.flush()

    def _end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _read_body(self):
        """Read the whole request body first, whatever the answer: on a kept-alive connection an unread body
        would be taken for the next request."""
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        self._raw = self.rfile.read(length) if length > 0 else b""

    def _body(self):
        if not self._raw:
            return {}
        return json.loads(self._raw.decode("utf-8"))

    def _authorized(self, path):
        """utils/auth.py decide_request_auth(): /health*, /ready*, /metrics* are always open; the rest need the key."""
        key = self.standin.args.api_key
        if not key or path.startswith(("/health", "/ready", "/metrics")):
            return True
        header = self.headers.get("authorization") or ""
        parts = header.split(" ", 1)
        return len(parts) == 2 and parts[0].lower() == "bearer" and parts[1] == key

    def _route(self, method):
        self._read_body()
        path = self.path.split("?", 1)[0]
        if not self._authorized(path):
            return self._send(401, {"error": "Unauthorized"})
        routes = {
            "/health": ("GET",), "/health_generate": ("GET",), "/ready": ("GET",),
            "/server_info": ("GET",), "/get_server_info": ("GET",),
            "/model_info": ("GET",), "/get_model_info": ("GET",), "/v1/models": ("GET",),
            "/generate": ("POST", "PUT"), "/v1/completions": ("POST",), "/v1/chat/completions": ("POST",),
            "/flush_cache": ("GET", "POST"),
        }
        if self.standin.args.enable_metrics:
            routes["/metrics"] = ("GET",)
        if path.startswith("/v1/models/") and method == "GET":
            return self.model_card(path[len("/v1/models/"):])
        if path not in routes:
            return self._send(404, {"detail": "Not Found"})
        if method not in routes[path]:
            return self._send(405, {"detail": "Method Not Allowed"})
        handler = getattr(self, "r_" + path.strip("/").replace("/", "_").replace("v1_", "v1"))
        try:
            return handler()
        except (BrokenPipeError, ConnectionResetError):
            return None

    def do_GET(self):  # noqa: N802
        self._route("GET")

    def do_POST(self):  # noqa: N802
        self._route("POST")

    def do_PUT(self):  # noqa: N802
        self._route("PUT")

    def _warmup_request(self):
        return self.headers.get(WARMUP_HEADER) == self.standin.warmup_token

    # ---- endpoints

    def r_ready(self):
        self._empty(200 if self.standin.ready else 503)

    def r_health(self):
        if not self.standin.ready:
            return self._empty(503)
        self.standin.sleep(self.standin.cfg["health_check_s"])  # the real check waits for a one-token generation, >= 1 s
        return self._empty(200)

    r_health_generate = r_health

    def r_server_info(self):
        server = self.standin
        with server.lock:
            stats = dict(server.stats)
        internal = dict(server.server_args)
        internal.update({"world_size": server.args.tp_size * server.args.pp_size,
                         "last_gen_throughput": stats["last_gen_throughput"],
                         "effective_max_running_requests_per_dp": server.max_running_requests})
        if server.speculative:
            internal["avg_spec_accept_length"] = average_accept_length(stats, float(server.cfg["accept_length"]))
        info = dict(server.server_args)
        info.update({
            "launch_command": " ".join(server.argv),
            "status": "ready",
            "max_total_num_tokens": server.max_total_num_tokens,
            "max_req_input_len": server.context_len - 1,
            "startup_time": server.startup_time,
            "internal_states": [internal],
            "version": server.sglang_version(),
            "frontend": "python",
            "kv_events": None,
            "standin": STANDIN,
            "standin_allreduce_path": server.allreduce_path,
        })
        self._send(200, info)

    def r_get_server_info(self):
        log("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead.")
        self.r_server_info()

    def r_model_info(self):
        server = self.standin
        self._send(200, {
            "model_path": server.args.model_path,
            "served_model_name": server.served_model_name,
            "tokenizer_path": server.tokenizer_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": server.args.weight_version,
            "load_format": server.args.load_format,
            "reasoning_parser": server.args.reasoning_parser,
            "tool_call_parser": server.args.tool_call_parser,
            "disaggregation_mode": "null",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": model_config_value(server.hf, "model_type"),
            "architectures": server.hf.get("architectures"),
        })

    def r_get_model_info(self):
        log("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
            "Please use '/model_info' instead.")
        self.r_model_info()

    def _card(self, name):
        return {"id": name, "object": "model", "created": int(self.standin.started_at), "owned_by": "sglang",
                "root": name, "parent": None, "max_model_len": self.standin.context_len}

    def r_v1models(self):
        self._send(200, {"object": "list", "data": [self._card(self.standin.served_model_name)]})

    def model_card(self, name):
        if name != self.standin.served_model_name:
            return self._send(404, {"error": {"message": "The model '%s' does not exist" % name,
                                              "type": "invalid_request_error", "param": "model",
                                              "code": "model_not_found"}})
        return self._send(200, self._card(name))

    def r_flush_cache(self):
        self._send(200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or "
                        "waiting requests, the operation will not be performed.)\n", "text/plain; charset=utf-8")

    def r_metrics(self):
        self._send(200, render_metrics(self.standin), "text/plain; version=0.0.4; charset=utf-8")

    # ---- generation

    def _not_ready(self):
        if self.standin.ready or self._warmup_request():
            return False
        self._send(503, {"error": {"message": "sglang STAND-IN: the server is still starting"}})
        return True

    def r_generate(self):
        if self._not_ready():
            return None
        try:
            body = self._body()
        except ValueError as exc:
            return self._send(*error_response("JSON decode error: %s" % exc))
        if not isinstance(body, dict):
            return self._send(*error_response("the request body must be a JSON object"))
        if body.get("text") is not None:
            prompts, batch = body["text"], isinstance(body["text"], list)
        elif body.get("input_ids") is not None:
            ids = body["input_ids"]
            batch = bool(ids) and isinstance(ids[0], list)
            prompts = ids
        else:
            return self._send(400, {"error": {"message": "Either text, input_ids or input_embeds should be "
                                                         "provided."}})
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            return self._send(400, {"error": {"message": "sampling_params must be an object"}})
        if not self._warmup_request() and self.standin.injected_failure():
            return self._send(500, {"error": {"message": "sglang STAND-IN: injected failure (error_pct)"}})
        try:
            gens = [Generation(self.standin, p, params, body.get("rid") if not batch else None,
                               (body.get("return_logprob", False), body.get("top_logprobs_num") or 0))
                    for p in (prompts if batch else [prompts])]
        except ValueError as exc:
            return self._send(400, {"error": {"message": str(exc)}})
        if body.get("stream"):
            if batch:
                return self._send(400, {"error": {"message": "sglang STAND-IN: streaming a batch is not "
                                                             "supported by the stand-in"}})
            gen = gens[0]
            return self._stream(gen, (state.out(state.finish_reason is not None) for state in gen.run()))
        outs = run_batch(gens)
        return self._send(200, outs if batch else outs[0])

    def _stream(self, gen, events):
        """Send `events` (JSON objects made while `gen` runs) as server-sent events, then [DONE]; a client that
        hangs up ends it quietly."""
        gen.streaming = True
        self._start_stream()
        try:
            for event in events:
                self._chunk("data: " + json.dumps(event) + "\n\n")
            self._chunk("data: [DONE]\n\n")
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            pass


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            return
        ulog("Exception in ASGI application\n" + traceback.format_exc().rstrip(), "ERROR")


class HTTPServer6(HTTPServer):
    address_family = socket.AF_INET6

