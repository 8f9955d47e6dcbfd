"""The command line: checked against the installed SGLang's own definitions (module_utils/sglang_cli_args.py,
beside the stand-in as the lab installs it) or the stand-in's own table; anything the real CLI refuses exits 2."""
import os
import re
import shutil
import sys

import pytest

from tests.helpers.sglang_standin import FUSION, MODULE_UTILS, REPO, run_flags


# ---------------------------------------------------------------------------------------------------- flags

def test_unknown_flag_exits_2(standin):
    proc = run_flags(["--model-path", "/m", "--no-such-flag", "1"])
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --no-such-flag 1"
    proc = run_flags(["--model-path", "/m", "--cuda-graph-max-bs", "8"])  # gone in 0.5.21: only -decode/-prefill
    assert proc.returncode == 2
    assert "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, " \
           "--cuda-graph-max-bs-prefill" in proc.stderr
    proc = run_flags(["--model-path", "/m", "--flashinfer-allreduce-fusion-backend", "nccl"])
    assert proc.returncode == 2 and "invalid choice: 'nccl'" in proc.stderr
    assert run_flags(["--tp-size", "2"]).returncode == 2  # --model-path is required


@pytest.mark.wheels
def test_flags_checked_with_the_installed_sglang(standin, sglang_0521_site):
    env = {"PYTHONPATH": sglang_0521_site, "SGLANG_STANDIN_CLI_ARGS": MODULE_UTILS}
    proc = run_flags(["--model-path", "/m", "--no-such-flag", "1"], env)
    assert proc.returncode == 2
    assert "sglang serve: error: unknown flag --no-such-flag" in proc.stderr and "sglang 0.5.21" in proc.stderr
    proc = run_flags(["--model-path", "/m", "--cuda-graph-max-bs", "8"], env)
    assert proc.returncode == 2 and "ambiguous abbreviation of --cuda-graph-max-bs-decode" in proc.stderr
    server = standin(args=["--tp", "2", "--cuda-graph-max-bs-decode", "8", "--enable-mixed-chunk"] + FUSION,
                     env=env).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in server.output()
    # the off switch the roles pass on the paths without fusion: 0.5.21 declares it, and it wins
    off = standin(args=["--tp", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION, env=env).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in off.output()
    assert off.wait_ready().request("/server_info")[1]["flashinfer_allreduce_fusion_backend"] is None
    info = server.request("/server_info")[1]
    assert info["tp_size"] == 2 and info["cuda_graph_max_bs_decode"] == 8  # --tp: an abbreviation argparse takes
    assert info["enable_mixed_chunk"] is True and info["version"] == "0.5.21"


def lab_copy(folder, leave_out=()):
    """The module_utils files lab/install-standins.sh puts beside the stand-in, copied into `folder`."""
    with open(os.path.join(REPO, "lab", "install-standins.sh"), encoding="utf-8") as handle:
        names = re.findall(r'"\$LAB_ROOT/module_utils/(\w+\.py)"', handle.read())
    assert "sglang_cli_args.py" in names, names
    folder.mkdir()
    for name in names:
        if name not in leave_out:
            shutil.copy(os.path.join(MODULE_UTILS, name), str(folder))
    return str(folder)


@pytest.mark.wheels
def test_flags_checked_without_ansible_like_the_lab(standin, sglang_0521_site, tmp_path):
    """The lab copies sglang_cli_args.py with what it imports next to the stand-in, and its venv has no Ansible."""
    env = {"PYTHONPATH": sglang_0521_site, "SGLANG_STANDIN_CLI_ARGS": lab_copy(tmp_path / "opt-sglang-standin")}
    proc = run_flags(["--model-path", "/m", "--no-such-flag"], env, interpreter=(sys.executable, "-S"))
    assert proc.returncode == 2 and "sglang 0.5.21" in proc.stderr, proc.stderr
    server = standin(args=["--tp", "2"], env=env, interpreter=(sys.executable, "-S")).start()
    assert "Flags checked with SGLang 0.5.21's own flag definitions" in server.output()


@pytest.mark.wheels
def test_a_lab_copy_without_what_the_reader_imports_falls_back_and_says_why(standin, sglang_0521_site, tmp_path):
    """No stand-in for a missing pkg_versions.py any more: the first log line names the import that failed."""
    lone = lab_copy(tmp_path / "opt-sglang-standin", leave_out=("pkg_versions.py",))
    server = standin(args=["--tp", "2"], env={"PYTHONPATH": sglang_0521_site, "SGLANG_STANDIN_CLI_ARGS": lone},
                     interpreter=(sys.executable, "-S")).start()
    assert "Flags checked with the stand-in's own list of sglang 0.5.21 flags (cannot import sglang_cli_args " \
        "from %s (ImportError: cannot import name 'pkg_versions'" % lone in server.output()


def test_falls_back_to_its_own_list_when_the_helper_is_unusable(standin, tmp_path):
    server = standin(env={"SGLANG_STANDIN_CLI_ARGS": str(tmp_path / "nothing-here")}).start()
    assert "Flags checked with the stand-in's own list of sglang 0.5.21 flags (no sglang_cli_args.py in" \
        in server.output()
    no_sglang = standin(env={"SGLANG_STANDIN_CLI_ARGS": MODULE_UTILS}).start()  # helper present, sglang absent
    assert "sglang_cli_args.known_flags(" in no_sglang.output() and "failed" in no_sglang.output()
