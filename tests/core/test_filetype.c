/* What a user sent instead of safetensors: gf_filetype_sniff on files the
 * real tools wrote (torch.save in both formats, torch.onnx.export,
 * numpy.save and numpy.savez: tests/fixtures/torch/make_fixtures.py), and on
 * the magic numbers of the others; and the message gf_st_open gives. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/filetype.h"
#include "core/safetensors.h"
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

/* gf_st_open(path) fails with GF_ERR_FORMAT and a message holding each of
 * expect (NULL-terminated); the file's sniffed type is want. */
static void expect_file(const char *path, gf_filetype want, const char *const *expect)
{
    size_t n = 0;
    char *data = gf_test_read_file(path, &n);
    ck_assert_msg(data != NULL, "cannot read %s", path);
    ck_assert_msg(gf_filetype_sniff(data, n) == want, "%s: sniffed %d (%s), expected %d", path,
                  (int)gf_filetype_sniff(data, n), gf_filetype_describe(gf_filetype_sniff(data, n)),
                  (int)want);
    free(data);
    gf_st_file *f;
    gf_err err;
    gf_err_clear(&err);
    ck_assert_int_eq(gf_st_open(path, &f, &err), GF_ERR_FORMAT);
    for (size_t i = 0; expect[i] != NULL; i++)
        ck_assert_msg(strstr(err.msg, expect[i]) != NULL, "%s: message '%s' lacks '%s'", path,
                      err.msg, expect[i]);
    ck_assert_msg(strlen(err.msg) < GF_ERR_MSG_MAX - 1, "%s: message truncated", path);
}

static void expect_bytes(const char *name, const void *bytes, size_t n, gf_filetype want,
                         const char *const *expect)
{
    char *p = gf_test_path(tmpdir, name);
    gf_test_write_file(p, bytes, n);
    expect_file(p, want, expect);
    free(p);
}

#define EXPECT(...) ((const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_files_tools_wrote)
{
    struct {
        const char *name;
        gf_filetype type;
        const char *const *expect;
    } cases[] = {
        {"torch/mlp_bn.pt", GF_FILE_TORCH_ZIP,
         EXPECT("not a safetensors file: it is a PyTorch checkpoint (torch.save",
                "safetensors.torch.save_file(torch.load(path")},
        {"torch/mlp_bn_legacy.pt", GF_FILE_PICKLE,
         EXPECT("it is a Python pickle (torch.save's legacy format", "never unpickles")},
        {"torch/mlp_bn.onnx", GF_FILE_ONNX, EXPECT("it is an ONNX model")},
        {"torch/arr.npy", GF_FILE_NPY,
         EXPECT("a NumPy array (numpy.save", "safetensors.numpy.save_file")},
        {"torch/arr.npz", GF_FILE_NPZ,
         EXPECT("a NumPy archive (numpy.savez)", "dict(numpy.load(path))")},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = gf_test_fixture(cases[i].name);
        expect_file(p, cases[i].type, cases[i].expect);
        free(p);
    }
    /* and the real thing is one */
    char *p = gf_test_fixture("torch/mlp_bn.safetensors");
    size_t n;
    char *data = gf_test_read_file(p, &n);
    ck_assert_int_eq(gf_filetype_sniff(data, n), GF_FILE_SAFETENSORS);
    gf_st_file *f;
    gf_err err;
    ck_assert_msg(gf_st_open(p, &f, &err) == GF_OK, "%s", err.msg);
    gf_st_close(f);
    free(data);
    free(p);
}
END_TEST

START_TEST(test_magic_numbers)
{
    expect_bytes("empty", "", 0, GF_FILE_EMPTY,
                 EXPECT("not a safetensors file: it is empty (0 bytes)"));
    const char gguf[24] = "GGUF\x03\0\0\0\x02\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0";
    expect_bytes("m.gguf", gguf, sizeof gguf, GF_FILE_GGUF, EXPECT("a GGUF file (llama.cpp)"));
    const char h5[16] = "\x89HDF\r\n\x1a\n\0\0\0\0\0\x08\x08\0";
    expect_bytes("m.h5", h5, sizeof h5, GF_FILE_HDF5, EXPECT("an HDF5 file (Keras"));
    const char gz[12] = "\x1f\x8b\x08\0\0\0\0\0\0\x03\x01\x02";
    expect_bytes("m.tar.gz", gz, sizeof gz, GF_FILE_GZIP, EXPECT("gzip-compressed data"));
    const char *json = "\n  {\"name\": \"digits\", \"kind\": \"mlp\"}";
    expect_bytes("m.json", json, strlen(json), GF_FILE_JSON,
                 EXPECT("a JSON document", "the part \"manifest\""));
    const char *html = "<html><body>404 Not Found</body></html>\n";
    expect_bytes("m.html", html, strlen(html), GF_FILE_TEXT, EXPECT("it is text, not weights"));
    /* a zip archive of something else: its first entry's name tells */
    unsigned char zip[40] = {'P', 'K', 3, 4};
    zip[26] = 10;
    memcpy(zip + 30, "readme.txt", 10);
    expect_bytes("m.zip", zip, sizeof zip, GF_FILE_ZIP, EXPECT("it is a zip archive"));
    /* an ELF file: unknown, named by its first bytes */
    const char elf[16] = "\x7f"
                         "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0";
    expect_bytes("m.so", elf, sizeof elf, GF_FILE_UNKNOWN,
                 EXPECT("not a format gpufaas knows (it begins with the bytes 7f 45 4c 46 02 01 "
                        "01 00)",
                        "safetensors.torch.save_file"));
    /* tiny files */
    expect_bytes("five", "\x02\0\0\0\0", 5, GF_FILE_UNKNOWN, EXPECT("too short"));
    expect_bytes("one", "{", 1, GF_FILE_JSON, EXPECT("a JSON document"));
}
END_TEST

/* A safetensors file keeps its own precise messages: it is not misnamed. */
START_TEST(test_safetensors_stays_safetensors)
{
    unsigned char hdr[8 + 16] = {16, 0, 0, 0, 0, 0, 0, 0};
    memcpy(hdr + 8, "{\"a\":{\"dtype\":\"F", 16);
    ck_assert_int_eq(gf_filetype_sniff(hdr, sizeof hdr), GF_FILE_SAFETENSORS);
    /* header length past the end: a truncated upload */
    unsigned char cut[8 + 2] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    expect_bytes("cut.safetensors", cut, sizeof cut, GF_FILE_SAFETENSORS,
                 EXPECT("runs past the end of the file", "truncated"));
    /* the ONNX heuristic does not claim a safetensors header */
    unsigned char st[8 + 2] = {0x08, 0x07, 0x12, 0, 0, 0, 0, 0, '{', '}'};
    ck_assert_int_eq(gf_filetype_sniff(st, sizeof st), GF_FILE_SAFETENSORS);
    ck_assert_str_eq(gf_filetype_describe((gf_filetype)99), gf_filetype_describe(GF_FILE_UNKNOWN));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core_filetype");
    TCase *tc = tcase_create("filetype");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_files_tools_wrote);
    tcase_add_test(tc, test_magic_numbers);
    tcase_add_test(tc, test_safetensors_stays_safetensors);
    suite_add_tcase(s, tc);
    return gf_test_run_suite(s);
}
