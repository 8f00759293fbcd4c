/*
 * progress.c - the progress line.  It appears only once a stage has run
 * for a second (short runs stay quiet), is redrawn four times a second,
 * and is erased before anything else is printed about the stage.  Where
 * standard error is not a terminal (a batch job's log) and --progress asks
 * for it anyway, it is a plain line every ten seconds instead, never
 * redrawn.  A foreach stage shows its blocks: a bar, the blocks and bytes
 * done, the rate and the time left.
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

#include "report.h"

#define SHOW_AFTER_MS 1000.0
#define PLAIN_EVERY_MS 10000.0
#define REDRAW_NS 250000000L
#define BAR_WIDTH 24

struct progress {
    FILE *out;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    bool active;                 /* a stage is running */
    bool drawn;                  /* its line is on the screen */
    bool plain;                  /* not a terminal: a line now and then */
    double every_ms;             /* plain: between lines */
    double last_ms;              /* plain: when the last line was printed */
    char stage[64];
    size_t done, steps;
    bool blocks;                 /* a foreach stage: done and steps count blocks */
    uint64_t bytes_done, bytes;
    struct timespec started;
};

static double since_ms(const struct timespec *t)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t->tv_sec) * 1e3 + (double)(now.tv_nsec - t->tv_nsec) / 1e6;
}

/* A foreach stage's line: the bar (on a terminal), blocks, bytes, rate and
 * time left. */
static void blocks_line(const struct progress *p, double ms, char *line, size_t size)
{
    char done[32], total[32], rate[32], left[32], bar[BAR_WIDTH + 3] = "";
    double fraction = p->bytes ? (double)p->bytes_done / (double)p->bytes
                               : p->steps ? (double)p->done / (double)p->steps : 0;
    double per_s = ms > 0 ? (double)p->bytes_done / (ms / 1000.0) : 0;

    if (!p->plain) {
        int filled = (int)(fraction * BAR_WIDTH + 0.5);
        bar[0] = '[';
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[1 + i] = i < filled ? '#' : '.';
        bar[BAR_WIDTH + 1] = ']';
        bar[BAR_WIDTH + 2] = '\0';
    }
    tr_format_bytes(p->bytes_done, done, sizeof done);
    tr_format_bytes(p->bytes, total, sizeof total);
    tr_format_bytes(per_s > 0 ? (uint64_t)per_s : 0, rate, sizeof rate);
    if (p->done > 0 && fraction > 0 && fraction < 1)
        report_format_time(ms * (1 - fraction) / fraction, left, sizeof left);
    else
        snprintf(left, sizeof left, "?");
    snprintf(line, size, "%s: %s%sblock %zu of %zu, %s of %s, %s/s, %s left", p->stage, bar,
             bar[0] ? " " : "", p->done, p->steps, done, total, rate, left);
}

/* Called with the lock held. */
static void draw(struct progress *p)
{
    double ms = since_ms(&p->started);
    char line[256];

    if (!p->active || ms < (p->plain ? p->every_ms : SHOW_AFTER_MS))
        return;
    if (p->plain && ms - p->last_ms < p->every_ms)
        return;
    if (p->blocks)
        blocks_line(p, ms, line, sizeof line);
    else
        snprintf(line, sizeof line, "%s: statement %zu of %zu, %.1f s", p->stage,
                 p->done < p->steps ? p->done + 1 : p->steps, p->steps, ms / 1000.0);
    if (p->plain) {
        fprintf(p->out, "%s\n", line);
        p->last_ms = ms;
    } else {
        fprintf(p->out, "\r\033[K%s", line);
        p->drawn = true;
    }
    fflush(p->out);
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

/* TENSORRUN_PROGRESS_INTERVAL: the seconds between plain lines (for the
 * tests; default 10). */
static double plain_every_ms(void)
{
    const char *v = getenv("TENSORRUN_PROGRESS_INTERVAL");
    char *end;
    double s;

    if (!v || !*v)
        return PLAIN_EVERY_MS;
    s = strtod(v, &end);
    return *end == '\0' && s > 0 && s < 1e6 ? s * 1000.0 : PLAIN_EVERY_MS;
}

struct progress *progress_start(enum progress_mode mode, FILE *out)
{
    struct progress *p;
    bool terminal = isatty(fileno(out));

    if (mode == PROGRESS_OFF || (mode == PROGRESS_AUTO && !terminal))
        return NULL;
    p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->out = out;
    p->plain = !terminal;
    p->every_ms = plain_every_ms();
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

static void begin(struct progress *p, const char *stage, size_t nsteps, bool blocks,
                  uint64_t bytes)
{
    pthread_mutex_lock(&p->lock);
    snprintf(p->stage, sizeof p->stage, "%s", stage);
    p->steps = nsteps;
    p->done = 0;
    p->blocks = blocks;
    p->bytes = bytes;
    p->bytes_done = 0;
    p->last_ms = 0;
    p->active = true;
    clock_gettime(CLOCK_MONOTONIC, &p->started);
    pthread_mutex_unlock(&p->lock);
}

void progress_stage(struct progress *p, const char *stage, size_t nsteps)
{
    if (p)
        begin(p, stage, nsteps, false, 0);
}

void progress_blocks(struct progress *p, const char *stage, size_t nblocks, uint64_t bytes)
{
    if (p)
        begin(p, stage, nblocks, true, bytes);
}

void progress_step(struct progress *p, size_t done)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = done;
    pthread_mutex_unlock(&p->lock);
}

void progress_block(struct progress *p, size_t done, uint64_t bytes_done)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->done = done;
    p->bytes_done = bytes_done;
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
