// Edit registry-p2p-override: make P2P reads and writes allowed by default, as
// the ForceP2P registry key does when set to READ_ENABLE | WRITE_ENABLE. The
// registry is still read after the default, so an explicit key wins.
// Matched by the function's name and the default's assignment, never by line.

@done@
expression bif;
position p;
@@
_kbifInitRegistryOverrides(...)
{
  <...
  bif->p2pOverride@p = DRF_DEF(_REG_STR, _CL_FORCE_P2P, _READ, _ENABLE) |
                       DRF_DEF(_REG_STR, _CL_FORCE_P2P, _WRITE, _ENABLE);
  ...>
}

@site@
expression bif;
position p;
@@
_kbifInitRegistryOverrides(...)
{
  <...
- bif->p2pOverride@p = BIF_P2P_NOT_OVERRIDEN;
+ bif->p2pOverride = DRF_DEF(_REG_STR, _CL_FORCE_P2P, _READ, _ENABLE) |
+                    DRF_DEF(_REG_STR, _CL_FORCE_P2P, _WRITE, _ENABLE);
  ...>
}

@script:python@
p << site.p;
@@
print("gdunlock-site p2pOverride %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done.p;
@@
print("gdunlock-done p2pOverride %s %s" % (p[0].current_element, p[0].line))
