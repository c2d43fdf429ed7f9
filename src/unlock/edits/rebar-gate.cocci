#spatch --no-ifdef-to-if
// (#spatch above: the function body is split by #if/#else; read each branch as
// written so the test inside the #if is seen.)
// Edit rebar-gate: let nv_resize_pcie_bars() grow BAR1 to the largest size the
// GPU offers without the EnableResizableBar module parameter. BAR1 P2P maps
// all of video memory into BAR1 at once (static BAR1), which the 256 MiB BAR1
// of a GeForce without Resizable BAR cannot hold. Stock code returns early
// unless the parameter is set; the edit drops that early return. Matched by
// the function's name and the parameter test, never by line.

@gate exists@
symbol NVreg_EnableResizableBar;
position p;
statement S;
@@
nv_resize_pcie_bars(...)
{
  <+...
  if (NVreg_EnableResizableBar@p == 0) S
  ...+>
}

// A version with no parameter test in the function has nothing to drop.
@done depends on !gate@
position p;
@@
nv_resize_pcie_bars@p(...)
{
  ...
}

@site@
symbol NVreg_EnableResizableBar;
position gate.p;
statement S;
@@
- if (NVreg_EnableResizableBar@p == 0) S

@script:python@
p << gate.p;
@@
print("gdunlock-site nv_resize_pcie_bars %s %s" % (p[0].current_element, p[0].line))

@script:python@
p << done.p;
@@
print("gdunlock-done nv_resize_pcie_bars %s %s" % (p[0].current_element, p[0].line))
