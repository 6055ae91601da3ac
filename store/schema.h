/* gpufaas — the store's schema and its migrations (store/, internal).
 *
 * The schema is the list of migrations in schema.c: migration N brings a
 * database from user_version N-1 to N. A fresh file (user_version 0) gets all
 * of them in order; an older file gets the ones it lacks. Migrations are
 * forward only. Each runs in its own transaction together with the
 * `PRAGMA user_version = N` that records it, so a crash or an error leaves
 * the file at N-1 or N, never in between.
 *
 * Only store.c and the tests include this header.
 */
#ifndef GF_STORE_SCHEMA_H
#define GF_STORE_SCHEMA_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

typedef struct gf_store_migration {
    int version;         /* user_version after this migration, 1, 2, ... */
    const char *summary; /* one line: what it changes and why */
    const char *sql;     /* statements, run with sqlite3_exec in one transaction */
    bool edits_schema;   /* sql is one UPDATE of sqlite_schema that changes a definition
                            and not the stored rows (a CHECK): it runs with
                            writable_schema on and bumps schema_version; a file
                            without the definition it expects keeps its own */
} gf_store_migration;

/* The migrations, in order; gf_store_migrations[i].version == i + 1. */
extern const gf_store_migration gf_store_migrations[];
extern const size_t gf_store_migrations_n;

/* Read PRAGMA user_version of db (borrowed) into *out. */
gf_status gf_store_schema_get_version(sqlite3 *db, int *out, gf_err *err);

/* Bring db (borrowed, no transaction open) forward to version target
 * (0 < target <= latest; pass gf_store_migrations_n for the latest). Each
 * step re-reads user_version inside its write transaction, so two processes
 * migrating at once do not apply a step twice. GF_ERR_UNSUPPORTED when the
 * file is newer than target. Fault site "store_migrate" fails a step. */
gf_status gf_store_schema_migrate(sqlite3 *db, int target, gf_err *err);

/* Map an SQLite result code to a gf_status. */
gf_status gf_store_sqlite_status(int rc);

#endif /* GF_STORE_SCHEMA_H */
