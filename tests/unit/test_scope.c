/*
 * test_scope.c - scopes: temporaries released at the end, kept values moved
 * to the parent, retain and release, sessions, and one stack per thread.
 */
#include <pthread.h>

#include "tensorrun.h"
#include "tap.h"

#define MiB (UINT64_C(1) << 20)

static uint64_t active(void)
{
    struct tr_memory_stats s;

    tr_memory_stats(TR_CPU, &s);
    return s.active_bytes;
}

static struct tr_tensor *f32(int64_t rows, int64_t cols)
{
    return tr_zeros(TR_DTYPE_F32, 2, (int64_t[]){rows, cols}, TR_CPU);
}

static void test_temporaries(void)
{
    uint64_t before = active();
    struct tr_scope *outer = tr_scope_begin(), *inner;
    struct tr_tensor *kept, *view, *tmp;

    is_int(tr_scope_depth(), 1, "one scope open");
    inner = tr_scope_begin();
    kept = f32(1024, 1024);               /* 4 MiB */
    tmp = f32(768, 1024);                 /* 3 MiB, rounded to 4 MiB */
    f32(1, 25);                           /* 100 bytes, rounded to 512 */
    view = tr_transpose(kept, 0, 1);      /* no memory of its own */
    ok(tmp && view, "temporaries made");
    is_int(tr_scope_size(inner), 4, "the inner scope holds four handles");
    is_int(active() - before, 8 * MiB + 512, "active: 4 MiB + 4 MiB + 512 B");
    ok(tr_scope_end(inner, &kept, 1) == TR_OK, "inner scope ended, keeping one");
    is_int(active() - before, 4 * MiB, "active falls to exactly the kept 4 MiB");
    is_int(tr_scope_size(outer), 1, "the kept handle moved to the parent");
    is_int(tr_tensor_ndim(kept), 2, "the kept handle is alive");
    is_int(tr_scope_depth(), 1, "back to one scope");
    ok(tr_scope_end(outer, NULL, 0) == TR_OK, "outer scope ended");
    is_int(active(), before, "nothing is left active");
    is_int(tr_scope_depth(), 0, "no scope open");
}

static void test_keep_to_bottom(void)
{
    uint64_t before = active();
    struct tr_scope *s = tr_scope_begin();
    struct tr_tensor *a = f32(256, 1024), *b = f32(256, 1024);
    struct tr_tensor *keep[3] = {a, NULL, a};

    ok(tr_scope_end(s, keep, 3) == TR_OK, "NULL and repeated keep entries are harmless");
    is_int(active() - before, 1 * MiB, "the kept 1 MiB survives the bottom scope");
    is_int(tr_tensor_ndim(a), 2, "and is free-standing now");
    (void)b;
    tr_release(a);
    is_int(active(), before, "released by hand");
}

static void test_retain_release(void)
{
    uint64_t before = active();
    struct tr_scope *outer = tr_scope_begin(), *inner = tr_scope_begin();
    struct tr_tensor *a = f32(256, 1024), *b = f32(256, 1024);

    ok(tr_retain(a) == TR_OK, "retain moves a handle up now");
    is_int(tr_scope_size(inner), 1, "the inner scope holds one handle");
    is_int(tr_scope_size(outer), 1, "the outer scope holds the retained one");
    ok(tr_release(b) == TR_OK, "release frees at once");
    is_int(tr_scope_size(inner), 0, "the released handle left its scope");
    is_int(active() - before, 1 * MiB, "only the retained 1 MiB remains");
    tr_scope_end(inner, NULL, 0);
    is_int(active() - before, 1 * MiB, "the retained tensor outlives its scope");
    ok(tr_retain(a) == TR_OK && tr_scope_size(outer) == 0,
       "retain from the bottom scope makes a handle free-standing");
    tr_scope_end(outer, NULL, 0);
    is_int(active() - before, 1 * MiB, "a free-standing handle survives every scope");
    ok(tr_retain(a) == TR_OK, "retain of a free-standing handle is a no-op");
    tr_release(a);
    is_int(active(), before, "all gone");
}

static void test_errors(void)
{
    struct tr_scope *outer = tr_scope_begin(), *inner = tr_scope_begin();
    bool was = tr_debug_handles(true);
    struct tr_tensor *t = f32(2, 2), *dead = f32(2, 2);

    is_int(tr_scope_end(outer, NULL, 0), TR_ERR_STATE,
           "ending a scope that is not innermost fails");
    is_int(tr_session_begin(), TR_ERR_STATE, "a session cannot start above open scopes");
    is_int(tr_session_end(), TR_ERR_STATE, "no session to end");
    tr_release(dead);
    is_int(tr_scope_end(inner, &dead, 1), TR_ERR_HANDLE, "keeping a released handle fails");
    is_int(tr_scope_depth(), 2, "and leaves the scope open");
    ok(tr_scope_end(inner, &t, 1) == TR_OK && tr_scope_end(outer, NULL, 0) == TR_OK,
       "both end normally afterwards");
    is_int(tr_scope_end(NULL, NULL, 0), TR_ERR_STATE, "ending no scope fails");
    tr_debug_handles(was);
}

static void *release_from_elsewhere(void *arg)
{
    return (void *)(intptr_t)tr_release(arg);
}

static void test_other_threads_handles(void)
{
    struct tr_scope *s = tr_scope_begin();
    struct tr_tensor *t = f32(4, 4);
    pthread_t th;
    void *status;

    pthread_create(&th, NULL, release_from_elsewhere, t);
    pthread_join(th, &status);
    is_int((intptr_t)status, TR_ERR_STATE, "another thread cannot release a scoped handle");
    is_int(tr_tensor_ndim(t), 2, "and the handle stays alive");
    is_int(tr_scope_end(s, NULL, 3), TR_ERR_INVALID, "keeping 3 handles of no array fails");
    ok(tr_scope_end(s, NULL, 0) == TR_OK, "the scope ends normally");
}

static void test_session(void)
{
    uint64_t before = active();
    struct tr_scope *s;

    ok(tr_session_begin() == TR_OK, "session begun");
    f32(512, 1024);
    s = tr_scope_begin();
    struct tr_tensor *kept = f32(512, 1024);
    tr_scope_end(s, &kept, 1);
    is_int(active() - before, 4 * MiB, "values kept into the session live on");
    s = tr_scope_begin();
    f32(512, 1024);
    is_int(tr_scope_end(s, NULL, 0), TR_OK, "a scope inside the session ends normally");
    s = tr_scope_begin();
    f32(512, 1024);
    (void)s;
    is_int(tr_session_end(), TR_OK, "session ended with a scope still open above it");
    is_int(active(), before, "the session's and the open scope's values are released");
    is_int(tr_scope_depth(), 0, "no scope left open");
}

struct thread_result {
    size_t depth_inside;
    size_t size_inside;
    uint64_t ok;
};

static void *thread_body(void *arg)
{
    struct thread_result *r = arg;
    struct tr_scope *s = tr_scope_begin(), *left_open;

    for (int i = 0; i < 5; i++)
        f32(16, 16);
    r->depth_inside = tr_scope_depth();
    r->size_inside = tr_scope_size(s);
    r->ok = tr_scope_end(s, NULL, 0) == TR_OK;
    /* a scope left open when the thread ends is released with it */
    left_open = tr_scope_begin();
    f32(256, 1024);
    (void)left_open;
    return NULL;
}

static void test_threads(void)
{
    uint64_t before = active();
    struct tr_scope *mine = tr_scope_begin();
    struct thread_result r[2] = {{0, 0, 0}, {0, 0, 0}};
    pthread_t th[2];

    f32(4, 4);
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, thread_body, &r[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ok(r[0].depth_inside == 1 && r[1].depth_inside == 1,
       "threads: each thread sees only its own scope");
    ok(r[0].size_inside == 5 && r[1].size_inside == 5 && r[0].ok && r[1].ok,
       "threads: each scope holds that thread's five handles");
    is_int(tr_scope_size(mine), 1, "threads: this thread's scope is untouched");
    is_int(tr_scope_depth(), 1, "threads: this thread's depth is untouched");
    tr_scope_end(mine, NULL, 0);
    is_int(active(), before, "threads: scopes left open at thread exit were released");
}

int main(void)
{
    test_temporaries();
    test_keep_to_bottom();
    test_retain_release();
    test_errors();
    test_other_threads_handles();
    test_session();
    test_threads();
    return done_testing();
}
