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


ALL_INTERFACES = [
    None, "", "   ", "*", "0.0.0.0", "::", "[::]", "[ :: ]", "0", "00", "0x0", "0X00", "0.0", "0.0.0", "000.0.0.0",
    "0.00.000.0000", "0x0.0.0.0", "0.0.0.0.", "::0", "0::", "0:0:0:0:0:0:0:0", "0000:0000::0000", "::0.0.0.0",
    "::ffff:0.0.0.0", "::FFFF:0.0.0.0", "[::ffff:0:0]", "::%eth0", "[::%1]", " 0.0.0.0 ", "\t::\n",
    "\u00a00.0.0.0\u2003", "\uff10.\uff10.\uff10.\uff10", "0\u30020\u30020\u30020", "\uff1a\uff1a", 0, 0.0,
]
NOT_ALL = [
    "127.0.0.1", "127.1", "::1", "[::1]", "localhost", "10.0.0.5", "fd00::5", "0.0.0.1", "0.0.0.0.0", "1", "0x1",
    "::2", "::ffff:127.0.0.1", "::ffff:0.0.0.1", "08", "0.0.0.08", "gpu1.example.org", "0.example", "**", "0..0",
    "256.0.0.0", "0.0.0.256", "0.65536", "false",
]


@pytest.mark.parametrize("host", ALL_INTERFACES)
def test_every_spelling_of_all_interfaces_is_caught(host):
    assert sglang_url.sglang_server_binds_all(host) is True
    if isinstance(host, str) or host is None:
        assert sglang_url.sglang_server_address(host) == "127.0.0.1"


@pytest.mark.parametrize("host", NOT_ALL)
def test_a_single_interface_is_not_all(host):
    assert sglang_url.sglang_server_binds_all(host) is False


def test_the_ipv4_reading_is_inet_aton_s():
    """The forms glibc's inet_aton (hence getaddrinfo, hence the server) takes, checked by their value."""
    aton = sglang_url._inet_aton  # pylint: disable=protected-access
    assert aton("127.1") == 0x7F000001 and aton("0x7f.1") == 0x7F000001 and aton("0177.0.0.1") == 0x7F000001
    assert aton("2130706433") == 0x7F000001 and aton("10.1.256") == 0x0A010100
    assert aton("4294967295") == 0xFFFFFFFF and aton("4294967296") is None
    for bad in ("", "1.2.3.4.5", "1..2", "09", "0xg", "1.2.3.256", "\uff11", "-1", "+1", "1 2"):
        assert aton(bad) is None, bad


def test_registered_under_its_names():
    assert set(sglang_url.FilterModule().filters()) == {"sglang_server_address", "sglang_server_url",
                                                        "sglang_server_binds_all"}
