"""Check that a wheelhouse directory holds a wheel for every exact pin, before an offline install starts.

Run on the target: ``python3 wheelhouse_check.py DIR PINS_JSON`` where PINS_JSON is a JSON list of
"name==version" strings. Matches wheel file names as pip does (PEP 427/503 normalization: name lowercased,
runs of -_. are one separator; the version compared after PEP 440 normalization where `packaging` is there).
Prints JSON {ok, wheels, missing}; exits 1 when a pin has no wheel or the directory is unusable.
"""
import json
import os
import re
import sys


def normalize_name(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_version(version):
    try:
        from packaging.version import InvalidVersion, Version  # pylint: disable=import-outside-toplevel
    except ImportError:
        return version.lower()
    try:
        return str(Version(version))
    except InvalidVersion:
        return version.lower()


def wheel_key(filename):
    """(name, version) of a wheel file name, or None for anything else."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) not in (5, 6):
        return None
    return normalize_name(parts[0]), normalize_version(parts[1])


def missing_pins(pins, filenames):
    have = {key for key in map(wheel_key, filenames) if key}
    missing = []
    for pin in pins:
        name, _sep, version = pin.partition("==")
        name = re.sub(r"\[.*\]$", "", name.strip())
        if (normalize_name(name), normalize_version(version.strip())) not in have:
            missing.append(pin)
    return missing


def main(directory, pins_json):
    try:
        pins = json.loads(pins_json)
        filenames = os.listdir(directory)
    except (ValueError, OSError) as exc:
        print(json.dumps({"ok": False, "error": str(exc), "wheels": 0, "missing": []}))
        return 1
    missing = missing_pins(pins, filenames)
    report = {"ok": not missing, "wheels": sum(name.endswith(".whl") for name in filenames), "missing": missing}
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
