/*
 * builtin_templates.c — chat_template strings of model families, as published
 * in each model's tokenizer_config.json. They are data, reproduced byte for
 * byte (JSON escapes turned into C escapes): changing a single space changes
 * the prompt the model sees. Invariant: every string here parses and renders
 * with src/tokenizer/chat_template.c (tests/unit/test_chat_template.c).
 *
 * One exception, marked below: "qwen3_5_moe" is ours, not Qwen3.5's published
 * template (its tokenizer files are in no package we can fetch). It writes
 * Qwen3.5's layout exactly where the server depends on it — ChatML turns, a
 * generation prompt that opens <think>, tool results as <tool_response> user
 * turns, and tool calls as <tool_call>\n<function=NAME>\n<parameter=KEY>\n
 * VALUE\n</parameter>\n...</function>\n</tool_call> — with our own wording of
 * the tool instructions, and JSON (not Python's str) for non-string values.
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

/* Ours, in Qwen3.5's format (see the top of this file); a test model's template. */
static const char ea__qwen3_5_template[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n# Tools\\n\\nThese functions can be called:\\n\\n<tools>' }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- '\\n' + (tool | tojson) }}\n"
    "    {%- endfor %}\n"
    "    {{- '\\n</tools>\\n\\nTo call functions, end the reply with one block per call, in exactly this form:\\n\\n<tool_call>\\n<function=NAME>\\n<parameter=PARAMETER>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>\\n\\nGive every required parameter; a value may span lines.' }}\n"
    "    {%- if messages and messages[0].role == 'system' %}\n"
    "        {{- '\\n\\n' + messages[0].content }}\n"
    "    {%- endif %}\n"
    "    {{- '<|im_end|>\\n' }}\n"
    "{%- elif messages and messages[0].role == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- set content = message.content if message.content is string else '' %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {%- if '</think>' in content %}\n"
    "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_start|>assistant\\n' + content }}\n"
    "        {%- for call in message.tool_calls or [] %}\n"
    "            {%- set fn = call.function if call.function is defined else call %}\n"
    "            {%- if not loop.first %}\n"
    "                {{- '\\n' }}\n"
    "            {%- elif content | trim %}\n"
    "                {{- '\\n\\n' }}\n"
    "            {%- endif %}\n"
    "            {{- '<tool_call>\\n<function=' + fn.name + '>\\n' }}\n"
    "            {%- if fn.arguments is mapping %}\n"
    "                {%- for key, value in fn.arguments | items %}\n"
    "                    {{- '<parameter=' + key + '>\\n' }}\n"
    "                    {%- if value is string %}\n"
    "                        {{- value }}\n"
    "                    {%- else %}\n"
    "                        {{- value | tojson }}\n"
    "                    {%- endif %}\n"
    "                    {{- '\\n</parameter>\\n' }}\n"
    "                {%- endfor %}\n"
    "            {%- endif %}\n"
    "            {{- '</function>\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}\n"
    "        {%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<think>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n";

const char *ea_builtin_chat_template(const char *family) {
    if (!family) return NULL;
    if (strcmp(family, "mixtral") == 0) return ea__mixtral_template;
    if (strcmp(family, "olmoe") == 0) return ea__olmoe_template;
    if (strcmp(family, "qwen3_5_moe") == 0) return ea__qwen3_5_template;
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
    if (strcmp(family, "qwen3_5_moe") == 0) { /* Qwen's: no BOS */
        *eos = "<|im_end|>";
        return 0;
    }
    if (strcmp(family, "olmoe") == 0) { /* GPT-NeoX-style vocabulary: one token for both */
        *bos = "<|endoftext|>";
        *eos = "<|endoftext|>";
        return 0;
    }
    return -1;
}
