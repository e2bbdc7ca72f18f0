#!/usr/bin/env bash
# Install the Debian packages listed in packages/debian.txt that are missing,
# and write the container engine settings these machines need. Safe to re-run:
# it changes nothing when everything is already in place.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
list="${1:-$here/packages/debian.txt}"

if [[ $EUID -ne 0 ]]; then
    echo "setup-debian: must run as root (it installs Debian packages)" >&2
    exit 1
fi

mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
missing=()
for pkg in "${wanted[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]})); then
    echo "setup-debian: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
    echo "setup-debian: all ${#wanted[@]} packages present"
fi

# podman on these machines runs containers only with runc (crun fails on the
# hybrid cgroup layout) and only with explicit ulimits.
conf_dir=/etc/containers/containers.conf.d
conf="$conf_dir/50-sdmz-kit.conf"
desired='# Written by the Science DMZ Kit (scripts/setup-debian.sh).
# crun fails on this host'"'"'s hybrid cgroup layout; runc works.
[engine]
runtime = "runc"

[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]'
if [[ ! -f "$conf" ]] || [[ "$(cat "$conf")" != "$desired" ]]; then
    mkdir -p "$conf_dir"
    printf '%s\n' "$desired" > "$conf"
    echo "setup-debian: wrote $conf"
fi
