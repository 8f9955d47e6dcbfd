#!/usr/bin/env bash
# Builds the lab image localhost/sglang-lab:bookworm: a Debian 12 root filesystem made with debootstrap
# (no container registry is reachable here), with systemd as PID 1 and sshd, imported into podman.
#
# Rebuilds only when this script changed: its sha256 is stored in the image label lab.build-hash and
# in the name of the cached tarball .cache/lab/rootfs-<hash>.tar, so after `podman rmi` the image is
# re-imported in seconds, and downloaded .debs stay in .cache/lab/debs for the next debootstrap.
#   LAB_FORCE_REBUILD=1   debootstrap again even if the hash matches
#   LAB_DEBIAN_MIRROR     Debian mirror for debootstrap (default http://deb.debian.org/debian)
set -euo pipefail
. "$(dirname "$0")/env.sh"

# What the roles expect on a fresh GPU host: systemd + D-Bus (the server runs as a unit), python3 with
# venv and real pip (sglang_install creates venvs with the host's python3), sshd (Ansible connects over
# SSH, like on a fleet), CA certificates (HTTPS through the proxy), the usual host tools, and rsync (with its rrsync)
# for the sglang_model role's peer source, which copies a model between hosts over SSH. node_exporter as Debian
# packages it (its service on :9100, its textfile collector reading /var/lib/prometheus/node-exporter), which
# lab/monitoring.sh's Prometheus scrapes.
packages=systemd,systemd-sysv,dbus,python3,python3-venv,python3-pip,openssh-server,ca-certificates,iproute2,pciutils,sudo,procps,rsync,prometheus-node-exporter

mirror="${LAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
hash="$(sha256sum "$0" | cut -c1-16)"
tarball="$LAB_CACHE/rootfs-$hash.tar"

current="$(podman image inspect --format '{{index .Labels "lab.build-hash"}}' "$LAB_IMAGE" 2>/dev/null || true)"
if [ "$current" = "$hash" ] && [ -z "${LAB_FORCE_REBUILD:-}" ]; then
  echo "lab image: $LAB_IMAGE is up to date ($hash)"
  exit 0
fi

mkdir -p "$LAB_CACHE/debs"
if [ ! -s "$tarball" ] || [ -n "${LAB_FORCE_REBUILD:-}" ]; then
  start=$SECONDS
  rootfs="$LAB_CACHE/rootfs"
  rm -rf "$rootfs"
  echo "lab image: debootstrap bookworm into $rootfs"
  debootstrap --variant=minbase --include="$packages" --cache-dir="$LAB_CACHE/debs" \
    bookworm "$rootfs" "$mirror" > "$LAB_CACHE/debootstrap.log" 2>&1 ||
    { tail -n 30 "$LAB_CACHE/debootstrap.log" >&2; exit 1; }

  # The package gives /var/lib/prometheus to its prometheus user, and root writes the deploy's textfile below it:
  # made root's as docs/metrics.md tells operators (a statoverride, which the package's upgrades respect).
  chroot "$rootfs" dpkg-statoverride --update --add root root 0755 /var/lib/prometheus

  # Each container makes its own identity at first boot: no host keys or machine-id in the image.
  rm -f "$rootfs"/etc/ssh/ssh_host_* "$rootfs/etc/hostname"
  : > "$rootfs/etc/machine-id"
  mkdir -p "$rootfs/etc/systemd/system/ssh.service.d"
  cat > "$rootfs/etc/systemd/system/ssh.service.d/lab-host-keys.conf" <<'EOF'
# Test lab: generate this container's SSH host keys on first boot (the image carries none), before
# Debian's own config test, which fails without them.
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
EOF
  cat > "$rootfs/etc/ssh/sshd_config.d/lab.conf" <<'EOF'
# Test lab: root logs in with the lab key only; no DNS lookups (nothing to resolve 127.0.0.1 against).
PermitRootLogin prohibit-password
PasswordAuthentication no
UseDNS no
EOF
  # Units that have nothing to do in a container, or fail there and leave the system "degraded".
  for unit in getty@tty1.service console-getty.service systemd-firstboot.service \
              systemd-remount-fs.service sys-kernel-config.mount sys-kernel-debug.mount \
              sys-kernel-tracing.mount apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
              fstrim.timer; do
    ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
  done

  # HTTPS inside goes through the same inspecting proxy as the host: up.sh copies the host's CA
  # bundle to this path at every start; point pip, requests, curl and systemd units at it.
  ca=/etc/ssl/certs/lab-host-ca-bundle.crt
  cat >> "$rootfs/etc/environment" <<EOF
SSL_CERT_FILE=$ca
PIP_CERT=$ca
REQUESTS_CA_BUNDLE=$ca
CURL_CA_BUNDLE=$ca
EOF
  printf '[global]\ncert = %s\n' "$ca" > "$rootfs/etc/pip.conf"
  mkdir -p "$rootfs/etc/systemd/system.conf.d"
  printf '[Manager]\nDefaultEnvironment=SSL_CERT_FILE=%s PIP_CERT=%s REQUESTS_CA_BUNDLE=%s\n' \
    "$ca" "$ca" "$ca" > "$rootfs/etc/systemd/system.conf.d/lab-ca.conf"

  cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*_Packages

  rm -f "$LAB_CACHE"/rootfs-*.tar
  tar -C "$rootfs" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$rootfs"
  echo "lab image: root filesystem built in $((SECONDS - start)) s"
fi

start=$SECONDS
podman import --quiet \
  --change 'CMD ["/sbin/init"]' \
  --change 'ENV container=podman' \
  --change 'STOPSIGNAL SIGRTMIN+3' \
  --change "LABEL lab.build-hash=$hash" \
  "$tarball" "$LAB_IMAGE" > /dev/null
echo "lab image: imported $LAB_IMAGE ($hash) in $((SECONDS - start)) s"
"$LAB_DIR/prune-images.sh"
