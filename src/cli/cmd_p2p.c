/* Placeholder until the p2p command lands; replaced by its implementation. */
#include "cli/commands.h"
#include "cli/exit_codes.h"

#include <stdio.h>

int gdu_cmd_p2p(int argc, char **argv)
{
    fprintf(stderr, "gdunlock p2p: not built yet\n");
    return GDU_EXIT_SOFTWARE;
}
