"""Refusals and foreign edits, on a real sglang 0.5.21 + flashinfer-python 0.6.18 venv.

Every refusal must leave every guard file byte-identical (hashes compared).
"""
import hashlib
import os
import stat

import pytest

from ansible.module_utils import atomic_files, fusion_patcher
from tests.helpers import wheels
from tests.helpers.ansible_run import run_module
from tests.helpers.gate_check import gate_report

pytestmark = pytest.mark.wheels

RELEASE = "0.5.21"
G1 = "sglang/srt/layers/layer_boundary/residual/add_norm.py"
FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"


@pytest.fixture(scope="module")
def pristine_venv(pristine_venv_of):
    """The run's shared venv of RELEASE and the flashinfer-python it pins (tests/integration/conftest.py): copied."""
    return pristine_venv_of(("sglang", RELEASE),
                            ("flashinfer-python", wheels.pinned_flashinfer(wheels.wheel("sglang", RELEASE))))


@pytest.fixture
def venv(pristine_venv, tmp_path):
    """A private copy of the pristine venv (copying beats reinstalling)."""
    return wheels.copy_venv(pristine_venv, tmp_path / "venv")


def hashes(venv):
    site = wheels.site_packages(venv)
    return {rel: hashlib.sha256(open(os.path.join(site, rel), "rb").read()).hexdigest() for rel in (G1, FUSION)}


def assert_refused(result, *needles):
    assert result.get("failed") and not result["changed"], result
    for needle in needles:
        assert needle in result["msg"], (needle, result["msg"])


def test_old_flashinfer_is_refused_with_the_reason(venv):
    wheels.pip_install(venv, wheels.wheel("flashinfer-python", "0.6.3"))
    before = hashes(venv)
    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert_refused(result, "flashinfer-python 0.6.3", "0.6.17", "empty body", "garbage")
    assert hashes(venv) == before


def test_minimum_cannot_be_lowered_below_the_safe_floor(venv):
    before = hashes(venv)
    result = run_module("sglang_fusion_patch", {"venv": venv, "min_flashinfer_version": "0.6.3"})
    assert_refused(result, "below 0.6.17")
    assert hashes(venv) == before


def test_minimum_can_be_raised(venv):
    result = run_module("sglang_fusion_patch", {"venv": venv, "min_flashinfer_version": "0.7.0"})
    assert_refused(result, "flashinfer-python 0.6.18", "older than 0.7.0")


def test_restructured_guard_is_refused_naming_file_and_what_was_sought(venv):
    site = wheels.site_packages(venv)
    path = os.path.join(site, G1)
    text = open(path, encoding="utf-8").read()
    assert "(_is_sm90_supported or _is_sm100_supported)" in text
    open(path, "w", encoding="utf-8").write(
        text.replace("(_is_sm90_supported or _is_sm100_supported)", "(_arch() in (90, 100))"))
    before = hashes(venv)
    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert_refused(result, "no G1 runtime architecture guard", "apply_flashinfer_allreduce_fusion",
                   "add_norm.py", "nothing written")
    assert hashes(venv) == before


def test_read_only_second_file_means_no_file_changes(venv):
    site = wheels.site_packages(venv)
    path = os.path.join(site, FUSION)
    os.chmod(path, 0o444)
    before = hashes(venv)
    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert_refused(result, "flashinfer_comm_fusion.py is read-only")
    assert hashes(venv) == before
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o444


def test_venv_without_sglang_is_refused(tmp_path):
    venv = wheels.make_venv(str(tmp_path / "bare"), wheels.wheel("flashinfer-python", "0.6.18"))
    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert_refused(result, "sglang is not installed", venv)
    assert not os.path.exists(os.path.join(venv, ".sglang-fusion-patch"))


def test_hand_applied_sed_is_recognised_not_doubled(venv):
    """The seeds' sed added an undefined name; the module keeps the gate and defines the flag."""
    site = wheels.site_packages(venv)
    path = os.path.join(site, G1)
    text = open(path, encoding="utf-8").read()
    sed = text.replace("(_is_sm90_supported or _is_sm100_supported)",
                       "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)")
    open(path, "w", encoding="utf-8").write(sed)
    assert gate_report(sed)[1] == ["_is_sm120_supported"]  # the hand patch alone would NameError on SM120

    result = run_module("sglang_fusion_patch", {"venv": venv})
    assert result["changed"], result
    g1 = [s for s in result["sites"] if s["gate"] == "G1"]
    assert [s["status"] for s in g1] == ["already_admitted"]
    patched = open(path, encoding="utf-8").read()
    report, unresolved = gate_report(patched)
    assert not unresolved
    assert [text.count("sm120") for _f, text, _a in report] == [1]

    run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"})
    assert open(path, encoding="utf-8").read() == sed  # pre-patch bytes include the hand edit


def test_absent_leaves_foreign_edits_alone(venv):
    site = wheels.site_packages(venv)
    assert run_module("sglang_fusion_patch", {"venv": venv})["changed"]
    path = os.path.join(site, FUSION)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n# edited by someone else\n")
    edited = open(path, "rb").read()
    result = run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"})
    assert result["changed"]  # add_norm.py is still ours and is restored
    assert result["foreign_files"] == [path]
    assert open(path, "rb").read() == edited
    again = run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"})
    assert not again["changed"] and again["foreign_files"] == [path]


def test_reinstall_over_patched_file_is_repatched(venv):
    sglang = wheels.wheel("sglang", RELEASE)
    assert run_module("sglang_fusion_patch", {"venv": venv})["changed"]
    wheels.pip_install(venv, "--force-reinstall", sglang)
    assert run_module("sglang_fusion_patch", {"venv": venv})["changed"]
    assert not run_module("sglang_fusion_patch", {"venv": venv})["changed"]


def test_absent_after_a_reinstall_cleans_the_record_and_says_it_changed(venv):
    # The files hold their original bytes again; the patch record still names them and is rewritten, which the
    # server's fingerprint sees: changed, in a dry run too, and the next run has nothing left to do.
    assert run_module("sglang_fusion_patch", {"venv": venv})["changed"]
    wheels.pip_install(venv, "--force-reinstall", wheels.wheel("sglang", RELEASE))
    before = hashes(venv)
    dry = run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"}, check=True)
    assert dry["changed"] and "would clean the state record" in dry["msg"], dry
    result = run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"})
    assert result["changed"] and "state record cleaned" in result["msg"], result
    assert hashes(venv) == before
    assert not run_module("sglang_fusion_patch", {"venv": venv, "state": "absent"})["changed"]


def test_failure_between_two_file_writes_leaves_every_file_as_it_was(venv, monkeypatch):
    before = hashes(venv)
    real_replace = atomic_files._Target.replace  # the rename of one staged file onto its target
    calls = []

    site = wheels.site_packages(venv)

    def failing_second_replace(target, tmp):
        if os.path.abspath(target.path).startswith(site):
            calls.append(target.path)
        if len(calls) == 2 and calls[-1] == target.path:
            raise OSError(28, "No space left on device (injected)")
        return real_replace(target, tmp)

    monkeypatch.setattr(atomic_files._Target, "replace", failing_second_replace)
    with pytest.raises(atomic_files.TransactionError) as raised:
        fusion_patcher.apply(venv)
    monkeypatch.setattr(atomic_files._Target, "replace", real_replace)
    assert "restored" in str(raised.value)
    assert len(calls) >= 3  # two forward writes, then the restore of the first
    assert hashes(venv) == before
    leftovers = [n for rel in (G1, FUSION) for n in os.listdir(os.path.dirname(os.path.join(site, rel)))
                 if n.endswith(".tmp")]
    assert leftovers == []
    assert not os.path.exists(os.path.join(venv, ".sglang-fusion-patch"))
