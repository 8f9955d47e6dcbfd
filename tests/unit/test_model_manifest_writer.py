"""module_utils/model_manifest_writer.py and the sglang_model_manifest module, on real folders: the manifest they write
is one model_manifest reads and the fetch's path source verifies; links, FIFOs and the manifest itself are never
listed; check mode writes nothing; a second run changes nothing."""
import hashlib
import json
import os

import pytest

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_manifest_writer as mw
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.ansible_run import module_doc, run_module

FILES = {"config.json": b'{"hidden_size": 64}', "model-00001-of-00002.safetensors": b"a" * 3000,
         "model-00002-of-00002.safetensors": b"b" * 17, "tokenizer/tokenizer.json": b"{}", ".gitattributes": b""}


def make_folder(root, files=FILES):
    for name, data in files.items():
        path = os.path.join(str(root), *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    return str(root)


def expected(files=FILES):
    return sorted(({"name": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()),
                  key=lambda entry: entry["name"])


def test_the_manifest_lists_every_file_but_itself_and_the_reader_accepts_it(tmp_path):
    folder = make_folder(tmp_path / "v1")
    made = mw.make(folder)
    dest = os.path.join(folder, "manifest.json")
    assert made["changed"] and made["dest"] == dest and made["files"] == len(FILES)
    with open(dest, "rb") as handle:
        files = mm.parse_manifest(handle.read(), dest)
    assert files == expected()
    assert made["manifest_sha256"] == mm.manifest_digest(files) and made["total_bytes"] == 3000 + 17 + 19 + 2
    assert mm.verify_dir(folder, files, "full") == []
    # A second run hashes the folder again, manifest.json in it, and still leaves the manifest out.
    again = mw.make(folder)
    assert again["changed"] is False and again["manifest_sha256"] == made["manifest_sha256"]


def test_the_fetch_verifies_a_path_source_against_the_written_manifest(tmp_path):
    folder = make_folder(tmp_path / "staged")
    mw.make(folder, str(tmp_path / "staged.json"))
    assert "manifest.json" not in os.listdir(folder)
    result = ms.ensure(str(tmp_path / "models"), "m", "v1",
                       {"type": "path", "path": folder, "manifest": str(tmp_path / "staged.json")})
    assert result["model_path"] == folder and result["manifest_sha256"] == mw.make(folder, str(
        tmp_path / "staged.json"))["manifest_sha256"]


def test_a_changed_file_changes_the_manifest_and_only_then(tmp_path):
    folder = make_folder(tmp_path / "v1")
    first = mw.make(folder)
    with open(os.path.join(folder, "config.json"), "ab") as handle:
        handle.write(b" ")
    second = mw.make(folder)
    assert second["changed"] and second["before"] == first["after"] != second["after"]
    assert second["manifest_sha256"] != first["manifest_sha256"]


def test_links_fifos_and_bad_names_are_refused_each_named_and_nothing_written(tmp_path):
    folder = make_folder(tmp_path / "v1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.bin").write_bytes(b"x")
    os.symlink(str(outside / "secret.bin"), os.path.join(folder, "weights.bin"))
    os.symlink(str(outside), os.path.join(folder, "tokenizer", "linked-dir"))
    os.mkfifo(os.path.join(folder, "pipe"))
    with open(os.path.join(folder, "bad\nname"), "wb") as handle:
        handle.write(b"x")
    with pytest.raises(ModelError) as refused:
        mw.make(folder)
    message = str(refused.value)
    assert "weights.bin is a symlink (to %s)" % (outside / "secret.bin") in message
    assert "tokenizer/linked-dir is a symlink" in message and "pipe is a FIFO" in message
    assert "'bad\\nname': its name holds control characters" in message and "nothing was written" in message
    assert not os.path.exists(os.path.join(folder, "manifest.json"))


def test_a_dest_that_is_a_link_or_a_fifo_is_refused_and_left_as_it_is(tmp_path):
    folder = make_folder(tmp_path / "v1")
    target = tmp_path / "target.json"
    target.write_text("keep")
    os.symlink(str(target), str(tmp_path / "link.json"))
    with pytest.raises(ModelError, match="is a symlink"):
        mw.make(folder, str(tmp_path / "link.json"))
    os.mkfifo(str(tmp_path / "fifo.json"))
    with pytest.raises(ModelError, match="is a FIFO, not a manifest file"):
        mw.make(folder, str(tmp_path / "fifo.json"))
    assert target.read_text() == "keep" and os.path.islink(str(tmp_path / "link.json"))


def test_bad_paths_and_an_empty_folder_get_their_own_message(tmp_path):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    for args, needle in (((str(empty),), "holds no file"), (("relative",), "must be an absolute path"),
                         ((str(tmp_path / "none"),), "does not exist"),
                         ((str(empty), str(tmp_path / "no" / "m.json")), "does not exist"),
                         ((str(empty), "m.json"), "dest must be an absolute path")):
        with pytest.raises(ModelError, match=needle):
            mw.make(*args)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(ModelError, match="is not a directory"):
        mw.make(str(tmp_path / "file"), str(tmp_path / "m.json"))


def test_the_folder_itself_may_be_a_link(tmp_path):
    folder = make_folder(tmp_path / "v1")
    os.symlink("v1", str(tmp_path / "current"))
    made = mw.make(str(tmp_path / "current"))
    assert made["files"] == len(FILES) and os.path.isfile(os.path.join(folder, "manifest.json"))


def test_the_module_check_mode_writes_nothing_then_writes_then_reports_no_change(tmp_path):
    folder = make_folder(tmp_path / "v1")
    dest = os.path.join(folder, "manifest.json")
    dry = run_module("sglang_model_manifest", {"path": folder}, check=True, diff=True)
    assert dry["changed"] is True and not os.path.exists(dest)
    assert json.loads(dry["diff"]["after"]) == {"files": expected()} and dry["diff"]["before"] == ""
    real = run_module("sglang_model_manifest", {"path": folder})
    assert real["changed"] is True and real["dest"] == dest and real["manifest_sha256"] == dry["manifest_sha256"]
    with open(dest, encoding="utf-8") as handle:
        assert handle.read() == dry["diff"]["after"]
    assert run_module("sglang_model_manifest", {"path": folder}, check=True)["changed"] is False
    assert run_module("sglang_model_manifest", {"path": folder})["changed"] is False
    os.mkfifo(os.path.join(folder, "pipe"))
    refused = run_module("sglang_model_manifest", {"path": folder})
    assert refused.get("failed") and "pipe is a FIFO" in refused["msg"] and "Traceback" not in json.dumps(refused)
    assert set(module_doc("sglang_model_manifest")["doc"]["options"]) == {"path", "dest"}
