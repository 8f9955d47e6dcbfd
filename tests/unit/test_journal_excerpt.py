"""The filter every journal excerpt the sglang_server role prints goes through: the API key never comes out."""
import json

import pytest
import os
import subprocess
import sys
from tests.helpers.script_module import load_file

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
journal_excerpt = load_file("roles/sglang_server/files/journal_excerpt.py", "journal_excerpt")

KEY = "sk-Zq81xKdfe0"
# SGLang 0.5.21 (engine.py): logger.info(f"server_args={server_args.resolved_dict()}"), a Python dict repr.
SERVER_ARGS = ("[2026-12-01 02:00:00] server_args={'model_path': '/srv/m', 'api_key': '%s', "
               "'admin_api_key': None, 'tp_size': 2}" % KEY)


def test_the_key_is_taken_out_of_sglangs_server_args_line():
    out = journal_excerpt.redact(SERVER_ARGS, [KEY])
    assert KEY not in out and "'api_key': '<redacted>'" in out and "'tp_size': 2" in out


def test_key_shaped_fields_are_redacted_even_without_the_key_file():
    for line, kept in [(SERVER_ARGS, "'model_path': '/srv/m'"),
                       ('{"api_key": "%s", "port": 30000}' % KEY, '"port": 30000'),
                       ("ServerArgs(api_key='%s', port=30000)" % KEY, "port=30000"),
                       ("launch: --api-key %s --port 30000" % KEY, "--port 30000"),
                       ("launch: --admin-api-key=%s --port 30000" % KEY, "--port 30000")]:
        out = journal_excerpt.redact(line, [])
        assert KEY not in out and "<redacted>" in out and kept in out, out


def test_the_key_anywhere_else_is_replaced_too():
    assert journal_excerpt.redact("Bearer %s rejected" % KEY, [KEY]) == "Bearer <redacted> rejected"


def test_lines_without_a_key_are_unchanged():
    line = "FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm"
    assert journal_excerpt.redact(line, [KEY]) == line
    assert journal_excerpt.redact(line, [""]) == line


def test_key_file_read(tmp_path):
    (tmp_path / "k").write_text(KEY + "\n")
    assert journal_excerpt.read_keys([str(tmp_path / "k"), str(tmp_path / "missing")]) == [KEY]


def test_a_key_holding_both_quotes_is_taken_out_as_repr_and_json_escape_it():
    key = "abc'def\"ghi\\jk"
    for line in ["server_args={'api_key': %r, 'port': 30000}" % key,
                 '{"api_key": %s, "port": 30000}' % json.dumps(key),
                 "ServerArgs(api_key=%r, port=30000)" % key]:
        for keys in ([key], []):  # with the key file, and by the field's shape alone
            out = journal_excerpt.redact(line, keys)
            assert "def" not in out and "ghi" not in out and "<redacted>" in out and "30000" in out, (keys, out)


def run_script(*args):
    script = os.path.join(REPO, "roles", "sglang_server", "files", "journal_excerpt.py")
    return subprocess.run([sys.executable, script] + list(args), capture_output=True, text=True, check=False)


def test_a_log_file_is_redacted_as_the_journal_is(tmp_path):
    """Hosts without a journal (sglang_server_log_file): the fusion proof reads the file through the same filter."""
    (tmp_path / "k").write_text(KEY + "\n")
    log = tmp_path / "server.log"
    log.write_text(SERVER_ARGS + "\nFlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm\n"
                   "Bearer %s\n" % KEY)
    proc = run_script("--file", str(log), "--key-file", str(tmp_path / "k"))
    assert proc.returncode == 0 and KEY not in proc.stdout and proc.stdout.count("<redacted>") == 2
    assert "backend=trtllm" in proc.stdout
    last = run_script("--file", str(log), "--lines", "1", "--key-file", str(tmp_path / "k"))
    assert last.stdout == "Bearer <redacted>\n"


def test_an_unreadable_log_file_says_so_and_a_source_is_required(tmp_path):
    proc = run_script("--file", str(tmp_path / "missing.log"))
    assert proc.returncode == 1 and "cannot read the server's log file %s" % (tmp_path / "missing.log") in proc.stderr
    assert run_script().returncode == 2  # neither --unit nor --file
    assert run_script("--unit", "x", "--file", "y").returncode == 2


# Issue 35: a repr inside JSON (a JSON log line carrying SGLang's server_args), JSON inside a repr, and deeper.
NESTED_KEYS = ["abc'def\"ghi\\jk", "k'ey", 'k"ey', "k\\ey", "k\\'ey\\", "z'}, 'port': 1", "\u00e9t\u00e9'x"]


def nestings(key):
    """(label, line) for the key in SGLang's repr, in JSON, and each inside the other, up to three levels."""
    server_args = "server_args={'api_key': %r, 'port': 30000}" % key
    as_json = json.dumps({"api_key": key, "port": 30000})
    return [
        ("repr", server_args),
        ("json", as_json),
        ("repr in json", json.dumps({"msg": server_args, "level": "INFO"})),
        ("repr in json, raw", json.dumps({"msg": server_args}, ensure_ascii=False)),
        ("json in repr", "record=%r" % {"body": as_json, "port": 30000}),
        ("json in json", json.dumps({"body": as_json})),
        ("repr in repr", "%r" % {"line": server_args}),
        ("repr in json in repr", "%r" % {"log": json.dumps({"msg": server_args})}),
        ("json in repr in json", json.dumps({"log": repr({"body": as_json})})),
    ]


@pytest.mark.parametrize("key", NESTED_KEYS)
def test_every_nested_escaping_of_the_key_is_taken_out_with_the_key_file(key):
    core = key.strip("'\"\\")[:3]
    for label, line in nestings(key):
        out = journal_excerpt.redact(line, [key])
        assert "<redacted>" in out and "30000" in out, (label, out)
        for spelling in journal_excerpt._spellings(key):
            assert spelling not in out, (label, spelling, out)
        assert core not in out.replace("<redacted>", ""), (label, out)


@pytest.mark.parametrize("key", [k for k in NESTED_KEYS if "}" not in k])
def test_the_field_shape_alone_takes_out_every_nested_escaping(key):
    """Without the key file (the shape of the field only): the value runs to the field's end, whatever its level."""
    core = key.strip("'\"\\")[:3]
    for label, line in nestings(key):
        out = journal_excerpt.redact(line, [])
        assert "<redacted>" in out and core not in out.replace("<redacted>", ""), (label, out)
        assert "30000" in out, (label, out)  # the rest of the line stays


def test_the_spellings_include_both_nestings():
    key = "a'b\"c\\d"
    spellings = journal_excerpt._spellings(key)
    assert json.dumps(repr(key))[2:-2] in spellings  # repr inside JSON
    assert repr(json.dumps(key))[2:-2] in spellings  # JSON inside a repr
    assert key in spellings and repr(key)[1:-1] in spellings and json.dumps(key)[1:-1] in spellings
