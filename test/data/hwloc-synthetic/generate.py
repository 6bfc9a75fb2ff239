#!/usr/bin/env python3
"""Writes xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml: a synthetic hwloc 2.x export of a
4x H100 SXM server of the Dell XE8640 class (2 sockets with 2 sub-NUMA clusters each; each GPU
under its own host bridge on its own NUMA node; all four GPUs NVLink-connected to each other;
an RDMA NIC behind the same PCIe switch as GPUs 0-2, none next to GPU 3; all-zero GPU UUIDs as in
sanitised exports). Hand-written from this specification, not captured from a machine.

With --mig it writes xe8640-like_4xH100-SXM_mig.xml instead: the same server with the MIG records
`draguard topology export` adds from NVML (GPU 0 split into seven 1g.10gb instances, GPU 1 into two
3g.40gb, GPUs 2 and 3 with MIG disabled).

With --pci-only it writes a100-like_4xA100-SXM_4numa_pci-only_3xmlx5.xml: the same layout with A100
GPUs as an hwloc 2.2 export without the CUDA and NVML backends shows them: PCI devices only, so no
GPU memory size, no UUIDs and no NVLink matrix."""
import sys

MIG = "--mig" in sys.argv[1:]
PCI_ONLY = "--pci-only" in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a not in ("--mig", "--pci-only")]
MIG_INSTANCES = {  # GPU -> NVIDIAMIGGPUInstance values (exporter format)
    0: [f"profile=1g.10gb id={7 + i} profile_id=19 slices=1 memory_mib=9856 placement={i}:1" for i in range(7)],
    1: [f"profile=3g.40gb id={1 + i} profile_id=9 slices=3 memory_mib=40448 placement={4 * i}:4" for i in range(2)],
}

GPUS = [  # (host bridge domain:bus range, switch bus, GPU bus id, NIC bus id or None)
    ("0000:[15-1a]", "0000:16:00.0", "0000:18:00.0", "0000:17:00.0"),
    ("0000:[63-68]", "0000:64:00.0", "0000:66:00.0", "0000:65:00.0"),
    ("0000:[99-9e]", "0000:9a:00.0", "0000:9c:00.0", "0000:9b:00.0"),
    ("0000:[c7-cc]", "0000:c8:00.0", "0000:ca:00.0", None),
]
gp = [100]


def nid():
    gp[0] += 1
    return gp[0]


def bits(i):
    return "0x%08x" % (1 << i)


out = ['<?xml version="1.0" encoding="UTF-8"?>', '<!DOCTYPE topology SYSTEM "hwloc2.dtd">', '<topology version="2.0">',
       '  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" '
       'nodeset="0x0000000f" complete_nodeset="0x0000000f" allowed_nodeset="0x0000000f" gp_index="1">',
       '    <info name="HostName" value="%s"/>' % ("a100-pci-only-synthetic" if PCI_ONLY else "xe8640-synthetic"),
       '    <info name="hwlocVersion" value="%s"/>' % ("2.2.0" if PCI_ONLY else "2.9.3")]
nvml_gp = []
for pkg in range(2):
    pc = "0x%08x" % (3 << (2 * pkg))
    out.append(f'    <object type="Package" os_index="{pkg}" cpuset="{pc}" complete_cpuset="{pc}" nodeset="{pc}" '
               f'complete_nodeset="{pc}" gp_index="{nid()}">')
    for sub in range(2):
        n = 2 * pkg + sub
        b = bits(n)
        bridge, switch, gpu, nic = GPUS[n]
        out.append(f'      <object type="Group" cpuset="{b}" complete_cpuset="{b}" nodeset="{b}" complete_nodeset="{b}" '
                   f'gp_index="{nid()}" kind="1001" subkind="0">')
        out.append(f'        <object type="NUMANode" os_index="{n}" cpuset="{b}" complete_cpuset="{b}" nodeset="{b}" '
                   f'complete_nodeset="{b}" gp_index="{nid()}" local_memory="274877906944"/>')
        out.append(f'        <object type="Core" os_index="{n}" cpuset="{b}" complete_cpuset="{b}" nodeset="{b}" '
                   f'complete_nodeset="{b}" gp_index="{nid()}">')
        out.append(f'          <object type="PU" os_index="{n}" cpuset="{b}" complete_cpuset="{b}" nodeset="{b}" '
                   f'complete_nodeset="{b}" gp_index="{nid()}"/>')
        out.append('        </object>')
        dom, rng = bridge.split(":[")
        first = rng.split("-")[0]
        out.append(f'        <object type="Bridge" gp_index="{nid()}" bridge_type="0-1" depth="0" bridge_pci="{bridge}">')
        sw_first = "%02x" % (int(first, 16) + 1)
        sw_last = rng.split("-")[1].rstrip("]")
        out.append(f'          <object type="Bridge" gp_index="{nid()}" bridge_type="1-1" depth="1" '
                   f'bridge_pci="{dom}:[{sw_first}-{sw_last}]" pci_busid="{dom}:{first}:00.0" '
                   f'pci_type="0604 [1000:c030] [0000:0000] 00" pci_link_speed="31.507692">')
        devs = [(gpu, "gpu")] + ([(nic, "nic")] if nic else [])
        for bus, kind in sorted(devs):
            if kind == "gpu" and PCI_ONLY:
                out.append(f'            <object type="PCIDev" gp_index="{nid()}" pci_busid="{bus}" '
                           f'pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="15.753846">')
                out.append('              <info name="PCIVendor" value="NVIDIA Corporation"/>')
                out.append('              <info name="PCIDevice" value="GA100 [A100 SXM4 40GB]"/>')
                out.append('            </object>')
            elif kind == "gpu":
                out.append(f'            <object type="PCIDev" gp_index="{nid()}" pci_busid="{bus}" '
                           f'pci_type="0302 [10de:2330] [10de:16c1] a1" pci_link_speed="31.507692">')
                out.append('              <info name="PCIVendor" value="NVIDIA Corporation"/>')
                out.append('              <info name="PCIDevice" value="GH100 [H100 SXM5 80GB]"/>')
                out.append(f'              <object type="OSDev" gp_index="{nid()}" name="cuda{n}" subtype="CUDA" osdev_type="5">')
                out.append('                <info name="CoProcType" value="CUDA"/>')
                out.append('                <info name="GPUModel" value="NVIDIA H100 80GB HBM3"/>')
                out.append('                <info name="CUDAGlobalMemorySize" value="83024384"/>')
                out.append('              </object>')
                g = nid()
                nvml_gp.append(g)
                out.append(f'              <object type="OSDev" gp_index="{g}" name="nvml{n}" subtype="NVML" osdev_type="1">')
                out.append('                <info name="Backend" value="NVML"/>')
                out.append('                <info name="GPUModel" value="NVIDIA H100 80GB HBM3"/>')
                out.append('                <info name="NVIDIAUUID" value="GPU-00000000-0000-0000-0000-000000000000"/>')
                if MIG:
                    mode = "Enabled" if n in MIG_INSTANCES else "Disabled"
                    out.append(f'                <info name="NVIDIAMIGMode" value="{mode}"/>')
                    for v in MIG_INSTANCES.get(n, []):
                        out.append(f'                <info name="NVIDIAMIGGPUInstance" value="{v}"/>')
                out.append('              </object>')
                out.append('            </object>')
            else:
                out.append(f'            <object type="PCIDev" gp_index="{nid()}" pci_busid="{bus}" '
                           f'pci_type="0207 [15b3:1021] [15b3:0041] 00" pci_link_speed="31.507692">')
                out.append('              <info name="PCIVendor" value="Mellanox Technologies"/>')
                out.append('              <info name="PCIDevice" value="MT2910 Family [ConnectX-7]"/>')
                k = [i for i, x in enumerate(GPUS) if x[3]].index(n)
                out.append(f'              <object type="OSDev" gp_index="{nid()}" name="ibp{k}" osdev_type="2">')
                out.append('                <info name="Address" value="00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00"/>')
                out.append('              </object>')
                out.append(f'              <object type="OSDev" gp_index="{nid()}" name="mlx5_{k}" osdev_type="3">')
                out.append('                <info name="NodeGUID" value="0000:0000:0000:0000"/>')
                out.append('              </object>')
                out.append('            </object>')
        out.append('          </object>')
        out.append('        </object>')
        out.append('      </object>')
    out.append('    </object>')
out.append('  </object>')
vals = []
for a in range(4):
    for b in range(4):
        vals.append("1000000" if a == b else "300000")
if not PCI_ONLY:
    idx = " ".join(f"OSDev:{g}" for g in nvml_gp) + " "
    out.append('  <distances2hetero nbobjs="4" kind="25" name="NVLinkBandwidth">')
    out.append(f'    <indexes length="{len(idx)}">{idx}</indexes>')
    for r in range(4):
        row = " ".join(vals[4 * r:4 * r + 4]) + " "
        out.append(f'    <u64values length="{len(row)}">{row}</u64values>')
    out.append('  </distances2hetero>')
out.append('</topology>')
default = ("xe8640-like_4xH100-SXM_mig.xml" if MIG else
           "a100-like_4xA100-SXM_4numa_pci-only_3xmlx5.xml" if PCI_ONLY else "xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml")
open(ARGS[0] if ARGS else default, "w").write("\n".join(out) + "\n")
