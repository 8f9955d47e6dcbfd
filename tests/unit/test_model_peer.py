"""module_utils/model_peer.py: the peer model source with the real rsync on both ends, against a local "peer" (a
models directory of its own) reached through a stand-in for ssh (tests/helpers/ssh_standin.py: it runs the remote
command here; no sshd runs in these tests). Also through the real rrsync -ro the role installs as the key's forced
command."""
import json
import os
import shutil
import sys

import pytest

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_peer as mp
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.model_mirror import make_model

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None or shutil.which("rrsync") is None,
                                reason="rsync (with rrsync) is not installed: apt-get install rsync")

STANDIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers", "ssh_standin.py")
FILES = {"config.json": b'{"hidden_size": 64}', "model-00001.safetensors": os.urandom(400000),
         "model-00002.safetensors": os.urandom(250001), "tokenizer/tokenizer.json": b"{}", "empty.txt": b""}
TOTAL = sum(len(data) for data in FILES.values())
PLENTY = lambda path: 10 ** 12  # noqa: E731


@pytest.fixture
def peer(tmp_path):
    """A peer's models directory holding m/r1, verified and recorded as a fetched copy is."""
    root = tmp_path / "peer"
    manifest = make_model(root / "m" / "r1", FILES)
    os.makedirs(str(root / "m" / ms.STATE_DIR))
    ms.write_record(str(root), "m", "r1", mm.parse_manifest(json.dumps({"files": manifest})),
                    {"type": "http", "url": "http://mirror.internal/m/r1"}, "full", str(root / "m" / "r1"))
    return root


def transport(tmp_path, cut=None, forced=None, restricted=False):
    words = ["/usr/bin/env", "SSH_STANDIN_LOG=%s" % (tmp_path / "ssh.log")]
    if cut is not None:
        words.append("SSH_STANDIN_CUT_AFTER=%d" % cut)
    if forced is not None:
        words.append("SSH_STANDIN_FORCED=%s" % forced)
    return {"rsh": words + [sys.executable, STANDIN], "address": "g1", "restricted": restricted}


def ssh_calls(tmp_path):
    log = tmp_path / "ssh.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def copy(tmp_path, peer, source=None, **kwargs):
    kwargs.setdefault("free", PLENTY)
    kwargs.setdefault("peer_transport", transport(tmp_path))
    return ms.ensure(str(tmp_path / "models"), "m", "r1",
                     dict({"type": "peer", "host": "g1", "path": str(peer)}, **(source or {})), **kwargs)


def flip(path, offset=7):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    open(path, "wb").write(bytes(data))


def test_a_verified_copy_is_placed_atomically_and_recorded(tmp_path, peer):
    result = copy(tmp_path, peer)
    final = tmp_path / "models" / "m" / "r1"
    assert result["changed"] and result["model_path"] == str(final) and result["copied_from"] == "g1"
    for name, data in FILES.items():
        assert (final / name).read_bytes() == data
    assert sorted(str(p.relative_to(final)) for p in final.rglob("*") if p.is_file()) == sorted(FILES)
    assert not (tmp_path / "models" / "m" / ".partial-r1").exists()
    assert result["transferred_bytes"] == TOTAL and result["hashed_bytes"] == TOTAL
    record = json.loads((tmp_path / "models" / "m" / ".state" / "r1.json").read_text())
    peer_record = json.loads((peer / "m" / ".state" / "r1.json").read_text())
    assert record["manifest_sha256"] == peer_record["manifest_sha256"] == result["manifest_sha256"]
    assert record["source"] == {"type": "peer", "host": "g1", "path": str(peer)} and record["copied_from"] == "g1"
    progress = json.loads(open(result["progress_file"]).read())
    assert progress["state"] == "verified" and progress["done_bytes"] == TOTAL
    assert len(ssh_calls(tmp_path)) == 2  # the record, then the files


def test_a_second_run_copies_nothing_and_asks_no_peer(tmp_path, peer):
    copy(tmp_path, peer)
    calls = len(ssh_calls(tmp_path))
    again = copy(tmp_path, peer)
    assert again["changed"] is False and again["transferred_bytes"] == 0 and again["hashed_bytes"] == 0
    assert len(ssh_calls(tmp_path)) == calls
    full = copy(tmp_path, peer, verify="full")
    assert full["changed"] is False and full["hashed_bytes"] == TOTAL and len(ssh_calls(tmp_path)) == calls
    assert copy(tmp_path, peer, peer_transport=None, peer_probe=True)["present"] is True


def test_a_corrupt_peer_file_is_refused_and_named(tmp_path, peer):
    flip(str(peer / "m" / "r1" / "model-00002.safetensors"))  # same size: only its hash tells
    with pytest.raises(ModelError) as error:
        copy(tmp_path, peer)
    message = str(error.value)
    assert "model-00002.safetensors has sha256" in message and "peer g1" in message and "corrupt" in message
    assert "model-00001" not in message
    assert not (tmp_path / "models" / "m" / "r1").exists()
    assert not (tmp_path / "models" / "m" / ".partial-r1" / "model-00002.safetensors").exists()
    assert not (tmp_path / "models" / "m" / ".state" / "r1.json").exists()


def test_an_interrupted_copy_is_resumed_not_started_again(tmp_path, peer):
    with pytest.raises(ModelError) as error:
        copy(tmp_path, peer, peer_transport=transport(tmp_path, cut=300000), retries=0)
    assert "stopped" in str(error.value) and "next run resumes it" in str(error.value)
    partial = tmp_path / "models" / "m" / ".partial-r1"
    kept = sum(p.stat().st_size for p in partial.rglob("*") if p.is_file())
    assert 100000 < kept < TOTAL and not (tmp_path / "models" / "m" / "r1").exists()
    result = copy(tmp_path, peer)
    assert result["changed"] and result["transferred_bytes"] <= TOTAL - kept + 1024, (result, kept)
    for name, data in FILES.items():
        assert (tmp_path / "models" / "m" / "r1" / name).read_bytes() == data
    assert not partial.exists()


def test_a_stopped_copy_resumes_within_one_run_when_retries_allow(tmp_path, peer):
    calls = []

    real_copy = mp._copy

    def cut_first(*args):
        calls.append(1)
        if len(calls) == 1:
            args = list(args)
            args[5] = transport(tmp_path, cut=300000)
        return real_copy(*args)

    mp._copy, saved = cut_first, mp._copy
    try:
        result = copy(tmp_path, peer, retries=1)
    finally:
        mp._copy = saved
    assert result["changed"] and len(calls) == 2
    assert (tmp_path / "models" / "m" / "r1" / "model-00001.safetensors").read_bytes() == FILES[
        "model-00001.safetensors"]


def test_a_kept_part_that_is_wrong_is_copied_again_from_the_first_byte(tmp_path, peer):
    partial = tmp_path / "models" / "m" / ".partial-r1"
    os.makedirs(str(partial))
    (partial / "model-00001.safetensors").write_bytes(b"x" * 1000)  # not the file's first 1000 bytes
    result = copy(tmp_path, peer)
    assert (tmp_path / "models" / "m" / "r1" / "model-00001.safetensors").read_bytes() == FILES[
        "model-00001.safetensors"]
    assert result["changed"]


def test_through_the_real_rrsync_read_only_forced_command(tmp_path, peer):
    forced = tmp_path / "forced.sh"
    forced.write_text("#!/bin/sh\nexec rrsync -ro %s\n" % peer)
    forced.chmod(0o755)
    result = copy(tmp_path, peer, peer_transport=transport(tmp_path, forced=str(forced), restricted=True))
    assert result["changed"] and (tmp_path / "models" / "m" / "r1" / "config.json").read_bytes() == FILES[
        "config.json"]
    # the same key cannot write to the peer: rrsync -ro refuses a transfer towards it
    import subprocess
    proc = subprocess.run(["rsync", "-e", " ".join(transport(tmp_path, forced=str(forced))["rsh"]),
                           str(forced), "g1:m/planted"], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "read-only" in proc.stderr and not (peer / "m" / "planted").exists()


def test_a_pinned_digest_the_peer_does_not_carry_is_refused_before_copying(tmp_path, peer):
    with pytest.raises(ModelError) as error:
        copy(tmp_path, peer, {"manifest_sha256": "0" * 64})
    assert "not the pinned manifest_sha256" in str(error.value) and "nothing copied" in str(error.value)
    assert not (tmp_path / "models" / "m" / ".partial-r1").exists()
    pinned = json.loads((peer / "m" / ".state" / "r1.json").read_text())["manifest_sha256"]
    assert copy(tmp_path, peer, {"manifest_sha256": pinned})["changed"]


def test_a_peer_without_a_record_holds_no_verified_copy(tmp_path, peer):
    os.unlink(str(peer / "m" / ".state" / "r1.json"))
    with pytest.raises(ModelError) as error:
        copy(tmp_path, peer)
    assert "holds no verified copy" in str(error.value) and "peer g1" in str(error.value)
    assert not (tmp_path / "models" / "m" / ".partial-r1").exists()


def test_free_space_is_checked_with_figures_and_check_mode_writes_nothing(tmp_path, peer):
    with pytest.raises(ModelError) as error:
        copy(tmp_path, peer, free=lambda path: 1000, margin=0)
    assert "not enough free space" in str(error.value) and "%d bytes" % TOTAL in str(error.value)
    dry = copy(tmp_path, peer, check_mode=True)
    assert dry["changed"] and dry["would_fetch_bytes"] == TOTAL and not (tmp_path / "models" / "m" / "r1").exists()
    assert not (tmp_path / "models" / "m" / ".partial-r1").exists()


def test_probe_reports_absence_without_asking_the_peer(tmp_path, peer):
    result = copy(tmp_path, peer, peer_transport=None, peer_probe=True)
    assert result["present"] is False and result["changed"] is False and ssh_calls(tmp_path) == []


def test_real_ssh_command_checks_the_host_key_against_the_given_file_only(tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("[10.0.0.1]:2222 ssh-ed25519 AAAA\n")
    key = tmp_path / "key"
    key.write_text("k")
    checked = mp.check_transport({"address": "10.0.0.1", "port": 2222, "user": "deploy",
                                  "known_hosts": str(known), "identity_file": str(key)})
    command = mp.ssh_command(checked, 30)
    for needle in ("StrictHostKeyChecking=yes", "UserKnownHostsFile=%s" % known, "GlobalKnownHostsFile=/dev/null",
                   "BatchMode=yes", "IdentityAgent=none", "-i %s" % key, "-p 2222", "-l deploy"):
        assert needle in command
    assert mp.remote(dict(checked, restricted=True), "/srv/models", "m/r1/") == "10.0.0.1:m/r1/"
    assert mp.remote(checked, "/srv/models", "m/r1/") == "10.0.0.1:/srv/models/m/r1/"
    assert mp.remote(dict(checked, address="fd00::1"), "/m", "x") == "[fd00::1]:/m/x"
    written = mp.check_transport({"address": "10.0.0.1", "port": 2222, "user": "deploy",
                                  "host_keys": ["ssh-ed25519 AAAAC3Nz"]}, str(tmp_path))
    assert open(written["known_hosts"]).read() == "[10.0.0.1]:2222 ssh-ed25519 AAAAC3Nz\n"


@pytest.mark.parametrize("given,needle", [
    (None, "needs peer_transport"),
    ({"address": "h", "user": "u"}, "known_hosts (or host_keys) is required"),
    ({"address": "h", "user": "u", "host_keys": ["ssh-ed25519 AAAA x\nevil"]}, "host_keys must list"),
    ({"address": "-oProxyCommand=x", "user": "u", "known_hosts": "/etc/hostname"}, "address must be"),
    ({"address": "h", "user": "u;rm", "known_hosts": "/etc/hostname"}, "user must be"),
    ({"address": "h", "user": "u", "port": 0, "known_hosts": "/etc/hostname"}, "port must be"),
    ({"address": "h", "user": "u", "known_hosts": "/nonexistent/kh"}, "does not exist"),
    ({"rsh": ["ssh -o x"]}, "rsh must be"),
])
def test_bad_transport_is_named(given, needle):
    with pytest.raises(ModelError) as error:
        mp.check_transport(given)
    assert needle in str(error.value)


@pytest.mark.parametrize("source,needle", [
    ({"type": "peer"}, "needs host"),
    ({"type": "peer", "host": "g 1"}, "inventory host name"),
    ({"type": "peer", "host": "g1", "path": "models"}, "absolute path"),
    ({"type": "peer", "host": "g1", "path": "/a b"}, "absolute path"),
    ({"type": "peer", "host": "g1", "manifest_sha256": "abc"}, "64 lowercase hex"),
    ({"type": "peer", "host": "g1", "url": "http://x"}, "does not take url"),
])
def test_bad_peer_source_is_named(source, needle):
    with pytest.raises(ModelError) as error:
        mm.check_source(source, "r1")
    assert needle in str(error.value)
