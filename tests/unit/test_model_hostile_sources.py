"""The hf and peer sources as root against what the service user planted (tests/helpers/planted.py): the hf client
(the real huggingface_hub, against the stand-in hub) and rsync (real, through the ssh stand-in) never write through a
link in a .partial- folder, never open a FIFO there; every refusal names the path and the rule, and a decoy tree
outside stays exactly as it was."""
import json
import os
import shutil

import pytest

from ansible.module_utils import hf_client
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.hf_standin import StandInHub, make_hf_model
from tests.helpers.planted import Home, hang_guard
from tests.helpers.wheels import hf_client_python
from tests.unit.test_model_peer import peer, transport  # noqa: F401  pylint: disable=unused-import

REPO_ID = "gpufleet/tiny-llama"
COMMIT = "3f1c0ffee" + "2" * 31
FILES = make_hf_model()
PLENTY = lambda path: 10 ** 12  # noqa: E731
needs_rsync = pytest.mark.skipif(shutil.which("rsync") is None or shutil.which("rrsync") is None,
                                 reason="rsync (with rrsync) is not installed: apt-get install rsync")


@pytest.fixture
def home():
    planted = Home()
    yield planted
    planted.close()


@pytest.fixture(autouse=True)
def never_hang():
    with hang_guard(300):
        yield


# ------------------------------------------------------------------------------------------------ the hf client

@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "partial"
    path.mkdir()
    fd = os.open(str(path), os.O_RDONLY | os.O_DIRECTORY)
    yield path, fd
    os.close(fd)


def test_the_client_never_writes_through_a_link_in_its_folder(folder, home):
    path, fd = folder
    os.symlink(os.path.join(home.decoy, "config.json"), str(path / "config.json"))
    with pytest.raises(OSError, match="config.json is not a regular file"):
        hf_client.open_below(fd, "config.json", True)
    os.makedirs(str(path / "real"))
    os.symlink(home.decoy, str(path / "sub"))
    with pytest.raises(OSError, match="sub: a folder on the way to sub/keys/id is a symbolic link"):
        hf_client.open_below(fd, "sub/keys/id", True)
    assert home.decoy_unchanged()


def test_the_client_never_opens_a_fifo(folder):
    path, fd = folder
    os.mkfifo(str(path / "weights.safetensors"))
    with pytest.raises(OSError, match="not a regular file"):
        hf_client.open_below(fd, "weights.safetensors", True)


def test_the_client_refuses_a_name_that_leaves_its_folder(folder):
    _path, fd = folder
    for name in ("../x", "a//b", "./a", "/etc/passwd"):
        with pytest.raises(OSError, match="not a plain relative name"):
            hf_client.open_below(fd, name, True)


@pytest.fixture(scope="module")
def hf_python():
    return hf_client_python()


@pytest.fixture
def hub():
    with StandInHub(REPO_ID, FILES, commit=COMMIT, token=None, branches={"main": COMMIT}) as server:
        yield server


def hf_fetch(home, hub, hf_python):
    return ms.ensure(home.models, "m", COMMIT, {"type": "hf", "repo": REPO_ID, "endpoint": hub.endpoint},
                     hf_python=hf_python, free=PLENTY)


def test_hf_refuses_a_partial_folder_that_is_a_link(home, hub, hf_python):
    home.root_model()
    os.symlink(home.decoy, home.path("m", ".partial-" + COMMIT))
    with pytest.raises(ModelError, match=r"\.partial-%s is a symbolic link: root follows no link" % COMMIT):
        hf_fetch(home, hub, hf_python)
    assert home.decoy_unchanged() and not os.path.exists(home.path("m", COMMIT))


def test_hf_refuses_a_partial_folder_the_service_user_made(home, hub, hf_python):
    home.root_model()
    os.chmod(home.path("m"), 0o777)  # a folder the service user could write, as a mistake could leave it

    def action():
        os.makedirs(home.path("m", ".partial-" + COMMIT))
        os.symlink(os.path.join(home.decoy, "config.json"), home.path("m", ".partial-" + COMMIT, "config.json"))
    home.plant(action)
    with pytest.raises(ModelError, match="models/m is writable by group or others"):
        hf_fetch(home, hub, hf_python)
    os.chmod(home.path("m"), 0o755)
    with pytest.raises(ModelError, match=r"\.partial-%s is owned by uid %d" % (COMMIT, home.uid)):
        hf_fetch(home, hub, hf_python)
    assert home.decoy_unchanged()


def test_hf_refuses_a_link_in_roots_partial_folder_and_the_target_stays(home, hub, hf_python):
    partial = home.path("m", ".partial-" + COMMIT)
    os.makedirs(partial)
    os.symlink(os.path.join(home.decoy, "config.json"), os.path.join(partial, "config.json"))
    with pytest.raises(ModelError, match=r"\.partial-%s/config.json is a symbolic link" % COMMIT):
        hf_fetch(home, hub, hf_python)
    assert home.decoy_unchanged()


def test_hf_still_fetches_into_a_clean_tree(home, hub, hf_python):
    result = hf_fetch(home, hub, hf_python)
    assert result["changed"] and os.lstat(result["model_path"]).st_uid == 0 and home.decoy_unchanged()


# ------------------------------------------------------------------------------------------------ the peer source

def peer_copy(home, tmp_path, peer_dir):
    return ms.ensure(home.models, "m", "r1", {"type": "peer", "host": "g1", "path": str(peer_dir)},
                     peer_transport=transport(tmp_path), free=PLENTY)


@needs_rsync
def test_peer_refuses_a_partial_folder_that_is_a_link(home, tmp_path, peer):  # noqa: F811
    home.root_model()
    os.symlink(home.decoy, home.path("m", ".partial-r1"))
    with pytest.raises(ModelError, match=r"\.partial-r1 is a symbolic link: root follows no link"):
        peer_copy(home, tmp_path, peer)
    assert home.decoy_unchanged()


@needs_rsync
@pytest.mark.parametrize("plant", ["link", "fifo", "folder-link"])
def test_peer_refuses_what_is_no_file_in_roots_partial_folder_before_rsync_runs(home, tmp_path, peer, plant):  # noqa: F811
    partial = home.path("m", ".partial-r1")
    os.makedirs(os.path.join(partial, "tokenizer"))
    if plant == "link":
        os.symlink(os.path.join(home.decoy, "keys", "id"), os.path.join(partial, "model-00001.safetensors"))
    elif plant == "fifo":
        os.mkfifo(os.path.join(partial, "stray"))
    else:
        os.rmdir(os.path.join(partial, "tokenizer"))
        os.symlink(home.decoy, os.path.join(partial, "tokenizer"))
    with pytest.raises(ModelError) as caught:
        peer_copy(home, tmp_path, peer)
    assert ".partial-r1/" in str(caught.value)
    assert "symbolic link" in str(caught.value) or "is a FIFO" in str(caught.value)
    assert home.decoy_unchanged() and not os.path.exists(home.path("m", "r1"))


@needs_rsync
def test_a_peer_record_nested_too_deep_is_no_record(home, tmp_path, peer):  # noqa: F811
    record = peer / "m" / ".state" / "r1.json"
    record.write_text('{"files": %s}' % ("[" * 100000 + "]" * 100000))
    with pytest.raises(ModelError, match="does not hold together"):
        peer_copy(home, tmp_path, peer)


@needs_rsync
def test_peer_still_copies_into_a_clean_tree(home, tmp_path, peer):  # noqa: F811
    result = peer_copy(home, tmp_path, peer)
    assert result["changed"] and json.loads(open(home.path("m", ".state", "r1.json")).read())["revision"] == "r1"
    assert home.decoy_unchanged()


def test_hf_never_runs_a_client_the_service_user_could_change_nor_hands_it_the_token(home, hub, hf_python, tmp_path):
    """The venv inside the service user's models folder (the old default): refused before the client runs."""
    venv = home.path(".hf-client")
    os.makedirs(os.path.join(venv, "bin"))
    os.symlink(hf_python, os.path.join(venv, "bin", "python"))
    token = tmp_path / "token"
    token.write_text("hf_never_shown\n")
    with pytest.raises(ModelError, match=r"the hf client's Python .*\.hf-client/bin/python is not run with the token: "
                                         r".*/home is owned by uid %d, not 0" % home.uid):
        ms.ensure(home.models, "m", COMMIT, {"type": "hf", "repo": REPO_ID, "endpoint": hub.endpoint,
                                             "token_file": str(token)},
                  hf_python=os.path.join(venv, "bin", "python"), free=PLENTY)
    assert hub.log == []


@needs_rsync
def test_a_peer_copy_that_runs_past_the_fetch_deadline_is_stopped(home, tmp_path, peer):  # noqa: F811
    slow = tmp_path / "slow-ssh"
    slow.write_text("#!/bin/sh\nexec sleep 600\n")
    slow.chmod(0o755)
    with pytest.raises(ms.DeadlineError, match="copying from the peer took longer than its deadline"):
        ms.ensure(home.models, "m", "r1", {"type": "peer", "host": "g1", "path": str(peer)},
                  peer_transport={"rsh": [str(slow)], "address": "g1"}, free=PLENTY, fetch_deadline=1)
    assert not os.path.exists(home.path("m", "r1"))


def test_an_hf_client_that_runs_past_the_fetch_deadline_is_killed(home, hf_python):
    import socket  # pylint: disable=import-outside-toplevel

    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = "http://127.0.0.1:%d" % silent.getsockname()[1]
        with pytest.raises(ms.DeadlineError, match="the hf client took longer than its deadline"):
            ms.ensure(home.models, "m", COMMIT, {"type": "hf", "repo": REPO_ID, "endpoint": endpoint},
                      hf_python=hf_python, free=PLENTY, timeout=600, fetch_deadline=2)
