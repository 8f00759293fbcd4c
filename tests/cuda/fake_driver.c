/*
 * fake_driver.c - libcuda.so.1 for tests on machines without a GPU: the two
 * calls the engine asks before it loads the CUDA module, answering that
 * one device exists.  Used only with tests/cuda/host_module.c as the module.
 */
int cuInit(unsigned flags);
int cuDeviceGetCount(int *count);

int cuInit(unsigned flags)
{
    (void)flags;
    return 0;
}

int cuDeviceGetCount(int *count)
{
    *count = 1;
    return 0;
}
