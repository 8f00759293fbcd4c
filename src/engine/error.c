/*
 * error.c - status codes and the thread-local last error.
 */
#include "engine_impl.h"

#include <stdarg.h>
#include <stdio.h>

#define TR__ERROR_MESSAGE_MAX 1024

static _Thread_local tr_status last_status = TR_OK;
static _Thread_local char last_message[TR__ERROR_MESSAGE_MAX];

static const char *const status_names[] = {
#define TR__STATUS_NAME(name, text) "TR_" #name,
    TR_STATUS_MAP(TR__STATUS_NAME)
#undef TR__STATUS_NAME
};

static const char *const status_strings[] = {
#define TR__STATUS_STRING(name, text) text,
    TR_STATUS_MAP(TR__STATUS_STRING)
#undef TR__STATUS_STRING
};

tr_status tr_set_error(tr_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    last_status = status;
    return status;
}

tr_status tr_last_status(void)
{
    return last_status;
}

const char *tr_last_error(void)
{
    return last_message;
}

void tr_clear_error(void)
{
    last_status = TR_OK;
    last_message[0] = '\0';
}

const char *tr_status_name(tr_status status)
{
    if ((unsigned)status >= TR_STATUS_COUNT)
        return "?";
    return status_names[status];
}

const char *tr_status_string(tr_status status)
{
    if ((unsigned)status >= TR_STATUS_COUNT)
        return "?";
    return status_strings[status];
}
