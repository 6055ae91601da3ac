/* Tests for the deploy upload (gateway/http/upload.c): parts fed directly,
 * and multipart/form-data bodies sent by libcurl through a real
 * libmicrohttpd post processor on loopback. No gateway core. */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sha256.h"
#include "functions/manifest.h"
#include "gateway/http/http.h"
#include "gateway/http/upload.h"
#include "gateway/http/upload_pipe.h"
#include "testutil.h"

static char *tmpdir;
static void setup(void)
{
    tmpdir = gf_test_tmpdir();
}
static void teardown(void)
{
    gf_test_rmtree(tmpdir);
    tmpdir = NULL;
}

/* Files in the staging directory. */
static int count_files(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static unsigned char *random_bytes(size_t n, uint64_t seed)
{
    gf_test_rng rng;
    gf_test_rng_seed(&rng, seed);
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)gf_test_rng_u64(&rng);
    return p;
}

/* Feed a part in random-sized chunks. */
/* Finish, with the HTTP status the one table gives the outcome. */
static gf_status finish(gf_upload *u, int *status, gf_err *err)
{
    gf_status st = gf_upload_finish(u, err);
    *status = gf_http_status_of(st);
    return st;
}

static gf_status feed_chunked(gf_upload *u, const char *key, const void *data, size_t n,
                              gf_test_rng *rng)
{
    size_t off = 0;
    do {
        size_t c = 1 + (size_t)gf_test_rng_below(rng, 70000);
        if (c > n - off)
            c = n - off;
        gf_status st = gf_upload_feed(u, key, (const char *)data + off, off, c);
        if (st != GF_OK)
            return st;
        off += c;
    } while (off < n);
    return GF_OK;
}

START_TEST(test_feed_streams_to_disk)
{
    size_t n = 3 * 1024 * 1024 + 17;
    unsigned char *w = random_bytes(n, 1);
    const char *m = "{\"name\":\"f\",\"kind\":\"mlp\"}";
    gf_upload *u;
    gf_err err;
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 2);
    ck_assert(feed_chunked(u, "manifest", m, strlen(m), &rng) == GF_OK);
    ck_assert(feed_chunked(u, "weights", w, n, &rng) == GF_OK);
    int status;
    ck_assert_msg(finish(u, &status, &err) == GF_OK, "%s", err.msg);
    ck_assert_int_eq(status, 200);
    size_t ml;
    ck_assert_str_eq(gf_upload_manifest(u, &ml), m);
    ck_assert_uint_eq(ml, strlen(m));
    ck_assert_uint_eq(gf_upload_bytes(u), n);
    /* the staged file is in the directory, holds the bytes, and its digest matches */
    const char *path = gf_upload_path(u);
    ck_assert(strncmp(path, tmpdir, strlen(tmpdir)) == 0);
    size_t fl;
    char *f = gf_test_read_file(path, &fl);
    ck_assert_uint_eq(fl, n);
    ck_assert(memcmp(f, w, n) == 0);
    free(f);
    char hex[GF_SHA256_HEX_LEN];
    gf_sha256_buf(w, n, hex, NULL);
    ck_assert_str_eq(gf_upload_sha256(u), hex);
    ck_assert_ptr_null(gf_upload_name(u));
    ck_assert(!gf_upload_is_model(u));
    ck_assert_ptr_null(gf_upload_data_path(u));
    /* freed without release: the staged file goes */
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), 0);

    /* released: someone else owns it now */
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", (const char *)w, 0, 10) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, strlen(m)) == GF_OK);
    ck_assert(finish(u, &status, &err) == GF_OK);
    gf_upload_release(u);
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), 1);
    free(w);
}
END_TEST

/* A model: no manifest needed, a name, its external data staged apart. */
START_TEST(test_model_parts)
{
    gf_upload *u;
    gf_err err;
    int before = count_files();
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "name", "res", 0, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "name", "net", 3, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "model", "onnx-bytes", 0, 10) == GF_OK);
    ck_assert(gf_upload_feed(u, "model_data", "0123", 0, 4) == GF_OK);
    ck_assert(gf_upload_feed(u, "model_data", "4567", 4, 4) == GF_OK);
    ck_assert_msg(gf_upload_finish(u, &err) == GF_OK, "%s", err.msg);
    size_t ml;
    ck_assert_ptr_null(gf_upload_manifest(u, &ml));
    ck_assert_str_eq(gf_upload_name(u), "resnet");
    ck_assert(gf_upload_is_model(u));
    ck_assert_uint_eq(gf_upload_bytes(u), 10);
    char buf[16] = "";
    FILE *f = fopen(gf_upload_data_path(u), "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(buf, 1, sizeof buf, f), 8);
    fclose(f);
    ck_assert_str_eq(buf, "01234567");
    ck_assert_int_eq(count_files(), before + 2);
    gf_upload_free(u); /* not released: both staged files go */
    ck_assert_int_eq(count_files(), before);
    /* an empty model part is still a (staged, empty) file for the validator to refuse */
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "model", "", 0, 0) == GF_OK);
    ck_assert_msg(gf_upload_finish(u, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_upload_bytes(u), 0);
    ck_assert_ptr_nonnull(gf_upload_path(u));
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), before);
}
END_TEST

/* A failed upload: status, message, nothing left on disk. */
static void expect_fail(gf_upload *u, int want_status, const char *want)
{
    int status;
    gf_err err;
    ck_assert(finish(u, &status, &err) != GF_OK);
    ck_assert_int_eq(status, want_status);
    ck_assert_msg(strstr(err.msg, want) != NULL, "'%s' lacks '%s'", err.msg, want);
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), 0);
}

START_TEST(test_feed_errors)
{
    gf_upload *u;
    gf_err err;
    const char *m = "{}";
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) == GF_OK);
    expect_fail(u, 400, "missing form field 'weights'");

    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) == GF_OK);
    expect_fail(u, 400, "missing form field 'manifest'");

    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "modle", "abc", 0, 3) != GF_OK);
    /* refused from now on, even good parts */
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) != GF_OK);
    expect_fail(u, 400, "unexpected form field 'modle' (expected 'manifest' and 'weights', or "
                "'model'");

    /* a model and weights in one deploy; a model's parts with weights */
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "model", "abc", 0, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) != GF_OK);
    expect_fail(u, 400, "give either the part 'weights'");
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "name", "x", 0, 1) == GF_OK);
    expect_fail(u, 400, "form field 'name' goes with 'model'");
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "model_data", "abc", 0, 3) == GF_OK);
    expect_fail(u, 400, "form field 'model_data' (a model's external data) goes with");
    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "model_data", "abc", 0, 3) == GF_OK);
    expect_fail(u, 400, "missing form field 'weights'");

    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "abc", 0, 3) != GF_OK);
    expect_fail(u, 400, "form field 'weights' given twice");

    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) == GF_OK);
    ck_assert(gf_upload_feed(u, "manifest", m, 0, 2) != GF_OK);
    expect_fail(u, 400, "form field 'manifest' given twice");

    ck_assert(gf_upload_new(tmpdir, 1000, &u, &err) == GF_OK);
    char *big = calloc(1, 2000);
    ck_assert(gf_upload_feed(u, "weights", big, 0, 600) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", big, 600, 600) != GF_OK);
    expect_fail(u, 413, "form field 'weights' takes the upload past its limit of 1000 bytes");
    /* the limit holds for a model and its data together */
    ck_assert(gf_upload_new(tmpdir, 1000, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "model", big, 0, 600) == GF_OK);
    ck_assert(gf_upload_feed(u, "model_data", big, 0, 600) != GF_OK);
    expect_fail(u, 413, "form field 'model_data' takes the upload past its limit");
    free(big);

    ck_assert(gf_upload_new(tmpdir, 0, &u, &err) == GF_OK);
    big = calloc(1, GF_MANIFEST_MAX_BYTES + 1);
    ck_assert(gf_upload_feed(u, "manifest", big, 0, GF_MANIFEST_MAX_BYTES + 1) != GF_OK);
    expect_fail(u, 413, "form field 'manifest' is larger than 1048576 bytes");
    free(big);

    /* the staging directory is gone: 500, clean message */
    char *gone = gf_test_path(tmpdir, "missing");
    ck_assert(gf_upload_new(gone, 0, &u, &err) == GF_OK);
    ck_assert(gf_upload_feed(u, "weights", "a", 0, 1) != GF_OK);
    expect_fail(u, 500, "cannot stage the upload");
    free(gone);
}
END_TEST

/* ---- through libmicrohttpd's post processor ------------------------------------- */

typedef struct {
    gf_upload *u;
    struct MHD_PostProcessor *pp;
    bool pp_ok; /* destroy reported a complete body */
} up_req;

static struct {
    int status;
    char msg[512];
    char sha[GF_SHA256_HEX_LEN];
    uint64_t bytes;
    char manifest[256];
} last;

static enum MHD_Result up_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *data,
                                 size_t *size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version;
    up_req *r = *con_cls;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        gf_err err;
        ck_assert(gf_upload_new(tmpdir, 1u << 30, &r->u, &err) == GF_OK);
        r->pp = MHD_create_post_processor(c, 64 * 1024, gf_upload_iter, r->u);
        *con_cls = r;
        return MHD_YES;
    }
    if (*size > 0) {
        if (r->pp != NULL && MHD_post_process(r->pp, data, *size) != MHD_YES)
            gf_upload_fail(r->u, GF_ERR_FORMAT, "malformed multipart/form-data body");
        *size = 0;
        return MHD_YES;
    }
    if (r->pp != NULL) {
        if (MHD_destroy_post_processor(r->pp) != MHD_YES)
            gf_upload_fail(r->u, GF_ERR_FORMAT, "ends early");
        r->pp = NULL;
    }
    gf_err err;
    gf_err_clear(&err);
    if (finish(r->u, &last.status, &err) == GF_OK) {
        snprintf(last.sha, sizeof last.sha, "%s", gf_upload_sha256(r->u));
        last.bytes = gf_upload_bytes(r->u);
        size_t ml;
        snprintf(last.manifest, sizeof last.manifest, "%s", gf_upload_manifest(r->u, &ml));
    }
    snprintf(last.msg, sizeof last.msg, "%s", err.msg);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(last.msg), last.msg, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)last.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void up_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    up_req *r = *con_cls;
    if (r == NULL)
        return;
    if (r->pp != NULL)
        MHD_destroy_post_processor(r->pp);
    gf_upload_free(r->u);
    free(r);
    *con_cls = NULL;
}

static struct MHD_Daemon *up_start(uint16_t *port)
{
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, up_access,
                         NULL, MHD_OPTION_NOTIFY_COMPLETED, up_done, NULL, MHD_OPTION_END);
    ck_assert_ptr_nonnull(d);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info->port;
    return d;
}

static size_t sink(char *p, size_t s, size_t n, void *u)
{
    (void)p, (void)u;
    return s * n;
}

/* POST a form with libcurl: parts are {name, file path or NULL, inline value}. */
static long post_form(uint16_t port, const char *const parts[][3], int nparts)
{
    CURL *c = curl_easy_init();
    curl_mime *mime = curl_mime_init(c);
    for (int i = 0; i < nparts; i++) {
        curl_mimepart *p = curl_mime_addpart(mime);
        curl_mime_name(p, parts[i][0]);
        if (parts[i][1] != NULL)
            curl_mime_filedata(p, parts[i][1]);
        else
            curl_mime_data(p, parts[i][2], CURL_ZERO_TERMINATED);
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/functions", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    CURLcode rc = curl_easy_perform(c);
    ck_assert_msg(rc == CURLE_OK, "%s", curl_easy_strerror(rc));
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_mime_free(mime);
    curl_easy_cleanup(c);
    return code;
}

START_TEST(test_multipart_through_mhd)
{
    uint16_t port;
    struct MHD_Daemon *d = up_start(&port);
    size_t n = 5 * 1024 * 1024 + 3;
    unsigned char *w = random_bytes(n, 7);
    /* bytes that look like a boundary inside the file must not confuse anyone */
    memcpy(w + 1000, "\r\n--------------------------", 28);
    char *wpath = gf_test_path(tmpdir, "model.safetensors");
    char *mpath = gf_test_path(tmpdir, "m.json");
    gf_test_write_file(wpath, w, n);
    const char *m = "{\"name\":\"digits\",\"kind\":\"mlp\"}";
    gf_test_write_file(mpath, m, strlen(m));
    char hex[GF_SHA256_HEX_LEN];
    gf_sha256_buf(w, n, hex, NULL);

    /* curl -F manifest=@m.json -F weights=@model.safetensors */
    const char *const ok[2][3] = {{"manifest", mpath, NULL}, {"weights", wpath, NULL}};
    memset(&last, 0, sizeof last);
    ck_assert_int_eq(post_form(port, ok, 2), 200);
    ck_assert_str_eq(last.sha, hex);
    ck_assert_uint_eq(last.bytes, n);
    ck_assert_str_eq(last.manifest, m);

    /* the manifest as an inline value, weights first */
    const char *const inl[2][3] = {{"weights", wpath, NULL}, {"manifest", NULL, m}};
    memset(&last, 0, sizeof last);
    ck_assert_int_eq(post_form(port, inl, 2), 200);
    ck_assert_str_eq(last.sha, hex);
    ck_assert_str_eq(last.manifest, m);

    const char *const dup[3][3] = {
        {"manifest", mpath, NULL}, {"weights", wpath, NULL}, {"weights", wpath, NULL}};
    ck_assert_int_eq(post_form(port, dup, 3), 400);
    ck_assert_msg(strstr(last.msg, "form field 'weights' given twice") != NULL, "%s", last.msg);
    const char *const miss[1][3] = {{"manifest", mpath, NULL}};
    ck_assert_int_eq(post_form(port, miss, 1), 400);
    ck_assert_msg(strstr(last.msg, "missing form field 'weights'") != NULL, "%s", last.msg);
    const char *const other[3][3] = {
        {"manifest", mpath, NULL}, {"weights", wpath, NULL}, {"extra", NULL, "x"}};
    ck_assert_int_eq(post_form(port, other, 3), 400);
    ck_assert_msg(strstr(last.msg, "unexpected form field 'extra'") != NULL, "%s", last.msg);

    /* only the two files written by the test remain: every staged upload is gone */
    MHD_stop_daemon(d);
    ck_assert_int_eq(count_files(), 2);
    free(w);
    free(wpath);
    free(mpath);
}
END_TEST

/* An upload of n random bytes (seed) as weights, with a manifest, fed in
 * random-sized chunks and finished: *u is the caller's; *fed the feeding's
 * outcome, the finish's status returned (the HTTP one in *status). */
static gf_status upload_random(size_t n, uint64_t seed, gf_upload **u, unsigned char **w,
                               gf_status *fed, int *status, gf_err *err)
{
    *w = random_bytes(n, seed);
    ck_assert(gf_upload_new(tmpdir, 0, u, err) == GF_OK);
    gf_test_rng rng;
    gf_test_rng_seed(&rng, seed + 1);
    ck_assert(gf_upload_feed(*u, "manifest", "{}", 0, 2) == GF_OK);
    *fed = feed_chunked(*u, "weights", *w, n, &rng);
    return finish(*u, status, err);
}

/* Larger than the writer's ring (GF_UPIPE_BUFS buffers of GF_UPIPE_CHUNK):
 * every buffer is reused, full ones go directly to the disk and the odd
 * tail through the page cache; the bytes and the digest come out whole. */
START_TEST(test_ring_wraps)
{
    size_t n = 2 * GF_UPIPE_BUFS * GF_UPIPE_CHUNK + GF_UPIPE_ALIGN + 3;
    gf_upload *u;
    unsigned char *w;
    gf_status fed;
    int status;
    gf_err err;
    ck_assert_msg(upload_random(n, 5, &u, &w, &fed, &status, &err) == GF_OK, "%s", err.msg);
    ck_assert(fed == GF_OK);
    size_t fl;
    char *f = gf_test_read_file(gf_upload_path(u), &fl);
    ck_assert_uint_eq(fl, n);
    ck_assert(memcmp(f, w, n) == 0);
    free(f);
    char hex[GF_SHA256_HEX_LEN];
    gf_sha256_buf(w, n, hex, NULL);
    ck_assert_str_eq(gf_upload_sha256(u), hex);
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), 0);
    free(w);
}
END_TEST

/* The writer fails part way (a file size limit: EFBIG): the upload is
 * refused with the reason, nothing waits for ever, and the staged file goes. */
START_TEST(test_writer_fails)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 3 * GF_UPIPE_CHUNK;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    gf_upload *u;
    unsigned char *w;
    gf_status fed;
    int status;
    gf_err err;
    gf_status st = upload_random(3 * GF_UPIPE_BUFS * GF_UPIPE_CHUNK, 7, &u, &w, &fed, &status,
                                 &err);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    ck_assert(fed == GF_ERR_IO || fed == GF_OK);
    ck_assert_int_eq(st, GF_ERR_IO);
    ck_assert_int_eq(status, 500);
    ck_assert_msg(strstr(err.msg, "cannot stage the upload") != NULL, "%s", err.msg);
    gf_upload_free(u);
    ck_assert_int_eq(count_files(), 0);
    free(w);
}
END_TEST

static Suite *upload_suite(void)
{
    Suite *s = suite_create("http_upload");
    TCase *tc = tcase_create("upload");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_feed_streams_to_disk);
    tcase_add_test(tc, test_feed_errors);
    tcase_add_test(tc, test_model_parts);
    tcase_add_test(tc, test_multipart_through_mhd);
    tcase_add_test(tc, test_ring_wraps);
    tcase_add_test(tc, test_writer_fails);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = gf_test_run_suite(upload_suite());
    curl_global_cleanup();
    return rc;
}
