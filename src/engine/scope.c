/*
 * scope.c - the thread-local stack of scopes that every new handle joins.
 *
 * A scope is an array of the handles it holds; each handle knows its scope
 * and its place in that array, so moving or releasing one is O(1).  Scopes
 * belong to the thread that opened them: handles held by a scope must be
 * released or moved by that thread; free-standing handles by anyone.
 */
#include "engine_impl.h"

#include <pthread.h>
#include <stdlib.h>

struct tr_scope {
    pthread_t owner;
    struct tr_scope *parent;
    struct tr_tensor **handles;
    size_t count, capacity;
    bool session;
};

struct scope_stack {
    struct tr_scope *innermost;
    size_t depth;
    bool registered; /* with the thread-exit cleanup */
};

static _Thread_local struct scope_stack stack;
static pthread_key_t exit_key;
static bool exit_key_made;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void release_all(void);

/* A thread that ends with scopes open releases what they hold.  glibc runs
 * this before the thread's own storage goes away, so `stack` is still its. */
static void on_thread_exit(void *arg)
{
    (void)arg;
    release_all();
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, on_thread_exit) == 0;
}

static tr_status push(bool session)
{
    struct tr_scope *s = calloc(1, sizeof *s);

    TR_RETURN_ERROR_IF(!s, TR_ERR_OOM, "out of memory opening a scope");
    if (!stack.registered) {
        pthread_once(&exit_key_once, make_exit_key);
        stack.registered = exit_key_made && pthread_setspecific(exit_key, &stack) == 0;
    }
    s->owner = pthread_self();
    s->parent = stack.innermost;
    s->session = session;
    stack.innermost = s;
    stack.depth++;
    return TR_OK;
}

/* Makes room in s for extra more handles. */
static tr_status reserve(struct tr_scope *s, size_t extra)
{
    size_t cap = s->capacity ? s->capacity : 16;
    struct tr_tensor **h;

    if (s->count + extra <= s->capacity)
        return TR_OK;
    while (cap < s->count + extra)
        cap *= 2;
    h = realloc(s->handles, cap * sizeof *h);
    TR_RETURN_ERROR_IF(!h, TR_ERR_OOM, "out of memory registering a tensor in its scope");
    s->handles = h;
    s->capacity = cap;
    return TR_OK;
}

/* Appends t to s, which has room. */
static void append(struct tr_scope *s, struct tr_tensor *t)
{
    t->link.scope = s;
    t->link.index = s->count;
    s->handles[s->count++] = t;
}

void tr__scope_remove(struct tr_tensor *t)
{
    struct tr_scope *s = t->link.scope;
    struct tr_tensor *last;

    if (!s)
        return;
    last = s->handles[--s->count];
    s->handles[t->link.index] = last;
    last->link.index = t->link.index;
    t->link.scope = NULL;
}

tr_status tr__scope_check_owner(const struct tr_tensor *t, const char *fn)
{
    const struct tr_scope *s = t->link.scope;

    TR_RETURN_ERROR_IF(s && !pthread_equal(s->owner, pthread_self()), TR_ERR_STATE,
                       "%s: the tensor is held by a scope of another thread", fn);
    return TR_OK;
}

tr_status tr__scope_add(struct tr_tensor *t)
{
    t->link.scope = NULL;
    if (!stack.innermost)
        return TR_OK;
    TR_FORWARD_IF_ERROR(reserve(stack.innermost, 1));
    append(stack.innermost, t);
    return TR_OK;
}

/* Moves t from its scope to dest (NULL: free-standing); dest has room. */
static void move(struct tr_tensor *t, struct tr_scope *dest)
{
    tr__scope_remove(t);
    if (dest)
        append(dest, t);
}

/* Releases every handle of s and frees it; s must be innermost. */
static void pop(struct tr_scope *s)
{
    while (s->count > 0) {
        struct tr_tensor *t = s->handles[s->count - 1];
        tr__scope_remove(t);
        tr__tensor_destroy(t);
    }
    stack.innermost = s->parent;
    stack.depth--;
    free(s->handles);
    free(s);
}

static void release_all(void)
{
    while (stack.innermost)
        pop(stack.innermost);
}

struct tr_scope *tr_scope_begin(void)
{
    return push(false) == TR_OK ? stack.innermost : NULL;
}

tr_status tr_scope_end(struct tr_scope *scope, struct tr_tensor *const *keep, size_t n)
{
    TR_RETURN_ERROR_IF(!scope || scope != stack.innermost, TR_ERR_STATE,
                       "scope_end: the scope is not the innermost open scope of this thread");
    TR_RETURN_ERROR_IF(scope->session, TR_ERR_STATE,
                       "scope_end: a session is ended with tr_session_end");
    TR_RETURN_ERROR_IF(n > 0 && !keep, TR_ERR_INVALID, "scope_end: %zu handles to keep, "
                       "but no array of them", n);
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            TR_FORWARD_IF_ERROR(tr__check(keep[i], "scope_end"));
    if (scope->parent)
        TR_FORWARD_IF_ERROR(reserve(scope->parent, n));
    for (size_t i = 0; i < n; i++)
        if (keep[i] && keep[i]->link.scope == scope)
            move(keep[i], scope->parent);
    pop(scope);
    return TR_OK;
}

tr_status tr_retain(struct tr_tensor *t)
{
    TR_FORWARD_IF_ERROR(tr__check(t, "retain"));
    TR_FORWARD_IF_ERROR(tr__scope_check_owner(t, "retain"));
    if (!t->link.scope)
        return TR_OK;
    if (t->link.scope->parent)
        TR_FORWARD_IF_ERROR(reserve(t->link.scope->parent, 1));
    move(t, t->link.scope->parent);
    return TR_OK;
}

tr_status tr_detach(struct tr_tensor *t)
{
    TR_FORWARD_IF_ERROR(tr__check(t, "detach"));
    TR_FORWARD_IF_ERROR(tr__scope_check_owner(t, "detach"));
    tr__scope_remove(t);
    return TR_OK;
}

tr_status tr_session_begin(void)
{
    TR_RETURN_ERROR_IF(stack.innermost, TR_ERR_STATE,
                       "session_begin: scopes are already open on this thread");
    return push(true);
}

tr_status tr_session_end(void)
{
    struct tr_scope *bottom = stack.innermost;

    while (bottom && bottom->parent)
        bottom = bottom->parent;
    TR_RETURN_ERROR_IF(!bottom || !bottom->session, TR_ERR_STATE,
                       "session_end: no session is open on this thread");
    release_all();
    return TR_OK;
}

size_t tr_scope_depth(void)
{
    return stack.depth;
}

size_t tr_scope_size(const struct tr_scope *scope)
{
    return scope ? scope->count : 0;
}
