/*
 * cmd_inspect.c — `eaas inspect MODEL [--json]`: open a model (HF directory or
 * .gguf file) the way the server does, and describe it: architecture and
 * sizes, parameter counts (total and active per token), dtypes, the weight
 * bytes one token reads, and file layout problems. A model the loader rejects
 * gives exit code 1 and the loader's one-line error (file, tensor, offset).
 *
 * "Active per token" counts the non-expert weights, the top-k routed experts
 * and the shared experts of every MoE layer (embeddings included, as model
 * cards count them). "Bytes per token" is what one decode step reads from the
 * weights: one embedding row, every non-expert tensor, lm_head, and k average
 * experts per MoE layer, in the file's dtypes.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/args.h"
#include "cli/commands.h"
#include "model/lin_state.h"
#include "model/model.h"

typedef struct {
    const ea_model *m;
    int64_t n_tensors[EA_N_DTYPES];
    int64_t bytes[EA_N_DTYPES];
    int64_t elems;
    int64_t n_mat[EA_N_DTYPES]; /* matrices (2-D and up) per dtype */
    double token_bytes;          /* non-expert bytes read per token */
    int64_t expert_bytes[EA_MAX_LAYERS];
} ea__insp;

static void ea__acc(void *ctx, const ea_tensor *t, int layer, int expert) {
    ea__insp *s = ctx;
    s->n_tensors[t->dtype]++;
    s->bytes[t->dtype] += (int64_t)t->nbytes;
    s->elems += ea_tensor_nelem(t);
    if (t->n_dims >= 2) s->n_mat[t->dtype]++;
    if (expert >= 0) {
        s->expert_bytes[layer] += (int64_t)t->nbytes;
    } else if (t == &s->m->tok_embd) {
        s->token_bytes += (double)t->nbytes / (double)(t->shape[0] ? t->shape[0] : 1);
    } else {
        s->token_bytes += (double)t->nbytes;
    }
}

static const char *ea__human(char *buf, size_t n, double v, const char *unit) {
    const char *sfx[] = {"", "K", "M", "G", "T"};
    int i = 0;
    double base = strcmp(unit, "B") == 0 ? 1024.0 : 1000.0;
    while (v >= base && i < 4) v /= base, i++;
    if (i == 0) snprintf(buf, n, "%.0f%s%s", v, unit[0] ? " " : "", unit);
    else snprintf(buf, n, "%.2f %s%s%s", v, sfx[i], strcmp(unit, "B") == 0 ? "i" : "", unit);
    return buf;
}

static const char usage_text[] =
    "usage: eaas inspect [--json] MODEL\n\n"
    "Open MODEL (an HF directory with config.json and *.safetensors, or a .gguf file),\n"
    "check every tensor the config needs, and describe it: architecture, layers,\n"
    "experts, parameter counts (total, active per token), dtypes, weight bytes read\n"
    "per token, and file layout problems. Exit code 1 with a one-line error if the\n"
    "model does not load.\n\nflags:\n";

int ea_cmd_inspect(int argc, char **argv) {
    int json = 0;
    ea_arg spec[] = {{"json", EA_ARG_BOOL, &json, NULL, "print one JSON object instead of text"}, {0}};
    ea_args_rest rest;
    int rc = ea_cli_parse("inspect", usage_text, spec, argc, argv, &rest);
    if (rc >= 0) return rc;
    ea_status s;
    if (rest.n_pos != 1) return ea_cli_usage_error("inspect", NULL, "needs one MODEL (see --help)");
    ea_model *m;
    s = ea_model_open(rest.pos[0], &m);
    if (s != EA_OK) return ea_cli_fail(argv[0], s);
    const ea_model_config *c = &m->cfg;
    ea__insp st;
    memset(&st, 0, sizeof st);
    st.m = m;
    ea_model_foreach(m, ea__acc, &st);
    int n_moe = 0;
    double tok = st.token_bytes;
    for (int l = 0; l < c->n_layers; l++) {
        n_moe += c->layer_is_moe[l];
        tok += (double)st.expert_bytes[l] / c->n_experts * c->n_experts_per_tok;
    }
    int64_t total, active;
    ea_config_param_counts(c, &total, &active);
    const char *arch = ea_arch_names[c->arch];
    int shared = c->n_shared_experts + (c->shared_expert_intermediate_size > 0);
    char dtypes[256] = "";
    for (int d = 0; d < EA_N_DTYPES; d++)
        if (st.n_tensors[d]) {
            size_t o = strlen(dtypes);
            snprintf(dtypes + o, sizeof dtypes - o, "%s%s", o ? "," : "", ea_dtypes[d].name);
        }
    /* matrices in more than one dtype: often intended (an f32 router), worth seeing */
    char mix[256] = "";
    int n_mat_types = 0;
    for (int d = 0; d < EA_N_DTYPES; d++)
        if (st.n_mat[d]) {
            size_t o = strlen(mix);
            snprintf(mix + o, sizeof mix - o, "%s%s x %lld", n_mat_types++ ? ", " : "matrices in mixed dtypes: ",
                     ea_dtypes[d].name, (long long)st.n_mat[d]);
        }
    if (n_mat_types < 2) mix[0] = 0;
    const char *notes = m->layout_notes ? m->layout_notes : "";
    int exit_code = 0;
    if (json) {
        json_t *o = json_object(), *dt = json_object(), *pr = json_array();
        json_object_set_new(o, "path", json_string(m->path));
        json_object_set_new(o, "format", json_string(m->format == EA_FORMAT_HF ? "hf" : "gguf"));
        json_object_set_new(o, "architecture", json_string(arch));
        json_object_set_new(o, "layers", json_integer(c->n_layers));
        json_object_set_new(o, "moe_layers", json_integer(n_moe));
        json_object_set_new(o, "dense_layers", json_integer(c->n_layers - n_moe));
        json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
        json_object_set_new(o, "heads", json_integer(c->n_heads));
        json_object_set_new(o, "kv_heads", json_integer(c->n_kv_heads));
        json_object_set_new(o, "head_dim", json_integer(c->head_dim));
        json_object_set_new(o, "experts", json_integer(c->n_experts));
        json_object_set_new(o, "experts_per_token", json_integer(c->n_experts_per_tok));
        json_object_set_new(o, "shared_experts", json_integer(shared));
        json_object_set_new(o, "moe_intermediate_size", json_integer(c->moe_intermediate_size));
        json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
        json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
        if (c->n_linear_layers > 0) {
            json_t *ll = json_array();
            for (int l = 0; l < c->n_layers; l++)
                if (c->layer_is_linear[l]) json_array_append_new(ll, json_integer(l));
            json_object_set_new(o, "linear_attention_layers", ll);
            json_object_set_new(o, "recurrent_state_bytes_per_sequence",
                                json_integer((json_int_t)ea_lin_state_bytes_per_seq(c)));
        }
        if (c->kv_lora_rank > 0) {
            json_object_set_new(o, "q_lora_rank", json_integer(c->q_lora_rank));
            json_object_set_new(o, "kv_lora_rank", json_integer(c->kv_lora_rank));
        }
        for (int d = 0; d < EA_N_DTYPES; d++)
            if (st.n_tensors[d]) json_object_set_new(dt, ea_dtypes[d].name, json_integer(st.bytes[d]));
        json_object_set_new(o, "dtype_bytes", dt);
        json_object_set_new(o, "params_total", json_integer(total));
        json_object_set_new(o, "params_active", json_integer(active));
        json_object_set_new(o, "params_in_tensors", json_integer(st.elems));
        json_object_set_new(o, "weight_bytes", json_integer(m->weight_bytes));
        json_object_set_new(o, "bytes_per_token", json_integer((json_int_t)tok));
        for (const char *p = notes; *p;) {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            json_array_append_new(pr, json_stringn(p, n));
            p += n + (e ? 1 : 0);
        }
        if (mix[0]) json_array_append_new(pr, json_string(mix));
        if (total != st.elems) {
            char b[128];
            snprintf(b, sizeof b, "config implies %lld parameters, tensors hold %lld", (long long)total,
                     (long long)st.elems);
            json_array_append_new(pr, json_string(b));
        }
        json_object_set_new(o, "layout_problems", pr);
        char *txt = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (txt) {
            printf("%s\n", txt);
            free(txt);
        } else {
            exit_code = ea_cli_fail(argv[0], ea_err(EA_ERR_NOMEM, "JSON output"));
        }
        json_decref(o);
    } else {
        char h1[32], h2[32], h3[32], h4[32];
        printf("model            %s\n", m->path);
        printf("format           %s\n", m->format == EA_FORMAT_HF ? "hf safetensors" : "gguf");
        printf("architecture     %s\n", arch);
        printf("layers           %d (%d MoE, %d dense)\n", c->n_layers, n_moe, c->n_layers - n_moe);
        printf("hidden           %d\n", c->hidden_size);
        if (c->kv_lora_rank > 0)
            printf("attention        MLA: %d heads, q_lora %d, kv_lora %d, nope %d, rope %d, v %d\n", c->n_heads,
                   c->q_lora_rank, c->kv_lora_rank, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim);
        else
            printf("attention        %d heads, %d kv heads, head_dim %d\n", c->n_heads, c->n_kv_heads, c->head_dim);
        if (c->n_linear_layers > 0) {
            char ll[EA_MAX_LAYERS * 5] = "";
            size_t o2 = 0;
            for (int l = 0; l < c->n_layers && o2 < sizeof ll; l++)
                if (c->layer_is_linear[l]) o2 += (size_t)snprintf(ll + o2, sizeof ll - o2, "%s%d", o2 ? "," : "", l);
            double sb = (double)ea_lin_state_bytes_per_seq(c);
            printf("linear attention %d of %d layers Gated DeltaNet (%s); %d key / %d value heads, dk %d, dv %d, "
                   "conv %d; the others gated full attention, rotary dims %d\n",
                   c->n_linear_layers, c->n_layers, ll, c->lin_n_k_heads, c->lin_n_v_heads, c->lin_k_dim, c->lin_v_dim,
                   c->lin_conv_kernel, c->rope_dim);
            printf("recurrent state  %.0f bytes per sequence (%s), beside the KV cache of %d attention layers\n", sb,
                   ea__human(h4, sizeof h4, sb, "B"), c->n_layers - c->n_linear_layers);
        }
        printf("experts          %d routed, top-%d, ffn %d\n", c->n_experts, c->n_experts_per_tok,
               c->moe_intermediate_size);
        printf("shared experts   %d\n", shared);
        printf("vocab            %d%s\n", c->vocab_size, c->tie_word_embeddings ? " (tied embeddings)" : "");
        printf("dtypes           %s\n", dtypes);
        printf("parameters       %lld total (%s), %lld active per token (%s)\n", (long long)total,
               ea__human(h1, sizeof h1, (double)total, ""), (long long)active,
               ea__human(h2, sizeof h2, (double)active, ""));
        printf("weight bytes     %lld (%s)\n", (long long)m->weight_bytes,
               ea__human(h3, sizeof h3, (double)m->weight_bytes, "B"));
        printf("bytes per token  %.0f (%s)\n", tok, ea__human(h4, sizeof h4, tok, "B"));
        if (!*notes && total == st.elems && !mix[0]) {
            printf("layout           ok\n");
        } else {
            printf("layout problems\n");
            for (const char *p = notes; *p;) {
                const char *e = strchr(p, '\n');
                size_t n = e ? (size_t)(e - p) : strlen(p);
                printf("  %.*s\n", (int)n, p);
                p += n + (e ? 1 : 0);
            }
            if (mix[0]) printf("  %s\n", mix);
            if (total != st.elems)
                printf("  config implies %lld parameters, tensors hold %lld\n", (long long)total, (long long)st.elems);
        }
    }
    ea_model_close(m);
    return exit_code;
}
