"""Prove a venv holds exactly what its lock pins, without importing sglang or torch.

Run with the venv's own interpreter: ``<venv>/bin/python lock_smoke.py LOCK``.
Checks every pin against installed metadata, that the top-level packages can
be found, and reads sglang's own ``_version.py`` by path (``import sglang``
would pull in torch). Prints JSON; exits 1 on any mismatch.
"""
import importlib.metadata
import importlib.util
import json
import os
import re
import sys

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path):
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = PIN.match(line)
            if match:
                yield normalize(match.group(1)), match.group(2)


def file_version(package):
    """__version__ from <package>/_version.py, loaded by path without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "_version.py")
    if not os.path.exists(path):
        return None
    loader = importlib.util.spec_from_file_location("_lock_smoke_version", path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return getattr(module, "__version__", None)


def main(lock):
    installed = {}
    for dist in importlib.metadata.distributions():  # sys.path order: the first one is the one imported
        installed.setdefault(normalize(dist.metadata["Name"]), dist.version)
    report = {"python": sys.executable, "pinned": 0, "mismatched": [], "missing": [], "versions": {}}
    for name, version in pins(lock):
        report["pinned"] += 1
        have = installed.get(name)
        report["versions"][name] = have
        if have is None:
            report["missing"].append(name)
        elif have != version:
            report["mismatched"].append("%s: lock %s, installed %s" % (name, version, have))
    for package, dist in (("sglang", "sglang"), ("flashinfer", "flashinfer-python")):
        if dist in report["versions"] and importlib.util.find_spec(package) is None:
            report["missing"].append("import %s" % package)
    if "sglang" in report["versions"]:
        report["sglang_file_version"] = file_version("sglang")
        if report["sglang_file_version"] not in (None, report["versions"]["sglang"]):
            report["mismatched"].append("sglang/_version.py says %s" % report["sglang_file_version"])
    report["ok"] = report["pinned"] > 0 and not report["missing"] and not report["mismatched"]
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
