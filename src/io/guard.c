/*
 * guard.c - inputs that shrink while they are read.
 *
 * A mapped input that another process truncates turns every read of a page
 * past its new end into SIGBUS.  The reads happen anywhere (a kernel on an
 * OpenMP worker, BLAS, zstd), so there is no place to unwind to: sigsetjmp
 * is not allowed across those threads.  Instead the handler maps zero pages
 * over the whole mapping, which lets the faulting read complete (with
 * zeros), marks the mapping as changed and returns; the command checks
 * tio_input_changed before it keeps any result.  A fault outside every
 * registered mapping is a real bug or a real SIGBUS: the handler restores
 * the default action and returns, so the faulting access kills the process
 * as it would have without the handler.
 */
#include "io_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_MAPPINGS 256

/* One registered read-only mapping.  The handler reads only base, length
 * and the state; a slot is filled (path, length, then base) before it is
 * live, and emptied (base first) before its path is freed. */
struct slot {
    _Atomic(uintptr_t) base;   /* 0: free */
    _Atomic(uintptr_t) length; /* bytes, rounded up to whole pages */
    atomic_int faulted;        /* zero pages were mapped over it */
    char *_Atomic path;
};

static struct slot slots[MAX_MAPPINGS];
static atomic_int any_faulted;
static char *_Atomic changed_path; /* of an unregistered faulted mapping */
static atomic_int installed;

static uintptr_t page_round(uintptr_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

    return (n + page - 1) & ~(page - 1);
}

void tio__guard_register(const void *base, uint64_t length, const char *path)
{
    char *copy = strdup(path ? path : "-");

    if (!copy || length == 0) {
        free(copy);
        return;
    }
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        uintptr_t none = 0;
        struct slot *s = &slots[i];
        /* claim the slot with a placeholder base the handler never matches */
        if (!atomic_compare_exchange_strong(&s->base, &none, (uintptr_t)1))
            continue;
        atomic_store(&s->path, copy);
        atomic_store(&s->faulted, 0);
        atomic_store(&s->length, page_round((uintptr_t)length));
        atomic_store(&s->base, (uintptr_t)base);
        return;
    }
    free(copy); /* a full registry: the mapping goes unguarded */
}

void tio__guard_unregister(const void *base)
{
    struct slot *s = NULL;
    char *path;

    for (int i = 0; i < MAX_MAPPINGS && !s; i++) {
        uintptr_t b = (uintptr_t)base;
        if (base && atomic_compare_exchange_strong(&slots[i].base, &b, (uintptr_t)1))
            s = &slots[i];
    }
    if (!s)
        return;
    path = atomic_exchange(&s->path, NULL);
    if (atomic_load(&s->faulted)) {
        char *none = NULL;
        /* the first changed input keeps its name for the message */
        if (atomic_compare_exchange_strong(&changed_path, &none, path))
            path = NULL;
    }
    free(path);
    atomic_store(&s->length, 0);
    atomic_store(&s->faulted, 0);
    atomic_store(&s->base, 0);
}

/* The live slot whose mapping holds addr, or NULL.  Async-signal-safe. */
static struct slot *find(uintptr_t addr)
{
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        struct slot *s = &slots[i];
        uintptr_t base = atomic_load(&s->base);
        if (base > 1 && addr >= base && addr - base < atomic_load(&s->length))
            return s;
    }
    return NULL;
}

/* Maps zero pages over s's mapping and marks it; false when that failed.
 * Async-signal-safe (mmap is a plain system call on Linux). */
static bool blank(struct slot *s)
{
    uintptr_t base = atomic_load(&s->base), length = atomic_load(&s->length);

    if (mmap((void *)base, (size_t)length, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0) == MAP_FAILED)
        return false;
    atomic_store(&s->faulted, 1);
    atomic_store(&any_faulted, 1);
    return true;
}

bool tio__guard_claim(const void *addr)
{
    struct slot *s = find((uintptr_t)addr);

    return s && blank(s);
}

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    struct slot *s = info->si_code > 0 ? find((uintptr_t)info->si_addr) : NULL;
    int saved = errno;

    (void)context;
    if (!s || !blank(s)) {
        struct sigaction dfl;
        /* not an input's fault: die of it, as without the handler, but
         * leave no temporary file behind */
        tio_remove_temporaries();
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        /* a fault strikes again on return; a sent signal must be sent again */
        if (info->si_code <= 0)
            raise(sig);
    }
    errno = saved;
}

tr_status tio_guard_inputs(void)
{
    static char stack[64 << 10];
    stack_t ss;
    struct sigaction sa;

    if (atomic_exchange(&installed, 1))
        return TR_OK;
    /* the main thread's handler runs on a stack of its own, so that it
     * runs even when the fault was a stack that cannot grow */
    memset(&ss, 0, sizeof ss);
    ss.ss_sp = stack;
    ss.ss_size = sizeof stack;
    if (sigaltstack(&ss, NULL) != 0)
        return tio__error(TR_ERR_IO, "cannot set a signal stack: %s", strerror(errno));
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) != 0)
        return tio__error(TR_ERR_IO, "cannot catch SIGBUS: %s", strerror(errno));
    return TR_OK;
}

const char *tio_input_changed(void)
{
    char *path;

    if (!atomic_load(&any_faulted))
        return NULL;
    for (int i = 0; i < MAX_MAPPINGS; i++) {
        struct slot *s = &slots[i];
        if (atomic_load(&s->base) > 1 && atomic_load(&s->faulted)) {
            path = atomic_load(&s->path);
            if (path)
                return path;
        }
    }
    path = atomic_load(&changed_path);
    return path ? path : "-";
}
