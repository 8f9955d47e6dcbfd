"""Flag tables read from the real sglang wheels, and the module through Ansible on a real venv.

The tables only need the sources, so each wheel's ``.py`` files (and its METADATA) are
extracted into a temporary directory instead of installed: same bytes, a second instead of a venv.
"""
import glob
import os
import zipfile

import pytest

import tests.conftest  # noqa: F401  (puts module_utils on ansible.module_utils' path)
from ansible.module_utils import fusion_guards as fg
from ansible.module_utils import sglang_cli_args as cli
from tests.helpers import wheels
from tests.helpers.ansible_run import run_module

pytestmark = pytest.mark.wheels

RELEASES = wheels.RELEASES
VALUE_FLAGS = ["--model-path", "--tp-size", "--speculative-algorithm", "--speculative-draft-model-path",
               "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens",
               "--mem-fraction-static", "--host", "--port", "--api-key"]


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def kimi_argv(flags):
    """Kimi-K2.5 on 8 GPUs with EAGLE-3 and the fusion flag the fusion_patch module publishes for this release."""
    return ["--model-path", "moonshotai/Kimi-K2.5", "--trust-remote-code", "--tp-size", "8",
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "lightseekorg/kimi-k2.5-eagle3",
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
            "--mem-fraction-static", "0.85", "--host", "0.0.0.0", "--port", "30000", "--api-key", "secret",
            "--enable-metrics"] + fusion_flag(flags)


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def fusion_flag(flags):
    return ["--flashinfer-allreduce-fusion-backend", "trtllm"] if "--flashinfer-allreduce-fusion-backend" in flags \
        else ["--enable-flashinfer-allreduce-fusion"]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    extracted = {}

    def get(release):
        if release not in extracted:
            root = tmp_path_factory.mktemp("sglang-%s" % release)
            with zipfile.ZipFile(wheels.wheel("sglang", release)) as archive:
                archive.extractall(root, [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")
                                          or (name.startswith("sglang/") and name.endswith(".py"))])
            extracted[release] = str(root)
        return extracted[release]
    return get


@pytest.fixture(scope="module")
def flags_of(sources):
    tables = {}

    def get(release):
        if release not in tables:
            tables[release] = cli.known_flags(sources(release))
        return tables[release]
    return get


@pytest.mark.parametrize("release", RELEASES)
def test_core_flags(release, flags_of):
    flags = flags_of(release)
    assert flags.version == release
    for flag in VALUE_FLAGS:
        assert flags[flag]["takes_value"], flag
    assert flags["--model-path"]["required"]
    assert not flags["--enable-metrics"]["takes_value"]
    assert (flags["--tp-size"]["type"], flags["--port"]["type"], flags["--mem-fraction-static"]["type"]) == \
        ("int", "int", "float")
    # the long alias is declared; before the annotated fields argparse named the dest after it
    assert flags["--tensor-parallel-size"] is flags["--tp-size"]
    tp_dest = "tp_size" if version_tuple(release) >= (0, 5, 14) else "tensor_parallel_size"
    assert flags["--tp-size"]["dest"] == tp_dest
    new_layout = version_tuple(release) >= (0, 5, 21)
    assert flags["--tp-size"]["source"] == (
        "sglang/srt/arg_groups/fields/parallel.py" if new_layout else "sglang/srt/server_args.py")
    assert flags["--speculative-num-steps"]["source"] == (
        "sglang/srt/arg_groups/fields/spec.py" if new_layout else "sglang/srt/server_args.py")


@pytest.mark.parametrize("release", RELEASES)
def test_tp_is_an_abbreviation_not_an_alias(release, flags_of):
    """No release declares --tp; argparse takes it as the only flag that starts with it."""
    flags = flags_of(release)
    assert "--tp" not in flags
    assert [flag for flag in flags if flag.startswith("--tp")] == ["--tp-size"]
    errors, parsed = cli.check_argv(flags, ["--model-path", "m", "--tp", "8"], allow_abbrev=True)
    assert errors == [] and parsed[flags["--tp-size"]["dest"]] == 8
    errors, _ = cli.check_argv(flags, ["--model-path", "m", "--tp", "8"])
    assert len(errors) == 1 and "did you mean --tp-size?" in errors[0]


@pytest.mark.parametrize("release", RELEASES)
def test_fusion_flags(release, flags_of, sources):
    flags = flags_of(release)
    annotated = version_tuple(release) >= (0, 5, 14)
    boolean = flags["--enable-flashinfer-allreduce-fusion"]
    assert not boolean["takes_value"]
    assert boolean["deprecated"] == annotated  # "(Deprecated: use --flashinfer-allreduce-fusion-backend=auto)"
    if annotated:
        assert "trtllm" in flags["--flashinfer-allreduce-fusion-backend"]["choices"]
    else:
        assert "--flashinfer-allreduce-fusion-backend" not in flags
    # the flag the fusion_patch module tells the server to use is one this release accepts
    root = sources(release)
    paths = [os.path.join(root, cli.SERVER_ARGS)] + glob.glob(os.path.join(root, "sglang/srt/arg_groups/fields/*.py"))
    published = fg.server_flag([(path, read_bytes(path)) for path in paths])
    assert published == fusion_flag(flags)
    assert cli.check_argv(flags, ["--model-path", "m"] + published)[0] == []


# 0.5.17 too: the device machine's release (tests/integration/test_allreduce_paths_real_wheels.py fetches it).
@pytest.mark.parametrize("release", sorted(RELEASES + ["0.5.17"], key=version_tuple))
def test_no_fusion_flag(release, flags_of, sources):
    """The off switch: SGLang turns fusion on by itself on SM90/SM100 for the architectures it knows (tp > 1, no
    fusion flag); --enforce-disable-flashinfer-allreduce-fusion, declared from 0.5.14, is the one flag that wins."""
    flags = flags_of(release)
    off = "--enforce-disable-flashinfer-allreduce-fusion"
    root = sources(release)
    paths = [os.path.join(root, cli.SERVER_ARGS)] + glob.glob(os.path.join(root, "sglang/srt/arg_groups/fields/*.py"))
    published = fg.server_no_fusion_flag([(path, read_bytes(path)) for path in paths])
    if version_tuple(release) >= (0, 5, 14):
        assert published == [off]
        entry = flags[off]
        assert not entry["takes_value"] and not entry["deprecated"] and entry["refuses"] is None
        assert entry["dest"] == "enforce_disable_flashinfer_allreduce_fusion"
        assert entry["source"] == ("sglang/srt/arg_groups/fields/exec_.py" if version_tuple(release) >= (0, 5, 21)
                                   else cli.SERVER_ARGS)
        errors, parsed = cli.check_argv(flags, ["--model-path", "m"] + published)
        assert errors == [] and parsed["enforce_disable_flashinfer_allreduce_fusion"] is True
    else:
        assert published == [] and off not in flags  # no off switch: fusion auto-enabled there stays on


@pytest.mark.parametrize("release", RELEASES)
def test_cuda_graph_max_bs(release, flags_of):
    """Renamed per phase in 0.5.14 (old name kept as a deprecated alias), the alias dropped in 0.5.21."""
    flags = flags_of(release)
    version = version_tuple(release)
    argv = ["--model-path", "m", "--cuda-graph-max-bs", "64"]
    errors, parsed = cli.check_argv(flags, argv, allow_abbrev=True)
    if version < (0, 5, 14):
        assert errors == [] and parsed["cuda_graph_max_bs"] == 64
    elif version < (0, 5, 21):
        assert flags["--cuda-graph-max-bs"]["deprecated"]
        assert errors == [] and parsed["cuda_graph_max_bs_decode"] == 64
    else:
        # argparse itself would stop here: two flags start with it
        assert "--cuda-graph-max-bs" not in flags
        assert len(errors) == 1 and "ambiguous abbreviation of --cuda-graph-max-bs-decode, " \
            "--cuda-graph-max-bs-prefill" in errors[0]


@pytest.mark.parametrize("release", RELEASES)
def test_kimi_command_line_passes(release, flags_of):
    flags = flags_of(release)
    notes = []
    errors, parsed = cli.check_argv(flags, kimi_argv(flags), notes=notes)
    assert errors == []
    assert notes == []  # nothing deprecated in it
    assert parsed[flags["--tp-size"]["dest"]] == 8
    assert (parsed["speculative_algorithm"], parsed["speculative_num_steps"], parsed["speculative_eagle_topk"],
            parsed["speculative_num_draft_tokens"], parsed["mem_fraction_static"]) == ("EAGLE3", 3, 1, 4, 0.85)
    assert parsed.get("flashinfer_allreduce_fusion_backend", "trtllm") == "trtllm"


@pytest.mark.parametrize("release", RELEASES)
def test_mistakes_fail_with_the_reason(release, flags_of):
    flags = flags_of(release)
    bad_choice = ["--flashinfer-allreduce-fusion-backend", "nvlink"] if version_tuple(release) >= (0, 5, 14) \
        else ["--speculative-algorithm", "EAGLE9"]
    errors, _ = cli.check_argv(flags, ["--model-path", "m", "--speculative-num-step", "3", "--tp-size",
                                       "--port", "30000"] + bad_choice)
    assert len(errors) == 3, errors
    assert errors[0].startswith("unknown flag --speculative-num-step: ")
    assert "did you mean --speculative-num-steps?" in errors[0] and "sglang %s, looked up in" % release in errors[0]
    assert errors[1] == "--tp-size needs a value, got none (sglang %s, %s)" % (release, flags["--tp-size"]["source"])
    assert errors[2].startswith("%s: %r is not one of " % tuple(bad_choice))
    assert errors[2].endswith("(sglang %s, %s)" % (release, flags[bad_choice[0]]["source"]))


@pytest.mark.parametrize("release", RELEASES)
def test_an_extra_argument_cannot_override_the_roles_own(release, flags_of):
    # The role's arguments come first; an extra --host/--tensor-parallel-size would win in argparse unseen.
    flags = flags_of(release)
    for again in (["--host", "0.0.0.0"], ["--port=22"], ["--model", "/other"]):
        errors, _ = cli.check_argv(flags, kimi_argv(flags) + again)
        assert len(errors) == 1 and " again (" in errors[0], (again, errors)


@pytest.mark.parametrize("release, flag, refuses", [
    ("0.5.4", "--enable-ep-moe", True),  # DeprecatedAction raised ValueError(help) up to 0.5.7
    ("0.5.9", "--prefill-round-robin-balance", False),  # from 0.5.9 it warns
    ("0.5.19", "--enable-expert-distribution-metrics", True),  # ... unless registered with error_message=
])
def test_retired_flags(release, flag, refuses, flags_of):
    flags = flags_of(release)
    assert flags[flag]["deprecated"] and not flags[flag]["takes_value"]
    notes = []
    errors, _ = cli.check_argv(flags, ["--model-path", "m", flag], notes=notes)
    if refuses:
        assert len(errors) == 1 and errors[0].startswith("%s: this SGLang stops the launch on it: " % flag)
    else:
        assert errors == [] and notes == ["%s is deprecated in sglang %s, sglang/srt/server_args.py" % (flag, release)]


def test_optional_flags_are_kept_where_the_release_declares_them_and_left_out_elsewhere(pristine_venv_of):
    # sglang_server passes --enable-metrics this way: a release without it runs without metrics, not not at all.
    venv = pristine_venv_of(("sglang", "0.5.21"))  # read only: the run's shared venv
    argv = ["--model-path", "m", "--enable-metrics", "--enable-made-up-metrics"]
    result = run_module("sglang_server_args", {"venv": venv, "argv": argv,
                                               "optional": ["--enable-metrics", "--enable-made-up-metrics"]})
    assert not result.get("failed"), result
    assert result["argv"] == ["--model-path", "m", "--enable-metrics"]
    assert result["parsed"]["enable_metrics"] is True
    assert "--enable-made-up-metrics is not a flag of this sglang; left out" in result["warnings"]
    refused = run_module("sglang_server_args", {"venv": venv, "argv": argv, "optional": ["--port=1"]})
    assert refused["failed"] and "optional names flags without a value" in refused["msg"]


def test_module_through_ansible_on_a_real_venv(tmp_path, pristine_venv_of):
    venv = pristine_venv_of(("sglang", "0.5.21"))  # read only: the run's shared venv
    flags = cli.known_flags(wheels.site_packages(venv))

    result = run_module("sglang_server_args", {"venv": venv, "argv": kimi_argv(flags)}, check=True)
    assert not result.get("failed"), result
    assert result["changed"] is False and result["sglang_version"] == "0.5.21"
    assert result["flags_known"] == len(flags)
    assert result["parsed"]["tp_size"] == 8 and result["parsed"]["flashinfer_allreduce_fusion_backend"] == "trtllm"

    result = run_module("sglang_server_args", {"venv": venv, "argv": [
        "--model-path", "m", "--enable-flashinfer-allreduce-fusion"]})
    assert not result.get("failed"), result
    assert any("--enable-flashinfer-allreduce-fusion is deprecated in sglang 0.5.21" in warning
               for warning in result.get("warnings", [])), result

    result = run_module("sglang_server_args", {"venv": venv, "argv": [
        "--model-path", "m", "--speculative-num-step", "3", "--tp-size", "--cuda-graph-max-bs", "64"]})
    assert result["failed"] and result["changed"] is False
    assert len(result["errors"]) == 3, result["errors"]
    assert result["msg"].startswith("command line refused for sglang 0.5.21: unknown flag --speculative-num-step")
    assert "did you mean --speculative-num-steps?" in result["msg"]

    result = run_module("sglang_server_args", {"venv": wheels.make_venv(str(tmp_path / "empty"))})
    assert result["failed"] and "sglang is not installed in venv" in result["msg"]

    # Not installed yet (a dry run on a fresh host): said, not failed; the command line comes back unchecked.
    result = run_module("sglang_server_args", {"venv": str(tmp_path / "absent"), "argv": ["--model-path", "m"]})
    assert not result.get("failed") and result["venv_exists"] is False and result["argv"] == ["--model-path", "m"]
