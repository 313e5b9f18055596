/* cmd_bench.c — placeholder until the subcommand lands; replaced by its owner. */
#include "cli/commands.h"

int ea_cmd_bench(int argc, char **argv) {
    (void)argc;
    return ea_cli_fail(argv[0], ea_err(EA_ERR_UNSUPPORTED, "not built yet"));
}
