#!/usr/bin/env bash
# The lab seen as an operator sees a fleet: a real Prometheus (Debian's, installed by lab/install-host-deps.sh) on
# this machine scraping every lab host's node_exporter (Debian's prometheus-node-exporter, in the lab image, reading
# /var/lib/prometheus/node-exporter) and every server's /metrics, with the collection's alert rules loaded.
#   LAB_HOSTS="drift-gpu1:2231:... drift-gpu2:2232:..." lab/monitoring.sh start DIR   prints the Prometheus URL
#   lab/monitoring.sh stop DIR
# DIR holds its configuration, TSDB, logs and process ids (nothing outside it). What differs from a fleet, lab only:
#   - the servers listen on 127.0.0.1 in their hosts (sglang_server_host): each is reached through an SSH tunnel
#     from this machine (127.0.0.1:LAB_MONITORING_TUNNEL_BASE+i), with its target labelled instance=<host name>;
#   - node_exporter is reached at the container's address on podman's bridge, labelled instance=<host name>;
#   - the drift checks this machine runs write their textfile to DIR/textfile, which a node_exporter of this
#     machine serves (the lab image's binary, copied out: job node, instance=control).
# LAB_MONITORING_PORT (default 19090): Prometheus' port on 127.0.0.1; its ports stay below the kernel's ephemeral
# range (32768-60999), where a test's "any free port" could take one first. Scrapes and rule evaluations every second.
set -euo pipefail
. "$(dirname "$0")/env.sh"
action=${1:?usage: $0 start|stop DIR}
dir=${2:?usage: $0 start|stop DIR}
port=${LAB_MONITORING_PORT:-19090}
tunnel_base=${LAB_MONITORING_TUNNEL_BASE:-19300}
node_port=${LAB_MONITORING_NODE_PORT:-19100}
server_port=30000  # sglang_server_port, the lab's

stop() {
  local pidfile sock
  for pidfile in "$dir"/*.pid; do
    [ -e "$pidfile" ] || continue
    kill "$(cat "$pidfile")" 2> /dev/null || true
    rm -f "$pidfile"
  done
  for sock in "$dir"/tunnel-*.sock; do
    [ -e "$sock" ] || continue
    ssh -S "$sock" -O exit lab-tunnel 2> /dev/null || true
    rm -f "$sock"
  done
}

if [ "$action" = stop ]; then
  stop
  echo "lab monitoring: stopped"
  exit 0
fi
[ "$action" = start ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop
mkdir -p "$dir/textfile" "$dir/bin"
ssh_args=(-i "$LAB_SSH_KEY" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
          -o IdentitiesOnly=yes -o ExitOnForwardFailure=yes)
node_targets="" server_targets="" index=0 first=""
for spec in $LAB_HOSTS; do
  IFS=: read -r name ssh_port _profile <<< "$spec"
  first=${first:-$name}
  address="$(podman inspect --format '{{.NetworkSettings.IPAddress}}' "$name")"
  [ -n "$address" ] || { echo "lab monitoring: $name has no address on podman's network" >&2; exit 1; }
  local_port=$((tunnel_base + index))
  ssh "${ssh_args[@]}" -p "$ssh_port" -f -N -M -S "$dir/tunnel-$name.sock" \
    -L "127.0.0.1:$local_port:127.0.0.1:$server_port" root@127.0.0.1
  node_targets+="      - {targets: ['$address:9100'], labels: {instance: $name}}"$'\n'
  server_targets+="      - {targets: ['127.0.0.1:$local_port'], labels: {instance: $name}}"$'\n'
  index=$((index + 1))
done
[ -n "$first" ] || { echo "lab monitoring: LAB_HOSTS names no host" >&2; exit 2; }

# This machine's node_exporter for the drift checks it runs: the same Debian binary the hosts run.
podman cp "$first:/usr/bin/prometheus-node-exporter" "$dir/bin/prometheus-node-exporter"
setsid "$dir/bin/prometheus-node-exporter" --web.listen-address="127.0.0.1:$node_port" \
  --collector.disable-defaults --collector.textfile --collector.textfile.directory="$dir/textfile" \
  > "$dir/node-exporter.log" 2>&1 < /dev/null &
echo $! > "$dir/node-exporter.pid"

cat > "$dir/prometheus.yml" <<EOF
# Written by lab/monitoring.sh: the lab's hosts, as docs/metrics.md tells an operator to scrape a fleet.
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $LAB_ROOT/monitoring/prometheus/sglang-alerts.yml
scrape_configs:
  - job_name: sglang
    static_configs:
$server_targets  - job_name: node
    static_configs:
$node_targets      - {targets: ['127.0.0.1:$node_port'], labels: {instance: control}}
EOF
promtool check config "$dir/prometheus.yml" > "$dir/promtool.log" 2>&1 || { cat "$dir/promtool.log" >&2; exit 1; }
setsid prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
  --web.listen-address="127.0.0.1:$port" > "$dir/prometheus.log" 2>&1 < /dev/null &
echo $! > "$dir/prometheus.pid"

url="http://127.0.0.1:$port"
for _ in $(seq 120); do
  if python3 -c "import sys, urllib.request as u; u.build_opener(u.ProxyHandler({})).open(sys.argv[1], timeout=2)" \
      "$url/-/ready" 2> /dev/null; then
    echo "$url"
    exit 0
  fi
  kill -0 "$(cat "$dir/prometheus.pid")" 2> /dev/null || break
  sleep 0.5
done
echo "lab monitoring: Prometheus did not become ready; its log:" >&2
tail -n 20 "$dir/prometheus.log" >&2
stop
exit 1
