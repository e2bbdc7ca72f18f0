#!/usr/bin/env bash
# Build the lab base root file system with debootstrap and pack it as a tarball
# for `podman import`. Usage: build-base-rootfs.sh SUITE MIRROR PKG,PKG,... OUT.tar
set -euo pipefail
suite="$1" mirror="$2" packages="$3" out="$4"

work="$(mktemp -d "${out%/*}/rootfs.XXXXXX" 2>/dev/null || { mkdir -p "${out%/*}"; mktemp -d "${out%/*}/rootfs.XXXXXX"; })"
trap 'rm -rf "$work"' EXIT

debootstrap --variant=minbase --include="$packages" "$suite" "$work" "$mirror" >"$work.log" 2>&1 \
    || { tail -n 20 "$work.log" >&2; rm -f "$work.log"; exit 1; }
rm -f "$work.log"

# Every container must get its own SSH host keys and machine id at first boot,
# never the ones debootstrap generated once for the image.
rm -f "$work"/etc/ssh/ssh_host_*
: > "$work/etc/machine-id"
mkdir -p "$work/etc/systemd/system/ssh.service.d"
cat > "$work/etc/systemd/system/ssh.service.d/10-sdmz-hostkeys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
# Units that make no sense in a container whose network the lab wires from outside.
for unit in systemd-networkd.service systemd-networkd-wait-online.service getty@tty1.service; do
    ln -sf /dev/null "$work/etc/systemd/system/$unit"
done
rm -rf "$work"/var/cache/apt/archives/*.deb "$work"/var/lib/apt/lists/*

tar -C "$work" --numeric-owner -cf "$out.partial" .
mv "$out.partial" "$out"
