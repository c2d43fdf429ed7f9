/* Placeholder until the run command lands; replaced by its implementation. */
#include "cli/commands.h"
#include "cli/exit_codes.h"

#include <stdio.h>

int gdu_cmd_run(int argc, char **argv)
{
    fprintf(stderr, "gdunlock run: not built yet\n");
    return GDU_EXIT_SOFTWARE;
}
