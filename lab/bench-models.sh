#!/usr/bin/env bash
# Time to stage one model revision of SIZE_MB (default 2048, four shards of random bytes) on N fleet lab hosts
# (default 4; inventories/fleet/fleet.py), two ways, each on empty hosts:
#   mirror   every host fetches it over HTTP from a mirror on the first host (Python's http.server)
#   fanout   the first host fetches it from that mirror, the others copy it from the hosts that hold it (the
#            sglang_model role's peer source: rsync over SSH, in computed rounds, sglang_model_peer_fanout 1)
# Both run the sglang_model role alone (lab/bench-models.yml) and verify every file's sha256. Prints one line per way:
# wall seconds, and the seconds per GB staged on all hosts. All hosts share this machine's disk and cores, so the
# figures compare the two ways on this machine; they say nothing of a real network.
#   lab/bench-models.sh             N=4, SIZE_MB=2048
#   lab/bench-models.sh 8 1024      N=8, SIZE_MB=1024
set -euo pipefail
. "$(dirname "$0")/env.sh"
cd "$LAB_ROOT"
export PATH="$LAB_ROOT/.venv/bin:$PATH" ANSIBLE_CONFIG="$LAB_ROOT/ansible.cfg"
size=${1:-4} mb=${2:-2048} port=8093
export LAB_LABEL=sglang-lab-models FLEET_SIZE=$size
LAB_HOSTS="$(inventories/fleet/fleet.py --lab-hosts)"
export LAB_HOSTS
cleanup() { "$LAB_DIR/down.sh" > /dev/null || true; }
trap cleanup EXIT
"$LAB_DIR/up.sh" > "$LAB_CACHE/bench-models-up.log"
seed="$(inventories/fleet/fleet.py --list | python3 -c 'import json, sys; print(sorted(json.load(sys.stdin)["blackwell"]["hosts"])[0])')"
# The model and its manifest in the seed's mirror folder, served on every interface for the other hosts.
podman exec "$seed" sh -c "set -e; d=/srv/bench-mirror/bench-model/r1; mkdir -p \$d
  for i in 1 2 3 4; do head -c $((mb / 4))M /dev/urandom > \$d/model-0000\$i-of-00004.safetensors; done
  echo '{}' > \$d/config.json
  python3 -c 'import hashlib, json, os, sys; d = sys.argv[1]; names = sorted(os.listdir(d))
json.dump({\"files\": [{\"name\": n, \"size\": os.path.getsize(os.path.join(d, n)), \"sha256\": hashlib.file_digest(open(os.path.join(d, n), \"rb\"), \"sha256\").hexdigest()} for n in names]}, open(os.path.join(d, \"manifest.json\"), \"w\"))' \$d
  setsid python3 -m http.server $port --directory /srv/bench-mirror > /dev/null 2>&1 < /dev/null &"
for mode in mirror fanout; do
  for spec in $LAB_HOSTS; do podman exec "${spec%%:*}" rm -rf /var/lib/sglang-bench-models; done
  start=$(date +%s.%N)
  ansible-playbook -i inventories/fleet lab/bench-models.yml -e "bench_mode=$mode bench_port=$port" \
    > "$LAB_CACHE/bench-models-$mode.log" 2>&1 || { tail -n 30 "$LAB_CACHE/bench-models-$mode.log" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c 'import sys; mode, n, mb, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[5]) - float(sys.argv[4])
print("%-6s %d hosts x %d MB: %.1f s (%.2f s per GB staged)" % (mode, n, mb, s, s / (n * mb / 1024.0)))' \
    "$mode" "$size" "$mb" "$start" "$end"
done
