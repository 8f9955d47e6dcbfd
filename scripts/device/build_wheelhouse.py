#!/usr/bin/env python3
"""Assemble the offline wheelhouse for the real SGLang server on the GPU test bed, from real PyPI wheels.

The test bed's tree travels with at most 64 MiB, so some wheels are trimmed for the test (never for production,
never committed): files the server on one SM90 machine never loads are left out, debug symbols stripped. Every
other wheel is the real one. All are stored uncompressed and packed as one .tar.xz (xz over the whole set is far
smaller than each wheel's own deflate).

    build_wheelhouse.py LOCK --download-dir .cache/device-wheels --out .device/carry/wheelhouse.tar.xz
LOCK: exact pins (name==version), the lock sglang_install installs on the test bed. Extra wheels that travel but
are not in the lock (ansible-core for running the roles there) come with --extra name==version.
Prints JSON: each wheel, its size before and after, what was trimmed.
"""
import argparse
import fnmatch
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile

PLATFORM_ARGS = ["--only-binary=:all:", "--no-deps", "--python-version", "3.12", "--implementation", "cp"] + [
    arg for tag in ("manylinux_2_35", "manylinux_2_34", "manylinux_2_31", "manylinux_2_28", "manylinux_2_27",
                    "manylinux_2_24", "manylinux_2_17", "manylinux2014", "manylinux1", "linux")
    for arg in ("--platform", tag + "_x86_64")]

# What each trimmed wheel leaves out (fnmatch on member names) and which shared objects lose debug symbols.
TRIMS = {
    # FlashAttention 3 (1.1 GB, imported lazily; the test uses triton attention), the SM100 build and InfLLM-V2's
    # attention (29 MB, loaded by infllm_v2/_loader.py only when that backend is called).
    "sglang-kernel": {"drop": ["sgl_kernel/flash_ops.abi3.so", "sgl_kernel/sm100/*", "sgl_kernel/infllm_ops*.so"],
                      "strip": []},
    # The static library is for C++ users; the bindings carry debug symbols.
    "xgrammar": {"drop": ["xgrammar/lib/*.a"], "strip": ["xgrammar/*.so"]},
    # Mistral's tokenizer vocabularies (the test model is not a Mistral model).
    "mistral-common": {"drop": ["mistral_common/data/tekken_*.json"], "strip": []},
    # Translations of country names (the databases themselves stay).
    "pycountry": {"drop": ["pycountry/locales/*"], "strip": []},
    # The all-reduce canaries' carry (allreduce-canary-h200-cp312.txt), keyed by release: FlashInfer's JIT sources
    # and artifacts for sampling, KDA/GDN, DeepSeek-V4, FMHA and MoE kernels; the canaries build only trtllm_comm
    # and pcie_ipc, whose sources (csrc/trtllm_*allreduce*.cu, csrc/pcie_ipc*) and headers all stay.
    "flashinfer-python==0.7.2": {"drop": ["flashinfer/data/csrc/cake_sampling/*", "flashinfer/data/csrc/kda/*",
                                          "flashinfer/data/csrc/cake_dsv4/*", "flashinfer/data/csrc/fused_moe/*",
                                          "flashinfer/data/csrc/cake_fmha/*", "flashinfer/data/csrc/gdn/*",
                                          "flashinfer/fused_moe/backends/cudnn_frost/artifacts/*",
                                          "flashinfer/data/cutlass/examples/*"], "strip": []},
    # The canary reads SGLang's source to mirror its call and never imports it: its compiled extensions stay out.
    "sglang==0.5.23": {"drop": ["sglang/*.so"], "strip": []},
}
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def trim_for(name, version):
    """The trim of one wheel: its release's own (name==version), else the name's, else none."""
    return TRIMS.get("%s==%s" % (normalize(name), version)) or TRIMS.get(normalize(name), {})


def read_pins(path):
    with open(path, encoding="utf-8") as handle:
        return [(m.group(1), m.group(2)) for m in map(PIN.match, handle) if m]


def find_wheel(directory, name, version):
    for filename in sorted(os.listdir(directory)):
        parts = filename[:-4].split("-") if filename.endswith(".whl") else []
        if len(parts) >= 5 and normalize(parts[0]) == normalize(name) and parts[1] == version:
            return os.path.join(directory, filename)
    return None


def download(directory, pins):
    wanted = ["%s==%s" % pin for pin in pins if not find_wheel(directory, *pin)]
    if wanted:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", directory] + PLATFORM_ARGS + wanted,
                       check=True)


def strip_debug(data):
    with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as handle:
        handle.write(data)
    try:
        subprocess.run(["strip", "--strip-debug", handle.name], check=True)
        with open(handle.name, "rb") as stripped:
            return stripped.read()
    finally:
        os.unlink(handle.name)


def repack(path, trim):
    """The wheel's bytes, stored uncompressed, without the dropped members (RECORD rows follow)."""
    dropped, stripped = [], []
    out = io.BytesIO()
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        record_name = next(n for n in source.namelist() if n.endswith(".dist-info/RECORD"))
        changed = set()
        for info in source.infolist():
            if info.filename == record_name:
                continue
            if any(fnmatch.fnmatch(info.filename, pattern) for pattern in trim.get("drop", [])):
                dropped.append(info.filename)
                continue
            data = source.read(info)
            if any(fnmatch.fnmatch(info.filename, pattern) for pattern in trim.get("strip", [])):
                data = strip_debug(data)
                stripped.append(info.filename)
                changed.add(info.filename)
            info.compress_type = zipfile.ZIP_STORED
            target.writestr(info, data)
        rows = []
        for row in source.read(record_name).decode().splitlines():
            member = row.split(",", 1)[0]
            if member in dropped:
                continue
            rows.append(member + ",," if member in changed else row)
        target.writestr(record_name, "\n".join(rows) + "\n")
    return out.getvalue(), dropped, stripped


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock")
    parser.add_argument("--extra", action="append", default=[], help="name==version of a wheel outside the lock")
    parser.add_argument("--download-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    pins = read_pins(args.lock) + [tuple(extra.split("==", 1)) for extra in args.extra]
    os.makedirs(args.download_dir, exist_ok=True)
    download(args.download_dir, pins)
    report = {"wheels": [], "lock": os.path.basename(args.lock)}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with tarfile.open(args.out, "w:xz", preset=9) as tar:
        for name, version in pins:
            path = find_wheel(args.download_dir, name, version)
            if path is None:
                raise SystemExit("no wheel for %s==%s in %s" % (name, version, args.download_dir))
            data, dropped, stripped = repack(path, trim_for(name, version))
            member = tarfile.TarInfo("wheelhouse/" + os.path.basename(path))
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
            report["wheels"].append({"wheel": os.path.basename(path), "pypi_bytes": os.path.getsize(path),
                                     "stored_bytes": len(data), "dropped": dropped, "stripped": stripped})
    report["archive_bytes"] = os.path.getsize(args.out)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
