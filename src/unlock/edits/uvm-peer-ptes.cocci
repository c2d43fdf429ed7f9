// Edit uvm-peer-ptes (before 580.65.06): when UVM maps another GPU's video
// memory and the two GPUs are joined by a PCIe BAR1 P2P mapping, write PTEs
// that reach the peer through its BAR1 as non-coherent system memory, at the
// peer's BAR1 DMA address, instead of peer-aperture PTEs (which need NVLink
// or the PCIe mailbox). This is what NVIDIA's own code does from 580.65.06 on
// (nvGpuOpsGetExternalAllocAperture and _nvGpuOpsEncodeBar1P2PAddrs in
// nv_gpu_ops.c); the edit takes the peer's DMA address from the same HAL
// call, kbusGetBar1P2PDmaInfo, so IOMMU mappings are honoured. Peers over
// NVLink keep their peer PTEs. Matched by the function's name, its mapping-GPU
// and memory-descriptor parameters, the aperture's assignment and the peer
// branch, never by line.

@done@
symbol gdunlockBar1Peer;
position p;
@@
nvGpuOpsBuildExternalAllocPtes@p(...)
{
  <+... gdunlockBar1Peer ...+>
}

@site depends on !done exists@
typedef OBJGPU, MEMORY_DESCRIPTOR;
symbol aperture;
identifier mgpu, md;
expression list es;
position p;
@@
nvGpuOpsBuildExternalAllocPtes@p(..., OBJGPU *mgpu, MEMORY_DESCRIPTOR *md, ...)
{
  <+...
  aperture = nvGpuOpsGetExternalAllocAperture(es);
  ...+>
}

@decl depends on site@
@@
nvGpuOpsBuildExternalAllocPtes(...)
{
+ NvBool gdunlockBar1Peer = NV_FALSE;
  ...
}

@set depends on decl@
identifier site.mgpu, site.md;
expression list es;
@@
nvGpuOpsBuildExternalAllocPtes(...)
{
  <...
  aperture = nvGpuOpsGetExternalAllocAperture(es);
+ gdunlockBar1Peer = (aperture == GMMU_APERTURE_PEER) &&
+                    kbusHasPcieBar1P2PMapping_HAL(mgpu, GPU_GET_KERNEL_BUS(mgpu),
+                                                  md->pGpu, GPU_GET_KERNEL_BUS(md->pGpu));
  ...>
}

@peer depends on set@
identifier site.mgpu, site.md;
statement S;
@@
nvGpuOpsBuildExternalAllocPtes(...)
{
  <...
+ if (gdunlockBar1Peer)
+ {
+     NvU64 bar1DmaSize = 0;
+     status = kbusGetBar1P2PDmaInfo_HAL(mgpu, md->pGpu, GPU_GET_KERNEL_BUS(md->pGpu),
+                                        &fabricBaseAddress, &bar1DmaSize);
+     if (status != NV_OK)
+         return status;
+ }
  if (
-     aperture == GMMU_APERTURE_PEER
+     !gdunlockBar1Peer && aperture == GMMU_APERTURE_PEER
     ) S
  ...>
}

@aper depends on peer@
expression fmt, v;
@@
nvGpuOpsBuildExternalAllocPtes(...)
{
  <...
  gmmuFieldSetAperture(&fmt->fldAperture,
-                      aperture,
+                      gdunlockBar1Peer ? GMMU_APERTURE_SYS_NONCOH : aperture,
                       v);
  ...>
}

@addr depends on peer@
expression fmt;
@@
nvGpuOpsBuildExternalAllocPtes(...)
{
  <...
  gmmuFmtPtePhysAddrFld(fmt,
-                       aperture
+                       gdunlockBar1Peer ? GMMU_APERTURE_SYS_NONCOH : aperture
                        , ...)
  ...>
}

@script:python depends on peer && aper && addr@
p << site.p;
@@
print("gdunlock-site nvGpuOpsBuildExternalAllocPtes %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done.p;
@@
print("gdunlock-done nvGpuOpsBuildExternalAllocPtes %s %s" % (p[0].current_element, p[0].line))
