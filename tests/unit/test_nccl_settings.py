"""The NCCL validation table: every variable and value class, the known-bad combinations, the typo hint."""
import pytest

from ansible.module_utils import nccl_settings as ns

NEW = ns.Context(nccl_version="2.29.7", nvlink=False)
OLD = ns.Context(nccl_version="2.23.4", nvlink=False)
NVLINK = ns.Context(nccl_version="2.29.7", nvlink=True)


def errors(settings, ctx=NEW):
    return ns.validate(settings, ctx)[0]


def warnings(settings, ctx=NEW):
    return ns.validate(settings, ctx)[1]


@pytest.mark.parametrize("name,good,bad", [
    ("NCCL_P2P_LEVEL", ["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "5"], ["NODE", "6", "pcie"]),
    ("NCCL_NET_GDR_LEVEL", ["PHB", "2"], ["far"]),
    ("NCCL_P2P_DISABLE", ["0", "1"], ["2", "yes", "true"]),
    ("NCCL_SHM_DISABLE", ["0", "1"], ["on"]),
    ("NCCL_CUMEM_ENABLE", ["1"], ["enabled"]),
    ("NCCL_NVLS_ENABLE", ["0"], ["-1"]),
    ("NCCL_IGNORE_CPU_AFFINITY", ["1"], ["x"]),
    ("NCCL_GRAPH_REGISTER", ["0"], ["no"]),
    ("NCCL_IB_DISABLE", ["1"], ["y"]),
    ("NCCL_ALGO", ["Ring", "ring,tree", "^Tree", "allreduce:tree;allgather:ring", "allreduce:tree"],
     ["Rings", "allreduce:tree;allgatherx:ring", "", "^"]),
    ("NCCL_PROTO", ["LL", "Simple", "^LL128", "LL,Simple", "allreduce:LL"], ["LL256", "fast"]),
    ("NCCL_BUFFSIZE", ["4194304", "65536", "0x400000", "16777216"], ["4000000", "1024", "-4194304", "4M"]),
    ("NCCL_NTHREADS", ["64", "128", "256", "512"], ["96", "1024", "0"]),
    ("NCCL_MIN_CTAS", ["1", "64"], ["0", "65"]),
    ("NCCL_MAX_CTAS", ["32"], ["100"]),
    ("NCCL_MIN_NCHANNELS", ["4"], ["33"]),
    ("NCCL_MAX_NCHANNELS", ["32"], ["0"]),
    ("NCCL_SOCKET_IFNAME", ["eth0", "^docker,lo", "=ens1f0", "enp65s0f0np0"], ["eth 0", "eth0;eth1"]),
    ("GLOO_SOCKET_IFNAME", ["eno1"], ["eno1 eno2"]),
    ("NCCL_DEBUG", ["WARN", "INFO", "VERSION", "TRACE"], ["LOUD", "warn"]),
    ("NCCL_TOPO_FILE", ["/etc/nccl/topo.xml"], ["topo.xml"]),
    ("NCCL_GRAPH_FILE", ["/etc/nccl/graph.xml"], ["./graph.xml"]),
    ("NCCL_CONF_FILE", ["/etc/nccl/custom.conf"], ["nccl.conf"]),
])
def test_documented_values_pass_and_others_are_refused(name, good, bad):
    for value in good:
        assert not errors({name: value}), (name, value, errors({name: value}))
    for value in bad:
        assert errors({name: value}), (name, value)


def test_every_known_variable_has_a_test_above():
    tested = {"NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_CUMEM_ENABLE",
              "NCCL_NVLS_ENABLE", "NCCL_IGNORE_CPU_AFFINITY", "NCCL_GRAPH_REGISTER", "NCCL_IB_DISABLE", "NCCL_ALGO",
              "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_NTHREADS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS",
              "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_DEBUG",
              "NCCL_TOPO_FILE", "NCCL_GRAPH_FILE", "NCCL_CONF_FILE", "NCCL_DEBUG_SUBSYS",
              "NCCL_GRAPH_MIXING_SUPPORT"}
    assert set(ns.VARIABLES) == tested


def test_typo_gets_a_did_you_mean():
    found = errors({"NCCL_ALGOO": "Ring"})
    assert found == ["NCCL_ALGOO is not an NCCL setting this role knows; did you mean NCCL_ALGO?"]
    assert "did you mean NCCL_P2P_LEVEL?" in errors({"NCCL_P2P_LEVL": "PHB"})[0]
    assert "did you mean" not in errors({"FOO": "1"})[0]


def test_global_tree_is_refused_and_the_per_collective_form_offered():
    found = errors({"NCCL_ALGO": "Tree"})
    assert len(found) == 1
    assert "all-gather has no tree implementation" in found[0] and "NCCL_ALGO=allreduce:tree" in found[0]
    assert errors({"NCCL_ALGO": "Tree,NVLSTree"})
    assert not errors({"NCCL_ALGO": "allreduce:tree"})
    assert not errors({"NCCL_ALGO": "Ring,Tree"})


def test_per_collective_syntax_needs_nccl_2_24():
    found = errors({"NCCL_ALGO": "allreduce:tree"}, OLD)
    assert found and "NCCL 2.24" in found[0] and "2.23.4" in found[0]
    assert errors({"NCCL_PROTO": "allreduce:LL"}, OLD)
    assert errors({"NCCL_ALGO": "allreduce:tree"}, ns.Context())  # unknown version: cannot prove support


def test_forcing_ll128_without_nvlink_is_refused():
    found = errors({"NCCL_PROTO": "LL128"})
    assert found and "corrupt" in found[0]
    assert not errors({"NCCL_PROTO": "LL128"}, NVLINK)
    assert not errors({"NCCL_PROTO": "^LL128"})


def test_ctas_limit_depends_on_the_release():
    assert errors({"NCCL_MAX_CTAS": "64"}, OLD)
    assert not errors({"NCCL_MAX_CTAS": "64"}, NEW)


def test_deprecated_channels_warn_and_inverted_ranges_fail():
    assert any("deprecated" in w for w in warnings({"NCCL_MIN_NCHANNELS": "4"}))
    assert errors({"NCCL_MIN_CTAS": "16", "NCCL_MAX_CTAS": "8"})
    assert errors({"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "PHB"})


def test_sys_p2p_level_warns_about_deadlocks():
    assert any("deadlocks" in w for w in warnings({"NCCL_P2P_LEVEL": "SYS"}))


def test_settings_sglang_overwrites_are_refused_or_warned():
    ctx = ns.Context(nccl_version="2.29.7", sglang_overrides={"NCCL_CUMEM_ENABLE": "always",
                                                              "NCCL_NVLS_ENABLE": "conditional"})
    assert "overwritten by SGLang" in errors({"NCCL_CUMEM_ENABLE": "0"}, ctx)[0]
    assert any("may be overwritten" in w for w in ns.validate({"NCCL_NVLS_ENABLE": "0"}, ctx)[1])


def test_empty_value_is_refused():
    assert "remove it" in errors({"NCCL_DEBUG": ""})[0]


@pytest.mark.parametrize("version,bad", [("2.26.2", True), ("2.26.5", True), ("2.29.2", True), ("2.29.3", False),
                                         ("2.29.7", False), ("2.25.1", False)])
def test_releases_with_known_bugs(version, bad):
    assert bool(ns.release_problems(ns.Context(nccl_version=version))) == bad


def topology(link):
    return {"gpus": ["GPU0", "GPU1"], "matrix": {"GPU0": {"GPU0": "X", "GPU1": link},
                                                  "GPU1": {"GPU0": link, "GPU1": "X"}}}


@pytest.mark.parametrize("link,expected", [("PHB", "PHB"), ("NODE", "PHB"), ("PIX", None), ("PXB", None),
                                           ("SYS", None), ("NV18", None)])
def test_pcie_profile_raises_p2p_level_only_across_host_bridges(link, expected):
    settings, notes = ns.profile_settings("pcie", {"topology": topology(link), "all_p2p_ok": True})
    assert (settings.get("NCCL_P2P_LEVEL") or {}).get("value") == expected
    assert settings or notes
    if expected:
        assert "shared memory" in settings["NCCL_P2P_LEVEL"]["reason"]


def test_pcie_profile_sets_nothing_without_p2p():
    settings, notes = ns.profile_settings("pcie", {"topology": topology("PHB"), "all_p2p_ok": False})
    assert settings == {} and "P2P is not OK" in notes[0]


def test_normalize_keeps_reasons():
    assert ns.normalize({"NCCL_DEBUG": "WARN", "NCCL_ALGO": {"value": "allreduce:tree", "reason": "measured"}}) == {
        "NCCL_DEBUG": {"value": "WARN", "reason": "set by the operator"},
        "NCCL_ALGO": {"value": "allreduce:tree", "reason": "measured"}}


# Issue 35: the hook and the EnvironmentFile write the value as given, so it is checked as given.
@pytest.mark.parametrize("name,value", [
    ("NCCL_P2P_LEVEL", "\u017fys"),          # 'ſys'.upper() == 'SYS'
    ("NCCL_P2P_LEVEL", "p\u0131x"),          # dotless i: 'pıx'.upper() == 'PIX'
    ("NCCL_NET_GDR_LEVEL", "PH\u0392"),      # Greek capital beta, looks like B
    ("NCCL_ALGO", "allreduce:\u212aing"),    # Kelvin sign, lower() is 'k'
    ("NCCL_PROTO", "\u017fimple"),
    ("NCCL_DEBUG_SUBSYS", "INIT,\u00c9NV"),  # free text: still ASCII only
])
def test_a_value_that_matches_only_after_unicode_case_mapping_is_refused(name, value):
    found = errors({name: value})
    assert len(found) == 1 and "NCCL reads its settings as ASCII" in found[0] and name in found[0], found


@pytest.mark.parametrize("name,value", [("NCCL_P2P_LEVEL", " PHB"), ("NCCL_P2P_DISABLE", "1 "),
                                        ("NCCL_ALGO", "allreduce:tree\t"), ("NCCL_SOCKET_IFNAME", " eth0")])
def test_whitespace_systemd_drops_around_a_value_is_refused(name, value):
    found = errors({name: value})
    assert len(found) == 1 and "systemd drops from an EnvironmentFile line" in found[0], found


@pytest.mark.parametrize("name,value", [("NCCL_BUFFSIZE", "4194304\n"), ("NCCL_MIN_CTAS", "4\n"),
                                        ("NCCL_SOCKET_IFNAME", "eth0\n")])
def test_a_pattern_end_lets_no_trailing_newline_through(name, value):
    assert errors({name: value})


@pytest.mark.parametrize("value", ["ring, tree", "allreduce: tree", "ring,", "allreduce:tree;"])
def test_lists_are_read_as_written_not_trimmed(value):
    assert errors({"NCCL_ALGO": value})
