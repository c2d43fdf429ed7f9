// Edit gp100-bar1-switch: let the Pascal-to-Ada P2P entry points route a
// PCIe BAR1 connection to the BAR1 P2P implementation. Stock code knows only
// NVLink and the PCIe mailbox and refuses every other connection type.
// Matched by each function's name and its PCIe-mailbox branch, never by line.

// Edited before (or a version that routes BAR1 itself): the function already
// tests for a PCIe BAR1 connection.
@done_create@
identifier attr;
position p;
@@
kbusCreateP2PMapping_GP100@p(...)
{
  <+... FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr) ...+>
}

@done_remove@
identifier attr;
position p;
@@
kbusRemoveP2PMapping_GP100@p(...)
{
  <+... FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr) ...+>
}

@site_create@
typedef OBJGPU, KernelBus, NvU32, NV_STATUS;
identifier a0, b0, a1, b1, p0, p1, attr;
position p;
@@
NV_STATUS kbusCreateP2PMapping_GP100@p(OBJGPU *a0, KernelBus *b0, OBJGPU *a1, KernelBus *b1,
                                       NvU32 *p0, NvU32 *p1, NvU32 attr)
{
  ... when != FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr)
+ if (FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr))
+ {
+     return kbusCreateP2PMappingForBar1P2P_HAL(a0, b0, a1, b1, attr);
+ }
  if (FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE, attr))
  {
      return kbusCreateP2PMappingForMailbox_HAL(a0, b0, a1, b1, p0, p1, attr);
  }
  ...
}

@site_remove@
typedef OBJGPU, KernelBus, NvU32, NV_STATUS;
identifier a0, b0, a1, b1, p0, p1, attr;
position p;
@@
NV_STATUS kbusRemoveP2PMapping_GP100@p(OBJGPU *a0, KernelBus *b0, OBJGPU *a1, KernelBus *b1,
                                       NvU32 p0, NvU32 p1, NvU32 attr)
{
  ... when != FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr)
+ if (FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE_BAR1, attr))
+ {
+     return kbusRemoveP2PMappingForBar1P2P_HAL(a0, b0, a1, b1, attr);
+ }
  if (FLD_TEST_DRF(_P2PAPI, _ATTRIBUTES, _CONNECTION_TYPE, _PCIE, attr))
  {
      return kbusRemoveP2PMappingForMailbox_HAL(a0, b0, a1, b1, p0, p1, attr);
  }
  ...
}

@script:python depends on site_create@
p << site_create.p;
@@
print("gdunlock-site kbusCreateP2PMapping_GP100 %s %s" % (p[0].current_element, p[0].line))

@script:python depends on site_remove@
p << site_remove.p;
@@
print("gdunlock-site kbusRemoveP2PMapping_GP100 %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done_create.p;
@@
print("gdunlock-done kbusCreateP2PMapping_GP100 %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done_remove.p;
@@
print("gdunlock-done kbusRemoveP2PMapping_GP100 %s %s" % (p[0].current_element, p[0].line))
