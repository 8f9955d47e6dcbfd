"""scripts/device/build_wheelhouse.py, the device test bed's carry: which trim a wheel gets (a release's own before
its name's) and what a trimmed wheel still holds (every kept member byte for byte, RECORD without the dropped rows),
on synthetic wheels. The trims' completeness for the JIT modules the canaries build is checked where the real wheel
is (docs/allreduce-paths.md)."""
import io
import zipfile

from tests.helpers.script_module import load_file

bw = load_file("scripts/device/build_wheelhouse.py", "build_wheelhouse")


def test_a_release_of_its_own_is_trimmed_by_its_own_rule_and_others_by_their_name():
    assert bw.trim_for("flashinfer_python", "0.7.2") is bw.TRIMS["flashinfer-python==0.7.2"]
    assert bw.trim_for("flashinfer-python", "0.6.18") == {}  # the server's FlashInfer on the test bed stays whole
    assert bw.trim_for("sglang", "0.5.23") is bw.TRIMS["sglang==0.5.23"]
    assert bw.trim_for("sglang", "0.5.17") == {}
    assert bw.trim_for("Sglang_Kernel", "0.4.5") is bw.TRIMS["sglang-kernel"]


def wheel(tmp_path, members):
    path = tmp_path / "demo-1.0-py3-none-any.whl"
    record = "".join("%s,sha256=x,%d\n" % (name, len(data)) for name, data in members.items())
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as handle:
        for name, data in members.items():
            handle.writestr(name, data)
        handle.writestr("demo-1.0.dist-info/RECORD", record + "demo-1.0.dist-info/RECORD,,\n")
    return str(path)


def test_a_trimmed_wheel_keeps_every_other_member_stored_and_records_only_those(tmp_path):
    members = {"demo/__init__.py": b"x = 1\n", "demo/ext.so": b"\0" * 64, "demo/sub/ext.so": b"\1" * 8,
               "demo/data/big.cuh": b"// big\n" * 100, "demo/data/keep.cuh": b"// keep\n"}
    data, dropped, stripped = bw.repack(wheel(tmp_path, members), {"drop": ["demo/*.so", "demo/data/big*"]})
    assert sorted(dropped) == ["demo/data/big.cuh", "demo/ext.so", "demo/sub/ext.so"] and stripped == []
    with zipfile.ZipFile(io.BytesIO(data)) as trimmed:
        assert {i.compress_type for i in trimmed.infolist()} == {zipfile.ZIP_STORED}
        kept = {n: trimmed.read(n) for n in trimmed.namelist() if not n.endswith("RECORD")}
        record = trimmed.read("demo-1.0.dist-info/RECORD").decode().splitlines()
    assert kept == {"demo/__init__.py": b"x = 1\n", "demo/data/keep.cuh": b"// keep\n"}
    assert [row.split(",")[0] for row in record] == ["demo/__init__.py", "demo/data/keep.cuh",
                                                    "demo-1.0.dist-info/RECORD"]


def test_without_a_trim_the_wheel_is_only_restored_uncompressed(tmp_path):
    members = {"demo/__init__.py": b"x = 1\n", "demo/ext.so": b"\0" * 64}
    data, dropped, _ = bw.repack(wheel(tmp_path, members), {})
    with zipfile.ZipFile(io.BytesIO(data)) as whole:
        assert dropped == [] and {n: whole.read(n) for n in members} == members
