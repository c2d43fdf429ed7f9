#include "doctor/doctor_pcie.h"

#include "doctor/doctor.h"

#include <stdio.h>
#include <string.h>

void gdu_path_bridge_evidence(const gdu_snapshot *sys, const gdu_pcie_path *path, gdu_finding *f)
{
    char bits[128];
    for (size_t i = 0; i < path->n_bridges; i++) {
        const gdu_pci_dev *b = gdu_pci_find(&sys->pci, path->bridges[i]);
        if (b == NULL || b->acs == GDU_CFG_UNKNOWN)
            gdu_finding_evidence(f,
                                 "bridge %s ACS: unknown (extended config space needs root: "
                                 "run as root)",
                                 path->bridges[i]);
        else if (b->acs == GDU_CFG_ABSENT)
            gdu_finding_evidence(f, "bridge %s ACS: no capability", b->bdf);
        else
            gdu_finding_evidence(f, "bridge %s ACS control: %s", b->bdf,
                                 gdu_pci_acs_describe(b->acs_ctrl, bits, sizeof bits));
    }
}

gdu_tri gdu_path_finding(const gdu_snapshot *sys, gdu_report *r, const char *id, const char *what,
                         const gdu_pcie_path *path)
{
    char redirecting[GDU_PATH_MAX_BRIDGES * 16];
    gdu_tri acs = gdu_pci_path_acs_redirect(&sys->pci, path, redirecting, sizeof redirecting);
    gdu_status st = acs == GDU_TRI_YES                                         ? GDU_ST_FAIL
                    : path->kind == GDU_PATH_SYS                               ? GDU_ST_WARN
                    : acs == GDU_TRI_UNKNOWN || path->kind == GDU_PATH_UNKNOWN ? GDU_ST_UNKNOWN
                                                                               : GDU_ST_OK;
    gdu_finding *f = gdu_report_add(r, id, "pcie", st, "%s: %s through %zu bridge(s)%s", what,
                                    gdu_path_kind_name(path->kind), path->n_bridges,
                                    acs == GDU_TRI_YES ? ", ACS redirects peer traffic" : "");
    gdu_path_bridge_evidence(sys, path, f);
    if (acs == GDU_TRI_YES) {
        char commands[384] = "";
        size_t used = 0;
        char *save = NULL;
        for (char *bdf = strtok_r(redirecting, " ", &save); bdf && used < sizeof commands;
             bdf = strtok_r(NULL, " ", &save))
            used += (size_t)snprintf(commands + used, sizeof commands - used,
                                     "%ssetpci -s %s ECAP_ACS+0x6.w=0000", used ? "; " : "", bdf);
        gdu_finding_fix(f,
                        "disable ACS in the BIOS, or clear the bridges' ACS control as root "
                        "after each boot: %s",
                        commands);
    } else if (path->kind == GDU_PATH_SYS)
        gdu_finding_fix(f,
                        "move one device to a slot on the same CPU socket (see 'gdunlock topo')");
    else if (acs == GDU_TRI_UNKNOWN)
        gdu_finding_fix(f, "run doctor as root to read the bridges' ACS control");
    return acs;
}
