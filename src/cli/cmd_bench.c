/* Placeholder until the bench command lands; replaced by its implementation. */
#include "cli/commands.h"
#include "cli/exit_codes.h"

#include <stdio.h>

int gdu_cmd_bench(int argc, char **argv)
{
    fprintf(stderr, "gdunlock bench: not built yet\n");
    return GDU_EXIT_SOFTWARE;
}
