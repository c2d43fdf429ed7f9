// Edit registry-force-bar1p2p (versions whose RMForceP2PType has a BAR1P2P
// value, before 575.51.02): make BAR1 P2P the forced P2P type by default, as
// RMForceP2PType=BAR1P2P does. The registry is still read after the default,
// so an explicit key wins. Matched by the function's name and the default's
// assignment, never by line.

@done@
expression bif;
position p;
@@
_kbifInitRegistryOverrides(...)
{
  <...
  bif->forceP2PType@p = NV_REG_STR_RM_FORCE_P2P_TYPE_BAR1P2P;
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
+ bif->forceP2PType = NV_REG_STR_RM_FORCE_P2P_TYPE_BAR1P2P;
  ...>
}

@script:python@
p << site.p;
@@
print("gdunlock-site forceP2PType %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done.p;
@@
print("gdunlock-done forceP2PType %s %s" % (p[0].current_element, p[0].line))
