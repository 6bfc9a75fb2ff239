#!/usr/bin/env bash
# Re-derives the exports of this directory from the captures they come from (see PROVENANCE.md).
# Usage: derive.sh HWLOC_CHECKOUT   (a clone of open-mpi/hwloc at the commit PROVENANCE.md names)
# Needs Debian's hwloc-nox (lstopo-no-graphics 2.9).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hwloc=${1:?usage: derive.sh HWLOC_CHECKOUT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# IBM POWER9 (PowerNV 8335-GTW) with 6 V100s whose memory the NVIDIA driver onlined as NUMA
# nodes 250-255. The snapshot's PCI functions carry only `class` and `local_cpus`; each is listed
# under /proc/driver/nvidia/gpus/ (the NVIDIA driver binds NVIDIA devices only), so each gets the
# PCI vendor file 0x10de. Nothing else is added: no device id, model, NVML or NVLink data.
tar -C "$work" -xjf "$hwloc/tests/hwloc/linux/nvidiagpunumanodes.tar.bz2"
root=$work/nvidiagpunumanodes
for gpu in "$root"/proc/driver/nvidia/gpus/*/; do
  echo 0x10de > "$root/sys/bus/pci/devices/$(basename "$gpu")/vendor"
done
HWLOC_COMPONENTS=linux,stop HWLOC_FSROOT=$root HWLOC_DUMPED_HWDATA_DIR=$root/var/run/hwloc \
  HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1 HWLOC_DONT_ADD_VERSION_INFO=1 \
  lstopo-no-graphics --whole-io --of xml "$here/ibm-power9-8335gtw_2s_6xV100_gpu-numa-nodes.xml"
