// Edit static-bar1-hal (before 565.57.01): BAR1 P2P needs all of video
// memory mapped into BAR1 at once (static BAR1). Before 565.57.01 the open
// module has that only for Hopper and later: the generated HAL table binds
// kbusIsBar1P2PCapable and kbusEnableStaticBar1Mapping to their *_GH100
// implementations for those chips and to stubs (false, NV_ERR_NOT_SUPPORTED)
// for the others; 565.57.01 moved static BAR1 to Turing and later
// (kbusEnableStaticBar1Mapping_TU102). The edit binds the default branch to
// the *_GH100 implementations, which kbusInitBar1_GM107 (their one caller)
// then runs at BAR1 setup. Same shape as bar1-p2p-hal.

// The rule done, first, finds entries already bound so (a source edited
// before, or a version that binds them itself); site then edits.

@done@
identifier fld =~ "^__kbus(IsBar1P2PCapable|EnableStaticBar1Mapping)__$";
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
identifier fld =~ "^__kbus(IsBar1P2PCapable|EnableStaticBar1Mapping)__$";
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
