/*
 * test_error.c - the status table and the thread-local last error.
 */
#include <pthread.h>
#include <string.h>

#include "tensorrun.h"
#include "tap.h"

static void *fail_in_thread(void *arg)
{
    (void)arg;
    tr_dtype_parse("nope", &(enum tr_dtype){0});
    return (void *)(intptr_t)tr_last_status();
}

int main(void)
{
    enum tr_dtype d;
    void *thread_status;
    pthread_t th;
    bool distinct = true;

    ok(strcmp(tr_status_name(TR_OK), "TR_OK") == 0, "TR_OK is named TR_OK");
    ok(strcmp(tr_status_name(TR_ERR_OOM), "TR_ERR_OOM") == 0, "TR_ERR_OOM is named");
    ok(strcmp(tr_status_string(TR_ERR_OOM), "out of memory") == 0, "TR_ERR_OOM's sentence");
    ok(strcmp(tr_status_name((tr_status)TR_STATUS_COUNT), "?") == 0 &&
           strcmp(tr_status_string((tr_status)-1), "?") == 0,
       "codes outside the table are '?'");
    for (int i = 0; i < TR_STATUS_COUNT; i++) {
        for (int j = i + 1; j < TR_STATUS_COUNT; j++)
            if (strcmp(tr_status_name((tr_status)i), tr_status_name((tr_status)j)) == 0)
                distinct = false;
        if (tr_status_string((tr_status)i)[0] == '\0')
            distinct = false;
    }
    ok(distinct, "every status has its own name and a sentence");

    tr_clear_error();
    is_int(tr_last_status(), TR_OK, "no error after clearing");
    ok(strcmp(tr_last_error(), "") == 0, "the message is empty after clearing");

    is_int(tr_dtype_parse("f33", &d), TR_ERR_DTYPE, "a failing call returns its status");
    is_int(tr_last_status(), TR_ERR_DTYPE, "and records it");
    ok(strstr(tr_last_error(), "'f33'") != NULL, "the message names the bad input: %s",
       tr_last_error());

    tr_clear_error();
    pthread_create(&th, NULL, fail_in_thread, NULL);
    pthread_join(th, &thread_status);
    is_int((intptr_t)thread_status, TR_ERR_DTYPE, "another thread sees its own error");
    is_int(tr_last_status(), TR_OK, "and this thread's stays clear");
    return done_testing();
}
