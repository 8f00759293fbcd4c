/*
 * progress.c - the progress line.  It appears only once a stage has run
 * for a second (short runs stay quiet), is redrawn four times a second,
 * and is erased before anything else is printed about the stage.
 */
#include "config.h"

#include "progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_MS 1000.0
#define REDRAW_NS 250000000L

struct progress {
    FILE *out;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    bool active;                 /* a stage is running */
    bool drawn;                  /* its line is on the screen */
    char stage[64];
    size_t done, steps;
    struct timespec started;
};

static double since_ms(const struct timespec *t)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) * 1e3 + (double)(now.tv_nsec - t->tv_nsec) / 1e6;
}

/* Called with the lock held. */
static void draw(struct progress *p)
{
    double ms = since_ms(&p->started);

    if (!p->active || ms < SHOW_AFTER_MS)
        return;
    fprintf(p->out, "\r\033[K%s: statement %zu of %zu, %.1f s", p->stage,
            p->done < p->steps ? p->done + 1 : p->steps, p->steps, ms / 1000.0);
    fflush(p->out);
    p->drawn = true;
}

static void erase(struct progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", p->out);
        fflush(p->out);
        p->drawn = false;
    }
}

static void *redraw_loop(void *arg)
{
    struct progress *p = arg;
    struct timespec until;

    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += REDRAW_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&p->wake, &p->lock, &until) == ETIMEDOUT)
            draw(p);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

struct progress *progress_start(enum progress_mode mode, FILE *out)
{
    struct progress *p;

    if (mode == PROGRESS_OFF || (mode == PROGRESS_AUTO && !isatty(fileno(out))))
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->out = out;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (pthread_create(&p->thread, NULL, redraw_loop, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->wake);
        free(p);
        return NULL;
    }
    return p;
}

void progress_stage(struct progress *p, const char *stage, size_t nsteps)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    snprintf(p->stage, sizeof p->stage, "%s", stage);
    p->steps = nsteps;
    p->done = 0;
    p->active = true;
    clock_gettime(CLOCK_MONOTONIC, &p->started);
    pthread_mutex_unlock(&p->lock);
}

void progress_step(struct progress *p, size_t done)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = done;
    pthread_mutex_unlock(&p->lock);
}

void progress_done(struct progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->active = false;
    erase(p);
    pthread_mutex_unlock(&p->lock);
}

void progress_stop(struct progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    p->active = false;
    erase(p);
    pthread_cond_signal(&p->wake);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}
