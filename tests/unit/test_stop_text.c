/*
 * test_stop_text.c — stop strings and UTF-8 across token boundaries
 * (serve/stop_text.h), without a model or a server: text that may start a stop
 * string is held back until a later token decides, a stop split over tokens is
 * never emitted (not even its first part), the earliest of several stops wins,
 * a character split over tokens is emitted whole, the hold never overflows.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "serve/stop_text.h"

typedef struct {
    char text[4096];
    int n, calls, split_char;
} out_t;

static void sink(void *ctx, const char *t, int n) {
    out_t *o = ctx;
    if (n <= 0 || ((unsigned char)t[0] & 0xc0) == 0x80) o->split_char = 1; /* never empty, never mid-character */
    if (o->n + n < (int)sizeof o->text) memcpy(o->text + o->n, t, (size_t)n), o->n += n;
    o->text[o->n] = 0;
    o->calls++;
}

/* Start st with the stops, then feed tokens (NULL-terminated); after token i,
 * emitted[i] is the text emitted so far. Returns the index of the token that
 * matched a stop, or -1. */
static int feed(ea_stop_text *st, const char *const *stops, int n_stops, const char *const *toks, out_t *o,
                char emitted[][64]) {
    ea_stop_text_init(st, stops, n_stops);
    memset(o, 0, sizeof *o);
    for (int i = 0; toks[i]; i++) {
        int stop = ea_stop_text_add(st, toks[i], (int)strlen(toks[i]), sink, o);
        snprintf(emitted[i], 64, "%.63s", o->text);
        if (stop) return i;
    }
    return -1;
}

/* min_tokens: while disarmed a whole stop string is text (emitted, no match);
 * once armed, a stop string that completes in a later token matches, even
 * when it began in a disarmed one (vLLM checks the text after each token
 * from min_tokens on, looking back over the stop's length). */
TEST(disarmed_stops_are_text) {
    const char *stops[] = {"xy"};
    ea_stop_text st;
    out_t o;
    memset(&o, 0, sizeof o);
    ea_stop_text_init(&st, stops, 1);
    st.disarmed = 1;
    CHECK_EQ(ea_stop_text_add(&st, "axyb", 4, sink, &o), 0);
    CHECK_STREQ(o.text, "axyb");
    CHECK_EQ(ea_stop_text_add(&st, "xyx", 3, sink, &o), 0);
    CHECK_STREQ(o.text, "axybxy"); /* the last "x" may start a stop: held */
    st.disarmed = 0;
    CHECK_EQ(ea_stop_text_add(&st, "yz", 2, sink, &o), 1);
    CHECK_STREQ(o.text, "axybxy");
    CHECK(!o.split_char);
}

TEST(prefix_of_a_stop_is_held_back) {
    const char *stops[] = {"cx"};
    const char *toks[] = {"ab", "c", "d", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    CHECK_EQ(feed(&st, stops, 1, toks, &o, em), -1);
    CHECK_STREQ(em[0], "ab");
    CHECK_STREQ(em[1], "ab"); /* "c" could start "cx" */
    CHECK_STREQ(em[2], "abcd");
    ea_stop_text_flush(&st, sink, &o);
    CHECK_STREQ(o.text, "abcd");
    CHECK(!o.split_char);
}

TEST(stop_across_tokens_never_emitted) {
    const char *stops[] = {"o w", "never"};
    const char *toks[] = {"Hel", "lo", " wo", "rld", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    CHECK_EQ(feed(&st, stops, 2, toks, &o, em), 2);
    CHECK_STREQ(em[0], "Hel");
    CHECK_STREQ(em[1], "Hell"); /* the "o" waits */
    CHECK_STREQ(o.text, "Hell");
    CHECK(strstr(o.text, "o") == NULL);
    /* a stop spread over three tokens, one byte each */
    const char *stops3[] = {"xyz"};
    const char *toks3[] = {"a", "x", "y", "z", "b", NULL};
    CHECK_EQ(feed(&st, stops3, 1, toks3, &o, em), 3);
    CHECK_STREQ(em[1], "a");
    CHECK_STREQ(em[2], "a");
    CHECK_STREQ(o.text, "a");
}

TEST(earliest_stop_wins_and_longest_prefix_is_kept) {
    const char *stops[] = {"yz", "xy"};
    const char *toks[] = {"wxyz", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    CHECK_EQ(feed(&st, stops, 2, toks, &o, em), 0);
    CHECK_STREQ(o.text, "w");
    /* "xy" ends the text: a prefix of "xyz" (2 bytes) and of "yq" (1 byte): keep 2 */
    const char *stops2[] = {"xyz", "yq"};
    const char *toks2[] = {"axy", "q", NULL};
    CHECK_EQ(feed(&st, stops2, 2, toks2, &o, em), 1);
    CHECK_STREQ(em[0], "a");
    CHECK_STREQ(o.text, "ax");
}

/* include (vLLM's include_stop_str_in_output): the text ends with the matched
 * stop string, also when it spans tokens; of two matches the earliest, and at
 * one place the stop string listed first; what follows the match is dropped. */
TEST(include_emits_the_matched_stop) {
    const char *stops[] = {"yz", "xy"};
    const char *toks[] = {"wxyz", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    ea_stop_text_init(&st, stops, 2);
    st.include = 1;
    memset(&o, 0, sizeof o);
    CHECK_EQ(ea_stop_text_add(&st, toks[0], 4, sink, &o), 1);
    CHECK_STREQ(o.text, "wxy");
    CHECK_EQ(st.matched, 1); /* "xy": what the API reports as stop_reason */
    const char *stops2[] = {"END", "ENDING"};
    const char *toks2[] = {"ab", "E", "NDINGcd", NULL};
    ea_stop_text_init(&st, stops2, 2);
    st.include = 1;
    memset(&o, 0, sizeof o);
    int i = 0, stop = 0;
    for (; toks2[i] && !stop; i++) {
        stop = ea_stop_text_add(&st, toks2[i], (int)strlen(toks2[i]), sink, &o);
        snprintf(em[i], 64, "%.63s", o.text);
    }
    CHECK_EQ(stop, 1);
    CHECK_EQ(i, 3);
    CHECK_STREQ(em[1], "ab"); /* "E" may start a stop: held */
    CHECK_STREQ(o.text, "abEND"); /* "END" listed first, at the same place as "ENDING" */
    CHECK_EQ(st.matched, 0);
    /* without include the same input ends before the stop */
    CHECK_EQ(feed(&st, stops2, 2, toks2, &o, em), 2);
    CHECK_STREQ(o.text, "ab");
    CHECK(!o.split_char);
}

TEST(utf8_split_over_tokens) {
    const char *stops[] = {"\xe2\x82\xac!"}; /* "€!" */
    const char *toks[] = {"a\xe2", "\x82", "\xac", "b", "\xe2\x82\xac", "!", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    CHECK_EQ(feed(&st, stops, 1, toks, &o, em), 5);
    CHECK_STREQ(em[0], "a");
    CHECK_STREQ(em[1], "a");
    CHECK_STREQ(em[2], "a"); /* "€" is whole but may start "€!" */
    CHECK_STREQ(em[3], "a\xe2\x82\xac" "b");
    CHECK_STREQ(em[4], "a\xe2\x82\xac" "b");
    CHECK_STREQ(o.text, "a\xe2\x82\xac" "b");
    CHECK(!o.split_char);
    /* without stops: a character is emitted when its last byte arrives */
    const char *toks2[] = {"\xf0\x9f", "\x98", "\x80", NULL}; /* U+1F600 */
    CHECK_EQ(feed(&st, NULL, 0, toks2, &o, em), -1);
    CHECK_STREQ(em[1], "");
    CHECK_STREQ(em[2], "\xf0\x9f\x98\x80");
}

TEST(flush_and_long_text) {
    const char *stops[] = {"cx"};
    const char *toks[] = {"ab", "c", NULL};
    ea_stop_text st;
    out_t o;
    char em[8][64];
    CHECK_EQ(feed(&st, stops, 1, toks, &o, em), -1);
    CHECK_STREQ(o.text, "ab");
    ea_stop_text_flush(&st, sink, &o);
    CHECK_STREQ(o.text, "abc");
    /* 3 tokens of 1000 bytes each: the hold (1024) never overflows, nothing is lost */
    static char big[1001];
    memset(big, 'q', 1000);
    big[999] = 'c';
    ea_stop_text_init(&st, stops, 1);
    memset(&o, 0, sizeof o);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(ea_stop_text_add(&st, big, 1000, sink, &o), 0);
        CHECK_EQ(st.n_hold, 1);
        CHECK_EQ(o.n, 1000 * (i + 1) - 1);
    }
    CHECK_EQ(ea_stop_text_add(&st, "x", 1, sink, &o), 1);
    CHECK_EQ(o.n, 2999);
}

int main(void) {
    RUN(prefix_of_a_stop_is_held_back);
    RUN(disarmed_stops_are_text);
    RUN(stop_across_tokens_never_emitted);
    RUN(earliest_stop_wins_and_longest_prefix_is_kept);
    RUN(include_emits_the_matched_stop);
    RUN(utf8_split_over_tokens);
    RUN(flush_and_long_text);
    return TEST_SUMMARY();
}
