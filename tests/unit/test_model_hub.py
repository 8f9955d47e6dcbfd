"""The hf model source (module_utils/model_hub.py and hf_client.py) with the real huggingface_hub client, the role's
pinned version installed by real pip from cached wheels into a venv, against a STAND-IN hub (tests/helpers/
hf_standin.py: the real hub is not reachable here) serving a generated model with real safetensors."""
import json
import os
import threading

import pytest

from ansible.module_utils import model_hub as mh
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.hf_standin import StandInHub, make_hf_model, read_safetensors_header
from tests.helpers.wheels import hf_client_python

REPO_ID = "gpufleet/tiny-llama"
COMMIT = "3f1c0ffee" + "1" * 31
TOKEN = "hf_standin_secret_4a7e9c"
FILES = make_hf_model()
SHARD = "model-00001-of-00002.safetensors"
PLENTY = lambda path: 10 ** 12  # noqa: E731


@pytest.fixture(scope="module")
def hf_python():
    return hf_client_python()


@pytest.fixture
def hub():
    with StandInHub(REPO_ID, FILES, commit=COMMIT, token=TOKEN, branches={"main": COMMIT, "v1.0": COMMIT}) as server:
        yield server


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "hf-token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return str(path)


def fetch(tmp_path, hub, hf_python, token_file, revision=COMMIT, **kwargs):
    kwargs.setdefault("free", PLENTY)
    source = {"type": "hf", "repo": REPO_ID, "endpoint": hub.endpoint, "token_file": token_file}
    return ms.ensure(str(tmp_path / "models"), "m", revision, source, hf_python=hf_python, **kwargs)


def flip(path, offset=200):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    open(path, "wb").write(bytes(data))


def test_the_generated_model_is_real_safetensors():
    header = read_safetensors_header(FILES[SHARD])
    assert header["__metadata__"] == {"format": "pt"}
    end = max(entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__")
    assert len(FILES[SHARD]) == 8 + int.from_bytes(FILES[SHARD][:8], "little") + end


def test_a_verified_fetch_places_the_commit_and_records_it(tmp_path, hub, hf_python, token_file):
    result = fetch(tmp_path, hub, hf_python, token_file)
    final = tmp_path / "models" / "m" / COMMIT
    assert result["changed"] and result["model_path"] == str(final) and result["revision"] == COMMIT
    assert result["transferred_bytes"] == sum(len(data) for data in FILES.values()) == result["total_bytes"]
    for name, data in FILES.items():
        assert (final / name).read_bytes() == data
    assert not (tmp_path / "models" / "m" / (".partial-" + COMMIT)).exists()
    record = json.loads((tmp_path / "models" / "m" / ".state" / (COMMIT + ".json")).read_text())
    assert record["commit"] == COMMIT and record["requested_revision"] == COMMIT and record["repo"] == REPO_ID
    assert record["manifest_sha256"] == result["manifest_sha256"]
    assert {entry["name"]: entry["size"] for entry in record["files"]} == {n: len(d) for n, d in FILES.items()}
    assert TOKEN not in json.dumps(record) and TOKEN not in json.dumps(result)
    progress = json.loads(open(result["progress_file"]).read())
    assert progress["state"] == "verified" and progress["done_bytes"] == progress["total_bytes"]
    # The client's calls, as the stand-in saw them: the API with files metadata, a HEAD per file, LFS bytes from the
    # CDN without the token, the rest from the hub with it.
    api = [entry for entry in hub.log if entry[2].startswith("/api/models/")]
    assert len(api) == 1 and "blobs=true" in api[0][2] and api[0][4] == "Bearer " + TOKEN
    heads = [entry for entry in hub.log if entry[1] == "HEAD"]
    assert len(heads) == len(FILES) and all(entry[4] == "Bearer " + TOKEN for entry in heads)
    cdn = [entry for entry in hub.log if entry[0] == "cdn"]
    assert len(cdn) == 2 and all(entry[4] is None for entry in cdn)
    assert hub.token_hits == []


def test_a_second_run_asks_nothing_transfers_nothing_and_hashes_nothing(tmp_path, hub, hf_python, token_file):
    fetch(tmp_path, hub, hf_python, token_file)
    hub.log.clear()
    again = fetch(tmp_path, hub, hf_python, token_file)
    assert again["changed"] is False and again["transferred_bytes"] == 0 and again["hashed_bytes"] == 0
    assert hub.log == []
    full = fetch(tmp_path, hub, hf_python, token_file, verify="full")
    assert full["changed"] is False and full["hashed_bytes"] == full["total_bytes"] and hub.log == []


def test_a_branch_is_resolved_to_its_commit_and_recorded(tmp_path, hub, hf_python, token_file):
    result = fetch(tmp_path, hub, hf_python, token_file, revision="main")
    assert result["revision"] == COMMIT and result["requested_revision"] == "main"
    assert result["model_path"] == str(tmp_path / "models" / "m" / COMMIT)
    record = json.loads((tmp_path / "models" / "m" / ".state" / (COMMIT + ".json")).read_text())
    assert record["commit"] == COMMIT and record["requested_revision"] == "main"
    assert not (tmp_path / "models" / "m" / "main").exists()
    hub.log.clear()
    again = fetch(tmp_path, hub, hf_python, token_file, revision="v1.0")  # one API call, nothing fetched
    assert again["changed"] is False and again["revision"] == COMMIT and again["transferred_bytes"] == 0
    assert [entry[2].split("?")[0] for entry in hub.log] == ["/api/models/%s/revision/v1.0" % REPO_ID]
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file, revision="main", hf_require_commit=True)
    assert "40-hex commit" in str(error.value) and "hf_require_commit" in str(error.value)


@pytest.mark.parametrize("revision,needle", [
    ("0" * 40, "does not exist in " + REPO_ID),
    ("no-such-branch", "does not exist in " + REPO_ID),
])
def test_a_wrong_revision_is_refused(tmp_path, hub, hf_python, token_file, revision, needle):
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file, revision=revision)
    assert needle in str(error.value) and TOKEN not in str(error.value)
    assert not (tmp_path / "models" / "m" / revision).exists()
    assert hub.file_requests() == []


def test_a_hub_answering_another_commit_is_refused(tmp_path, hub, hf_python, token_file):
    hub.commit_header = "9" * 40
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file)
    assert "with commit " + "9" * 40 in str(error.value) and "not used" in str(error.value)
    assert not (tmp_path / "models" / "m" / COMMIT).exists()


@pytest.mark.parametrize("name,damage,needle", [
    (SHARD, lambda data: data[:300] + bytes([data[300] ^ 1]) + data[301:], SHARD + " has sha256"),
    ("config.json", lambda data: data.replace(b"64", b"65"), "config.json has git blob id"),
    (SHARD, lambda data: data[:1000], SHARD),
])
def test_a_corrupt_or_truncated_file_from_the_hub_is_refused_named_and_never_placed(
        tmp_path, hub, hf_python, token_file, name, damage, needle):
    hub.served[name] = damage(FILES[name])
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file, retries=0)
    assert needle in str(error.value), str(error.value)
    assert not (tmp_path / "models" / "m" / COMMIT).exists()
    assert not os.path.exists(tmp_path / "models" / "m" / (".state/%s.json" % COMMIT))


def test_a_file_the_hub_lacks_is_refused_and_named(tmp_path, hub, hf_python, token_file):
    hub.missing.add("tokenizer/tokenizer.json")
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file)
    assert "tokenizer/tokenizer.json is listed in" in str(error.value) and "no such file" in str(error.value)
    assert not (tmp_path / "models" / "m" / COMMIT).exists()


@pytest.mark.parametrize("damage,verify,needle", [
    (flip, "full", SHARD + " has sha256"),
    (lambda path: open(path, "r+b").truncate(1000), "size", SHARD + " has 1000 bytes"),
    (os.unlink, "size", SHARD + " is missing"),
])
def test_a_damaged_copy_in_place_is_refused_and_named(tmp_path, hub, hf_python, token_file, damage, verify, needle):
    fetch(tmp_path, hub, hf_python, token_file)
    damage(str(tmp_path / "models" / "m" / COMMIT / SHARD))
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file, verify=verify)
    assert needle in str(error.value) and "not used" in str(error.value)


def test_an_interrupted_transfer_is_resumed_from_what_was_kept(tmp_path, hf_python, token_file):
    files = make_hf_model(hidden=512, vocab=1024, layers=1)  # a 2 MiB shard: the client writes 1 MiB at a time
    with StandInHub(REPO_ID, files, commit=COMMIT, token=TOKEN) as hub:
        hub.cut_after, hub.down_after_cut = 1536 * 1024, True
        with pytest.raises(ModelError) as error:
            fetch(tmp_path, hub, hf_python, token_file, retries=0)
        assert "next run resumes it" in str(error.value) and "bytes kept" in str(error.value)
        partial = tmp_path / "models" / "m" / (".partial-" + COMMIT)
        kept = {name: (partial / name).stat().st_size for name in files if (partial / name).exists()}
        cut = [name for name, size in kept.items() if 0 < size < len(files[name])]
        assert len(cut) == 1, kept
        hub.down, hub.down_after_cut = False, False
        hub.log.clear()
        result = fetch(tmp_path, hub, hf_python, token_file)
        assert result["changed"] and result["transferred_bytes"] == result["total_bytes"] - sum(kept.values())
        assert result["hashed_bytes"] >= kept[cut[0]]  # what was kept was hashed again
        resumed = [entry for entry in hub.log if entry[1] == "GET" and entry[3]]
        assert [entry[3] for entry in resumed] == ["bytes=%d-" % kept[cut[0]]], hub.log
        for name, data in files.items():
            assert (tmp_path / "models" / "m" / COMMIT / name).read_bytes() == data


def test_free_space_is_checked_before_anything_is_fetched(tmp_path, hub, hf_python, token_file):
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, token_file, free=lambda path: 1000, margin=0)
    assert "not enough free space" in str(error.value)
    assert hub.file_requests() == [] and not (tmp_path / "models" / "m" / (".partial-" + COMMIT)).exists()


def test_check_mode_reports_what_would_be_fetched_and_writes_nothing(tmp_path, hub, hf_python, token_file):
    result = fetch(tmp_path, hub, hf_python, token_file, revision="main", check_mode=True)
    assert result["changed"] and result["revision"] == COMMIT
    assert result["would_fetch_bytes"] == sum(len(data) for data in FILES.values())
    assert not (tmp_path / "models").exists() and hub.file_requests() == []
    missing = fetch(tmp_path, hub, str(tmp_path / "no-venv" / "bin" / "python"), token_file, check_mode=True)
    assert missing["changed"] and missing["would_fetch_bytes"] is None and "not installed yet" in missing["msg"]
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, str(tmp_path / "no-venv" / "bin" / "python"), token_file)
    assert "sglang_model_hf_venv" in str(error.value)


def test_a_wrong_or_missing_token_is_refused_without_showing_it(tmp_path, hub, hf_python):
    wrong = tmp_path / "wrong-token"
    wrong.write_text("hf_not_the_token\n")
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, hub, hf_python, str(wrong))
    assert "the token" in str(error.value) and "hf_not_the_token" not in str(error.value)
    source = {"type": "hf", "repo": REPO_ID, "endpoint": hub.endpoint}
    with pytest.raises(ModelError):
        ms.ensure(str(tmp_path / "models"), "m", COMMIT, source, hf_python=hf_python, free=PLENTY)
    assert all(entry[4] is None for entry in hub.log[-1:])


def test_the_token_is_in_no_process_arguments_or_environment(tmp_path, hub, hf_python, token_file, monkeypatch):
    """The stand-in scans /proc at every request, while the client waits for the answer; the command and the
    environment the module builds hold no token either."""
    seen = []
    real_popen = mh.subprocess.Popen

    def spying_popen(argv, **kwargs):
        seen.append((list(argv), dict(kwargs["env"])))
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(mh.subprocess, "Popen", spying_popen)
    monkeypatch.setenv("HF_TOKEN", "hf_ambient_token_must_not_reach_the_client")
    fetch(tmp_path, hub, hf_python, token_file)
    assert hub.token_hits == [] and len(hub.log) > len(FILES)
    assert len(seen) == 2  # model_info, then the files
    for argv, env in seen:
        assert argv[0] == hf_python and len(argv) == 3 and TOKEN not in " ".join(argv)
        assert TOKEN not in json.dumps(env) and "HF_TOKEN" not in env and env["HF_ENDPOINT"] == hub.endpoint


def test_progress_is_written_while_the_client_fetches(tmp_path, hub, hf_python, token_file, monkeypatch):
    monkeypatch.setattr(ms, "PROGRESS_EVERY_S", 0.0)
    ticks = []
    real_tick = ms.Progress.tick

    def tick(self, force=False, state="fetching"):
        ticks.append((self.done, self.transferred))
        return real_tick(self, force, state)

    monkeypatch.setattr(ms.Progress, "tick", tick)
    result = fetch(tmp_path, hub, hf_python, token_file)
    assert len(ticks) >= len(FILES) and ticks[-1][0] == result["total_bytes"]
    assert [done for done, _ in ticks] == sorted(done for done, _ in ticks)


def test_hub_metadata_without_sizes_or_hashes_is_refused():
    with pytest.raises(ModelError) as error:
        mh.hub_files([{"name": "a.safetensors", "size": None, "blob_id": "1" * 40, "lfs_sha256": None}], "meta")
    assert "a.safetensors has no size" in str(error.value)
    with pytest.raises(ModelError) as error:
        mh.hub_files([{"name": "../x", "size": 1, "blob_id": "1" * 40, "lfs_sha256": None}], "meta")
    assert "'..'" in str(error.value)
    with pytest.raises(ModelError) as error:
        mh.hub_files([{"name": "x", "size": 1, "blob_id": "zz", "lfs_sha256": None}], "meta")
    assert "neither an LFS sha256 nor a git blob id" in str(error.value)


def test_the_client_script_is_what_the_child_runs():
    assert "def fetch_one" in mh.client_source()
    assert mh.client_command("/venv/bin/python", "/tmp/x/hf_client.py") == ["/venv/bin/python", "-I",
                                                                          "/tmp/x/hf_client.py"]
    env = mh.client_env("http://mirror:8080/", 30, "/tmp/home", base={"HF_TOKEN": "t", "PATH": "/bin"})
    assert env["HF_ENDPOINT"] == "http://mirror:8080" and "HF_TOKEN" not in env and env["HF_HUB_DISABLE_XET"] == "1"
    assert "HF_ENDPOINT" not in mh.client_env(None, 30, "/tmp/home", base={"HF_ENDPOINT": "http://elsewhere"})


def test_concurrent_fetches_of_one_model_are_refused(tmp_path, hub, hf_python, token_file):
    os.makedirs(tmp_path / "models" / "m" / ".state")
    holder = ms._lock(str(tmp_path / "models"), "m")  # pylint: disable=protected-access
    try:
        with pytest.raises(ModelError) as error:
            fetch(tmp_path, hub, hf_python, token_file)
        assert "another fetch" in str(error.value)
    finally:
        holder.close()
    assert threading.active_count() >= 1
