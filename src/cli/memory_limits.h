/*
 * memory_limits.h - --memory-limit: one size for every device pool, or
 * sizes per device kind and per device ("8G", "cpu=8G,cuda=60G",
 * "4G,cuda:1=20G").
 */
#ifndef TR_MEMORY_LIMITS_H
#define TR_MEMORY_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorrun.h"

#define MEMORY_LIMITS_MAX 16

struct memory_limits {
    uint64_t every;   /* a device named by no item; 0: no limit */
    size_t n;
    struct {
        struct tr_device device;
        bool whole_kind; /* "cuda": every device of the kind */
        uint64_t bytes;
    } named[MEMORY_LIMITS_MAX];
};

/* Parses comma-separated items, each SIZE (every device not named) or
 * DEVICE=SIZE, DEVICE being a kind (cpu, cuda, fake: each device of it)
 * or one device (cuda:N, fake:N), sizes as parse_size and above 0; a
 * device named twice is an error.  false with a sentence in why (whysize
 * bytes) when malformed.  Warns of each size as warn_memory_limit does
 * (the machine's memory only for the CPU's). */
bool memory_limits_parse(const char *text, struct memory_limits *out, char *why,
                         size_t whysize);
/* The limit of device's pool (0: none): its own item, else its kind's,
 * else the size for every device. */
uint64_t memory_limit_of(const struct memory_limits *limits, struct tr_device device);

#endif /* TR_MEMORY_LIMITS_H */
