/* gpufaas top — the state shared by the command (cmd_top.c: scrapes, the
 * terminal) and its view (top_view.c: figures, the screen's text, JSON). */
#ifndef GF_GATEWAY_CLI_TOP_H
#define GF_GATEWAY_CLI_TOP_H

#include <jansson.h>
#include <stdbool.h>

#include "core/buf.h"
#include "gateway/cli/client.h"
#include "gateway/cli/prom.h"

#define MAX_EVENTS 8 /* recent swaps kept */

/* One scrape of the server (owned JSON and metrics). */
typedef struct snapshot {
    bool ok;
    double t; /* monotonic seconds */
    json_t *workers, *placements, *functions;
    gf_prom metrics;
} snapshot;

typedef struct top_state {
    gf_cli_client *c;
    snapshot cur, prev;
    char events[MAX_EVENTS][160]; /* newest first */
    int n_events;
    char err[GF_CLI_SINK_MAX]; /* the last failure, "" when the last refresh worked */
    double interval;
} top_state;

/* A frame being drawn: its lines; failed once an append ran out of memory. */
typedef struct screen {
    gf_buf lines; /* '\n'-separated */
    bool failed;
} screen;

/* Draw s (its last two scrapes and recent swaps) into sc, lines laid out
 * for cols columns. */
void gf_top_render(top_state *s, screen *sc, int cols);

/* --once --json: the same figures as one JSON object. NULL on OOM. */
json_t *gf_top_snapshot_json(const top_state *s);

#endif /* GF_GATEWAY_CLI_TOP_H */
