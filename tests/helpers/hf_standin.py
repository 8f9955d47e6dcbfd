"""A STAND-IN for the Hugging Face Hub (the real hub is not reachable here): stdlib http.server in threads, answering
exactly the calls the pinned huggingface_hub client makes for the hf model source, as read from its source
(huggingface_hub 2.4.0: hf_api.HfApi.model_info, file_download.get_hf_file_metadata and http_get):

* ``GET /api/models/<owner>/<name>/revision/<rev>?blobs=true`` -> ``{"id", "sha", "siblings": [{"rfilename", "size",
  "blobId", "lfs": {"size", "sha256", "pointerSize"}}]}``; ``404`` with ``X-Error-Code: RepoNotFound`` or
  ``RevisionNotFound`` (the header the client's hf_raise_for_status reads), ``401`` without the right token.
* ``HEAD``/``GET /<owner>/<name>/resolve/<rev>/<file>``: an LFS file answers ``302`` with ``Location`` on another
  origin (the "CDN", a second server: the client must not send the token there), ``X-Linked-Etag`` (its sha256),
  ``X-Linked-Size`` and ``X-Repo-Commit``; any other file ``200`` with ``ETag`` (its git blob id), ``Content-Length``
  and ``X-Repo-Commit``, and its bytes on GET, honouring ``Range: bytes=N-`` with ``206``/``Content-Range``.
  ``404`` with ``X-Error-Code: EntryNotFound`` for a file the revision lacks.

Faults on request: ``served`` (other bytes than the metadata describes), ``missing`` (a listed file the hub cannot
serve), ``commit_header`` (another X-Repo-Commit), ``cut_after`` (bytes of a body after which the connection is cut)
with ``down_after_cut`` (every later file GET answers 503). Each request is logged, and each scans /proc for the
token in any process's command line (``token_hits``): the client is alive and waiting while it is answered.
"""
import hashlib
import json
import os
import struct
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".safetensors", ".bin", ".pt")


def safetensors_bytes(tensors, metadata=None):
    """A real safetensors file: 8-byte little-endian header length, the JSON header (dtype, shape, data_offsets per
    tensor, padded with spaces to 8 bytes), then the tensors' bytes. tensors: {name: (dtype, shape, raw bytes)}."""
    header, data = {}, b""
    for name, (dtype, shape, raw) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def read_safetensors_header(data):
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + length])


def make_hf_model(hidden=64, layers=2, vocab=128, seed=1):
    """{file name: bytes} of a small model as a hub repository holds it: two safetensors shards (F32 weights), their
    index, config.json, a tokenizer file and .gitattributes."""
    rng = __import__("random").Random(seed)

    def weights(*shape):
        count = 1
        for dim in shape:
            count *= dim
        return ("F32", shape, struct.pack("<%df" % count, *(rng.uniform(-0.05, 0.05) for _ in range(count))))

    shards = [{"model.embed_tokens.weight": weights(vocab, hidden)},
              {"lm_head.weight": weights(vocab, hidden), "model.norm.weight": weights(hidden)}]
    for layer in range(layers):
        shards[layer % 2]["model.layers.%d.mlp.up_proj.weight" % layer] = weights(hidden * 2, hidden)
    files, weight_map = {}, {}
    for index, tensors in enumerate(shards):
        name = "model-%05d-of-%05d.safetensors" % (index + 1, len(shards))
        files[name] = safetensors_bytes(tensors)
        weight_map.update({tensor: name for tensor in tensors})
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": sum(len(t[2]) for s in shards for t in s.values())},
         "weight_map": weight_map}, indent=2, sort_keys=True).encode()
    files["config.json"] = json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": hidden,
                                       "num_hidden_layers": layers, "vocab_size": vocab}).encode()
    files["tokenizer/tokenizer.json"] = json.dumps({"version": "1.0", "model": {"type": "BPE"}}).encode()
    files[".gitattributes"] = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    return files


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()  # noqa: S324 (git's object id)


def _range_start(header):
    if not header or not header.startswith("bytes="):
        return 0
    return int(header[len("bytes="):].split("-")[0] or 0)


class StandInHub(object):
    """The stand-in hub and its CDN. repo: owner/name; files: {name: bytes} of one commit; branches: {name: commit};
    ports: the hub's and the CDN's on 127.0.0.1 (0: any free one)."""

    def __init__(self, repo, files, commit="c0ffee" + "0" * 34, token=None, branches=None, ports=(0, 0)):
        self.repo, self.files, self.commit, self.token = repo, dict(files), commit, token
        self.branches = dict(branches or {"main": commit})
        self.served = {}             # name -> bytes served instead of the file (metadata unchanged)
        self.missing = set()         # listed names the resolve endpoint answers 404 for
        self.commit_header = None    # another X-Repo-Commit than the commit
        self.cut_after = None        # bytes of one body after which the connection is cut
        self.down_after_cut = False  # after a cut, every file GET answers 503 until reset
        self.down = False
        self.log = []                # (server, method, path, Range, Authorization)
        self.token_hits = []         # (pid, cmdline) of processes whose command line held the token
        self.lock = threading.Lock()
        hub = self
        self.hub_server = ThreadingHTTPServer(("127.0.0.1", ports[0]), self._handler("hub"))
        self.cdn_server = ThreadingHTTPServer(("127.0.0.1", ports[1]), self._handler("cdn"))
        self.cdn = "http://127.0.0.1:%d" % self.cdn_server.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.hub_server.server_address[1]
        self.threads = [threading.Thread(target=server.serve_forever, daemon=True)
                        for server in (self.hub_server, self.cdn_server)]
        del hub

    # ------------------------------------------------------------------------------------------ what it holds
    def is_lfs(self, name):
        return name.endswith(LFS_SUFFIXES)

    def sha256(self, name):
        return hashlib.sha256(self.files[name]).hexdigest()

    def siblings(self):
        result = []
        for name, data in sorted(self.files.items()):
            entry = {"rfilename": name, "size": len(data), "blobId": git_blob_id(data)}
            if self.is_lfs(name):
                pointer = ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                           % (self.sha256(name), len(data))).encode()
                entry.update(blobId=git_blob_id(pointer), size=len(pointer),
                             lfs={"size": len(data), "sha256": self.sha256(name), "pointerSize": len(pointer)})
            result.append(entry)
        return result

    def resolve(self, revision):
        if revision == self.commit:
            return self.commit
        return self.branches.get(revision)

    def file_requests(self):
        return [entry for entry in self.log if "/resolve/" in entry[2] or entry[0] == "cdn"]

    def scan_for_token(self):
        if not self.token:
            return
        needle = self.token.encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    cmdline = handle.read()
            except OSError:
                continue
            if needle in cmdline:
                self.token_hits.append((pid, cmdline.replace(b"\0", b" ").decode("utf-8", "replace")))

    # ------------------------------------------------------------------------------------------ HTTP
    def _handler(self, server_name):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, headers=None, body=b"", head=False):
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                if "Content-Length" not in (headers or {}):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head and body:
                    self.wfile.write(body)

            def _error(self, status, code=None, head=False):
                headers = {"X-Error-Code": code} if code else {}
                headers["Content-Type"] = "application/json"
                self._send(status, headers, json.dumps({"error": code or str(status)}).encode(), head)

            def _body(self, data, head, extra):
                start = _range_start(self.headers.get("Range"))
                if hub.down:
                    self._error(503)
                    return
                if start > len(data) or (start == len(data) and data):
                    self._send(416, {"Content-Range": "bytes */%d" % len(data)}, head=head)
                    return
                headers = dict(extra, **{"Content-Length": str(len(data) - start), "Accept-Ranges": "bytes"})
                status = 200
                if start:
                    status = 206
                    headers["Content-Range"] = "bytes %d-%d/%d" % (start, len(data) - 1, len(data))
                self._send(status, headers, head=True)
                if head:
                    return
                body = data[start:]
                if hub.cut_after is not None and len(body) > hub.cut_after:
                    self.wfile.write(body[:hub.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    hub.cut_after = None
                    if hub.down_after_cut:
                        hub.down = True
                    return
                self.wfile.write(body)

            def _handle(self, head):
                path = urllib.parse.urlsplit(self.path).path
                with hub.lock:
                    hub.log.append((server_name, self.command, self.path, self.headers.get("Range"),
                                    self.headers.get("Authorization")))
                hub.scan_for_token()
                if server_name == "cdn":
                    digest = path.rsplit("/", 1)[-1]
                    for name in hub.files:
                        if hub.is_lfs(name) and hub.sha256(name) == digest:
                            self._body(hub.served.get(name, hub.files[name]), head, {})
                            return
                    self._error(404, head=head)
                    return
                if hub.token and self.headers.get("Authorization") != "Bearer " + hub.token:
                    self._error(401, head=head)
                    return
                owner_name = hub.repo
                api = "/api/models/%s/revision/" % owner_name
                if path.startswith("/api/models/"):
                    if not path.startswith(api):
                        self._error(404, "RepoNotFound", head)
                        return
                    commit = hub.resolve(urllib.parse.unquote(path[len(api):]))
                    if commit is None:
                        self._error(404, "RevisionNotFound", head)
                        return
                    body = json.dumps({"id": hub.repo, "modelId": hub.repo, "sha": commit, "private": False,
                                       "siblings": hub.siblings()}).encode()
                    self._send(200, {"Content-Type": "application/json"}, body, head)
                    return
                prefix = "/%s/resolve/" % owner_name
                if not path.startswith(prefix):
                    self._error(404, "RepoNotFound", head)
                    return
                revision, _, name = path[len(prefix):].partition("/")
                commit = hub.resolve(urllib.parse.unquote(revision))
                name = urllib.parse.unquote(name)
                if commit is None:
                    self._error(404, "RevisionNotFound", head)
                    return
                if name not in hub.files or name in hub.missing:
                    self._send(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, b"", head)
                    return
                data = hub.files[name]
                common = {"X-Repo-Commit": hub.commit_header or commit}
                if hub.is_lfs(name):
                    common.update({"Location": "%s/blobs/%s" % (hub.cdn, hub.sha256(name)),
                                   "X-Linked-Etag": '"%s"' % hub.sha256(name), "X-Linked-Size": str(len(data)),
                                   "ETag": '"%s"' % git_blob_id(data)})
                    self._send(302, common, b"", head)
                    return
                common["ETag"] = '"%s"' % git_blob_id(data)
                self._body(hub.served.get(name, data), head, common)

            def do_HEAD(self):
                self._handle(True)

            def do_GET(self):
                self._handle(False)

        return Handler

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        for server in (self.hub_server, self.cdn_server):
            server.shutdown()
            server.server_close()
