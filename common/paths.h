/* Where the data reclass ships (migrations, Avro schemas) is found at run time: next to the
 * executable, so that neither a build nor an install compiles a directory into the binary. */
#ifndef RECLASS_COMMON_PATHS_H
#define RECLASS_COMMON_PATHS_H

#include <stddef.h>

/* The first directory of: <exe>/../<tree> (a build directory inside the source tree, tree
 * being the source tree's folder, e.g. "consumers/schemas"), <exe>/../share/reclass/<name>
 * (the installed layout, e.g. /usr/bin + /usr/share), /usr/share/reclass/<name>. Returns 0
 * with out holding it (canonical), or -1 with out listing the candidates tried. */
int common_data_dir(const char *tree, const char *name, char *out, size_t outlen);

/* 1 when p is a directory; then p (plen bytes) is made canonical ("..", links resolved). */
int common_is_dir(char *p, size_t plen);

#endif
