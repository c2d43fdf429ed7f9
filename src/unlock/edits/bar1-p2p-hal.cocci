// Edit bar1-p2p-hal: in the generated HAL table of KernelBus, bind the five
// BAR1 P2P entries of every chip to the implementation that NVIDIA binds for
// Hopper and later (the *_GH100 functions), in place of the stubs that refuse
// (NV_ERR_NOT_SUPPORTED, NV_FALSE) which the table's default branch binds for
// older chips. Matched by the field's name and the if/else shape that the
// NVOC generator writes for a halified method with two implementations: the
// default branch is rebound to whatever the chip branch binds, so the name of
// the generated stub (a hash that changes between versions) is never spelled.

// The rule done, first, finds entries already bound so (a source edited
// before, or a version that binds them itself); site then edits.

@done@
identifier fld =~ "^__kbus(GetBar1P2PDmaInfo|CreateP2PMappingForBar1P2P|RemoveP2PMappingForBar1P2P|HasPcieBar1P2PMapping|IsPcieBar1P2PMappingSupported)__$";
identifier impl =~ "_GH100$";
expression obj, chips;
position p;
@@
if (chips)
{
  obj->fld = &impl;
}
else
{
  obj->fld@p = &impl;
}

@site@
identifier fld =~ "^__kbus(GetBar1P2PDmaInfo|CreateP2PMappingForBar1P2P|RemoveP2PMappingForBar1P2P|HasPcieBar1P2PMapping|IsPcieBar1P2PMappingSupported)__$";
identifier impl =~ "_GH100$";
identifier stub =~ "_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]$";
expression obj, chips;
position p;
@@
if (chips)
{
  obj->fld = &impl;
}
else
{
- obj->fld@p = &stub;
+ obj->fld = &impl;
}

@script:python@
fld << site.fld;
p << site.p;
@@
print("gdunlock-site %s %s %s" % (fld.strip("_"), p[0].current_element, p[0].line))

@script:python@
fld << done.fld;
p << done.p;
@@
print("gdunlock-done %s %s %s" % (fld.strip("_"), p[0].current_element, p[0].line))
