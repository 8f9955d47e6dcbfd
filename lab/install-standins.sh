#!/usr/bin/env bash
# Lab only: gives a host the SGLang stand-in server and the stand-in model directories.
#   lab/install-standins.sh lab-gpu1
# /opt/sglang-standin/: the stand-in (lab/standins/sglang_server_standin.py) and the flag reader it validates
# command lines with (module_utils/sglang_cli_args.py, the same code the role uses); /srv/models/: lab/models/;
# /etc/sglang-standin/: its behaviour (config.json) and the environment its unit needs (standin.env).
set -euo pipefail
. "$(dirname "$0")/env.sh"
host=${1:?usage: $0 HOST}
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -d "$stage/opt/sglang-standin" "$stage/srv/models" "$stage/etc/sglang-standin"
install -m 0755 "$LAB_DIR/standins/sglang_server_standin.py" "$stage/opt/sglang-standin/"
install -m 0644 "$LAB_ROOT/module_utils/sglang_cli_args.py" "$stage/opt/sglang-standin/"
cp -R "$LAB_DIR/models/kimi-k2.5-standin" "$LAB_DIR/models/kimi-k2.5-eagle3-standin" "$stage/srv/models/"
chmod -R u=rwX,go=rX "$stage/srv/models"
printf '{"startup_delay_s": %s}\n' "${LAB_STANDIN_STARTUP_DELAY_S:-3}" > "$stage/etc/sglang-standin/config.json"
printf 'SGLANG_STANDIN_CLI_ARGS=/opt/sglang-standin\nSGLANG_STANDIN_CONFIG=/etc/sglang-standin/config.json\n' \
  > "$stage/etc/sglang-standin/standin.env"
chmod -R u=rwX,go=rX "$stage/etc/sglang-standin"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -c opt/sglang-standin srv/models etc/sglang-standin |
  podman cp - "$host:/"
echo "lab: $host has the SGLang stand-in server and stand-in models"
