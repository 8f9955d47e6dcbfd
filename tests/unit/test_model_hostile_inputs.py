"""model_store's http source against hostile inputs: a mirror that drips bytes, redirects that change origin,
credentials in URLs, token files that are no token, manifests and records nested too deep, names that are no names.
Each gets its own message (never a traceback), and no credential lands in a record or a result."""
import hashlib
import json
import os
import urllib.parse

import pytest

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.ansible_run import run_module
from tests.helpers.model_mirror import Mirror, make_model

FILES = {"config.json": b'{"hidden_size": 64}', "model.safetensors": os.urandom(3000)}
PLENTY = lambda path: 10 ** 12  # noqa: E731
TOKEN = "mirror-secret-7f3a"


@pytest.fixture
def mirror(tmp_path):
    manifest = make_model(tmp_path / "served", FILES)
    with Mirror(tmp_path / "served", manifest) as server:
        yield server


def fetch(tmp_path, url, revision="r1", **kwargs):
    kwargs.setdefault("free", PLENTY)
    source = dict({"type": "http", "url": url}, **kwargs.pop("source", {}))
    return ms.ensure(str(tmp_path / "models"), "m", revision, source, **kwargs)


def token_file(tmp_path, data):
    path = tmp_path / "token"
    path.write_bytes(data)
    return str(path)


def test_a_mirror_that_drips_a_byte_at_a_time_is_stopped_by_the_file_deadline(tmp_path, mirror):
    mirror.drip_s = 0.3  # 3000 bytes: 15 minutes; each byte well within the idle timeout
    with pytest.raises(ms.DeadlineError, match="fetching (config.json|model.safetensors) took longer than its "
                                               "deadline"):
        fetch(tmp_path, mirror.url, file_deadline=1, timeout=30)


def test_the_fetch_deadline_covers_the_manifest_too(tmp_path, mirror):
    mirror.drip_s = 0.3
    mirror.manifest_drip = True
    with pytest.raises(ModelError, match="deadline"):
        fetch(tmp_path, mirror.url, fetch_deadline=1, timeout=30)


def test_the_token_never_follows_a_redirect_to_another_origin(tmp_path, mirror):
    manifest = make_model(tmp_path / "other", FILES)
    with Mirror(tmp_path / "other", manifest) as other:
        mirror.redirects["/model.safetensors"] = other.url + "/model.safetensors"
        fetch(tmp_path, mirror.url, source={"token_file": token_file(tmp_path, TOKEN.encode() + b"\n")})
        assert [entry for entry in other.log if entry[2]] == []
        assert ("/model.safetensors", None, None) in other.log
    assert all(entry[2] == "Bearer " + TOKEN for entry in mirror.log)


def test_a_redirect_within_the_origin_keeps_the_token(tmp_path, mirror):
    os.makedirs(os.path.join(mirror.root, "blobs"))
    os.rename(os.path.join(mirror.root, "model.safetensors"), os.path.join(mirror.root, "blobs", "w"))
    mirror.redirects["/model.safetensors"] = "/blobs/w"
    fetch(tmp_path, mirror.url, source={"token_file": token_file(tmp_path, TOKEN.encode())})
    assert ("/blobs/w", None, "Bearer " + TOKEN) in mirror.log


def test_another_port_is_another_origin(tmp_path, mirror):
    assert ms.origin("http://h:80/a") == ms.origin("http://h/b") != ms.origin("http://h:8080/a")
    assert ms.origin("https://h/a") != ms.origin("http://h/a")


def test_url_credentials_are_neither_recorded_nor_returned(tmp_path, mirror):
    parts = urllib.parse.urlsplit(mirror.url)
    url = "http://alice:s3cr3t-pw@%s/?X-Amz-Signature=sig-0badc0de" % parts.netloc
    mirror.redirects["/?X-Amz-Signature=sig-0badc0de/manifest.json"] = mirror.url + "/manifest.json"
    result = run_module("sglang_model_fetch", {"name": "m", "revision": "r1", "models_dir": str(tmp_path / "models"),
                                               "space_margin_mb": 0, "source": {"type": "http", "url": url}})
    shown = json.dumps(result)
    record = (tmp_path / "models" / "m" / ".state" / "r1.json").read_text() if result.get("changed") else ""
    for secret in ("s3cr3t-pw", "sig-0badc0de"):
        assert secret not in shown and secret not in record, (secret, shown)
    assert mm.public_source({"type": "http", "url": url})["url"] == "http://%s/" % parts.netloc
    files = mm.parse_manifest(json.dumps({"files": mirror.manifest}))
    ms.write_record(str(tmp_path / "models"), "m", "r2", files, {"type": "http", "url": url, "manifest_url": url},
                    "full", str(tmp_path / "models" / "m" / "r2"))
    written = (tmp_path / "models" / "m" / ".state" / "r2.json").read_text()
    assert "s3cr3t-pw" not in written and "sig-0badc0de" not in written and "alice" not in written


@pytest.mark.parametrize("data,needle", [
    (b"\xff\xfe token", "is not UTF-8 text"),
    ("jeton-\u20ac".encode(), "not Latin-1"),
    (b"one\ntwo\n", "more than one line"),
    (b"", "empty"),
    (b"tok\x01en", "control characters"),
])
def test_a_token_file_that_holds_no_token_gets_its_own_message(tmp_path, mirror, data, needle):
    with pytest.raises(ModelError, match=needle):
        fetch(tmp_path, mirror.url, source={"token_file": token_file(tmp_path, data)})


def test_a_token_file_that_is_a_fifo_is_refused_without_hanging(tmp_path, mirror):
    fifo = str(tmp_path / "token")
    os.mkfifo(fifo)
    with pytest.raises(ModelError, match="is a FIFO, not a regular file"):
        fetch(tmp_path, mirror.url, source={"token_file": fifo})


def nested(depth):
    return "[" * depth + "]" * depth


def test_a_manifest_nested_too_deep_gets_its_own_message():
    with pytest.raises(ModelError, match="nested too deeply"):
        mm.parse_manifest('{"files": %s}' % nested(100000), "manifest")


def test_a_record_nested_too_deep_is_no_record(tmp_path, mirror):
    fetch(tmp_path, mirror.url)
    (tmp_path / "models" / "m" / ".state" / "r1.json").write_text('{"files": %s}' % nested(100000))
    assert ms.read_record(str(tmp_path / "models"), "m", "r1") is None


def test_a_lone_surrogate_file_name_is_refused():
    doc = '{"files": [{"name": "a\\ud800b", "size": 0, "sha256": "%s"}]}' % hashlib.sha256(b"").hexdigest()
    with pytest.raises(ModelError, match="lone surrogate"):
        mm.parse_manifest(doc)


def test_a_file_and_folder_prefix_clash_is_refused_whatever_sorts_between():
    files = [{"name": name, "size": 0, "sha256": "0" * 64} for name in ("a", "a.b", "a/c")]
    with pytest.raises(ModelError, match="a is both a file and a folder of a/c"):
        mm.parse_manifest(json.dumps({"files": files}))


@pytest.mark.parametrize("pattern,value", [
    (mm.NAME_RE, "m\n"), (mm.SHA256_RE, "0" * 64 + "\n"), (mm.COMMIT_RE, "0" * 40 + "\n"),
    (mm.REPO_RE, "o/m\n"), (mm.HOST_RE, "gpu1\n"), (mm.PEER_PATH_RE, "/srv/models\n"),
])
def test_a_trailing_newline_never_passes_a_pattern(pattern, value):
    assert pattern.fullmatch(value) is None and pattern.fullmatch(value[:-1]) is not None


def test_no_pattern_of_the_model_utils_is_anchored_with_a_dollar():
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "module_utils")
    for name in ("model_manifest.py", "model_store.py", "model_hub.py", "model_peer.py", "model_prune.py",
                 "hf_client.py", "safe_files.py"):
        text = open(os.path.join(root, name)).read()
        assert '$")' not in text and "$')" not in text, name


def test_the_hubs_file_list_with_a_prefix_clash_is_refused():
    from ansible.module_utils import model_hub as mh  # pylint: disable=import-outside-toplevel

    listed = [{"name": name, "size": 1, "blob_id": "1" * 40, "lfs_sha256": None} for name in ("a", "a.b", "a/c")]
    with pytest.raises(ModelError, match="hub: a is both a file and a folder of a/c"):
        mh.hub_files(listed, "the hub")
