#!/usr/bin/env bash
# Starts the lab: N Debian 12 containers with systemd as PID 1 and sshd, SSH published on 127.0.0.1,
# each with a simulated GPU profile (see set-profile.sh) and .cache/lab/wheelhouse mounted read-only at
# /srv/lab-wheelhouse. Idempotent: hosts already running as configured (image, port, wheelhouse) keep
# running (keys, CA bundle and GPU profile are refreshed); stopped or differently configured containers
# of the same name (an earlier session, CI in another clone on the same machine) are replaced.
#   LAB_HOSTS="lab-gpu1:2221:rtxpro6000-8x-pcie lab-gpu2:2222:rtxpro6000-2x-pcie"   (the default)
#   LAB_GPU1_PROFILE / LAB_GPU2_PROFILE   override just the profiles
set -euo pipefail
. "$(dirname "$0")/env.sh"
start=$SECONDS

# One build at a time (labs starting at once, as molecule default and drift do in CI): a second waits, then finds
# the image up to date. The lock is taken here: build-image.sh's own bytes are the image's build hash.
mkdir -p "$LAB_CACHE"
flock "$LAB_CACHE/.build-image.lock" "$LAB_DIR/build-image.sh"
image_id="$(podman image inspect --format '{{.Id}}' "$LAB_IMAGE")"

# One key pair for the lab, made once; root's authorized_keys in every host.
"$LAB_DIR/ssh-key.sh"

# Files every host gets before (or, when reused, while) it runs. Only these paths go in the archive.
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
install -d -m 0700 "$stage/root" "$stage/root/.ssh"
install -m 0600 "$LAB_SSH_KEY.pub" "$stage/root/.ssh/authorized_keys"
# The host's CA bundle (a superset of Debian's roots plus the proxy's): where the image's pip.conf and
# /etc/environment point, and over Debian's own bundle for everything else (curl, python's ssl).
install -d "$stage/etc/ssl/certs"
install -m 0644 "$LAB_CA_BUNDLE" "$stage/etc/ssl/certs/lab-host-ca-bundle.crt"
install -m 0644 "$LAB_CA_BUNDLE" "$stage/etc/ssl/certs/ca-certificates.crt"
copy_base_files() {
  lab_copy_in "$1" "$stage" root/.ssh etc/ssl/certs/lab-host-ca-bundle.crt etc/ssl/certs/ca-certificates.crt
}

# Wheels for offline installs and a real nvcc (lab/fill-wheelhouse.sh; fast when cached), read-only in every host.
"$LAB_DIR/fill-wheelhouse.sh" > /dev/null

started=()
for spec in $LAB_HOSTS; do
  IFS=: read -r name port profile <<< "$spec"
  # --systemd=always: podman sets up /run, /tmp, cgroups and the stop signal for systemd as PID 1.
  # CAP_SYS_ADMIN lets systemd build the mount namespaces of hardened units (PrivateTmp, ProtectSystem,
  # ReadWritePaths); without it systemd silently runs them unsandboxed in a container, and a unit that
  # cannot write where it must would pass here and fail on a real host.
  create_args=(--name "$name" --hostname "$name" --systemd=always --cap-add SYS_ADMIN
               --publish "127.0.0.1:$port:22" --stop-timeout 10
               --volume "$LAB_WHEELHOUSE:$LAB_WHEELHOUSE_MOUNT:ro" --volume "$LAB_CUDA:/usr/local/cuda:ro")
  # Everything a running container must match to be reused: a new image, other arguments (another
  # port, or a CI clone in another folder with its own wheelhouse) make a new container.
  config="$(echo "$image_id ${create_args[*]}" | sha256sum | cut -c1-16)"
  state="$(podman container inspect --format '{{.State.Status}} {{index .Config.Labels "lab.config"}}' "$name" 2>/dev/null || true)"
  if [ "$state" = "running $config" ] && podman exec "$name" true 2>/dev/null; then
    echo "lab: $name already running, reusing it"
    copy_base_files "$name"
    "$LAB_DIR/set-profile.sh" "$name" "$profile"
    "$LAB_DIR/install-standins.sh" "$name"
    continue
  fi
  if [ -n "$state" ]; then
    echo "lab: replacing stale container $name ($state)"
    podman rm --force --time 5 "$name" > /dev/null
  fi
  podman create --quiet "${create_args[@]}" --label "$LAB_LABEL=1" --label "lab.config=$config" \
    "$LAB_IMAGE" /sbin/init > /dev/null
  copy_base_files "$name"
  "$LAB_DIR/set-profile.sh" "$name" "$profile"
  "$LAB_DIR/install-standins.sh" "$name"
  podman start "$name" > /dev/null
  started+=("$name")
done

"$LAB_DIR/prune-images.sh"   # the image the replaced containers held

# Ready = systemd finished booting (running, or degraded: some unit failed, which we show) and sshd
# lets the lab key in.
deadline=$((SECONDS + ${LAB_BOOT_TIMEOUT:-120}))
for spec in $LAB_HOSTS; do
  IFS=: read -r name port _ <<< "$spec"
  until state="$(podman exec "$name" systemctl is-system-running 2>/dev/null)"; [[ "$state" =~ ^(running|degraded)$ ]] &&
        lab_ssh "$port" true 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ] || podman exec "$name" systemctl is-failed --quiet ssh.service; then
      echo "lab: $name not ready (systemd: ${state:-?}; sshd not answering on 127.0.0.1:$port)" >&2
      podman exec "$name" systemctl --failed --no-pager >&2 || true
      podman logs --tail 30 "$name" >&2 || true
      exit 1
    fi
    sleep 1
  done
  if [ "$state" = degraded ]; then
    echo "lab: warning: $name is degraded:" >&2
    podman exec "$name" systemctl --failed --no-pager --plain >&2 || true
  fi
done
# The hosts reach each other by name, as a fleet's hosts do through its DNS (the sglang_model role's peer source
# copies a model from one lab host to another over SSH): every host's address in every host's /etc/hosts.
hosts_lines=""
for spec in $LAB_HOSTS; do
  IFS=: read -r name _ _ <<< "$spec"
  address="$(podman container inspect --format '{{.NetworkSettings.IPAddress}}' "$name")"
  hosts_lines+="$address $name # lab/up.sh"$'\n'
done
for spec in $LAB_HOSTS; do
  IFS=: read -r name _ _ <<< "$spec"
  printf '%s' "$hosts_lines" | podman exec -i "$name" sh -c \
    'grep -v " # lab/up.sh$" /etc/hosts > /etc/hosts.lab; cat >> /etc/hosts.lab; cat /etc/hosts.lab > /etc/hosts; rm /etc/hosts.lab'
done
echo "lab: up in $((SECONDS - start)) s (started: ${started[*]:-none}); ssh: . lab/env.sh; lab_ssh 2221"
