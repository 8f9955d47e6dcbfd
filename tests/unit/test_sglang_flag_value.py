"""filter_plugins/sglang_server_argv.py: a flag's value in the server's arguments, both spellings argparse reads."""
import pytest
from ansible.errors import AnsibleFilterError
from tests.helpers.script_module import load_file

flag_value = load_file("filter_plugins/sglang_server_argv.py", "sglang_server_argv").sglang_flag_value
EP = ["--ep-size", "--expert-parallel-size", "--ep"]


@pytest.mark.parametrize("argv,expected", [
    (["--ep-size", "2"], "2"),
    (["--ep-size=2"], "2"),
    (["--expert-parallel-size=4", "--enable-deterministic-inference"], "4"),
    (["--attention-backend", "triton", "--ep", "8"], "8"),
    (["--ep-size", "2", "--ep-size=4"], "4"),          # argparse keeps the last
    (["--ep-sizes=3", "--tp-size", "2"], 1),           # another flag, not a spelling of this one
    (["--", "--ep-size", "2"], 1),                      # after --, no options
    ([], 1),
    (None, 1),
])
def test_both_spellings_and_the_last_one_wins(argv, expected):
    assert flag_value(argv, EP, 1) == expected


def test_one_name_as_a_string():
    assert flag_value(["--cuda-graph-max-bs=16"], "--cuda-graph-max-bs") == "16"


@pytest.mark.parametrize("argv,flags", [("--ep-size 2", EP), (["--ep-size"], EP), (["--ep-size", "--tp-size", "2"], EP),
                                        (["--ep-size", "2"], ["ep-size"]), (["--ep-size", "2"], [])])
def test_what_is_not_an_argument_list_or_a_flag_is_refused_by_name(argv, flags):
    with pytest.raises(AnsibleFilterError, match="sglang_flag_value"):
        flag_value(argv, flags, 1)
