/* Tests for store/sha256 (SHA-256 through libcrypto's EVP): the FIPS 180-4 /
 * NIST example vectors, streaming in every split of a message, files of many
 * lengths against Python's hashlib (an independent implementation), errors,
 * and a hash that stops when asked. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sha256.h"
#include "testutil.h"

static void hex_of(const void *data, size_t n, char hex[GF_SHA256_HEX_LEN])
{
    ck_assert_int_eq(gf_sha256_buf(data, n, hex, NULL), GF_OK);
}

/* The NIST CSRC example messages for SHA-256 (FIPS 180-4 examples). */
START_TEST(test_nist_vectors)
{
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrl"
         "m"
         "nopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[GF_SHA256_HEX_LEN];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        hex_of(v[i].msg, strlen(v[i].msg), hex);
        ck_assert_str_eq(hex, v[i].hex);
    }
    /* one million 'a', fed in uneven chunks */
    gf_sha256 c = {0};
    ck_assert_int_eq(gf_sha256_init(&c, NULL), GF_OK);
    char a[997];
    memset(a, 'a', sizeof a);
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof a ? left : sizeof a;
        gf_sha256_update(&c, a, n);
        left -= n;
    }
    ck_assert_int_eq(gf_sha256_final(&c, hex, NULL), GF_OK);
    gf_sha256_deinit(&c);
    gf_sha256_deinit(&c); /* a second deinit is a no-op */
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

/* Feeding a message in two pieces at every split point, or byte by byte,
 * gives the one-shot digest. */
START_TEST(test_streaming_splits)
{
    unsigned char msg[200];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 7 + 3);
    gf_sha256 c = {0}; /* reused: init after final starts afresh */
    for (size_t len = 0; len <= sizeof msg; len += 1) {
        char want[GF_SHA256_HEX_LEN], got[GF_SHA256_HEX_LEN];
        hex_of(msg, len, want);
        for (size_t cut = 0; cut <= len; cut += (len > 130 ? 13 : 1)) {
            ck_assert_int_eq(gf_sha256_init(&c, NULL), GF_OK);
            gf_sha256_update(&c, msg, cut);
            gf_sha256_update(&c, msg + cut, len - cut);
            ck_assert_int_eq(gf_sha256_final(&c, got, NULL), GF_OK);
            ck_assert_msg(strcmp(got, want) == 0, "len %zu cut %zu", len, cut);
        }
        ck_assert_int_eq(gf_sha256_init(&c, NULL), GF_OK);
        for (size_t i = 0; i < len; i++)
            gf_sha256_update(&c, msg + i, 1);
        ck_assert_int_eq(gf_sha256_final(&c, got, NULL), GF_OK);
        ck_assert_msg(strcmp(got, want) == 0, "bytewise len %zu", len);
    }
    gf_sha256_deinit(&c);
}
END_TEST

START_TEST(test_hex_valid)
{
    ck_assert(
        gf_sha256_hex_valid("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    ck_assert(!gf_sha256_hex_valid(NULL));
    ck_assert(!gf_sha256_hex_valid(""));
    ck_assert(
        !gf_sha256_hex_valid("E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
    ck_assert(
        !gf_sha256_hex_valid("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"));
    ck_assert(
        !gf_sha256_hex_valid("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555"));
    ck_assert(
        !gf_sha256_hex_valid("g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
}
END_TEST

/* Random files of lengths around every block boundary and some large ones:
 * gf_sha256_file must agree with Python's hashlib. */
START_TEST(test_random_vs_hashlib)
{
    const char *py = getenv("GF_PYTHON");
    ck_assert_msg(py != NULL && py[0] != '\0', "GF_PYTHON must be set (meson sets it)");
    char *dir = gf_test_tmpdir();
    gf_test_rng rng;
    gf_test_rng_seed(&rng, 0x5ea256);
    enum { NFILES = 40 };
    size_t lens[NFILES];
    char *argv[NFILES + 4];
    argv[0] = (char *)py;
    argv[1] = "-c";
    argv[2] = "import hashlib, sys\n"
              "for p in sys.argv[1:]:\n"
              "    print(hashlib.sha256(open(p, 'rb').read()).hexdigest())\n";
    for (int i = 0; i < NFILES; i++) {
        /* 0..130 covers the one/two padding-block cases; then larger sizes */
        lens[i] = i < 24 ? (size_t)(i * 5 + (i % 3)) : (size_t)gf_test_rng_below(&rng, 300000);
        unsigned char *data = malloc(lens[i] + 1);
        ck_assert_ptr_nonnull(data);
        for (size_t j = 0; j < lens[i]; j++)
            data[j] = (unsigned char)gf_test_rng_u64(&rng);
        char name[32];
        snprintf(name, sizeof name, "r%02d.bin", i);
        argv[3 + i] = gf_test_path(dir, name);
        gf_test_write_file(argv[3 + i], data, lens[i]);
        free(data);
    }
    argv[3 + NFILES] = NULL;
    char *out = NULL, *errs = NULL;
    int rc = gf_test_run_cmd(argv, &out, &errs, 60);
    ck_assert_msg(rc == 0, "python failed (%d): %s", rc, errs);
    char *line = out;
    for (int i = 0; i < NFILES; i++) {
        char *nl = strchr(line, '\n');
        ck_assert_ptr_nonnull(nl);
        *nl = '\0';
        char hex[GF_SHA256_HEX_LEN];
        uint64_t size = 0;
        gf_err err;
        ck_assert_int_eq(gf_sha256_file(argv[3 + i], hex, &size, &err), GF_OK);
        ck_assert_uint_eq(size, lens[i]);
        ck_assert_msg(strcmp(hex, line) == 0, "file %d (%zu bytes): ours %s, hashlib %s", i,
                      lens[i], hex, line);
        line = nl + 1;
        free(argv[3 + i]);
    }
    free(out);
    free(errs);
    gf_test_rmtree(dir);
}
END_TEST

START_TEST(test_file_errors)
{
    char hex[GF_SHA256_HEX_LEN];
    gf_err err;
    ck_assert_int_eq(gf_sha256_file("/nonexistent/gf/weights.safetensors", hex, NULL, &err),
                     GF_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.msg, "/nonexistent/gf/weights.safetensors"));
    /* a directory opens but cannot be read */
    ck_assert_int_eq(gf_sha256_file("/", hex, NULL, &err), GF_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.msg, "read"));
}
END_TEST

/* A background check stops as soon as it is asked to, and hashes the whole
 * file when it is not. */
START_TEST(test_file_until_stops)
{
    char *dir = gf_test_tmpdir();
    char *path = gf_test_path(dir, "big.bin");
    size_t n = 5u << 20; /* five of the reader's chunks */
    char *data = calloc(1, n);
    ck_assert_ptr_nonnull(data);
    gf_test_write_file(path, data, n);
    char want[GF_SHA256_HEX_LEN], hex[GF_SHA256_HEX_LEN];
    hex_of(data, n, want);
    free(data);
    _Atomic bool stop = false;
    uint64_t size = 0;
    ck_assert_int_eq(gf_sha256_file_until(path, &stop, hex, &size, NULL), GF_OK);
    ck_assert_str_eq(hex, want);
    ck_assert_uint_eq(size, n);
    atomic_store(&stop, true);
    gf_err err;
    ck_assert_int_eq(gf_sha256_file_until(path, &stop, hex, &size, &err), GF_ERR_CLOSED);
    ck_assert_str_eq(hex, "");
    ck_assert_ptr_nonnull(strstr(err.msg, path));
    free(path);
    gf_test_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_sha256");
    TCase *tc = tcase_create("sha256");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nist_vectors);
    tcase_add_test(tc, test_streaming_splits);
    tcase_add_test(tc, test_hex_valid);
    tcase_add_test(tc, test_random_vs_hashlib);
    tcase_add_test(tc, test_file_errors);
    tcase_add_test(tc, test_file_until_stops);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
