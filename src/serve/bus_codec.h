/*
 * bus_codec.h — the control bus's batch format (DESIGN.md section 4): what
 * rank 0 writes each step and every rank reads back. The transport is not
 * here (ep/bus.c broadcasts the bytes over MPI; the scheduler's ea_sched_bus
 * calls it); this file only turns events into bytes and back, checking every
 * length against the batch's size.
 *
 * Batch (little-endian; docs/protocol.md "Control bus"):
 *
 *   offset  size  field
 *   0       4     magic "EAB3" (0x33424145)
 *   4       8     step number (rank 0's count of forward steps)
 *   12      4     n_events
 *   16      ...   n_events events
 *
 * Event:
 *
 *   size  field
 *   1     kind (EA_BUS_SUBMIT 1, EA_BUS_CANCEL 2, EA_BUS_SHUTDOWN 3, EA_BUS_ASSIGN 4)
 *   8     request id (assigned by rank 0; 0 for shutdown)
 *   ...   assign only (data-parallel attention, right after its submit): i32 the rank that runs it
 *   ...   submit only: i32 n_prompt, max_tokens, ignore_eos, logprobs, top_logprobs, n_stop;
 *         f32 temperature, top_p; i32 top_k; f32 min_p, presence, frequency, repetition;
 *         u64 seed; i32 n_stop_ids, min_tokens, prompt_logprobs, keep_special, include_stop;
 *         n_stop_ids x i32; n_stop x (u32 len 1..511, bytes, no NUL);
 *         i32 n_bias, n_forced; n_bias x (i32 id, f32 bias); n_forced x i32 (test hook);
 *         u32 n_grammar_src, n_grammar_src bytes (the structured output's source,
 *         ea_req_params.grammar_src; 0: none); i32 grammar_after_think (0/1), think_end;
 *         n_prompt x i32 token ids
 *
 * An empty batch (n_events 0) is the tick that keeps every rank in step.
 *
 *   ea_sbuf b = {0};                                   // rank 0, each step
 *   ea_bus_begin(&b, step);
 *   ea_bus_put_submit(&b, id, &params);  ea_bus_put_cancel(&b, id);  ea_bus_put_shutdown(&b);
 *   if (b.failed) -> no memory
 *
 *   ea_bus_reader rd;                                  // every rank
 *   EA_TRY(ea_bus_read_begin(&rd, buf, len));
 *   ea_bus_event ev; int more;
 *   while ((st = ea_bus_read_next(&rd, &ev, &more)) == EA_OK && more) apply(ev);
 */
#ifndef EA_BUS_CODEC_H
#define EA_BUS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/sbuf.h"
#include "base/status.h"
#include "serve/scheduler.h"
#include "serve/stop_text.h"

#define EA_BUS_MAGIC 0x33424145u /* "EAB3" (EAB2 had no text options, EAB1 no grammar gate) */
#define EA_BUS_MAX_GRAMMAR_SRC (16u << 20) /* bytes of one grammar source (the HTTP body limit is below) */

typedef enum { EA_BUS_SUBMIT = 1, EA_BUS_CANCEL = 2, EA_BUS_SHUTDOWN = 3, EA_BUS_ASSIGN = 4 } ea_bus_kind;

/* Start a batch in b (its old content is dropped). */
void ea_bus_begin(ea_sbuf *b, uint64_t step);
/* Append one event and count it in the header. p->prompt and p->stop are read. */
void ea_bus_put_submit(ea_sbuf *b, uint64_t id, const ea_req_params *p);
void ea_bus_put_cancel(ea_sbuf *b, uint64_t id);
void ea_bus_put_shutdown(ea_sbuf *b);
void ea_bus_put_assign(ea_sbuf *b, uint64_t id, int rank);

typedef struct {
    const uint8_t *p, *end; /* views the batch */
    uint32_t n, i;          /* events in the batch, events read */
    uint64_t step;
} ea_bus_reader;

typedef struct {
    ea_bus_kind kind;
    uint64_t id;
    /* EA_BUS_SUBMIT: every field but prompt; p.stop points into stops. */
    ea_req_params p;
    char stops[EA_MAX_STOP][EA_STOP_TEXT_HOLD / 2];
    const uint8_t *prompt; /* views the batch: p.n_prompt little-endian i32, not aligned */
    int rank;              /* EA_BUS_ASSIGN: the rank that runs the request (>= 0) */
    const uint8_t *bias;   /* views the batch: p.n_bias (i32 id, f32 bias), not aligned */
    const uint8_t *forced; /* views the batch: p.n_forced i32, not aligned */
    const char *grammar_src; /* views the batch: p.n_grammar_src bytes (not NUL-terminated); NULL: none */
} ea_bus_event;

/* Check the header of buf[0..len) (viewed, not copied). EA_ERR_FORMAT if it is not a batch. */
ea_status ea_bus_read_begin(ea_bus_reader *rd, const void *buf, size_t len);
/* The next event into *ev (*more = 1), or *more = 0 after the last. EA_ERR_FORMAT
 * naming the event when it is truncated or malformed. */
ea_status ea_bus_read_next(ea_bus_reader *rd, ea_bus_event *ev, int *more);

#endif
