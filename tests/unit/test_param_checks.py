"""Paths and account names a system call cannot take are found before a module uses them (issue 35)."""
import pytest

from ansible.module_utils import param_checks as pc

SPEC = {
    "dest": {"type": "path", "required": True},
    "paths": {"type": "list", "elements": "path"},
    "owner": {"type": "str"},
    "service_user": {"type": "str"},
    "content": {"type": "str"},
    "directories": {"type": "list", "elements": "dict", "options": {
        "path": {"type": "path"}, "owner": {"type": "str"}, "group": {"type": "str"}, "mode": {"type": "str"}}},
}


def test_usable_values_pass():
    assert pc.problems(SPEC, {"dest": "/etc/sglang/x.env", "paths": ["/a", "/b"], "owner": "sglang",
                              "content": "anything\x00goes here", "directories": None}) == []
    assert pc.refusal("m", SPEC, {"dest": "/x"}) is None


@pytest.mark.parametrize("params,named", [
    ({"dest": "/etc/sglang/x\x00.env"}, "dest holds a NUL byte"),
    ({"paths": ["/ok", "/b\x00"]}, "paths[1] holds a NUL byte"),
    ({"owner": "root\x00x"}, "owner holds a NUL byte"),
    ({"service_user": "sglang\x00"}, "service_user holds a NUL byte"),
    ({"directories": [{"path": "/ok", "owner": "root", "group": "a\x00", "mode": "0755"}]},
     "directories[0].group holds a NUL byte"),
    ({"dest": "/x\ud800"}, "dest holds a lone surrogate (U+D800)"),
    ({"paths": ["/x\udcff"]}, None),  # the file-system encoding's escape: a real byte (0xff), usable
])
def test_each_unusable_value_is_named(params, named):
    found = pc.problems(SPEC, params)
    if named is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(named), found


def test_extra_names_are_checked_and_free_text_is_not():
    assert pc.problems({"nvcc_paths": {"type": "list", "elements": "str"}}, {"nvcc_paths": ["/x\x00"]},
                       extra=("nvcc_paths",)) == ["nvcc_paths[0] holds a NUL byte, which no path or account name "
                                                  "can hold (got '/x\\x00')"]
    assert pc.problems({"content": {"type": "str"}}, {"content": "\x00"}) == []


def test_the_refusal_names_the_module_and_every_value():
    msg = pc.refusal("sglang_env_file", SPEC, {"dest": "/x\x00", "owner": "\x00"})
    assert msg.startswith("sglang_env_file refused its arguments, nothing read or written: dest holds a NUL byte")
    assert "; owner holds a NUL byte" in msg


def test_malformed_sub_options_are_left_to_ansible():
    assert pc.problems(SPEC, {"directories": ["not a dict", 3]}) == []


def test_printable_escapes_lone_surrogates_so_the_controller_takes_the_result():
    assert pc.printable({"dest": "/x\udc80", "paths": ["/a\ud800", 3], "ok": "caf\u00e9", "n": None}) == {
        "dest": "/x\\udc80", "paths": ["/a\\ud800", 3], "ok": "caf\u00e9", "n": None}


def test_every_module_with_a_path_or_account_option_asks_first():
    """A new module taking a path or an account name gets the same first check (a NUL byte was a traceback)."""
    import glob
    import os
    import re
    library = os.path.join(os.path.dirname(__file__), "..", "..", "library")
    missing = []
    for path in sorted(glob.glob(os.path.join(library, "*.py"))):
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        takes = re.search(r"type=\"path\"|elements=\"path\"|\b(owner|group|service_user)=dict\(", source)
        if takes and "param_checks.refusal(" not in source:
            missing.append(os.path.basename(path))
    assert missing == []
