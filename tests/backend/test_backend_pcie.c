/* Tests for runtime/backend/pcie.c: a GPU's PCIe link (generation, width,
 * bandwidth) read from a sysfs tree laid out as Linux does, bounded by the
 * port above it. Needs no device; part of the backend suites
 * (test_backend.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/pcie.h"
#include "backend_testlib.h"
#include "testutil.h"

static void put_attr(const char *dir, const char *name, const char *text)
{
    char *p = gf_test_path(dir, name);
    gf_test_write_file(p, text, strlen(text));
    free(p);
}

START_TEST(test_pcie_link_from_sysfs)
{
    char *root = gf_test_tmpdir();
    /* root complex pci0000:15 / port 0000:15:01.0 / GPU 0000:17:00.0; the
     * idle GPU's current link is down at Gen1 x16 */
    char *rc = gf_test_path(root, "pci0000:15");
    char *port = gf_test_path(rc, "0000:15:01.0");
    char *gpu = gf_test_path(port, "0000:17:00.0");
    ck_assert_int_eq(mkdir(rc, 0755), 0);
    ck_assert_int_eq(mkdir(port, 0755), 0);
    ck_assert_int_eq(mkdir(gpu, 0755), 0);
    put_attr(gpu, "current_link_speed", "2.5 GT/s PCIe\n");
    put_attr(gpu, "current_link_width", "16\n");
    put_attr(gpu, "max_link_speed", "32.0 GT/s PCIe\n");
    put_attr(gpu, "max_link_width", "16\n");
    put_attr(port, "max_link_speed", "32.0 GT/s PCIe\n");
    put_attr(port, "max_link_width", "16\n");
    gf_pcie_link l;
    gf_pcie_link_read(gpu, &l);
    ck_assert_int_eq(l.gen, 5);
    ck_assert_int_eq(l.width, 16);
    ck_assert_msg(l.gbps > 62.9 && l.gbps < 63.1, "%.3f GB/s", l.gbps);
    /* a Gen4 x8 slot bounds a Gen5 x16 card */
    put_attr(port, "max_link_speed", "16.0 GT/s PCIe\n");
    put_attr(port, "max_link_width", "8\n");
    gf_pcie_link_read(gpu, &l);
    ck_assert_int_eq(l.gen, 4);
    ck_assert_int_eq(l.width, 8);
    ck_assert_msg(l.gbps > 15.7 && l.gbps < 15.8, "%.3f GB/s", l.gbps);
    /* the same through a symbolic link, as /sys/bus/pci/devices/BDF is */
    char *alias = gf_test_path(root, "alias");
    ck_assert_int_eq(symlink(gpu, alias), 0);
    gf_pcie_link_read(alias, &l);
    ck_assert_int_eq(l.gen, 4);
    /* an older kernel's "8 GT/s" without a port above; unknown attributes */
    put_attr(rc, "max_link_speed", "8 GT/s\n");
    put_attr(rc, "max_link_width", "4\n");
    gf_pcie_link_read(rc, &l);
    ck_assert_int_eq(l.gen, 3);
    ck_assert_int_eq(l.width, 4);
    char *none = gf_test_path(root, "missing");
    gf_pcie_link_read(none, &l);
    ck_assert_int_eq(l.gen, 0);
    ck_assert(l.gbps == 0.0);
    put_attr(gpu, "max_link_speed", "Unknown\n");
    gf_pcie_link_read(gpu, &l);
    ck_assert_int_eq(l.gen, 4); /* the port's maximum is all that is known */
    free(none);
    free(alias);
    free(gpu);
    free(port);
    free(rc);
    gf_test_rmtree(root);
}
END_TEST

void tb_pcie_tests(TCase *tc)
{
    tcase_add_test(tc, test_pcie_link_from_sysfs);
}
