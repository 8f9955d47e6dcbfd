"""Prove a venv built on a base interpreter's site-packages imports the base's torch, at the intended version.

Run with the venv's own interpreter: ``<venv>/bin/python base_torch_smoke.py EXPECTED_VERSION``.
Fails when torch does not import, when its version differs from EXPECTED_VERSION (a local tag such as
"+cu130" is ignored unless EXPECTED_VERSION has one), when the torch imported lives inside the venv, or when the
venv's own site-packages hold a torch distribution (a lock that shadowed the base). Prints JSON; exits 1 on any.
"""
import glob
import json
import os
import sys


def version_matches(found, expected):
    if "+" in expected:
        return found == expected
    return found.split("+", 1)[0] == expected


def inside(path, prefix):
    path, prefix = os.path.realpath(path), os.path.realpath(prefix)
    return path == prefix or path.startswith(prefix + os.sep)


def judge(expected, version, torch_file, prefix, shadowing):
    problems = []
    if not version_matches(version, expected):
        problems.append("torch %s imported, %s intended" % (version, expected))
    if inside(torch_file, prefix):
        problems.append("torch was imported from the venv itself (%s), not from the base" % torch_file)
    if shadowing:
        problems.append("the venv holds its own torch distribution: %s" % ", ".join(shadowing))
    return problems


def main(expected):
    report = {"python": sys.executable, "prefix": sys.prefix, "expected": expected}
    try:
        import torch  # pylint: disable=import-outside-toplevel
    except Exception as exc:  # pylint: disable=broad-except
        report.update(ok=False, problems=["import torch failed: %s: %s" % (type(exc).__name__, exc)])
        print(json.dumps(report, sort_keys=True))
        return 1
    own = [p for p in sys.path if inside(p, sys.prefix) and p.endswith("site-packages")]
    shadowing = sorted(os.path.basename(d) for p in own for d in glob.glob(os.path.join(p, "torch-*.dist-info")))
    report.update(torch=torch.__version__, torch_file=torch.__file__, cuda=getattr(torch.version, "cuda", None))
    report["problems"] = judge(expected, torch.__version__, torch.__file__, sys.prefix, shadowing)
    report["ok"] = not report["problems"]
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1]))
