#!/bin/sh
# Measures a first command on a fresh Debian 12: makes a debootstrap'd
# chroot (or copies BASE, one made earlier), puts a clean export of this
# checkout's HEAD in /root/tfenc, runs COMMAND there as root, and reports
# its wall time, the packages it installed (count, and download size from
# apt's cache) and what pip downloaded. This is how the README's figures
# for `sh jobs/demo/demo.sh` and `sh tests/setup-deps` were measured.
#
#   sudo sh tests/deps/fresh-debian.sh WORKDIR 'sh jobs/demo/demo.sh' [BASE]
#   sudo sh tests/deps/fresh-debian.sh WORKDIR 'PIP_INDEX_URL=http://127.0.0.1:9/ sh jobs/demo/demo.sh' [BASE]
#                                     (the demo without the package index)
#
# Needs debootstrap (Debian package) and deb.debian.org; not run by make
# check (root, network, minutes). WORKDIR/root is the chroot, WORKDIR/log
# the command's output, WORKDIR/report the figures.
set -eu
[ $# -ge 2 ] || { echo "usage: fresh-debian.sh WORKDIR COMMAND [BASE]" >&2; exit 2; }
# The whole run in a mount namespace of its own: the chroot's /proc, /dev
# and whatever its tests mount stay out of the host's and go with it. The
# chroot's root is made a mount point (below), as a real root is, so that
# tests that mount a small disk or hide a folder can make private mount
# namespaces inside it (tests/environment.sh: in_private_mounts).
if [ -z "${TFENC_FRESH_NAMESPACE:-}" ]; then
  TFENC_FRESH_NAMESPACE=1 exec unshare --mount --propagation private sh "$0" "$@"
fi
work=$1
command=$2
base=${3:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
root=$work/root
mkdir -p "$work"
[ ! -e "$root" ] || { echo "fresh-debian: $root exists; choose a new WORKDIR" >&2; exit 2; }

if [ -n "$base" ]; then
  cp -a "$base" "$root"
else
  debootstrap bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1
fi
# What a Debian 12 installation lists: the release, its updates and security.
cat >"$root/etc/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
# A host behind a TLS-inspecting proxy trusts the proxy's CA through local
# certificates (installed into the chroot's bundle when the command
# installs ca-certificates) and pip's `cert` setting: the chroot gets the
# same, or PyPI would look unreachable. Nothing else of the host is copied.
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
fi
[ ! -f /etc/pip.conf ] || cp /etc/pip.conf "$root/etc/pip.conf"
rm -f "$root"/var/cache/apt/archives/*.deb
mount --bind "$root" "$root"
mount --bind /proc "$root/proc"
mount --bind /sys "$root/sys"
mount --bind /dev "$root/dev"
mount --bind /dev/pts "$root/dev/pts"
trap 'umount "$root/dev/pts" "$root/dev" "$root/sys" "$root/proc" "$root"' EXIT

mkdir -p "$root/root/tfenc"
git -C "$top" archive HEAD | tar -x -C "$root/root/tfenc"

before=$(chroot "$root" dpkg-query -W -f='${Status}\n' | grep -c 'install ok installed')
start=$(date +%s)
status=0
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  sh -c "cd /root/tfenc && $command" >"$work/log" 2>&1 || status=$?
seconds=$(( $(date +%s) - start ))
after=$(chroot "$root" dpkg-query -W -f='${Status}\n' | grep -c 'install ok installed')
debs=$(ls "$root"/var/cache/apt/archives/*.deb 2>/dev/null | wc -l)
deb_bytes=$(cat "$root"/var/cache/apt/archives/*.deb 2>/dev/null | wc -c)
installed_kib=$(chroot "$root" dpkg-query -W -f='${Installed-Size}\n' | awk '{s += $1} END {print s}')
pip_bytes=$(du -sb "$root/root/.cache/pip" 2>/dev/null | cut -f1)
for heavy in python3-torch clang valgrind groff-base python3-matplotlib; do
  chroot "$root" dpkg-query -W -f='${Status}' "$heavy" 2>/dev/null | grep -q 'install ok installed' \
    && echo "installed: $heavy" || echo "not installed: $heavy"
done >"$work/heavy"
{
  echo "command: $command"
  echo "exit status: $status"
  echo "wall time: $seconds s"
  echo "packages: $before before, $after after: $((after - before)) installed"
  echo "apt downloads: $debs .deb files, $((deb_bytes / 1048576)) MiB"
  echo "installed size of all packages now: $((installed_kib / 1024)) MiB"
  echo "pip cache: $(( ${pip_bytes:-0} / 1048576 )) MiB"
  cat "$work/heavy"
} >"$work/report"
cat "$work/report"
