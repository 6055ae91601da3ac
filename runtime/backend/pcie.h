/* gpufaas — a PCIe link's generation, width and peak bandwidth, from sysfs
 * (runtime/backend; the cuda module and the tests).
 *
 * The figure that matters for swap-in is what the link can carry: the
 * highest speed and width that both the device and the port above it
 * support (max_link_speed, max_link_width). The current_link_* attributes
 * are what is negotiated now, and a GPU drops its link to 2.5 GT/s when idle,
 * so reading them at open time reports a Gen1 link on a Gen5 card. */
#ifndef GF_BACKEND_PCIE_H
#define GF_BACKEND_PCIE_H

typedef struct gf_pcie_link {
    int gen;     /* 1..6; 0 when unknown */
    int width;   /* lanes; 0 when unknown */
    double gbps; /* usable GB/s in each direction after line encoding; 0 when unknown */
} gf_pcie_link;

/* Read the link of the PCI device whose sysfs folder is devdir (e.g.
 * /sys/bus/pci/devices/0000:17:00.0), bounded by the port above it when
 * that is a PCI device too. Unknown fields stay 0; never fails. devdir is
 * borrowed. */
void gf_pcie_link_read(const char *devdir, gf_pcie_link *out);

#endif /* GF_BACKEND_PCIE_H */
