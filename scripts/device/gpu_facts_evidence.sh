#!/usr/bin/env bash
# Evidence that nvidia_gpu_facts reads a real GPU host, made on a machine with GPUs and no network:
#   OUT=/some/dir scripts/device/gpu_facts_evidence.sh
# 1. saves the raw nvidia-smi outputs in $OUT/raw/ (named like a stand-in profile);
# 2. installs ansible-core offline from the wheels carried in .cache/device-wheels (no index is reachable);
# 3. runs `ansible localhost -c local -M library -m nvidia_gpu_facts` with this repo's ansible.cfg;
# 4. writes $OUT/$EVIDENCE_NAME: {meta, result (the module's result), raw (the outputs of step 1)}.
# Falls back, saying so, when python3 has no venv module (wheels unpacked onto PYTHONPATH) or no ansible-core
# can run at all (then only the parsers run: $OUT/parser_only_summary.json, exit 2).
set -uo pipefail   # no -e: keep collecting evidence after a failure
cd "$(dirname "$0")/../.." || exit 1
REPO=$PWD
OUT=${OUT:?set OUT to the folder for the evidence}
WHEELS=${DEVICE_WHEELS:-$REPO/.cache/device-wheels}
EVIDENCE_NAME=${EVIDENCE_NAME:-h200x2_nvidia_gpu_facts.json}
WORK=${DEVICE_WORK:-$REPO/.cache/device-evidence}
mkdir -p "$OUT/raw" "$WORK"
say() { echo "gpu_facts_evidence: $*" >&2; }

# A python3 that ansible-core can run on: 2.19 needs 3.11+, the carried 2.17 takes 3.10 (DEVICE_PYTHON forces one).
PY=${DEVICE_PYTHON:-}
[ -n "$PY" ] || for candidate in python3:11 python3.13:11 python3.12:11 python3.11:11 python3.14:11 python3:10 python3.10:10; do
  if command -v "${candidate%:*}" > /dev/null &&
     "${candidate%:*}" -c "import sys; sys.exit(sys.version_info < (3, ${candidate#*:}))" 2> /dev/null; then
    PY=$(command -v "${candidate%:*}"); break
  fi
done
[ -n "$PY" ] || PY=$(command -v python3) || { say "no python3 on this machine"; exit 1; }
say "python: $PY ($("$PY" -V 2>&1))"

# 1. The raw outputs, exactly what the module will parse (the query fields come from module_utils).
SMI=$(command -v nvidia-smi) || { say "no nvidia-smi in PATH"; exit 1; }
FIELDS=$("$PY" -c 'import sys; sys.path.insert(0, "module_utils"); import nvidia_smi; print(",".join(nvidia_smi.QUERY_FIELDS))')
"$SMI" > "$OUT/raw/nvidia-smi.txt" 2>&1
"$SMI" -q -x > "$OUT/raw/q-x.xml"
"$SMI" --query-gpu="$FIELDS" --format=csv > "$OUT/raw/query-gpu.csv"
"$SMI" topo -m > "$OUT/raw/topo-m.txt"
"$SMI" topo -p2p r > "$OUT/raw/topo-p2p-r.txt"
"$SMI" nvlink -s > "$OUT/raw/nvlink-s.txt" 2>&1 || true   # for humans; not every host has NVLink
"$SMI" --version > "$OUT/raw/version.txt" 2>&1

# 2. ansible-core from the carried wheels, never from an index.
# Pinned per Python: pip with --find-links alone does not step back from a wheel whose Requires-Python fails.
SPEC=$("$PY" -c 'import sys; print("ansible-core==2.19.*" if sys.version_info >= (3, 11) else "ansible-core==2.17.*")')
ANSIBLE=()
[ -d "$WHEELS" ] || say "no wheels at $WHEELS (carry .cache/device-wheels to this machine)"
if [ -d "$WHEELS" ] && "$PY" -m venv --clear "$WORK/venv" > "$WORK/venv.log" 2>&1 &&
   "$WORK/venv/bin/python" -m pip install -q --no-index --find-links "$WHEELS" "$SPEC" \
     >> "$WORK/venv.log" 2>&1; then
  ANSIBLE=("$WORK/venv/bin/ansible")
  HOW="venv + pip install --no-index"
elif [ -d "$WHEELS" ]; then
  say "venv/pip failed (see $WORK/venv.log, copied to \$OUT); unpacking the wheels onto PYTHONPATH instead"
  cp "$WORK/venv.log" "$OUT/venv.log" 2> /dev/null
  rm -rf "$WORK/pylib"
  # Pure wheels plus this Python's binary ones; cryptography is not needed to run one ad-hoc module.
  if "$PY" - "$WHEELS" "$WORK/pylib" <<'EOF'
import glob, os, sys, zipfile
wheels, target = sys.argv[1:]
tag = "-cp%d%d-" % sys.version_info[:2]
core, resolvelib = ("2.19.", "1.2.") if sys.version_info >= (3, 11) else ("2.17.", "1.0.")
for path in sorted(glob.glob(os.path.join(wheels, "*.whl"))):
    name = os.path.basename(path)
    dist, version = name.split("-")[:2]
    if dist in ("cryptography", "cffi", "pycparser") or ("-cp3" in name and tag not in name) \
            or (dist == "ansible_core" and not version.startswith(core)) \
            or (dist == "resolvelib" and not version.startswith(resolvelib)):
        continue
    zipfile.ZipFile(path).extractall(target)
EOF
  then
    export PYTHONPATH="$WORK/pylib"
    ANSIBLE=("$PY" -m ansible adhoc)
    HOW="wheels unpacked onto PYTHONPATH"
  fi
fi
if [ ${#ANSIBLE[@]} -eq 0 ] || ! "${ANSIBLE[@]}" --version > "$OUT/ansible-version.txt" 2>&1; then
  say "no ansible-core could run here; only the parsers run (no module evidence)"
  "$PY" - "$OUT" <<'EOF'
import json, os, sys
sys.path.insert(0, "module_utils")
import nvidia_smi as n
raw = lambda name: open(os.path.join(sys.argv[1], "raw", name), encoding="utf-8").read()
parts = (n.parse_query_xml(raw("q-x.xml")), n.parse_query_csv(raw("query-gpu.csv")),
         n.parse_topo_matrix(raw("topo-m.txt")), n.parse_p2p_matrix(raw("topo-p2p-r.txt")))
json.dump(n.summarize(*parts), open(os.path.join(sys.argv[1], "parser_only_summary.json"), "w"), indent=1)
EOF
  exit 2
fi
say "ansible-core: $(head -1 "$OUT/ansible-version.txt") ($HOW)"

# 3. The module, through Ansible, the way a play runs it; the minimal callback prints "host | STATUS => {json}".
ANSIBLE_CONFIG="$REPO/ansible.cfg" ANSIBLE_STDOUT_CALLBACK=ansible.builtin.minimal ANSIBLE_CALLBACK_RESULT_FORMAT=json \
  "${ANSIBLE[@]}" localhost -c local -M "$REPO/library" -m nvidia_gpu_facts > "$OUT/ansible.out" 2> "$OUT/ansible.err"
rc=$?

# 4. One JSON file: the result and the raw outputs it came from (the test re-parses them).
"$PY" - "$OUT" "$EVIDENCE_NAME" "$rc" "$HOW" "$FIELDS" <<'EOF'
import datetime, json, os, platform, sys
out, name, rc, how, fields = sys.argv[1:]
raw = lambda f: open(os.path.join(out, "raw", f), encoding="utf-8").read()
printed = open(os.path.join(out, "ansible.out"), encoding="utf-8").read()
try:
    result = json.loads(printed[printed.index(" => ") + 4:])
except ValueError:
    result = {"failed": True, "msg": "ansible printed no result (see ansible.out and ansible.err)"}
evidence = {
    "meta": {"captured_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
             "python": platform.python_version(), "ansible_rc": int(rc), "ansible_install": how,
             "ansible_version": open(os.path.join(out, "ansible-version.txt")).readline().strip(),
             "command": "ansible localhost -c local -M library -m nvidia_gpu_facts"},
    "result": result,
    "raw": {"nvidia-smi -q -x": raw("q-x.xml"),
            "nvidia-smi --query-gpu=%s --format=csv" % fields: raw("query-gpu.csv"),
            "nvidia-smi topo -m": raw("topo-m.txt"), "nvidia-smi topo -p2p r": raw("topo-p2p-r.txt")},
}
json.dump(evidence, open(os.path.join(out, name), "w"), indent=1, sort_keys=True)
facts = result.get("ansible_facts", {}).get("nvidia_gpu", {})
print("gpu_facts_evidence: %s: %s GPU(s), cc %s, nvlink %s, all_p2p_ok %s, driver %s%s" % (
    name, facts.get("gpu_count"), facts.get("compute_capabilities"), facts.get("nvlink"),
    facts.get("all_p2p_ok"), facts.get("driver_version"), " - FAILED: %s" % result.get("msg") if result.get("failed") else ""))
EOF
exit "$rc"
