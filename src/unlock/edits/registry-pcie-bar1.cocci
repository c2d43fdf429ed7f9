// Edit registry-pcie-bar1 (575.51.02 and later, where RMForceP2PType names
// PCIe P2P and RMPcieP2PType picks mailbox or BAR1 under it): make PCIe BAR1
// P2P the default, as RMForceP2PType=1 RMPcieP2PType=1 do. The registry is
// still read after each default, so explicit keys win. Matched by the
// function's name and the two defaults' assignments, never by line.

@done@
expression bif;
position p;
@@
_kbifInitRegistryOverrides(...)
{
  <...
  bif->forceP2PType@p = NV_REG_STR_RM_FORCE_P2P_TYPE_PCIEP2P;
  ...
  bif->pcieP2PType = NV_REG_STR_RM_PCIEP2P_TYPE_BAR1;
  ...>
}

@site@
expression bif;
position p;
@@
_kbifInitRegistryOverrides(...)
{
  <...
- bif->forceP2PType@p = NV_REG_STR_RM_FORCE_P2P_TYPE_DEFAULT;
+ bif->forceP2PType = NV_REG_STR_RM_FORCE_P2P_TYPE_PCIEP2P;
  ...
- bif->pcieP2PType = NV_REG_STR_RM_PCIEP2P_TYPE_DEFAULT;
+ bif->pcieP2PType = NV_REG_STR_RM_PCIEP2P_TYPE_BAR1;
  ...>
}

@script:python@
p << site.p;
@@
print("gdunlock-site pcieP2PType %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done.p;
@@
print("gdunlock-done pcieP2PType %s %s" % (p[0].current_element, p[0].line))
