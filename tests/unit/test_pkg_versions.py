"""Versions come from dist-info metadata and compare the way pip compares them."""
import pytest

from ansible.module_utils import pkg_versions as pv


@pytest.mark.parametrize("low,high", [
    ("0.6.16.post4", "0.6.17"),
    ("0.6.17rc5", "0.6.17"),
    ("0.6.17", "0.6.17.post1"),
    ("0.6.9", "0.6.17"),
    ("0.7.0.dev1", "0.7.0rc1"),
    ("0.6.18", "0.7.2"),
    ("0.5.3", "0.6.3"),
])
def test_version_order(low, high):
    assert pv.version_lt(low, high)
    assert not pv.version_lt(high, low)


def test_equal_versions_and_local_labels():
    assert not pv.version_lt("0.6.17", "0.6.17.0")
    assert not pv.version_lt("0.6.17+cu130", "0.6.17")


def test_garbage_is_rejected():
    with pytest.raises(ValueError):
        pv.version_key("latest")


def test_installed_versions_read_from_metadata(tmp_path):
    for folder, name, version in (("flashinfer_python-0.6.18.dist-info", "flashinfer-python", "0.6.18"),
                                  ("sglang-0.5.21.dist-info", "sglang", "0.5.21")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: %s\nVersion: %s\n\nVersion: 9.9 (body, not a header)\n" % (name, version))
    versions = pv.installed_versions(str(tmp_path))
    assert pv.find_distribution(versions, "flashinfer_python") == "0.6.18"
    assert pv.find_distribution(versions, "SGLang") == "0.5.21"
    assert pv.find_distribution(versions, "torch") is None
