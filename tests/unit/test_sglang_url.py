"""filter_plugins/sglang_url.py: the one place the server's URL is built."""

import pytest
from ansible.errors import AnsibleFilterError
from tests.helpers.script_module import load_file

sglang_url = load_file("filter_plugins/sglang_url.py", "sglang_url")


@pytest.mark.parametrize("host, url", [
    ("0.0.0.0", "http://127.0.0.1:30000"),
    ("::", "http://127.0.0.1:30000"),
    ("", "http://127.0.0.1:30000"),
    (None, "http://127.0.0.1:30000"),
    ("::1", "http://[::1]:30000"),
    ("fd00::5", "http://[fd00::5]:30000"),
    ("[::1]", "http://[::1]:30000"),
    ("127.0.0.1", "http://127.0.0.1:30000"),
    ("gpu1.example.org", "http://gpu1.example.org:30000"),
])
def test_url(host, url):
    assert sglang_url.sglang_server_url(host, 30000) == url


def test_port_as_text_and_address_for_a_tunnel():
    assert sglang_url.sglang_server_url("::1", "8080") == "http://[::1]:8080"
    assert sglang_url.sglang_server_address("::1") == "[::1]"


@pytest.mark.parametrize("port", ["x", None, 0, 70000])
def test_bad_port_is_refused_by_name(port):
    with pytest.raises(AnsibleFilterError, match="sglang_server_url"):
        sglang_url.sglang_server_url("::1", port)


def test_registered_under_both_names():
    assert set(sglang_url.FilterModule().filters()) == {"sglang_server_address", "sglang_server_url"}
