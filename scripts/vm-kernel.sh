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

dir="$(realpath -m "${1:-${CODEEXEC_VM_KERNEL:-${XDG_CACHE_HOME:-$HOME/.cache}/codeexec/vm-kernel}}")"
cd "$(dirname "$0")/.."
command -v qemu-system-x86_64 >/dev/null 2>&1 || scripts/apt-install.sh qemu-system-x86
if [ -s "$dir/vmlinuz" ] && [ -s "$dir/modules/order" ]; then
  exit 0
fi

# Load order: each after the modules it needs (their .modinfo depends=).
modules="virtio_ring virtio_pci_modern_dev virtio_pci_legacy_dev virtio virtio_pci
9pnet 9pnet_virtio netfs fscache 9p overlay"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
kernel_package() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true
}
# The lists may be missing or stale (Debian drops a superseded kernel's
# package): then once more after apt-get update.
pkg="$(kernel_package)"
for attempt in 1 2; do
  if [ -n "$pkg" ] && (cd "$tmp" && apt-get download -q "$pkg" >"$tmp/download.log" 2>&1); then
    break
  fi
  if [ "$attempt" = 2 ]; then
    echo "could not download Debian's kernel package (${pkg:-linux-image-amd64 has no kernel in the apt lists}):" >&2
    cat "$tmp/download.log" >&2 2>/dev/null || true
    exit 1
  fi
  apt-get update -qq >/dev/null
  pkg="$(kernel_package)"
done
echo "fetched $pkg for the test machines" >&2
dpkg-deb -x "$tmp"/*.deb "$tmp/x"
version="${pkg#linux-image-}"
mkdir -p "$tmp/out/modules"
cp "$tmp/x/boot/vmlinuz-$version" "$tmp/out/vmlinuz"
order=()
for m in $modules; do
  ko="$(find "$tmp/x/lib/modules/$version" \( -name "$m.ko" -o -name "$m.ko.xz" \) | head -1)"
  if [ -z "$ko" ]; then
    if ! grep -q "/$m\.ko$" "$tmp/x/lib/modules/$version/modules.builtin" 2>/dev/null; then
      echo "$pkg has no module $m, and does not build it in: the test machines need it" >&2
      exit 1
    fi
    continue
  fi
  case "$ko" in *.xz) xz -dc "$ko" >"$tmp/out/modules/$m.ko" ;; *) cp "$ko" "$tmp/out/modules/$m.ko" ;; esac
  order+=("$m")
done
echo "${order[*]}" >"$tmp/out/modules/order"
echo "$pkg" >"$tmp/out/version"
mkdir -p "$(dirname "$dir")"
rm -rf "$dir"
mv "$tmp/out" "$dir"
echo "test machine kernel: $pkg in $dir ($(du -sh "$dir" | cut -f1))" >&2
