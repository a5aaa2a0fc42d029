#!/usr/bin/env bash
# The GPU check on a bare Linux x86-64 machine (no Node, no network): unpacks the bundle `npm run gpu:bundle`
# wrote, generates the models with the project's generators, runs Hearth, PyTorch (the machine's python3) and
# llama.cpp on the same GPU, prints one table and writes it as $OUT/gpu-check.json. See docs/gpu.md.
#
#   scripts/gpu-check.sh [--device auto|cpu|webgpu[:N]|cuda[:N]] [--shapes full|small] [--budget-s 450]
#
# Environment: OUT (result folder, default ./.gpu-check-out), HEARTH_GPU_BUNDLE (the bundle folder, default
# .gpu-bundle beside scripts/), HEARTH_GPU_ROOT (where it is unpacked, default /tmp/hearth-gpu), HEARTH_GPU_WORK
# (generated models, default /tmp/hearth-gpu-work, or ./.gpu-work where the current folder has more room; kept,
# so a second run in the same place skips generating the files that were not dropped after use).
# Whatever it measured is in the JSON even when a phase fails or the time budget runs out.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bundle="${HEARTH_GPU_BUNDLE:-$here/../.gpu-bundle}"
root="${HEARTH_GPU_ROOT:-/tmp/hearth-gpu}"
# The generated models need about 30 GB at the full shapes' peak: /tmp unless the current folder has more room.
free_kb() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print $4 }'; }
work="${HEARTH_GPU_WORK:-}"
if [ -z "$work" ]; then
  work=/tmp/hearth-gpu-work
  [ "$(free_kb /tmp || echo 0)" -lt "$(free_kb "$PWD" || echo 0)" ] && work="$PWD/.gpu-work"
fi
out="${OUT:-$PWD/.gpu-check-out}"
device=auto shapes=full budget=450 python=python3
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --budget-s) budget="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    *) echo "usage: $0 [--device auto|cpu|webgpu[:N]|cuda[:N]] [--shapes full|small] [--budget-s S] [--python P]" >&2; exit 2 ;;
  esac
done
for p in node native app; do
  [ -f "$bundle/$p.tar.xz" ] || { echo "gpu-check: $bundle/$p.tar.xz is missing: run npm run gpu:bundle first (and carry .gpu-bundle)" >&2; exit 2; }
done

# Unpack (again only when the bundle changed): tar + xz where present, else Python's lzma.
stamp="$(cat "$bundle"/*.key 2>/dev/null; stat -c %Y "$bundle/app.tar.xz")"
if [ ! -f "$root/.stamp" ] || [ "$(cat "$root/.stamp")" != "$stamp" ]; then
  rm -rf "$root" && mkdir -p "$root"
  t0=$(date +%s)
  for p in node native app; do
    if command -v xz >/dev/null; then tar -C "$root" -xJf "$bundle/$p.tar.xz"
    else "$python" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$bundle/$p.tar.xz" "$root"; fi
  done
  printf '%s' "$stamp" > "$root/.stamp"
  echo "gpu-check: unpacked the bundle into $root in $(( $(date +%s) - t0 )) s" >&2
fi

# The Vulkan loader: the system's if it has one, else the bundle's (Dawn and ggml-vulkan dlopen libvulkan.so.1),
# with GLVND's libraries, which NVIDIA's Vulkan driver (libGLX_nvidia) loads beside it.
if ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 ' && ldconfig -p 2>/dev/null | grep -q 'libGLdispatch.so.0 '; then
  export HEARTH_VULKAN_LOADER=system
else
  export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" HEARTH_VULKAN_LOADER="bundle ($root/lib/libvulkan.so.1)"
fi
# NVIDIA's Vulkan driver manifest where the container runtime mounts it but the loader does not look.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -z "${VK_ICD_FILENAMES:-}" ] && ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  for f in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
    [ -f "$f" ] && { export VK_DRIVER_FILES="$f"; break; }
  done
fi

mkdir -p "$out" "$work"
exec "$root/node" "$root/app/dist/gpu-check.mjs" --device "$device" --shapes "$shapes" --budget-s "$budget" --python "$python" --out "$out" --work "$work"
