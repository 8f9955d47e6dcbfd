"""A real HTTP mirror for model tests: stdlib http.server in a thread, serving generated files and a manifest,
with Range support, a byte limit after which it cuts the connection, and a log of the requests."""
import hashlib
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_model(root, files):
    """Write {name: bytes} under root; returns the manifest's files."""
    entries = []
    for name, data in sorted(files.items()):
        path = os.path.join(str(root), *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
        entries.append({"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    return entries


class Mirror(object):
    def __init__(self, root, manifest, token=None):
        self.root, self.manifest, self.token = str(root), manifest, token
        self.cut_after = None   # bytes of file data after which the connection is closed (once per request)
        self.ignore_range = False
        self.redirects = {}     # request path -> Location answered with 302 (another mirror, or this one)
        self.drip_s = None      # seconds between single bytes of a file's body (a mirror that answers too slowly)
        self.manifest_drip = False  # the manifest drips as well
        self.log = []           # (path, Range header or None, Authorization header or None)
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def drip(self, body):
                for index in range(len(body)):
                    try:
                        self.wfile.write(body[index:index + 1])
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(mirror.drip_s)

            def do_GET(self):
                mirror.log.append((self.path, self.headers.get("Range"), self.headers.get("Authorization")))
                if self.path in mirror.redirects:
                    self.send_response(302)
                    self.send_header("Location", mirror.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if mirror.token and self.headers.get("Authorization") != "Bearer " + mirror.token:
                    self.send_error(401)
                    return
                if self.path == "/manifest.json":
                    body = json.dumps({"files": mirror.manifest}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if mirror.manifest_drip:
                        self.drip(body)
                        return
                    self.wfile.write(body)
                    return
                path = os.path.join(mirror.root, *self.path.lstrip("/").split("/"))
                if not os.path.isfile(path):
                    self.send_error(404)
                    return
                data = open(path, "rb").read()
                start, status = 0, 200
                wanted = self.headers.get("Range")
                if wanted and not mirror.ignore_range:
                    start, status = int(wanted.split("=")[1].rstrip("-")), 206
                self.send_response(status)
                if status == 206:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if mirror.drip_s is not None:
                    self.drip(body)
                    return
                if mirror.cut_after is not None:
                    body = body[:mirror.cut_after]
                    self.wfile.write(body)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def file_requests(self):
        return [entry for entry in self.log if entry[0] != "/manifest.json"]
