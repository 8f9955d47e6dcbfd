"""The fingerprint's inputs that are not UTF-8 text (issue 35): a message for the module's own inputs, exact bytes
for what the host holds."""
import hashlib
import os

from ansible.module_utils import server_fingerprint as sf


def test_text_inputs_give_the_value_they_always_gave(tmp_path):
    unit = tmp_path / "unit"
    unit.write_bytes(b"[Service]\n")
    link = tmp_path / "current"
    os.symlink("venvs/a", str(link))
    expected = hashlib.sha256(",".join([hashlib.sha1(b"[Service]\n").hexdigest(), "-", "-", "venvs/a",
                                        "580.1"]).encode("utf-8")).hexdigest()
    assert sf.fingerprint([str(unit), str(link)], ["580.1"]) == expected


def test_a_link_target_that_is_not_utf8_is_fingerprinted_by_its_bytes(tmp_path):
    link = os.path.join(os.fsencode(str(tmp_path)), b"current")
    os.symlink(b"venvs/\xff", link)
    value = sf.fingerprint([os.fsdecode(link)], [])
    os.unlink(link)
    os.symlink(b"venvs/\xfe", link)
    assert sf.fingerprint([os.fsdecode(link)], []) != value


def test_extra_values_that_are_not_text_are_named():
    assert sf.input_problems(["580.1", 3]) == []
    found = sf.input_problems(["580.1", "x\ud800y"])
    assert found == ["extra[1] holds a lone surrogate (U+D800): it is not text and cannot be fingerprinted "
                     "(got 'x\\ud800y')"]
