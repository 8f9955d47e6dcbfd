"""module_utils/model_store.py and model_manifest.py with real temp folders and a real local HTTP mirror."""
import json
import os

import pytest

from ansible.module_utils import model_manifest as mm
from ansible.module_utils import model_store as ms
from ansible.module_utils.model_manifest import ModelError
from tests.helpers.model_mirror import Mirror, make_model

FILES = {"config.json": b'{"hidden_size": 64}', "model-00001.safetensors": os.urandom(300000),
         "model-00002.safetensors": os.urandom(200001), "tokenizer/tokenizer.json": b"{}", "empty.txt": b""}
PLENTY = lambda path: 10 ** 12  # noqa: E731


@pytest.fixture
def mirror(tmp_path):
    manifest = make_model(tmp_path / "served", FILES)
    with Mirror(tmp_path / "served", manifest) as server:
        yield server


def fetch(tmp_path, mirror, **kwargs):
    kwargs.setdefault("free", PLENTY)
    return ms.ensure(str(tmp_path / "models"), "m", "r1", {"type": "http", "url": mirror.url}, **kwargs)


def flip(path, offset=7):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x01
    open(path, "wb").write(bytes(data))


def test_fetch_places_the_revision_atomically_and_records_it(tmp_path, mirror):
    result = fetch(tmp_path, mirror)
    final = tmp_path / "models" / "m" / "r1"
    assert result["changed"] and result["model_path"] == str(final)
    assert result["transferred_bytes"] == sum(len(d) for d in FILES.values()) == result["total_bytes"]
    for name, data in FILES.items():
        assert (final / name).read_bytes() == data
    assert not (tmp_path / "models" / "m" / ".partial-r1").exists()
    assert not (tmp_path / "models" / "m" / "current").exists()  # the restart path owns it
    record = json.loads((tmp_path / "models" / "m" / ".state" / "r1.json").read_text())
    assert record["manifest_sha256"] == result["manifest_sha256"] == mm.manifest_digest(mirror.manifest)
    progress = json.loads(open(result["progress_file"]).read())
    assert progress["state"] == "verified" and progress["done_bytes"] == progress["total_bytes"]
    assert result["rate_bytes_per_s"] > 0


def test_second_run_transfers_nothing_hashes_nothing_and_asks_no_mirror(tmp_path, mirror):
    fetch(tmp_path, mirror)
    mirror.log.clear()
    again = fetch(tmp_path, mirror)
    assert again["changed"] is False and again["transferred_bytes"] == 0 and again["hashed_bytes"] == 0
    assert mirror.log == []
    full = fetch(tmp_path, mirror, verify="full")  # re-hash on request only
    assert full["changed"] is False and full["hashed_bytes"] == full["total_bytes"] and mirror.log == []


@pytest.mark.parametrize("damage,needle", [
    (lambda p: flip(p), "has sha256"),
    (lambda p: open(p, "r+b").truncate(1000), "has 1000 bytes, the manifest says 300000"),
    (os.unlink, "is missing"),
])
def test_a_damaged_revision_in_place_is_refused_and_named(tmp_path, mirror, damage, needle):
    fetch(tmp_path, mirror)
    damage(str(tmp_path / "models" / "m" / "r1" / "model-00001.safetensors"))
    verify = "full" if needle == "has sha256" else "size"
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror, verify=verify)
    assert "model-00001.safetensors " + needle in str(error.value) and "not used" in str(error.value)


def test_a_corrupt_file_from_the_mirror_is_removed_named_and_never_placed(tmp_path, mirror):
    flip(os.path.join(mirror.root, "model-00002.safetensors"))
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror)
    assert "model-00002.safetensors from http://127.0.0.1" in str(error.value) and "sha256" in str(error.value)
    assert not (tmp_path / "models" / "m" / "r1").exists()
    assert not (tmp_path / "models" / "m" / ".partial-r1" / "model-00002.safetensors").exists()
    assert ms.read_record(str(tmp_path / "models"), "m", "r1") is None


def test_a_truncated_or_missing_file_on_the_mirror_is_named(tmp_path, mirror):
    open(os.path.join(mirror.root, "model-00001.safetensors"), "r+b").truncate(10)
    os.unlink(os.path.join(mirror.root, "tokenizer", "tokenizer.json"))
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror, retries=0)
    assert "model-00001.safetensors" in str(error.value) and "stopped at 10 of 300000" in str(error.value)
    open(os.path.join(mirror.root, "model-00001.safetensors"), "wb").write(FILES["model-00001.safetensors"])
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror, retries=0)
    assert "tokenizer/tokenizer.json" in str(error.value) and "404" in str(error.value)
    assert not (tmp_path / "models" / "m" / "r1").exists()


def test_an_interrupted_transfer_resumes_with_range_and_rehashes_what_it_kept(tmp_path, mirror):
    mirror.cut_after = 120000
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror, retries=0)
    assert "stopped at 120000 of" in str(error.value) and "next run resumes" in str(error.value)
    kept = tmp_path / "models" / "m" / ".partial-r1"
    assert os.path.getsize(str(kept / "config.json")) == len(FILES["config.json"])
    mirror.cut_after, mirror.log[:] = None, []
    result = fetch(tmp_path, mirror)
    ranges = [entry[1] for entry in mirror.file_requests()]
    assert "bytes=120000-" in ranges  # the shard continued where it stopped
    assert result["hashed_bytes"] >= 120000  # what was kept was hashed again
    assert result["transferred_bytes"] < result["total_bytes"]
    assert (tmp_path / "models" / "m" / "r1" / "model-00001.safetensors").read_bytes() == \
        FILES["model-00001.safetensors"]


def test_retries_resume_within_one_run(tmp_path, mirror):
    mirror.cut_after = 150000
    result = fetch(tmp_path, mirror, retries=5)
    assert result["changed"] and (tmp_path / "models" / "m" / "r1" / "model-00002.safetensors").read_bytes() == \
        FILES["model-00002.safetensors"]


def test_a_corrupt_kept_part_is_fetched_again_from_the_first_byte(tmp_path, mirror):
    mirror.cut_after = 120000
    with pytest.raises(ModelError):
        fetch(tmp_path, mirror, retries=0)
    flip(str(tmp_path / "models" / "m" / ".partial-r1" / "model-00001.safetensors"), 5)
    mirror.cut_after = None
    result = fetch(tmp_path, mirror)
    assert (tmp_path / "models" / "m" / "r1" / "model-00001.safetensors").read_bytes() == \
        FILES["model-00001.safetensors"]
    assert result["changed"]


def test_a_server_that_ignores_range_sends_the_whole_file_again(tmp_path, mirror):
    mirror.cut_after = 120000
    with pytest.raises(ModelError):
        fetch(tmp_path, mirror, retries=0)
    mirror.cut_after, mirror.ignore_range = None, True
    fetch(tmp_path, mirror)
    assert (tmp_path / "models" / "m" / "r1" / "model-00001.safetensors").read_bytes() == \
        FILES["model-00001.safetensors"]


def test_full_disk_refused_before_any_download_with_the_figures(tmp_path, mirror):
    with pytest.raises(ModelError) as error:
        fetch(tmp_path, mirror, free=lambda path: 4096, margin=1024)
    msg = str(error.value)
    for needle in ("not enough free space", "(500022 bytes) to fetch", "(1024 bytes) margin", "(4096 bytes) free",
                   "(496950 bytes) short"):
        assert needle in msg, msg
    assert mirror.file_requests() == [] and not (tmp_path / "models" / "m" / ".partial-r1").exists()


def test_space_counts_only_what_is_still_to_fetch():
    assert mm.space_problem(100, 200, 100) is None
    assert "1 bytes short" in mm.space_problem(100, 200, 101)


def test_check_mode_reports_what_would_be_fetched_and_writes_nothing(tmp_path, mirror):
    result = fetch(tmp_path, mirror, check_mode=True)
    assert result["changed"] and result["would_fetch_bytes"] == result["total_bytes"]
    assert sorted(f["name"] for f in result["would_fetch"]) == sorted(FILES)
    assert not (tmp_path / "models").exists() and mirror.file_requests() == []


def test_a_revision_in_place_without_record_is_hashed_then_recorded(tmp_path, mirror):
    fetch(tmp_path, mirror)
    os.unlink(ms.record_path(str(tmp_path / "models"), "m", "r1"))
    mirror.log.clear()
    result = fetch(tmp_path, mirror)
    assert result["changed"] and result["hashed_bytes"] == result["total_bytes"]
    assert mirror.file_requests() == []


def test_token_goes_in_a_header_only(tmp_path):
    manifest = make_model(tmp_path / "served", {"a.bin": b"abc"})
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t-token\n")
    with Mirror(tmp_path / "served", manifest, token="s3cr3t-token") as mirror:
        source = {"type": "http", "url": mirror.url, "token_file": str(token_file)}
        result = ms.ensure(str(tmp_path / "models"), "m", "r1", source, free=PLENTY)
        assert all(entry[2] == "Bearer s3cr3t-token" for entry in mirror.log)
        everything = json.dumps(result) + "".join(
            open(os.path.join(d, f)).read() for d, _s, fs in os.walk(str(tmp_path / "models" / "m" / ".state"))
            for f in fs)
        assert "s3cr3t" not in everything
        token_file.write_text("wrong\n")
        with pytest.raises(ModelError) as error:
            ms.ensure(str(tmp_path / "models"), "m", "r2", source, free=PLENTY)
        assert "401" in str(error.value) and "wrong" not in str(error.value)


def test_path_source_verifies_in_place_and_records(tmp_path):
    manifest = make_model(tmp_path / "shared", FILES)
    (tmp_path / "manifest.json").write_text(json.dumps({"files": manifest}))
    source = {"type": "path", "path": str(tmp_path / "shared"), "manifest": str(tmp_path / "manifest.json")}
    first = ms.ensure(str(tmp_path / "models"), "m", "r1", source)
    assert first["changed"] and first["model_path"] == str(tmp_path / "shared")
    assert first["hashed_bytes"] == first["total_bytes"]
    second = ms.ensure(str(tmp_path / "models"), "m", "r1", source)
    assert second["changed"] is False and second["hashed_bytes"] == 0
    flip(str(tmp_path / "shared" / "model-00002.safetensors"))
    with pytest.raises(ModelError) as error:
        ms.ensure(str(tmp_path / "models"), "m", "r1", source, verify="full")
    assert "model-00002.safetensors has sha256" in str(error.value)


@pytest.mark.parametrize("source,needle", [
    ({"type": "hf", "repo": "o"}, "owner/name"),
    ({"type": "hf", "repo": "o/m", "endpoint": "ftp://mirror"}, "source.endpoint must be"),
    ({"type": "hf", "repo": "o/m", "url": "http://x"}, "does not take url"),
    ({"type": "peer", "host": "gpu 2"}, "source.host must be an inventory host name"),
    ({"type": "ftp"}, "source.type must be one of"),
    ({"type": "http"}, "needs url"),
    ({"type": "http", "url": "file:///etc"}, "http:// or https://"),
    ({"type": "http", "url": "http://x", "repo": "o/m"}, "does not take repo"),
    ({"type": "path", "path": "/x"}, "needs manifest"),
    ("http://x", "must be a mapping"),
])
def test_bad_sources_are_refused_with_their_reason(source, needle):
    with pytest.raises(ModelError) as error:
        mm.check_source(source, "r1")
    assert needle in str(error.value)


def test_hf_takes_a_commit_or_a_name_unless_a_commit_is_required():
    source = {"type": "hf", "repo": "o/m", "token_file": "/etc/t", "endpoint": "https://hf-mirror.internal/"}
    assert mm.check_source(source, "a" * 40, require_commit=True) == source
    assert mm.check_source(source, "main") == source
    with pytest.raises(ModelError) as error:
        mm.check_source(source, "main", require_commit=True)
    assert "40-hex commit" in str(error.value)


@pytest.mark.parametrize("files,needle", [
    ([{"name": "../x", "size": 1, "sha256": "0" * 64}], "'..' part"),
    ([{"name": "/etc/x", "size": 1, "sha256": "0" * 64}], "relative"),
    ([{"name": "a", "size": -1, "sha256": "0" * 64}], "no size"),
    ([{"name": "a", "size": 1, "sha256": "xyz"}], "no sha256"),
    ([{"name": "a", "size": 1, "sha256": "0" * 64}] * 2, "listed twice"),
    ([{"name": "a", "size": 1, "sha256": "0" * 64}, {"name": "a/b", "size": 1, "sha256": "0" * 64}], "a folder"),
    ([], "at least one file"),
])
def test_bad_manifests_are_refused(files, needle):
    with pytest.raises(ModelError) as error:
        mm.parse_manifest(json.dumps({"files": files}))
    assert needle in str(error.value)


@pytest.mark.parametrize("name", ["..", "a/b", "", "-x", "x" * 200])
def test_bad_names_are_refused(tmp_path, name):
    with pytest.raises(ModelError):
        ms.ensure(str(tmp_path), name, "r1", {"type": "http", "url": "http://x"})


def test_switch_current_is_atomic_and_refuses_an_unverified_revision(tmp_path, mirror):
    models = str(tmp_path / "models")
    with pytest.raises(ModelError):
        ms.switch_current(models, "m", "r1")
    fetch(tmp_path, mirror)
    assert ms.switch_current(models, "m", "r1", check_mode=True) == (None, "r1")
    assert not os.path.lexists(ms.current_link(models, "m"))
    assert ms.switch_current(models, "m", "r1") == (None, "r1")
    assert os.readlink(os.path.join(models, "m", "current")) == "r1"
    assert ms.switch_current(models, "m", "r1") == ("r1", "r1")


def test_switch_current_points_at_a_path_sources_own_folder_and_never_replaces_a_directory(tmp_path):
    shared = tmp_path / "shared" / "m-v1"
    files = make_model(shared, {"config.json": b"{}"})
    (tmp_path / "m.manifest.json").write_text(json.dumps({"files": files}))
    models = str(tmp_path / "models")
    ms.ensure(models, "m", "v1", {"type": "path", "path": str(shared), "manifest": str(tmp_path / "m.manifest.json")})
    assert ms.current_target(models, "m", "v1", str(shared)) == str(shared)
    os.makedirs(ms.current_link(models, "m"))  # put there by hand: not ours to replace
    with pytest.raises(ModelError, match="is not a symbolic link"):
        ms.switch_current(models, "m", "v1")
    os.rmdir(ms.current_link(models, "m"))
    assert ms.switch_current(models, "m", "v1") == (None, str(shared))
    assert os.listdir(os.path.join(models, "m", "current")) == ["config.json"]


def test_manifest_digest_ignores_order():
    files = [{"name": "b", "size": 1, "sha256": "1" * 64}, {"name": "a", "size": 2, "sha256": "2" * 64}]
    assert mm.manifest_digest(files) == mm.manifest_digest(list(reversed(files)))


def test_a_link_in_a_kept_partial_directory_is_refused_and_its_target_left_alone(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"x")
    outside.chmod(0o600)
    partial = tmp_path / "models" / "m" / ".partial-r1"
    (partial / "tokenizer").mkdir(parents=True)
    (partial / "config.json").write_bytes(b"{}")
    (partial / "tokenizer" / "vocab.json").symlink_to(outside)
    with pytest.raises(ModelError, match="vocab.json is a symbolic link"):
        ms.place(str(partial), str(tmp_path / "models" / "m" / "r1"))
    assert oct(outside.stat().st_mode & 0o777) == oct(0o600)
    assert not (tmp_path / "models" / "m" / "r1").exists()


def test_place_makes_the_revision_readable_and_renames_it(tmp_path):
    partial = tmp_path / ".partial-r1"
    (partial / "sub").mkdir(parents=True)
    (partial / "sub" / "w.safetensors").write_bytes(b"w")
    (partial / "sub" / "w.safetensors").chmod(0o600)
    (partial / "sub").chmod(0o700)
    ms.place(str(partial), str(tmp_path / "r1"))
    assert not partial.exists()
    assert oct((tmp_path / "r1" / "sub").stat().st_mode & 0o777) == oct(0o755)
    assert oct((tmp_path / "r1" / "sub" / "w.safetensors").stat().st_mode & 0o777) == oct(0o644)
