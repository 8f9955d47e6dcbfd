#!/usr/bin/env bash
# Host packages the container lab needs (Debian 12, run as root). Idempotent: when every package is
# already installed it changes nothing and touches no network.
#   podman + runc     containers; runc because crun refuses this host's hybrid cgroup layout
#   netavark, aardvark-dns, iptables   rootful networking and port publishing (-p 127.0.0.1:PORT:22)
#   slirp4netns       fallback network mode; catatonit: podman's --init helper
#   debootstrap       builds the Debian 12 image locally (no container registry is reachable)
#   openssh-client    Ansible and the lab scripts reach the containers over SSH
#   uidmap            newuidmap/newgidmap, so podman does not warn (and rootless keeps working)
#   prometheus        promtool: the metrics tests lint every textfile (check metrics) and unit-test every alert rule
#                     (test rules) with Debian's real one (its service stays off: nothing here starts it)
set -euo pipefail

packages=(podman runc conmon netavark aardvark-dns iptables slirp4netns catatonit uidmap
          debootstrap debian-archive-keyring openssh-client ca-certificates prometheus)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# Rootful networking is netavark's. Without a setting podman 4.3 picks its backend once, on first use, and picks CNI
# (whose plugins are not installed) when images or containers already exist then: every container's port rule is
# left behind on removal, and a later container on the same port is never reached ("No route to host").
backend_conf=/etc/containers/containers.conf.d/lab-network-backend.conf
set_backend() {
  install -d -m 0755 "$(dirname "$backend_conf")"
  printf '[network]\nnetwork_backend = "netavark"\n' > "$backend_conf"
  chmod 0644 "$backend_conf"
}

if [ "${#missing[@]}" -eq 0 ]; then
  if ! grep -qs 'network_backend = "netavark"' "$backend_conf"; then
    [ "$(id -u)" -eq 0 ] || { echo "lab host deps: $backend_conf missing; run this script as root" >&2; exit 1; }
    set_backend
    echo "lab host deps: podman's network backend set to netavark"
  fi
  echo "lab host deps: all installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "lab host deps: missing ${missing[*]}; run this script as root" >&2
  exit 1
fi

echo "lab host deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# No recommends: podman's pull in buildah, fuse-overlayfs and a user D-Bus session we do not use.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
set_backend
echo "lab host deps: done"
