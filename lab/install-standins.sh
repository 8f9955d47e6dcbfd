#!/usr/bin/env bash
# Lab only: gives a host the SGLang stand-in server and the stand-in model directories.
#   lab/install-standins.sh lab-gpu1
# /opt/sglang-standin/: the stand-in (lab/standins/sglang_server_standin.py and its package sglang_standin/) and the
# flag reader it validates command lines with (module_utils/sglang_cli_args.py, the same code the role uses, with
# the pkg_versions.py it imports); /srv/models/: lab/models/ (as a
# model staged by other means, with <name>.manifest.json beside it: the collection scenario's path source); /srv/model-mirror/: the same models
# as a mirror serves them (<name>/<revision>/ with a manifest.json: name, size, sha256 per file), which
# lab-model-mirror.service (Python's http.server on 127.0.0.1:8090) serves to the sglang_model role's http source;
# /etc/sglang-standin/: its behaviour (config.json) and the environment its unit needs (standin.env).
set -euo pipefail
. "$(dirname "$0")/env.sh"
host=${1:?usage: $0 HOST}
[ -x "$LAB_ROOT/.venv/bin/python" ] || { echo "lab: no $LAB_ROOT/.venv (make setup)" >&2; exit 2; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -d "$stage/opt/sglang-standin" "$stage/srv/models" "$stage/etc/sglang-standin" \
  "$stage/etc/fusion-canary-replay" "$stage/usr/local/bin" "$stage/srv/model-mirror" \
  "$stage/etc/systemd/system/multi-user.target.wants"
# The fusion canary's stand-in replays results the real canary recorded on 2x H200 (pass, and a corrupted rank).
install -m 0755 "$LAB_DIR/standins/fusion-canary-replay" "$stage/usr/local/bin/"
install -m 0644 "$LAB_ROOT/tests/fixtures/device/h200x2_fusion_canary.json" "$stage/etc/fusion-canary-replay/pass.json"
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["results"]["canary_corrupt"], indent=1))' \
  "$LAB_ROOT/tests/fixtures/device/h200x2_fusion_probes.json" > "$stage/etc/fusion-canary-replay/fail.json"
echo pass > "$stage/etc/fusion-canary-replay/mode"
install -m 0755 "$LAB_DIR/standins/sglang_server_standin.py" "$stage/opt/sglang-standin/"
install -d "$stage/opt/sglang-standin/sglang_standin"
install -m 0644 "$LAB_DIR"/standins/sglang_standin/*.py "$stage/opt/sglang-standin/sglang_standin/"
# The Hugging Face Hub stand-in (the tests' own, tests/helpers/hf_standin.py, and the lab's runner beside it) with a
# token of this host's (root only; the role reads it through the hf source's token_file).
install -m 0755 "$LAB_DIR/standins/hf-hub-standin" "$stage/opt/sglang-standin/"
install -m 0644 "$LAB_ROOT/tests/helpers/hf_standin.py" "$stage/opt/sglang-standin/"
install -m 0644 "$LAB_ROOT/module_utils/sglang_cli_args.py" "$LAB_ROOT/module_utils/pkg_versions.py" \
  "$stage/opt/sglang-standin/"
cp -R "$LAB_DIR/models/kimi-k2.5-standin" "$LAB_DIR/models/kimi-k2.5-eagle3-standin" "$stage/srv/models/"
# The manifest sglang_model checks a revision against, written by the sglang_model_manifest module's own code
# (module_utils/model_manifest_writer.py, in the checkout's venv): every file but the manifest itself.
write_manifest() {  # write_manifest DIR FILE
  "$LAB_ROOT/.venv/bin/python" - "$LAB_ROOT/module_utils" "$1" "$2" <<'PY'
import sys
import ansible.module_utils
ansible.module_utils.__path__.append(sys.argv[1])
from ansible.module_utils import model_manifest_writer
model_manifest_writer.make(sys.argv[2], sys.argv[3])
PY
}
for model in kimi-k2.5-standin kimi-k2.5-eagle3-standin; do
  served="$stage/srv/model-mirror/$model/$LAB_MODEL_REVISION"
  mkdir -p "$served"
  cp -R "$LAB_DIR/models/$model/." "$served/"
  write_manifest "$served" "$served/manifest.json"
  # The same revision staged by other means, for the path source (molecule's collection scenario).
  write_manifest "$stage/srv/models/$model" "$stage/srv/models/$model.manifest.json"
done
chmod -R u=rwX,go=rX "$stage/srv/models"
chmod -R u=rwX,go=rX "$stage/srv/model-mirror"
for unit in lab-model-mirror.service lab-hf-hub.service; do
  install -m 0644 "$LAB_DIR/standins/$unit" "$stage/etc/systemd/system/"
  ln -s "../$unit" "$stage/etc/systemd/system/multi-user.target.wants/$unit"
done
# The seeds' speeds: 82-90 tok/s single stream without speculation, ~130 projected with EAGLE-3 + fusion; EAGLE-3
# on NCCL alone set apart (110), so the benchmark gate's auto trials pick fusion in the lab, not by noise. A short
# "loading" time (1 s; LAB_STANDIN_STARTUP_DELAY_S): the readiness wait is still exercised, and molecule's ~40
# restarts do not each wait for a model that is not there. The model has a greedy tie at the 4th new token, which
# fusion breaks the other way (as the real server's kernels do, docs/benchmark-gate.md): the gate must see it as a
# tie for fusion to win here.
printf '{"startup_delay_s": %s, "tokens_per_s": 130, "plain_tokens_per_s": 85, "accept_length": 2.0, "greedy_ties": [3], "allreduce_paths": {"nccl": {"tokens_per_s": 110}, "fusion": {"tie_break": "second"}}}\n' "${LAB_STANDIN_STARTUP_DELAY_S:-1}" > "$stage/etc/sglang-standin/config.json"
printf 'SGLANG_STANDIN_CLI_ARGS=/opt/sglang-standin\nSGLANG_STANDIN_CONFIG=/etc/sglang-standin/config.json\n' \
  > "$stage/etc/sglang-standin/standin.env"
printf 'LAB_DRAFT_COMMIT=%s\n' "$LAB_DRAFT_COMMIT" > "$stage/etc/sglang-standin/hf-hub.env"
chmod -R u=rwX,go=rX "$stage/etc/sglang-standin"
python3 -c 'import secrets; print("hf_lab_" + secrets.token_hex(16))' > "$stage/etc/sglang-standin/hf-token"
chmod 0600 "$stage/etc/sglang-standin/hf-token"
chmod -R u=rwX,go=rX "$stage/etc/fusion-canary-replay"
lab_copy_in "$host" "$stage" opt/sglang-standin srv/models srv/model-mirror etc/sglang-standin \
  etc/fusion-canary-replay usr/local/bin/fusion-canary-replay etc/systemd/system/lab-model-mirror.service \
  etc/systemd/system/multi-user.target.wants/lab-model-mirror.service etc/systemd/system/lab-hf-hub.service \
  etc/systemd/system/multi-user.target.wants/lab-hf-hub.service
# A container already running (reused by lab/up.sh) starts the mirror now; a new one starts it when it boots.
if [ "$(podman container inspect --format '{{.State.Running}}' "$host" 2>/dev/null)" = true ]; then
  podman exec "$host" systemctl daemon-reload
  podman exec "$host" systemctl restart lab-model-mirror.service lab-hf-hub.service
fi
echo "lab: $host has the SGLang stand-in server and stand-in models"
