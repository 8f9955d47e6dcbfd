"""The stand-in's life cycle: start (config, flags, the start-up log, the port bound at once), "loading", the
warm-up over HTTP and the ready line, and SGLang's and uvicorn's shutdown lines on SIGTERM or SIGINT (exit 0)."""
import json
import os
import signal
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

from sglang_standin.config import EX_CONFIG, ConfigError, load_config
from sglang_standin.faults import crash_later
from sglang_standin.flags import merge_config, parse_flags
from sglang_standin.http_api import WARMUP_HEADER, Handler, HTTPServer, HTTPServer6
from sglang_standin.logs import die, log, standin_note, ulog
from sglang_standin.server import Server
from sglang_standin.startup_log import print_startup

WARMUP_PROMPT = "The capital city of France is"  # http_server._execute_server_warmup


def local_url(server):
    host = server.args.host
    if not host or host == "0.0.0.0":
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = "[%s]" % host
    return "http://%s:%d" % (host, server.args.port)


def warmup(server):
    """http_server._execute_server_warmup(): GET /model_info, then an 8-token greedy /generate, over HTTP."""
    headers = {WARMUP_HEADER: server.warmup_token, "Content-Type": "application/json"}
    if server.args.api_key:
        headers["Authorization"] = "Bearer " + server.args.api_key
    url = local_url(server)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via $http_proxy
    try:
        with opener.open(urllib.request.Request(url + "/model_info", headers=headers), timeout=5) as r:
            json.loads(r.read().decode("utf-8"))
        body = json.dumps({"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                           "text": WARMUP_PROMPT}).encode("utf-8")
        with opener.open(urllib.request.Request(url + "/generate", data=body, headers=headers), timeout=60) as r:
            json.loads(r.read().decode("utf-8"))
    except (OSError, ValueError, urllib.error.URLError):
        log("Initialization failed. warmup error: %s" % traceback.format_exc())
        die(1)


def compile_caches(seconds):
    """A first start's compiling, as the real one fills Triton's cache: a kernel folder a second under
    $HOME/.triton/cache, then a marker that later starts find (and skip this)."""
    cache = os.path.join(os.path.expanduser("~"), ".triton", "cache")
    marker = os.path.join(cache, "standin-compiled")
    if seconds <= 0 or os.path.exists(marker):
        return
    standin_note("first start: compiling for %s s into %s" % (seconds, cache))
    started = time.monotonic()
    kernel = 0
    while time.monotonic() - started < seconds:
        folder = os.path.join(cache, "standin-kernel-%d" % kernel)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "kernel.cubin"), "wb") as handle:
            handle.write(b"stand-in kernel %d\n" % kernel)
        kernel += 1
        time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - started))))
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write("%d kernels\n" % kernel)


def become_ready(server):
    compile_caches(server.cfg["first_start_compile_s"])
    delay = server.cfg["startup_delay_s"]
    time.sleep(delay)
    if server.cfg["never_healthy"]:
        standin_note("never_healthy is set: start-up never completes, health stays 503")
        return
    if not server.args.skip_server_warmup:
        warmup(server)
    server.startup_time = time.time() - server.started_at
    server.ready = True
    log("The server is fired up and ready to roll!")


def on_sigterm(signum, _frame):
    # The handler runs in the main thread between two bytecodes, possibly inside emit() with _log_lock held:
    # logging here would wait on that lock forever. A thread logs once the main thread lets go of it.
    threading.Thread(target=shut_down, args=(signum,), daemon=True).start()


def shut_down(signum):
    log("SIGTERM received. signum=%d frame=None. Draining requests and shutting down..." % signum)
    log("Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].")
    ulog("Shutting down")
    ulog("Waiting for application shutdown.")
    ulog("Application shutdown complete.")
    ulog("Finished server process [%d]" % os.getpid())
    die(0)


def main(argv):
    try:
        cfg, config_path, config_found = load_config()
    except ConfigError as exc:
        sys.stderr.write("sglang STAND-IN: bad config: %s\n" % exc)
        return EX_CONFIG
    args, extra, checked_with = parse_flags(merge_config(list(argv)))
    server = Server(args, extra, cfg, list(argv))  # launch_command: the flags, as prepare_server_args keeps them
    Handler.standin = server
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)
    if cfg["crash_after_s"] is not None:
        threading.Thread(target=crash_later, args=(server, cfg["crash_after_s"]), daemon=True).start()
    print_startup(server, checked_with, config_path, config_found)
    if args.node_rank >= 1:
        # launch_server(): nodes other than 0 run schedulers only, no HTTP server.
        standin_note("node_rank=%d: no HTTP server on this node, as in SGLang; waiting for SIGTERM" % args.node_rank)
        while True:
            time.sleep(3600)
    host = args.host or "0.0.0.0"
    cls = HTTPServer6 if ":" in host else HTTPServer
    try:
        httpd = cls((host, args.port), Handler)
    except OSError as exc:
        ulog("[Errno %s] error while attempting to bind on address %r: %s"
             % (exc.errno, (host, args.port), (exc.strerror or str(exc)).lower()), "ERROR")
        die(1)
    ulog("Started server process [%d]" % os.getpid())
    ulog("Waiting for application startup.")
    ulog("Application startup complete.")
    ulog("Uvicorn running on %s (Press CTRL+C to quit)" % ("http://%s:%d" % (
        "[%s]" % host if ":" in host else host, args.port)))
    threading.Thread(target=become_ready, args=(server,), daemon=True).start()
    httpd.serve_forever(poll_interval=0.2)
    return 0


