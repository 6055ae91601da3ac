/* Tests for runtime/core safetensors: a corpus of malformed files, each
 * rejected with its own message; a round trip of every dtype; a file written
 * by an independent Python writer (struct + json, not our code). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/dtype.h"
#include "core/safetensors.h"
#include "testutil.h"

static char *tmpdir;

static void setup(void) { tmpdir = gf_test_tmpdir(); }
static void teardown(void) { gf_test_rmtree(tmpdir); tmpdir = NULL; }

/* Build a file: 8-byte length (hlen_override when != UINT64_MAX), the header
 * text, then data_len bytes of data. Returns the path (malloc'd). */
static char *make_file(const char *name, const char *hdr, size_t hdr_len, uint64_t hlen_override,
                       size_t data_len)
{
    size_t total = 8 + hdr_len + data_len;
    unsigned char *buf = calloc(1, total);
    uint64_t n = hlen_override != UINT64_MAX ? hlen_override : hdr_len;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, hdr, hdr_len);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + hdr_len + i] = (unsigned char)i;
    char *path = gf_test_path(tmpdir, name);
    gf_test_write_file(path, buf, total);
    free(buf);
    return path;
}

static void expect_reject(const char *path, const char *expect)
{
    gf_st_file *f = (gf_st_file *)0x1;
    gf_err err;
    gf_err_clear(&err);
    gf_status st = gf_st_open(path, &f, &err);
    ck_assert_msg(st != GF_OK, "%s: accepted, expected '%s'", path, expect);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.msg, expect) != NULL, "%s: message '%s' lacks '%s'", path, err.msg,
                  expect);
}

static void bad_header(const char *name, const char *hdr, size_t data_len, const char *expect)
{
    char *p = make_file(name, hdr, strlen(hdr), UINT64_MAX, data_len);
    expect_reject(p, expect);
    free(p);
}

#define T1(name, dt, shape, b, e) "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":" shape \
                                  ",\"data_offsets\":[" #b "," #e "]}"

START_TEST(test_malformed_corpus)
{
    /* each case: (file, distinct expected message) */
    char *p;
    p = make_file("short", "", 0, UINT64_MAX, 0);
    {
        /* a 5-byte file */
        gf_test_write_file(p, "\x02\0\0\0\0", 5);
        expect_reject(p, "too short for the 8-byte header length");
        free(p);
    }
    p = make_file("huge_len", "{}", 2, 100000001ull, 0);
    expect_reject(p, "exceeds the limit of 100000000");
    free(p);
    p = make_file("len_past_end", "{}", 2, 4096, 0);
    expect_reject(p, "runs past the end of the file");
    free(p);
    p = make_file("not_utf8", "{\"\xff\":1}", 7, UINT64_MAX, 0);
    expect_reject(p, "not valid UTF-8");
    free(p);
    bad_header("not_brace", " {}", 0, "does not start with '{'");
    bad_header("not_json", "{\"a\":", 0, "header is not valid JSON");
    bad_header("entry_not_object", "{\"a\":5}", 0, "entry is a number, not an object");
    bad_header("unknown_dtype", "{" T1("w", "F99", "[1]", 0, 4) "}", 4, "unknown dtype 'F99'");
    bad_header("f8_dtype", "{" T1("w", "F8_E4M3", "[1]", 0, 1) "}", 1,
               "unsupported dtype 'F8_E4M3'");
    bad_header("negative_dim", "{" T1("w", "F32", "[-1]", 0, 4) "}", 4,
               "tensor 'w': shape[0] is negative");
    bad_header("float_dim", "{" T1("w", "F32", "[1.5]", 0, 4) "}", 4,
               "tensor 'w': shape[0] is not an integer");
    bad_header("numel_overflow",
               "{" T1("w", "F32", "[4294967296,4294967296,4294967296]", 0, 4) "}", 4,
               "tensor 'w': element count of its shape overflows");
    bad_header("bytes_overflow", "{" T1("w", "F32", "[4611686018427387904]", 0, 4) "}", 4,
               "tensor 'w': byte size overflows");
    bad_header("rank_too_big", "{" T1("w", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4,
               "tensor 'w': rank 9 exceeds 8");
    bad_header("start_not_zero", "{" T1("w", "F32", "[1]", 4, 8) "}", 8,
               "tensor 'w': data starts at offset 4, expected 0");
    bad_header("hole", "{" T1("a", "F32", "[1]", 0, 4) "," T1("b", "F32", "[1]", 8, 12) "}", 12,
               "tensor 'b': hole of 4 bytes before it");
    bad_header("overlap", "{" T1("a", "F32", "[2]", 0, 8) "," T1("b", "F32", "[2]", 4, 12) "}",
               12, "tensor 'b' overlaps tensor 'a'");
    bad_header("span_mismatch", "{" T1("w", "F32", "[2]", 0, 4) "}", 4,
               "tensor 'w': data span is 4 bytes but shape [2] of FP32 needs 8");
    bad_header("end_before_begin", "{" T1("w", "F32", "[0]", 8, 4) "}", 8,
               "tensor 'w': data_offsets end 4 is before begin 8");
    bad_header("trailing", "{" T1("w", "F32", "[1]", 0, 4) "}", 12,
               "8 trailing bytes after the last tensor");
    bad_header("data_short", "{" T1("w", "F32", "[4]", 0, 16) "}", 8,
               "tensor 'w': ends at offset 16, past the end of the data (8 bytes)");
    bad_header("meta_not_string", "{\"__metadata__\":{\"format\":1}}", 0,
               "__metadata__ value of 'format' is a number, not a string");
    bad_header("meta_not_object", "{\"__metadata__\":[]}", 0,
               "__metadata__ is a array, not an object");
    bad_header("duplicate", "{" T1("w", "F32", "[1]", 0, 4) "," T1("w", "F32", "[1]", 4, 8) "}",
               8, "duplicate tensor name 'w'");
    bad_header("missing_dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "tensor 'w': missing or non-string \"dtype\"");
    bad_header("offsets_three", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}",
               4, "tensor 'w': data_offsets has 3 entries, expected 2");
    bad_header("offset_negative",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
               "tensor 'w': data_offsets[0] is negative (-4)");
    bad_header("offset_float",
               "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4,
               "tensor 'w': data_offsets[1] is not an integer");
    bad_header("dim_too_large", "{" T1("w", "F32", "[9223372036854775808]", 0, 4) "}", 4,
               "tensor 'w': shape[0] exceeds 9223372036854775807");
    bad_header("dim_string", "{" T1("w", "F32", "[1,\"2\"]", 0, 4) "}", 4,
               "tensor 'w': shape[1] is not an integer");
    bad_header("nul_in_name", "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],"
                              "\"data_offsets\":[0,4]}}", 4, "tensor name contains a NUL byte");
    p = gf_test_path(tmpdir, "does_not_exist");
    expect_reject(p, "No such file");
    free(p);
    expect_reject(tmpdir, "is not a regular file");
}
END_TEST

START_TEST(test_valid_edge_cases)
{
    /* empty header object, zero-sized tensors, scalar, padding spaces */
    const char *hdr = "{" T1("s", "F32", "[]", 0, 4) "," T1("z", "I64", "[0,3]", 4, 4) ","
                      T1("v", "U8", "[3]", 4, 7) "}    ";
    char *p = make_file("edge", hdr, strlen(hdr), UINT64_MAX, 7);
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(p, &f, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_st_count(f), 3);
    const gf_st_tensor *s = gf_st_find(f, "s");
    ck_assert_int_eq(s->rank, 0);
    ck_assert_uint_eq(s->nbytes, 4);
    const gf_st_tensor *z = gf_st_find(f, "z");
    ck_assert_uint_eq(z->nbytes, 0);
    ck_assert_int_eq(z->rank, 2);
    const gf_st_tensor *v = gf_st_find(f, "v");
    ck_assert_uint_eq(v->nbytes, 3);
    ck_assert_int_eq(((const unsigned char *)v->data)[0], 4); /* data byte i == i */
    ck_assert_ptr_null(gf_st_find(f, "nope"));
    ck_assert_int_eq(gf_st_index(f, "s"), 0);
    ck_assert_uint_eq(gf_st_data_len(f), 7);
    gf_st_close(f);
    free(p);
    p = make_file("empty", "{}", 2, UINT64_MAX, 0);
    ck_assert_int_eq(gf_st_open(p, &f, &err), GF_OK);
    ck_assert_uint_eq(gf_st_count(f), 0);
    gf_st_close(f);
    free(p);
}
END_TEST

START_TEST(test_round_trip_every_dtype)
{
    gf_test_rng r;
    gf_test_rng_seed(&r, 42);
    enum { N = GF_DT_BYTES - 1 }; /* every fixed-size type: BYTES is never a weight */
    gf_st_wtensor ts[N];
    int64_t shapes[N][3];
    unsigned char *datas[N];
    char names[N][32];
    for (int i = 0; i < N; i++) {
        gf_dtype dt = (gf_dtype)(i + 1);
        shapes[i][0] = 1 + i % 3;
        shapes[i][1] = 2;
        shapes[i][2] = 1 + i;
        size_t bytes = (size_t)(shapes[i][0] * shapes[i][1] * shapes[i][2]) * gf_dtype_size(dt);
        datas[i] = malloc(bytes);
        for (size_t k = 0; k < bytes; k++)
            datas[i][k] = (unsigned char)gf_test_rng_u64(&r);
        if (dt == GF_DT_BOOL)
            for (size_t k = 0; k < bytes; k++)
                datas[i][k] &= 1;
        snprintf(names[i], sizeof names[i], "layer.%d.%s", i, gf_dtype_st_name(dt));
        ts[i] = (gf_st_wtensor){names[i], dt, (i % 4 == 0) ? 2 : 3, shapes[i], datas[i]};
    }
    const char *meta[] = {"format", "pt", "note", "quote\" and \\ and \xc3\xa9"};
    char *path = gf_test_path(tmpdir, "rt.safetensors");
    gf_err err;
    ck_assert_msg(gf_st_write(path, ts, N, meta, 2, &err) == GF_OK, "%s", err.msg);
    gf_st_file *f;
    ck_assert_msg(gf_st_open(path, &f, &err) == GF_OK, "%s", err.msg);
    ck_assert_uint_eq(gf_st_header_len(f) % 8, 0);
    ck_assert_uint_eq(gf_st_count(f), N);
    for (int i = 0; i < N; i++) {
        const gf_st_tensor *t = gf_st_at(f, (size_t)i); /* file order == write order */
        ck_assert_str_eq(t->name, names[i]);
        ck_assert_int_eq(t->dtype, ts[i].dtype);
        ck_assert_int_eq(t->rank, ts[i].rank);
        for (int d = 0; d < t->rank; d++)
            ck_assert_int_eq(t->shape[d], shapes[i][d]);
        ck_assert(memcmp(t->data, datas[i], t->nbytes) == 0);
        ck_assert_ptr_eq(gf_st_find(f, names[i]), t);
        free(datas[i]);
    }
    ck_assert_str_eq(gf_st_meta_get(f, "format"), "pt");
    ck_assert_str_eq(gf_st_meta_get(f, "note"), "quote\" and \\ and \xc3\xa9");
    ck_assert_ptr_null(gf_st_meta_get(f, "absent"));
    gf_st_close(f);
    /* no temporary file is left behind */
    char *tmp = gf_test_path(tmpdir, "rt.safetensors.tmp");
    ck_assert_int_ne(access(tmp, F_OK), 0);
    free(tmp);
    free(path);
}
END_TEST

START_TEST(test_writer_rejects_bad_shape)
{
    int64_t shape[1] = {-3};
    gf_st_wtensor t = {"bad", GF_DT_F32, 1, shape, NULL};
    char *path = gf_test_path(tmpdir, "bad.safetensors");
    gf_err err;
    ck_assert_int_eq(gf_st_write(path, &t, 1, NULL, 0, &err), GF_ERR_INVALID);
    ck_assert_msg(strstr(err.msg, "tensor 'bad'") != NULL, "%s", err.msg);
    ck_assert_int_ne(access(path, F_OK), 0);
    free(path);
}
END_TEST

/* A file written by tests/core/st_pywriter.py: Python's struct and json only. */
START_TEST(test_independent_python_writer)
{
    const char *py = getenv("GF_PYTHON");
    const char *script = getenv("GF_ST_PYWRITER");
    ck_assert_msg(py != NULL && script != NULL,
                  "GF_PYTHON and GF_ST_PYWRITER must be set (meson sets them)");
    char *path = gf_test_path(tmpdir, "py.safetensors");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl(py, py, script, path, (char *)NULL);
        _exit(127);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "python writer failed");
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(path, &f, &err) == GF_OK, "%s", err.msg);
    ck_assert_str_eq(gf_st_meta_get(f, "format"), "pt");
    /* fc.weight: F32 [2,3], values i * 0.5 - 1 */
    const gf_st_tensor *w = gf_st_find(f, "fc.weight");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->dtype, GF_DT_F32);
    ck_assert_int_eq(w->rank, 2);
    ck_assert_int_eq(w->shape[0], 2);
    ck_assert_int_eq(w->shape[1], 3);
    for (int i = 0; i < 6; i++) {
        float v;
        memcpy(&v, (const char *)w->data + 4 * i, 4);
        ck_assert(v == (float)i * 0.5f - 1.0f);
    }
    /* ids: I64 [4] = -2, -1, 0, 1e12 */
    const gf_st_tensor *ids = gf_st_find(f, "ids");
    ck_assert_int_eq(ids->dtype, GF_DT_I64);
    int64_t want_ids[4] = {-2, -1, 0, 1000000000000ll};
    ck_assert(memcmp(ids->data, want_ids, 32) == 0);
    /* half: F16 [3] = 1.0, -2.0, 65504 */
    const gf_st_tensor *h = gf_st_find(f, "half");
    ck_assert_int_eq(h->dtype, GF_DT_F16);
    uint16_t hv[3];
    memcpy(hv, h->data, 6);
    ck_assert(gf_f16_to_f32(hv[0]) == 1.0f && gf_f16_to_f32(hv[1]) == -2.0f &&
              gf_f16_to_f32(hv[2]) == 65504.0f);
    /* bhalf: BF16 [2] = 1.0, -0.5 (top halves of the F32 patterns) */
    const gf_st_tensor *b = gf_st_find(f, "bhalf");
    ck_assert_int_eq(b->dtype, GF_DT_BF16);
    uint16_t bv[2];
    memcpy(bv, b->data, 4);
    ck_assert(gf_bf16_to_f32(bv[0]) == 1.0f && gf_bf16_to_f32(bv[1]) == -0.5f);
    /* scalar U8 rank 0 = 7, and an empty tensor */
    const gf_st_tensor *sc = gf_st_find(f, "scalar");
    ck_assert_int_eq(sc->rank, 0);
    ck_assert_int_eq(*(const unsigned char *)sc->data, 7);
    ck_assert_uint_eq(gf_st_find(f, "empty")->nbytes, 0);
    gf_st_close(f);
    free(path);
}
END_TEST

/* Peak resident memory of this process, in bytes. */
static size_t peak_rss(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024;
}

/* A buffer holding an 8-byte length and the header text (no data). */
static unsigned char *header_buf(const char *prefix, const char *fill, size_t reps,
                                 const char *suffix, size_t *len)
{
    size_t pl = strlen(prefix), fl = strlen(fill), sl = strlen(suffix);
    size_t n = pl + fl * reps + sl;
    unsigned char *b = malloc(8 + n);
    ck_assert_ptr_nonnull(b);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    unsigned char *p = b + 8;
    memcpy(p, prefix, pl);
    p += pl;
    for (size_t i = 0; i < reps; i++, p += fl)
        memcpy(p, fill, fl);
    memcpy(p, suffix, sl);
    *len = 8 + n;
    return b;
}

/* Issue 18 item 3: a valid-JSON header of ~20 MB whose one tensor entry
 * carries millions of numbers the format does not define was accepted and
 * held as a tree (~33x its size). It is refused by name, and reading it costs
 * a bounded amount of memory; so does a shape of millions of dimensions. */
START_TEST(test_hostile_header_bounded)
{
    const size_t reps = 10u * 1000 * 1000;
    struct { const char *prefix, *fill, *suffix, *expect; } cases[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"junk\":[0", ",0",
         "]}}", "tensor 'w': unknown key 'junk'"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[1", ",1", "]}}",
         "tensor 'w': rank 10000001 exceeds 8"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0", ",0", "]}}",
         "tensor 'w': data_offsets has 10000001 entries, expected 2"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len;
        unsigned char *b = header_buf(cases[c].prefix, cases[c].fill, reps, cases[c].suffix, &len);
        size_t before = peak_rss();
        gf_st_file *f = NULL;
        gf_err err;
        gf_err_clear(&err);
        ck_assert_int_ne(gf_st_parse(b, len, &f, &err), GF_OK);
        size_t grew = peak_rss() - before;
        ck_assert_msg(strstr(err.msg, cases[c].expect) != NULL, "'%s' lacks '%s'", err.msg,
                      cases[c].expect);
        ck_assert_msg(grew < 8u << 20, "reading a %zu-byte header grew the peak by %zu bytes",
                      len, grew);
        free(b);
    }
}
END_TEST

/* What a valid file keeps is O(tensors): 100,000 tensors of one element in
 * a ~7.7 MB header cost well under what a tree of it would (~33x). */
START_TEST(test_many_tensors_bounded)
{
    const size_t n = 100000;
    gf_buf h;
    gf_buf_init(&h);
    ck_assert_int_eq(gf_buf_append_str(&h, "{\"__metadata__\":{\"format\":\"pt\"}"), GF_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(gf_buf_printf(&h, ",\"layer.%zu.weight\":{\"dtype\":\"U8\",\"shape\":[1],"
                                           "\"data_offsets\":[%zu,%zu]}", i, i, i + 1),
                         GF_OK);
    ck_assert_int_eq(gf_buf_append_str(&h, "}"), GF_OK);
    unsigned char *b = malloc(8 + h.len + n);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    memcpy(b + 8, h.data, h.len);
    memset(b + 8 + h.len, 7, n);
    size_t before = peak_rss();
    gf_st_file *f = NULL;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_msg(gf_st_parse(b, 8 + h.len + n, &f, &err) == GF_OK, "%s", err.msg);
    size_t grew = peak_rss() - before;
    ck_assert_uint_eq(gf_st_count(f), n);
    ck_assert_ptr_nonnull(gf_st_find(f, "layer.99999.weight"));
    ck_assert_str_eq(gf_st_meta_get(f, "format"), "pt");
    /* a tensor entry is ~100 bytes, its name ~20: 12 MB, under ASan (redzones, the
     * quarantine of the arrays as they grow) ~7x the header; a tree is ~33x */
    ck_assert_msg(grew < 12 * h.len, "a %zu-byte header grew the peak by %zu bytes", h.len, grew);
    gf_st_close(f);
    free(b);
    gf_buf_deinit(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_malformed_corpus);
    tcase_add_test(tc, test_valid_edge_cases);
    tcase_add_test(tc, test_round_trip_every_dtype);
    tcase_add_test(tc, test_writer_rejects_bad_shape);
    tcase_add_test(tc, test_independent_python_writer);
    tcase_add_test(tc, test_hostile_header_bounded);
    tcase_add_test(tc, test_many_tensors_bounded);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
