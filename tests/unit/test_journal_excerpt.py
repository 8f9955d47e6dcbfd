"""The filter every journal excerpt the sglang_server role prints goes through: the API key never comes out."""
import json
import os
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
