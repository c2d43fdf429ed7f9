/* The gdunlock subcommands. Each lives in its own cmd_<name>.c and returns the
 * process exit status (see util/exit_codes.h). argv[0] is the subcommand's name. */
#ifndef GDUNLOCK_CLI_COMMANDS_H
#define GDUNLOCK_CLI_COMMANDS_H

int gdu_cmd_doctor(int argc, char **argv);
int gdu_cmd_topo(int argc, char **argv);
int gdu_cmd_verify(int argc, char **argv);
int gdu_cmd_bench(int argc, char **argv);
int gdu_cmd_p2p(int argc, char **argv);
int gdu_cmd_p2p_unlock(int argc, char **argv); /* gdunlock p2p unlock */
int gdu_cmd_load(int argc, char **argv);
int gdu_cmd_run(int argc, char **argv);
int gdu_cmd_report(int argc, char **argv);

#endif
