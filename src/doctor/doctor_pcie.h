/* ACS state of the bridges on a PCIe path as findings, shared by the GDS and P2P rules. */
#ifndef GDUNLOCK_DOCTOR_DOCTOR_PCIE_H
#define GDUNLOCK_DOCTOR_DOCTOR_PCIE_H

#include "doctor/doctor_report.h"
#include "facts/snapshot.h"

/* Adds one evidence line per bridge: "0000:00:01.0 ACS: ReqRedir CmpltRedir". */
void gdu_path_bridge_evidence(const gdu_snapshot *sys, const gdu_pcie_path *path, gdu_finding *f);

/* A finding "pcie.<id>" for the path between two named devices; returns the
 * ACS answer. */
gdu_tri gdu_path_finding(const gdu_snapshot *sys, gdu_report *r, const char *id, const char *what,
                         const gdu_pcie_path *path);

#endif
