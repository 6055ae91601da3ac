/* What the store suite's files share (test_store.c defines it; the other
 * suites use store_testlib.h only). */
#ifndef GF_TESTS_STORE_SUITE_H
#define GF_TESTS_STORE_SUITE_H

#include <check.h>

#include "store/store.h"

/* Each test's fresh temporary directory and the database path in it (the
 * checked fixture makes and removes them, and resets injected faults). */
extern char *ts_tmpdir;
extern char *ts_dbpath;

/* A configuration without periodic retention, so that nothing but the
 * test's own actions runs transactions. */
gf_store_config ts_quiet_config(void);

/* The record path's tests (test_store_records.c). */
void ts_records_tests(TCase *tc);

#endif
