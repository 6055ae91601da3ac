/* gpufaas — a PCIe link from sysfs. See pcie.h. */
#include "backend/pcie.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A number at the start of devdir/name ("32.0 GT/s PCIe", "16"), or 0. */
static double read_number(const char *devdir, const char *name)
{
    char path[PATH_MAX], line[64];
    if (snprintf(path, sizeof path, "%s/%s", devdir, name) >= (int)sizeof path)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    double v = 0;
    if (fgets(line, sizeof line, f) != NULL)
        v = strtod(line, NULL);
    fclose(f);
    return v > 0 ? v : 0;
}

/* The lower of two maxima, ignoring an unknown (0) one. */
static double lower_known(double a, double b)
{
    if (a <= 0)
        return b;
    if (b <= 0)
        return a;
    return a < b ? a : b;
}

/* True when the last component of path looks like a PCI address
 * (dddd:bb:dd.f), i.e. the folder above a device is a port, not the root
 * complex's pciDDDD:BB. */
static bool is_pci_address(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    unsigned dom, bus, dev, fn;
    char tail;
    return sscanf(base, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4;
}

void gf_pcie_link_read(const char *devdir, gf_pcie_link *out)
{
    memset(out, 0, sizeof *out);
    double gts = read_number(devdir, "max_link_speed");
    double width = read_number(devdir, "max_link_width");
    char real[PATH_MAX];
    if (realpath(devdir, real) != NULL) {
        char *slash = strrchr(real, '/');
        if (slash != NULL && slash != real) {
            *slash = '\0'; /* the folder above: the port the device hangs off */
            if (is_pci_address(real)) {
                gts = lower_known(gts, read_number(real, "max_link_speed"));
                width = lower_known(width, read_number(real, "max_link_width"));
            }
        }
    }
    /* GT/s per lane -> generation and usable GB/s per lane (8b/10b for
     * Gen1-2, 128b/130b for Gen3-5, FLIT mode for Gen6) */
    static const struct {
        double gts;
        int gen;
        double gbps_lane;
    } gens[] = {{2.5, 1, 0.25},    {5.0, 2, 0.5},     {8.0, 3, 0.985},
                {16.0, 4, 1.969}, {32.0, 5, 3.938}, {64.0, 6, 7.563}};
    for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
        if (gts > gens[i].gts - 0.1 && gts < gens[i].gts + 0.1) {
            out->gen = gens[i].gen;
            out->width = (int)width;
            out->gbps = gens[i].gbps_lane * width;
        }
    }
}
