/* ACS state of the bridges on a PCIe path as findings, shared by the GDS and P2P rules. */
#ifndef GDUNLOCK_PROBE_DOCTOR_PCIE_H
#define GDUNLOCK_PROBE_DOCTOR_PCIE_H

#include "probe/doctor_report.h"
#include "probe/doctor_system.h"

/* Adds one evidence line per bridge: "0000:00:01.0 ACS: ReqRedir CmpltRedir". */
void gdu_path_bridge_evidence(const gdu_system *sys, const gdu_pcie_path *path, gdu_finding *f);

/* A finding "pcie.<id>" for the path between two named devices; returns the
 * ACS answer. */
gdu_tri gdu_path_finding(const gdu_system *sys, gdu_report *r, const char *id, const char *what,
                         const gdu_pcie_path *path);

#endif
