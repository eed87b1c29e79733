#!/usr/bin/env bash
# Fetches what services/vmtest boots its test machines with (cgroup v2
# alone, which this project's CI hosts cannot show): QEMU from Debian's
# packages, and Debian's kernel with the modules the machine's init loads.
# apt checks the package against the archive's signed index.
#
#   bash scripts/vm-kernel.sh        # to ~/.cache/codeexec/vm-kernel
#   bash scripts/vm-kernel.sh DIR    # elsewhere; then CODEEXEC_VM_KERNEL=DIR
#
# A second run does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${1:-${CODEEXEC_VM_KERNEL:-${XDG_CACHE_HOME:-$HOME/.cache}/codeexec/vm-kernel}}"
command -v qemu-system-x86_64 >/dev/null 2>&1 || scripts/apt-install.sh qemu-system-x86
if [ -s "$dir/vmlinuz" ] && [ -s "$dir/modules/order" ]; then
  exit 0
fi

# Load order: each after the modules it needs (their .modinfo depends=).
modules="virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio virtio_pci
9pnet 9pnet_virtio netfs fscache 9p overlay"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
if [ -z "$pkg" ]; then
  apt-get update -qq >/dev/null
  pkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
fi
echo "fetching $pkg for the test machines" >&2
(cd "$tmp" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
deb="$(ls "$tmp"/*.deb)"
dpkg-deb -x "$deb" "$tmp/x"
version="${pkg#linux-image-}"
mkdir -p "$tmp/out/modules"
cp "$tmp/x/boot/vmlinuz-$version" "$tmp/out/vmlinuz"
order=()
for m in $modules; do
  ko="$(find "$tmp/x/lib/modules/$version" -name "$m.ko" -o -name "$m.ko.xz" | head -1)"
  [ -n "$ko" ] || continue # built in
  case "$ko" in *.xz) xz -dc "$ko" >"$tmp/out/modules/$m.ko" ;; *) cp "$ko" "$tmp/out/modules/$m.ko" ;; esac
  order+=("$m")
done
echo "${order[*]}" >"$tmp/out/modules/order"
echo "$pkg" >"$tmp/out/version"
mkdir -p "$(dirname "$dir")"
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "test machine kernel: $pkg in $dir ($(du -sh "$dir" | cut -f1))" >&2
