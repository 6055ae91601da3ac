/* gpufaas-worker: everything is in the worker library (entry.c), so that a
 * test can build the same program with a kind of its own linked in. */
#include "worker/worker.h"

int main(int argc, char **argv)
{
    return gf_worker_main(argc, argv);
}
