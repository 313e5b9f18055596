/*
 * builtin_templates.c — chat_template strings of model families, as published
 * in each model's tokenizer_config.json. They are data, reproduced byte for
 * byte (JSON escapes turned into C escapes): changing a single space changes
 * the prompt the model sees. Invariant: every string here parses and renders
 * with src/tokenizer/chat_template.c (tests/unit/test_chat_template.c).
 */
#include "tokenizer/builtin_templates.h"

#include <string.h>

/* Mixtral-8x7B-Instruct-v0.1: optional system message folded into the first
 * user turn; strict user/assistant alternation enforced with raise_exception. */
static const char ea__mixtral_template[] =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content'] %}\n"
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n"
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "\n"
    "{{- bos_token }}\n"
    "{%- for message in loop_messages %}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n"
    "        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n"
    "    {%- endif %}\n"
    "    {%- if message['role'] == 'user' %}\n"
    "        {%- if loop.first and system_message is defined %}\n"
    "            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n"
    "        {%- else %}\n"
    "            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n"
    "        {%- endif %}\n"
    "    {%- elif message['role'] == 'assistant' %}\n"
    "        {{- ' ' + message['content'] + eos_token}}\n"
    "    {%- else %}\n"
    "        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n";

/* OLMoE-1B-7B-0924-Instruct: the Tulu template behind the BOS token. */
static const char ea__olmoe_template[] =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ '<|system|>\\n' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + '\\n' }}"
    "{% elif message['role'] == 'assistant' %}{% if not loop.last %}"
    "{{ '<|assistant|>\\n'  + message['content'] + eos_token + '\\n' }}"
    "{% else %}{{ '<|assistant|>\\n'  + message['content'] + eos_token }}{% endif %}{% endif %}"
    "{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}{% endfor %}";

const char *ea_builtin_chat_template(const char *family) {
    if (!family) return NULL;
    if (strcmp(family, "mixtral") == 0) return ea__mixtral_template;
    if (strcmp(family, "olmoe") == 0) return ea__olmoe_template;
    return NULL;
}

int ea_builtin_special_tokens(const char *family, const char **bos, const char **eos) {
    *bos = *eos = NULL;
    if (!family) return -1;
    if (strcmp(family, "mixtral") == 0) {
        *bos = "<s>";
        *eos = "</s>";
        return 0;
    }
    if (strcmp(family, "olmoe") == 0) { /* GPT-NeoX-style vocabulary: one token for both */
        *bos = "<|endoftext|>";
        *eos = "<|endoftext|>";
        return 0;
    }
    return -1;
}
