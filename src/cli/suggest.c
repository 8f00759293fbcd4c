/*
 * suggest.c - "did you mean": the closest candidate by edit distance
 * (insertions, deletions, substitutions and swaps of neighbours all cost
 * one), accepted when the distance is small against the word's length.
 */
#include "config.h"

#include <string.h>

#include "msg.h"

#define MAX_WORD 64

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;
    return m < c ? m : c;
}

/* Optimal string alignment distance, over three rolling rows. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t rows[3][MAX_WORD + 1];
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

    if (la > MAX_WORD || lb > MAX_WORD)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            cur[j] = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < cur[j])
                cur[j] = prev2[j - 2] + 1;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *suggest(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1, len = strlen(word);
    /* one edit in a short word already makes another word (isinf and sin,
     * gpu and cpu): a word of three letters or fewer keeps its first */
    size_t limit = len <= 5 ? 1 : len <= 9 ? 2 : 3;

    for (size_t i = 0; candidates[i]; i++) {
        size_t d = distance(word, candidates[i]);
        if (len <= 3 && word[0] != candidates[i][0])
            continue;
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
