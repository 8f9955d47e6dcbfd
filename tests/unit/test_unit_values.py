"""The one validation layer for values that reach a unit, an EnvironmentFile or a start-up hook."""
import pytest

from ansible.module_utils import unit_values as uv

HOSTILE_WORDS = [
    ("model\nExecStartPre=+/bin/sh -c id", "newline"),
    ("a\rb", "carriage return"),
    ("a\x00b", "NUL"),
    ("a\tb", "tab"),
    ("a\x7fb", "control character"),
    ("/models/my model", "whitespace"),
    ("%h/x", "specifier"),
    ("${SGLANG_API_KEY}", "expansion"),
    ("$HOME", "expansion"),
    ('"quoted"', "quote"),
    ("it's", "quote"),
    ("a\\nb", "backslash"),
    (";", "command separator"),
    ("", "empty"),
]


@pytest.mark.parametrize("value,rule", HOSTILE_WORDS)
def test_word_refuses_what_systemd_would_read_differently(value, rule):
    errors = uv.word("sglang_server_extra_args[0]", value)
    assert len(errors) == 1
    assert errors[0].startswith("sglang_server_extra_args[0] ")
    assert rule in errors[0]


@pytest.mark.parametrize("value", ["--enable-metrics", "--max-running-requests=64", "Kimi-K2.5", "allreduce:tree;x"])
def test_word_accepts_plain_arguments(value):
    assert uv.word("x", value) == []


@pytest.mark.parametrize("value", [None, 3, ["a"], {"a": 1}, True])
def test_non_strings_are_refused_by_type(value):
    assert "must be a string" in uv.word("x", value)[0]


@pytest.mark.parametrize("value,rule", [
    ("models/k2", "absolute"),
    ("/models/../etc", "normalized"),
    ("/models/./k2", "normalized"),
    ("/models//k2", "normalized"),
    ("//models", "normalized"),
    ("/models/k2/", "normalized"),
    ("/models/k 2", "whitespace"),
    ("/models/k2\n", "newline"),
])
def test_path_rules(value, rule):
    errors = uv.path("sglang_server_model_path", value)
    assert errors and rule in errors[0] and errors[0].startswith("sglang_server_model_path ")


def test_path_under_a_directory():
    assert uv.path("p", "/etc/sglang/nccl.env", under="/etc/sglang") == []
    assert "inside /etc/sglang" in uv.path("p", "/etc/sglangx/nccl.env", under="/etc/sglang")[0]
    assert "inside /etc/sglang" in uv.path("p", "/etc/sglang", under="/etc/sglang")[0]
    assert "normalized" in uv.path("p", "/etc/sglang/../passwd", under="/etc/sglang")[0]


@pytest.mark.parametrize("value", ["sglang_nccl_env", "_x", "A1"])
def test_identifier_accepts(value):
    assert uv.identifier("hook_name", value) == []


@pytest.mark.parametrize("value", ["../evil", "os;import x", "a.b", "1x", "a b", "x\nimport os", "", "ü"])
def test_identifier_refuses(value):
    errors = uv.identifier("hook_name", value)
    assert errors and errors[0].startswith("hook_name ")


@pytest.mark.parametrize("value", ["127.0.0.1", "::1", "0.0.0.0", "gpu-node-1.example", "fe80::1"])
def test_host_accepts(value):
    assert uv.host("sglang_server_host", value) == []


@pytest.mark.parametrize("value", ["127.0.0.1\nExecStartPre=+/x", "a b", "h/x", "%H", "${X}", ""])
def test_host_refuses(value):
    assert uv.host("sglang_server_host", value)


def test_text_allows_spaces_but_no_specifier_or_newline():
    assert uv.text("name", "Kimi K2.5 (EAGLE-3)") == []
    assert "specifier" in uv.text("name", "50% faster")[0]
    assert "newline" in uv.text("name", "a\n[Service]")[0]


@pytest.mark.parametrize("value,ok", [(1, True), ("8", True), ("08", True), (True, False), ("1e3", False),
                                      ("0x10", False), ("-1", False), (" 1", False), (1.5, False), (70000, False)])
def test_integer(value, ok):
    assert (uv.integer("sglang_server_port", value, low=1, high=65535) == []) is ok


@pytest.mark.parametrize("value", ["PHB", "allreduce:tree;allgather:ring", "^docker,lo", "/etc/nccl/topo.xml", 4, "1"])
def test_env_value_accepts(value):
    assert uv.env_value("NCCL_X", value) == []


@pytest.mark.parametrize("value,rule", [
    ("INIT\nLD_PRELOAD=/tmp/x.so", "newline"),
    ("PHB\n", "newline"),
    ("a b", "whitespace"),
    (" PHB", "whitespace"),
    ("$HOME/topo.xml", "expansion"),
    ('"x"', "quote"),
    ("x\\", "backslash"),
    ("%i", "specifier"),
])
def test_env_value_refuses(value, rule):
    errors = uv.env_value("NCCL_DEBUG_SUBSYS", value)
    assert errors and rule in errors[0] and errors[0].startswith("NCCL_DEBUG_SUBSYS ")


def test_check_all_names_every_refused_value_and_list_item():
    errors = uv.check_all({
        "sglang_server_host": {"value": "127.0.0.1\nx", "kind": "host"},
        "sglang_server_extra_args": {"value": ["--ok", "--bad=%n", "a b"], "kind": "word", "items": True},
        "sglang_server_draft_model_path": {"value": "", "kind": "path", "optional": True},
        "sglang_server_port": {"value": "99999", "kind": "integer", "low": 1, "high": 65535},
        "x": {"value": "1", "kind": "nonsense"},
    })
    assert [e.split(" ", 1)[0] for e in errors] == [
        "sglang_server_extra_args[1]", "sglang_server_extra_args[2]", "sglang_server_host", "sglang_server_port",
        "x:"]


def test_check_all_refuses_a_list_that_is_not_one():
    assert "must be a list" in uv.check_all({"a": {"value": "x", "kind": "word", "items": True}})[0]


# Python's '$' also matches before a final newline: each pattern is matched whole.
@pytest.mark.parametrize("check,value", [
    (uv.unit_name, "sglang\n"),
    (uv.identifier, "sglang_nccl_env\n"),
    (uv.env_name, "NCCL_ALGO\n"),
    (uv.host, "127.0.0.1\n"),
    (uv.integer, "30000\n"),
])
def test_a_trailing_newline_is_refused(check, value):
    errors = check("v", value)
    assert errors and errors[0].startswith("v ")
    assert check("v", value.rstrip("\n")) == []


def test_identifier_refuses_a_python_keyword():
    assert "keyword" in uv.identifier("hook", "import")[0]


@pytest.mark.parametrize("value", ["9" * 5000, 10 ** 5000, -(10 ** 19)], ids=["digits", "int", "negative"])
def test_integer_refuses_more_digits_than_any_setting_needs_with_its_own_message(value):
    assert uv.integer("sglang_server_port", value) == ["sglang_server_port has more than 18 digits"]


def test_comment_refuses_a_trailing_backslash_that_would_swallow_the_next_line():
    assert "backslash" in uv.comment("reason", "measured on C:\\")[0]
    assert uv.comment("reason", "a \\ in the middle is fine") == []


@pytest.mark.parametrize("spec", [
    {"kind": "path", "value": "/etc/sglang/x", "under": 5},
    {"kind": "integer", "value": "3", "low": "1"},
    {"kind": "integer", "value": "3", "high": True},
])
def test_check_all_refuses_a_malformed_check_by_name(spec):
    errors = uv.check_all({"v": spec})
    assert len(errors) == 1 and errors[0].startswith("v: its check's")


@pytest.mark.parametrize("kind", ["word", "text", "comment", "line", "path", "identifier", "unit_name", "host",
                                  "env_value", "env_name"])
@pytest.mark.parametrize("surrogate", ["\udc80", "\ud800", "\udfff"])
def test_a_lone_surrogate_is_refused_by_every_text_kind(kind, surrogate):
    """JSON can carry "\\udc80" into a str; no UTF-8 file can hold it (the writer would fail with a traceback, and
    systemd refuses an EnvironmentFile line of invalid UTF-8)."""
    errors = uv.CHECKS[kind]("v", "/opt/x" + surrogate)
    assert errors and errors[0].startswith("v holds a lone surrogate (U+%04X)" % ord(surrogate)), errors


@pytest.mark.parametrize("kind", [["path"], {"path": 1}, None, 3, True])
def test_check_all_names_a_kind_that_is_not_a_name_instead_of_failing(kind):
    errors = uv.check_all({"v": {"value": "/x", "kind": kind}, "w": {"value": "/x", "kind": "path"}})
    assert errors == ["v: no known check (kind is one of %s)" % ", ".join(sorted(uv.CHECKS))]


def test_line_takes_anything_printable_on_one_line():
    assert uv.line("drift_schedule_notify_command[1]", "sglang drift: $STATUS 'quoted' 100%") == []
    assert "newline" in uv.line("v", "ok\nrm -rf /")[0]
    assert "carriage return" in uv.line("v", "ok\rX")[0]
    assert "must be a string" in uv.line("v", ["x"])[0]
    assert "is empty" in uv.line("v", "")[0]


def test_url_allows_what_an_index_url_holds_but_no_break():
    assert uv.url("u", "https://ci:t%40k3n@pypi.example/simple/?a=$b") == []
    assert "whitespace" in uv.url("u", "https://a.example/ simple")[0]
    assert "newline" in uv.url("u", "https://a.example/\ntrusted-host = evil")[0]


@pytest.mark.parametrize("value,rule", [("ansible-core==2.19.14", None), ("ansible[azure]>=9; python_version>'3'", None),
                                        ("--index-url=http://evil/", "begins with '-'"), (" -r /etc/x", "begins with '-'"),
                                        ("ansible\n--index-url http://evil/", "newline")])
def test_requirement_is_one_package_line(value, rule):
    errors = uv.requirement("drift_schedule_python_packages[0]", value)
    assert (errors == []) if rule is None else (rule in errors[0]), errors


def test_requirements_admits_exactly_what_the_lock_check_admits():
    import glob
    import os
    locks = glob.glob(os.path.join(os.path.dirname(__file__), "..", "..", "roles", "sglang_install", "files", "locks",
                                   "*.txt"))
    assert locks
    for lock in locks:
        with open(lock, encoding="utf-8") as handle:
            assert uv.requirements("lock", handle.read()) == [], lock
    assert "line 2 is not an exact pin" in uv.requirements("lock", "a==1\n--index-url http://evil/\n")[0]
    assert "line 2 is not an exact pin" in uv.requirements("lock", "a==1\nb>=2\n")[0]
    assert "control character" in uv.requirements("lock", "a==1\x1b\n")[0]
    assert uv.requirements("lock", "# comment\n\na[x,y]==1.0 ; python_version < '3.12' \\\n    --hash=sha256:ab\n") == []


def test_a_secret_value_is_left_out_of_the_message():
    errors = uv.check_all({"sglang_install_pip_index_url": {"value": "https://u:s3cr3t@h/ x", "kind": "url",
                                                            "secret": True}})
    assert errors == ["sglang_install_pip_index_url holds whitespace: it would be read as two values (the value is not "
                      "shown: it may hold a secret)"]


@pytest.mark.parametrize("value", ["-2", -2, "0"])
def test_a_signed_integer_below_the_range_is_named_by_its_range(value):
    assert uv.integer("sglang_server_tp_size", value, low=1, high=1024) == [
        "sglang_server_tp_size must be a positive integer, from 1 to 1024 (got %d)" % int(value)]
