// Edit static-bar1-aperture (before 565.57.01, with static-bar1-hal): with
// static BAR1 on, _kbusMapAperture_GM107 hands out video memory through
// kbusGetStaticFbAperture_HAL and _kbusUnmapAperture_GM107 skips the unmap.
// Before 565.57.01 that HAL entry is a stub (NV_ERR_NOT_SUPPORTED) on every
// chip but Hopper and later, so each BAR1 mapping of video memory would fail.
// The edit drops the two shortcuts: those chips keep mapping BAR1 the dynamic
// way, beside the static window that BAR1 P2P uses. Matched by each
// function's name and the shortcut's test, never by line.

@site_map@
expression g, b, m;
statement S;
position p;
@@
_kbusMapAperture_GM107(...)
{
  <...
- if (kbusIsStaticBar1Enabled@p(g, b) && (memdescGetAddressSpace(m) == ADDR_FBMEM)) S
  ...>
}

@site_unmap@
expression g, b, m;
statement S;
position p;
@@
_kbusUnmapAperture_GM107(...)
{
  <...
- if (kbusIsStaticBar1Enabled@p(g, b) && (memdescGetAddressSpace(m) == ADDR_FBMEM)) S
  ...>
}

// The shortcut was the one user of gfid in _kbusMapAperture_GM107 (550.x):
// its declaration goes with it where nothing else uses it.
@unused_gfid depends on site_map@
symbol gfid;
type T;
@@
_kbusMapAperture_GM107(...)
{
  ... when != gfid
- T gfid;
  ... when != gfid
}

// Edited before: the functions are there and test static BAR1 no more.
@done_map depends on !site_map@
position p;
@@
_kbusMapAperture_GM107@p(...)
{
  ... when != kbusIsStaticBar1Enabled(...)
}

@done_unmap depends on !site_unmap@
position p;
@@
_kbusUnmapAperture_GM107@p(...)
{
  ... when != kbusIsStaticBar1Enabled(...)
}

@script:python@
p << site_map.p;
@@
print("gdunlock-site _kbusMapAperture_GM107 %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << site_unmap.p;
@@
print("gdunlock-site _kbusUnmapAperture_GM107 %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done_map.p;
@@
print("gdunlock-done _kbusMapAperture_GM107 %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done_unmap.p;
@@
print("gdunlock-done _kbusUnmapAperture_GM107 %s %s" % (p[0].current_element, p[0].line))
