/*
 * exec_fallback.c - an auto stage that ran out of memory on its
 * accelerator, run again on the CPU (exec_impl.h).
 */
#include "config.h"

#include "exec_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "msg.h"

/* Whether every tensor alive is a value of the lowering, which has the
 * same number in every plan of the pipeline. */
static bool carries_over(const struct exec *x, const struct plan *twin)
{
    if (twin->program->nlowered != x->prog->nlowered)
        return false;
    for (size_t v = x->prog->nlowered; v < x->prog->nvalues; v++)
        if (x->tensors[v])
            return false;
    return true;
}

int exec_fall_back(struct exec *x, size_t s, struct tr_device device, const char *why)
{
    const struct stage *st = x->plan->stages[s].stage;
    struct plan *twin = plan_pin_cpu(x->plan, s);
    struct tr_tensor **tensors = NULL;
    bool carries = twin && carries_over(x, twin);
    char dev[TR_DEVICE_NAME_MAX];

    if (carries)
        tensors = calloc(twin->program->nvalues + 1, sizeof *tensors);
    if (!tensors) {
        plan_free(twin);
        msg_error(NULL, "stage '%s': %s", st->name, why);
        msg_note(NULL, "the stage could not run again on the CPU: %s",
                 !twin     ? "it could not be planned there"
                 : carries ? "out of memory"
                           : "what it read could not carry over");
        return EXIT_OOM;
    }
    memcpy(tensors, x->tensors, x->prog->nlowered * sizeof *tensors);
    free(x->tensors);
    x->tensors = tensors;
    plan_hand_inputs(x->plan, twin);
    plan_free(x->own_plan);
    x->own_plan = twin;
    x->plan = twin;
    x->prog = twin->program;
    x->released_bytes += tr_release_cached(device);
    msg_warning(NULL, "stage '%s' ran out of memory on %s, and runs again on the CPU: %s",
                st->name, tr_device_format(device, dev, sizeof dev), why);
    return EXIT_OK;
}
