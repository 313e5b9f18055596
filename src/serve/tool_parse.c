/*
 * tool_parse.c — see tool_parse.h. Two small machines in a row: the
 * reasoning machine splits thinking from the rest, and the rest goes through
 * the tool machine, which splits calls from plain content. Each keeps the
 * text it cannot decide yet (a suffix that may start a marker, the body of an
 * open call) in its hold buffer; `final` (end of output) decides everything.
 *
 * Invariant: every byte fed comes out exactly once, as reasoning, content or
 * part of a parsed call — except markers, and whitespace between calls.
 */
#include "serve/tool_parse.h"

#include <string.h>

#include "base/alloc.h"
#include "grammar/grammar.h"

/* ---- markers ------------------------------------------------------------------ */

typedef struct {
    const char *block_begin, *block_end; /* NULL: calls stand alone (Qwen3) */
    const char *call_begin, *call_end;
} markers;

static const markers qwen3_markers = {NULL, NULL, "<tool_call>", "</tool_call>"};
static const markers deepseek_markers = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                         "<｜tool▁call▁end｜>"};
static const markers kimi_markers = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                     "<|tool_call_begin|>", "<|tool_call_end|>"};
#define DS_SEP "<｜tool▁sep｜>"
#define KIMI_ARGS "<|tool_call_argument_begin|>"
#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"

static const markers *markers_of(ea_tool_format f) {
    return f == EA_TOOL_FMT_QWEN3 || f == EA_TOOL_FMT_QWEN3_XML          ? &qwen3_markers
           : f == EA_TOOL_FMT_DEEPSEEK_V3 || f == EA_TOOL_FMT_DEEPSEEK_V31 ? &deepseek_markers
           : f == EA_TOOL_FMT_KIMI_K2                                      ? &kimi_markers
                                                                           : NULL;
}

ea_tool_format ea_tool_format_for_model(const char *tpl, const char *t) {
    if (tpl && strstr(tpl, "<tool_call>")) return strstr(tpl, "<function=") ? EA_TOOL_FMT_QWEN3_XML : EA_TOOL_FMT_QWEN3;
    /* V3 writes "function<｜tool▁sep｜>NAME" and a ```json block; V3.1 "NAME<｜tool▁sep｜>ARGS" */
    if (tpl && strstr(tpl, "tool▁calls▁begin"))
        return strstr(tpl, "```json") ? EA_TOOL_FMT_DEEPSEEK_V3 : EA_TOOL_FMT_DEEPSEEK_V31;
    if (tpl && strstr(tpl, "<|tool_calls_section_begin|>")) return EA_TOOL_FMT_KIMI_K2;
    /* a template that writes calls in another way (Mistral's [TOOL_CALLS]): no parser,
     * whatever the family, rather than one that reads them wrong */
    if (!t || (tpl && strstr(tpl, "tool_calls"))) return EA_TOOL_FMT_NONE;
    if (!strcmp(t, "qwen3_5_moe")) return EA_TOOL_FMT_QWEN3_XML; /* Qwen3.5's published template */
    if (!strcmp(t, "qwen3_moe") || !strcmp(t, "qwen2_moe") || !strcmp(t, "qwen3_next")) return EA_TOOL_FMT_QWEN3;
    if (!strcmp(t, "deepseek_v3") || !strcmp(t, "deepseek_v2")) return EA_TOOL_FMT_DEEPSEEK_V3;
    return EA_TOOL_FMT_NONE;
}

int ea_tool_format_parse(const char *name) {
    if (!strcmp(name, "auto")) return -2;
    if (!strcmp(name, "none")) return EA_TOOL_FMT_NONE;
    if (!strcmp(name, "hermes")) return EA_TOOL_FMT_QWEN3;
    if (!strcmp(name, "qwen3_coder")) return EA_TOOL_FMT_QWEN3_XML;
    if (!strcmp(name, "deepseek_v3")) return EA_TOOL_FMT_DEEPSEEK_V3;
    if (!strcmp(name, "deepseek_v31")) return EA_TOOL_FMT_DEEPSEEK_V31;
    if (!strcmp(name, "kimi_k2")) return EA_TOOL_FMT_KIMI_K2;
    return -1;
}

int ea_reasoning_mode_parse(const char *name) {
    if (!strcmp(name, "none")) return EA_REASONING_NONE;
    if (!strcmp(name, "qwen3")) return EA_REASONING_QWEN3;
    if (!strcmp(name, "deepseek_r1")) return EA_REASONING_DEEPSEEK_R1;
    if (!strcmp(name, "kimi_k2")) return EA_REASONING_KIMI_K2;
    return -1;
}

/* ---- byte helpers ----------------------------------------------------------------- */

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

int ea_prompt_opens_think(const char *prompt) {
    size_t n = prompt ? strlen(prompt) : 0, k = strlen(THINK_OPEN);
    while (n && is_ws(prompt[n - 1])) n--;
    return n >= k && memcmp(prompt + n - k, THINK_OPEN, k) == 0;
}

/* Offset of m in s[0..n), or -1. */
static long find(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, m, k) == 0) return (long)i;
    return -1;
}

/* The longest suffix of s[0..n) that is a proper prefix of m (text that may start m). */
static size_t partial(const char *s, size_t n, const char *m) {
    size_t k = strlen(m) - 1;
    for (k = k < n ? k : n; k > 0; k--)
        if (memcmp(s + n - k, m, k) == 0) return k;
    return 0;
}

/* s[0..n) is a (possibly whole) prefix of m. */
static int is_prefix_of(const char *s, size_t n, const char *m) { return n <= strlen(m) && memcmp(s, m, n) == 0; }

static void drop(ea_sbuf *b, size_t k) {
    if (k >= b->len) {
        ea_sbuf_reset(b);
        return;
    }
    memmove(b->data, b->data + k, b->len - k);
    b->len -= k;
}

static void trim(const char **s, size_t *n) {
    while (*n && is_ws(**s)) (*s)++, (*n)--;
    while (*n && is_ws((*s)[*n - 1])) (*n)--;
}

/* ---- one call's body ------------------------------------------------------------ */

/* {"name", "arguments"} from a name and a JSON object's text; NULL when either is bad. */
static json_t *make_call(const char *name, size_t name_len, const char *args, size_t args_len) {
    trim(&name, &name_len);
    if (name_len == 0) return NULL;
    json_error_t je;
    json_t *a = json_loadb(args, args_len, 0, &je);
    if (!json_is_object(a)) {
        json_decref(a);
        return NULL;
    }
    char *txt = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(a);
    json_t *jn = json_stringn(name, name_len);
    json_t *call = txt && jn ? json_pack("{s:o,s:s}", "name", jn, "arguments", txt) : NULL;
    if (!call) json_decref(jn);
    free(txt);
    return call;
}

static json_t *parse_qwen3(const char *body, size_t n) {
    json_error_t je;
    json_t *o = json_loadb(body, n, 0, &je);
    json_t *name = json_object_get(o, "name"), *args = json_object_get(o, "arguments");
    json_t *call = NULL;
    if (json_is_string(name) && json_is_object(args)) {
        char *txt = json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (txt && json_string_length(name) > 0)
            call = json_pack("{s:s%,s:s}", "name", json_string_value(name), json_string_length(name), "arguments", txt);
        free(txt);
    }
    json_decref(o);
    return call;
}

/* function<｜tool▁sep｜>NAME\n```json\n{...}\n``` */
static json_t *parse_deepseek(const char *body, size_t n) {
    long sep = find(body, n, DS_SEP);
    if (sep < 0) return NULL;
    const char *type = body;
    size_t type_len = (size_t)sep;
    trim(&type, &type_len);
    if (type_len != 8 || memcmp(type, "function", 8) != 0) return NULL;
    const char *rest = body + sep + strlen(DS_SEP);
    size_t rn = n - (size_t)sep - strlen(DS_SEP);
    long nl = find(rest, rn, "\n");
    if (nl < 0) return NULL;
    const char *args = rest + nl + 1;
    size_t an = rn - (size_t)nl - 1;
    trim(&args, &an);
    if (an >= 7 && memcmp(args, "```json", 7) == 0) {
        args += 7, an -= 7;
        if (an < 3 || memcmp(args + an - 3, "```", 3) != 0) return NULL;
        an -= 3;
    }
    return make_call(rest, (size_t)nl, args, an);
}

/* NAME<｜tool▁sep｜>{...} (DeepSeek-V3.1) */
static json_t *parse_deepseek_v31(const char *body, size_t n) {
    long sep = find(body, n, DS_SEP);
    if (sep < 0) return NULL;
    size_t skip = (size_t)sep + strlen(DS_SEP);
    return make_call(body, (size_t)sep, body + skip, n - skip);
}

/* functions.NAME:IDX<|tool_call_argument_begin|>{...}: the model's id is kept
 * (Kimi's template writes it back into the conversation); the name is what
 * lies between the id's last '.' and its ':' (vLLM's kimi_k2 parser). */
static json_t *parse_kimi(const char *body, size_t n) {
    long at = find(body, n, KIMI_ARGS);
    if (at < 0) return NULL;
    const char *id = body;
    size_t idn = (size_t)at, c;
    trim(&id, &idn);
    for (c = idn; c && id[c - 1] >= '0' && id[c - 1] <= '9'; c--) {}
    if (c == idn || c < 2 || id[c - 1] != ':') return NULL;
    size_t name_end = c - 1, name_start = name_end;
    while (name_start && id[name_start - 1] != '.') name_start--;
    size_t skip = (size_t)at + strlen(KIMI_ARGS);
    json_t *call = make_call(id + name_start, name_end - name_start, body + skip, n - skip);
    if (call && json_object_set_new(call, "id", json_stringn(id, idn))) {
        json_decref(call);
        call = NULL;
    }
    return call;
}

/* The schema of parameter key of function name in tools, or NULL. */
static const json_t *param_schema(const json_t *tools, const char *name, size_t name_len, const char *key) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *f = json_object_get(t, "function"), *fn = json_object_get(f, "name");
        if (json_is_string(fn) && json_string_length(fn) == name_len && !memcmp(json_string_value(fn), name, name_len))
            return json_object_get(json_object_get(json_object_get(f, "parameters"), "properties"), key);
    }
    return NULL;
}

/* A raw parameter value as JSON: see tool_parse.h (EA_TOOL_FMT_QWEN3_XML). */
static json_t *xml_value(const json_t *schema, const char *v, size_t n) {
    if (!schema || ea_schema_takes_strings(schema)) return json_stringn(v, n);
    static const char *const py[] = {"True", "False", "None"};
    for (int i = 0; i < 3; i++)
        if (n == strlen(py[i]) && !memcmp(v, py[i], n)) return i == 0 ? json_true() : i == 1 ? json_false() : json_null();
    json_error_t je;
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, &je);
    return j ? j : json_stringn(v, n);
}

/* <function=NAME>\n(<parameter=KEY>\nVALUE\n</parameter>\n)*</function>; a call cut
 * short at the end of the output may lack </function> (and </tool_call>), never a
 * value its </parameter>. */
static json_t *parse_qwen3_xml(const char *body, size_t n, const json_t *tools) {
    static const char FN[] = "<function=", FN_END[] = "</function>", PAR[] = "<parameter=", PAR_END[] = "</parameter>";
    trim(&body, &n);
    if (n < strlen(FN) || memcmp(body, FN, strlen(FN)) != 0) return NULL;
    const char *name = body + strlen(FN);
    size_t rn = n - strlen(FN);
    long gt = find(name, rn, ">");
    if (gt <= 0 || find(name, (size_t)gt, "\n") >= 0 || find(name, (size_t)gt, "<") >= 0) return NULL;
    const char *in = name + gt + 1;
    size_t in_n = rn - (size_t)gt - 1;
    long fe = find(in, in_n, FN_END);
    if (fe >= 0) {
        const char *after = in + fe + strlen(FN_END);
        size_t an = in_n - (size_t)fe - strlen(FN_END);
        trim(&after, &an);
        if (an) return NULL;
        in_n = (size_t)fe;
    }
    json_t *args = json_object();
    while (args) {
        trim(&in, &in_n);
        if (!in_n) break;
        long kg;
        if (in_n < strlen(PAR) || memcmp(in, PAR, strlen(PAR)) != 0 ||
            (kg = find(in + strlen(PAR), in_n - strlen(PAR), ">")) <= 0 ||
            find(in + strlen(PAR), (size_t)kg, "\n") >= 0) {
            json_decref(args);
            return NULL;
        }
        char key[256];
        if ((size_t)kg >= sizeof key) {
            json_decref(args);
            return NULL;
        }
        memcpy(key, in + strlen(PAR), (size_t)kg);
        key[kg] = 0;
        const char *v = in + strlen(PAR) + kg + 1;
        size_t vn = in_n - strlen(PAR) - (size_t)kg - 1;
        long pe = find(v, vn, PAR_END);
        if (pe < 0) { /* a value cut short is no value */
            json_decref(args);
            return NULL;
        }
        size_t take = (size_t)pe;
        in = v + pe + strlen(PAR_END), in_n = vn - (size_t)pe - strlen(PAR_END);
        if (take && v[0] == '\n') v++, take--;
        if (take && v[take - 1] == '\n') take--;
        json_t *val = xml_value(param_schema(tools, name, (size_t)gt, key), v, take);
        if (!val || json_object_set_new(args, key, val)) json_decref(args), args = NULL;
    }
    char *txt = args ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(args);
    json_t *call = txt ? json_pack("{s:s%,s:s}", "name", name, (size_t)gt, "arguments", txt) : NULL;
    free(txt);
    return call;
}

int ea_tool_parse_call(ea_tool_format fmt, const json_t *tools, const char *body, size_t n, json_t **call) {
    *call = fmt == EA_TOOL_FMT_QWEN3          ? parse_qwen3(body, n)
            : fmt == EA_TOOL_FMT_QWEN3_XML    ? parse_qwen3_xml(body, n, tools)
            : fmt == EA_TOOL_FMT_DEEPSEEK_V3  ? parse_deepseek(body, n)
            : fmt == EA_TOOL_FMT_DEEPSEEK_V31 ? parse_deepseek_v31(body, n)
            : fmt == EA_TOOL_FMT_KIMI_K2      ? parse_kimi(body, n)
                                              : NULL;
    return *call ? 0 : -1;
}

/* ---- the tool machine ----------------------------------------------------------- */

enum { T_TEXT = 0, T_BLOCK = 1, T_CALL = 2 };

/* The open call's body ends (terminated: its end marker was seen). */
static void end_call(ea_chat_split *sp, const markers *m, size_t body_len, int terminated, ea_chat_delta *d) {
    json_t *call;
    sp->after_call = 0;
    if (ea_tool_parse_call(sp->fmt, sp->tools, sp->thold.data, body_len, &call) == 0) {
        json_array_append_new(d->calls, call);
        sp->n_calls++;
        sp->after_call = 1;
    } else { /* malformed: the text as it came */
        ea_sbuf_puts(&d->content, m->call_begin);
        ea_sbuf_append(&d->content, sp->thold.data, body_len);
        if (terminated) ea_sbuf_puts(&d->content, m->call_end);
    }
    drop(&sp->thold, body_len + (terminated ? strlen(m->call_end) : 0));
    sp->tstate = m->block_begin ? T_BLOCK : T_TEXT;
}

/* Plain text before a call or after the calls. Right after a call, whitespace
 * alone is held (it may only separate calls) and dropped when a call or the end
 * follows; `final`: nothing more comes before a call or the end. The rule looks
 * only at the text since the last call, so any split into deltas gives the same. */
static void emit_text(ea_chat_split *sp, size_t n, int final, ea_chat_delta *d) {
    if (sp->after_call) {
        size_t i = 0;
        while (i < n && is_ws(sp->thold.data[i])) i++;
        if (i == n) {
            if (final) drop(&sp->thold, n);
            return;
        }
        sp->after_call = 0;
    }
    ea_sbuf_append(&d->content, sp->thold.data, n);
    drop(&sp->thold, n);
}

static void tools_feed(ea_chat_split *sp, const char *text, size_t n, int final, ea_chat_delta *d) {
    const markers *m = markers_of(sp->fmt);
    if (!m) {
        ea_sbuf_append(&d->content, text, n);
        return;
    }
    ea_sbuf_append(&sp->thold, text, n);
    for (;;) {
        const char *h = sp->thold.data;
        size_t hn = sp->thold.len;
        if (sp->tstate == T_TEXT) {
            const char *start = m->block_begin ? m->block_begin : m->call_begin;
            long at = find(h ? h : "", hn, start);
            if (at >= 0) {
                emit_text(sp, (size_t)at, 1, d);
                drop(&sp->thold, strlen(start));
                sp->tstate = m->block_begin ? T_BLOCK : T_CALL;
                continue;
            }
            emit_text(sp, hn - (final ? 0 : partial(h ? h : "", hn, start)), final, d);
            return;
        }
        if (sp->tstate == T_BLOCK) {
            size_t w = 0;
            while (w < hn && is_ws(h[w])) w++;
            drop(&sp->thold, w);
            h = sp->thold.data, hn = sp->thold.len;
            if (hn == 0) return;
            if (hn >= strlen(m->call_begin) && memcmp(h, m->call_begin, strlen(m->call_begin)) == 0) {
                drop(&sp->thold, strlen(m->call_begin));
                sp->tstate = T_CALL;
                continue;
            }
            if (hn >= strlen(m->block_end) && memcmp(h, m->block_end, strlen(m->block_end)) == 0) {
                drop(&sp->thold, strlen(m->block_end));
                sp->tstate = T_TEXT;
                continue;
            }
            if (!final && (is_prefix_of(h, hn, m->call_begin) || is_prefix_of(h, hn, m->block_end))) return;
            /* text inside the block that is no call: content, up to the next marker */
            long a = find(h, hn, m->call_begin), b = find(h, hn, m->block_end);
            long to = a < 0 ? b : b < 0 ? a : a < b ? a : b;
            if (to < 0 && !final) return;
            size_t k = to < 0 ? hn : (size_t)to;
            ea_sbuf_append(&d->content, h, k);
            drop(&sp->thold, k);
            continue;
        }
        long at = find(h ? h : "", hn, m->call_end); /* T_CALL */
        if (at >= 0) {
            end_call(sp, m, (size_t)at, 1, d);
            continue;
        }
        if (final) {
            end_call(sp, m, hn, 0, d);
            continue;
        }
        return;
    }
}

/* ---- the reasoning machine -------------------------------------------------------- */

enum { R_START = 0, R_THINK = 1, R_CONTENT = 2 };

static void reason_feed(ea_chat_split *sp, const char *text, size_t n, int final, ea_chat_delta *d) {
    if (sp->rstate == R_CONTENT) {
        tools_feed(sp, text, n, final, d);
        return;
    }
    ea_sbuf_append(&sp->rhold, text, n);
    for (;;) {
        const char *h = sp->rhold.data ? sp->rhold.data : "";
        size_t hn = sp->rhold.len;
        if (sp->rstate == R_START) {
            if (!final && hn < strlen(THINK_OPEN) && is_prefix_of(h, hn, THINK_OPEN)) return;
            if (hn >= strlen(THINK_OPEN) && memcmp(h, THINK_OPEN, strlen(THINK_OPEN)) == 0) {
                drop(&sp->rhold, strlen(THINK_OPEN));
                sp->rstate = R_THINK;
            } else {
                sp->rstate = sp->rmode == EA_REASONING_DEEPSEEK_R1 ? R_THINK : R_CONTENT;
            }
            continue;
        }
        if (sp->rstate == R_THINK) {
            long at = find(h, hn, THINK_CLOSE);
            /* kimi_k2: a tool-call section ends the thinking too, and stays for the tool machine */
            const char *sec = sp->rmode == EA_REASONING_KIMI_K2 ? kimi_markers.block_begin : NULL;
            long at_sec = sec ? find(h, hn, sec) : -1;
            if (at_sec >= 0 && (at < 0 || at_sec < at)) {
                ea_sbuf_append(&d->reasoning, h, (size_t)at_sec);
                drop(&sp->rhold, (size_t)at_sec);
                sp->rstate = R_CONTENT;
                continue;
            }
            if (at >= 0) {
                ea_sbuf_append(&d->reasoning, h, (size_t)at);
                drop(&sp->rhold, (size_t)at + strlen(THINK_CLOSE));
                sp->rstate = R_CONTENT;
                continue;
            }
            size_t hold = partial(h, hn, THINK_CLOSE);
            if (sec && partial(h, hn, sec) > hold) hold = partial(h, hn, sec);
            size_t k = hn - (final ? 0 : hold);
            ea_sbuf_append(&d->reasoning, h, k);
            drop(&sp->rhold, k);
            return;
        }
        /* R_CONTENT: the rest goes on to the tool machine */
        ea_sbuf rest = sp->rhold;
        memset(&sp->rhold, 0, sizeof sp->rhold);
        tools_feed(sp, rest.data ? rest.data : "", rest.len, final, d);
        ea_sbuf_deinit(&rest);
        return;
    }
}

/* ---- public ------------------------------------------------------------------------ */

void ea_chat_split_init(ea_chat_split *sp, ea_reasoning_mode rmode, ea_tool_format fmt) {
    memset(sp, 0, sizeof *sp);
    sp->rmode = rmode;
    sp->fmt = fmt;
    sp->rstate = rmode == EA_REASONING_NONE ? R_CONTENT : R_START;
}

void ea_chat_split_set_tools(ea_chat_split *sp, const json_t *tools) {
    json_decref(sp->tools);
    sp->tools = json_incref((json_t *)tools);
}

void ea_chat_split_think_open(ea_chat_split *sp, int open) {
    if (sp->rmode == EA_REASONING_NONE) return;
    if (open) sp->rstate = R_THINK;
    else if (sp->rmode == EA_REASONING_DEEPSEEK_R1) sp->rmode = EA_REASONING_QWEN3;
}

void ea_chat_split_deinit(ea_chat_split *sp) {
    json_decref(sp->tools);
    ea_sbuf_deinit(&sp->rhold);
    ea_sbuf_deinit(&sp->thold);
    memset(sp, 0, sizeof *sp);
}

static void delta_reset(ea_chat_delta *d) {
    ea_sbuf_reset(&d->content);
    ea_sbuf_reset(&d->reasoning);
    if (!d->calls) d->calls = json_array();
    else json_array_clear(d->calls);
}

void ea_chat_split_feed(ea_chat_split *sp, const char *text, size_t n, ea_chat_delta *d) {
    delta_reset(d);
    reason_feed(sp, text, n, 0, d);
}

void ea_chat_split_finish(ea_chat_split *sp, ea_chat_delta *d) {
    delta_reset(d);
    reason_feed(sp, "", 0, 1, d);
}

void ea_chat_delta_deinit(ea_chat_delta *d) {
    ea_sbuf_deinit(&d->content);
    ea_sbuf_deinit(&d->reasoning);
    json_decref(d->calls);
    memset(d, 0, sizeof *d);
}
