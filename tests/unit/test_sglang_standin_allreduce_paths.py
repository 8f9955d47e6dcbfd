"""The all-reduce path a start runs (read from its flags and environment as SGLang would) and what
allreduce_paths changes for it: speed, wrong output."""
import pytest

from tests.helpers.sglang_standin import FUSION, generate, in_process, paced


PATHS = {"allreduce_paths": {"nccl": {"tokens_per_s": 100}, "fusion": {"tokens_per_s": 400},
                              "pcie_ipc": {"tokens_per_s": 300, "wrong_output": True}}}


@pytest.mark.parametrize("args,env,path", [
    (["--tp-size", "2"], {}, "nccl"),
    (["--tp-size", "2"] + FUSION, {}, "fusion"),
    (["--tp-size", "1"] + FUSION, {}, "nccl"),  # one rank: nothing to all-reduce, no fusion line either
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "pcie_ipc"),
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "0"}, "nccl"),
    (["--tp-size", "6"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "nccl"),  # world size PCIe IPC does not build
    (["--tp-size", "2"] + FUSION, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "true"}, "fusion+pcie_ipc"),
    # the roles' nccl and pcie_ipc paths pass 0.5.21's off switch; it wins over a fusion flag, as in the real release
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"], {}, "nccl"),
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"},
     "pcie_ipc"),
    (["--tp-size", "2", "--enforce-disable-flashinfer-allreduce-fusion"] + FUSION, {}, "nccl"),
])
def test_the_allreduce_path_is_read_from_the_flags_and_environment(standin, args, env, path):
    server = standin(PATHS, args, env=env).start().wait_ready()
    status, info, _ = server.request("/server_info")
    assert status == 200 and info["standin_allreduce_path"] == path
    note = "sglang STAND-IN: all-reduce path %s (allreduce_paths" % path
    assert note in server.output()


@pytest.mark.parametrize("args,env,path,rate", [
    (["--tp-size", "2"], {}, "nccl", 100),
    (["--tp-size", "2"] + FUSION, {}, "fusion", 400),
    (["--tp-size", "2"], {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "pcie_ipc", 300),
])
def test_each_path_is_paced_at_its_own_speed(monkeypatch, tmp_path, args, env, path, rate):
    server, clock = in_process(monkeypatch, tmp_path, PATHS, args, env)
    assert server.allreduce_path == path and server.speed() == rate
    assert paced(server, clock, 60)[1][-1] == (pytest.approx(60.0 / rate), 60)


def test_each_path_runs_at_its_own_speed_and_one_can_be_made_wrong(standin):
    nccl = standin(PATHS, ["--tp-size", "2"]).start()
    fusion = standin(PATHS, ["--tp-size", "2"] + FUSION).start()
    ipc = standin(PATHS, ["--tp-size", "2"], env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}).start()
    for server in (nccl, fusion, ipc):
        server.wait_ready()
    assert "all-reduce path nccl (allreduce_paths): tokens_per_s=100, wrong_output=false" in nccl.output()
    assert "all-reduce path fusion (allreduce_paths): tokens_per_s=400, wrong_output=false" in fusion.output()
    assert "all-reduce path pcie_ipc (allreduce_paths): tokens_per_s=300, wrong_output=true" in ipc.output()
    right = generate(nccl, "What is 2+2?", max_new_tokens=16)["text"]
    assert generate(fusion, "What is 2+2?", max_new_tokens=16)["text"] == right
    assert generate(ipc, "What is 2+2?", max_new_tokens=16)["text"] != right  # wrong_output on that path only
