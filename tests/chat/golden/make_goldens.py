#!/usr/bin/python3
"""Render the chat-template golden files with the real Jinja2.

Run from anywhere with Debian's python3-jinja2 (apt-get install python3-jinja2):
    /usr/bin/python3 tests/chat/golden/make_goldens.py

The environment is the one Hugging Face transformers builds in
apply_chat_template: an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and loopcontrols, a tojson filter that is json.dumps with
ensure_ascii=False (no HTML escaping), and a raise_exception global. The
template sees messages, tools (None unless given), documents (None),
add_generation_prompt, bos_token and eos_token (from tokenizer_config.json,
"" when the directory has none).

Writes cases.json (the conversations) and, for each model directory under
tests/fixtures/chat/, <family>/<case>.txt (the exact rendering) or
<family>/<case>.error (Jinja2 raised; the C++ side must raise too).
"""
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "chat")
FAMILIES = ["deepseek-v3", "kimi-k2", "kimi-k2-thinking"]

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city, \"now\".",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Город"}},
                       "required": ["city"]},
    },
}]

CASES = [
    {"name": "system_user", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": "You are a helpful assistant."},
                  {"role": "user", "content": "What is 2+2?"}]},
    {"name": "multi_turn", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": "Hello. How can I help?"},
                  {"role": "user", "content": "Tell me a joke."},
                  {"role": "assistant", "content": "Why did the chicken cross the road?"},
                  {"role": "user", "content": "Why?"}]},
    {"name": "no_system", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "Hello"}]},
    {"name": "no_generation_prompt", "add_generation_prompt": False,
     "messages": [{"role": "user", "content": "Hello"}]},
    {"name": "assistant_last", "add_generation_prompt": False,
     "messages": [{"role": "system", "content": "S"},
                  {"role": "user", "content": "Q"},
                  {"role": "assistant", "content": "A"}]},
    {"name": "unicode", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": "Отвечай по-русски. 你好"},
                  {"role": "user", "content": "Привет, мир! مرحبا 👋🏽 日本語\tтаб"},
                  {"role": "assistant", "content": "Здравствуйте! 🌍"},
                  {"role": "user", "content": "ẞ ﬁ é (e\u0301) \u200b end"}]},
    {"name": "empty_content", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": ""},
                  {"role": "user", "content": ""},
                  {"role": "assistant", "content": ""},
                  {"role": "user", "content": ""}]},
    {"name": "template_syntax_in_content", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "{{ 1 + 1 }} {% if x %}y{% endif %} {# c #}\n\n  line\r\n"}]},
    {"name": "whitespace_content", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": "  \n padded \n  "},
                  {"role": "user", "content": "\n\nfirst\n\nsecond\n"}]},
    {"name": "two_systems", "add_generation_prompt": True,
     "messages": [{"role": "system", "content": "First rule."},
                  {"role": "system", "content": "Second rule."},
                  {"role": "user", "content": "Go"}]},
    {"name": "system_not_first", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "U1"},
                  {"role": "system", "content": "Late system"},
                  {"role": "user", "content": "U2"}]},
    {"name": "special_tokens_in_content", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "<｜User｜> <|im_end|> <｜end▁of▁sentence｜>"}]},
    {"name": "tool_calls", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "Weather in Paris and Oslo?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                      {"id": "call_2", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
                  {"role": "tool", "tool_call_id": "call_2", "content": "9C, rain"},
                  {"role": "assistant", "content": "Paris: 18C sunny. Oslo: 9C rain."},
                  {"role": "user", "content": "Thanks"}]},
    {"name": "tool_last", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]},
    {"name": "tools_declared", "add_generation_prompt": True, "tools": TOOLS,
     "messages": [{"role": "system", "content": "Use tools."},
                  {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "Calling get_weather."},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"}]},
    {"name": "content_parts", "add_generation_prompt": True,
     "messages": [{"role": "user", "content": [
         {"type": "text", "text": "Describe "},
         {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
         {"type": "text", "text": " briefly."}]}]},
    {"name": "missing_content", "add_generation_prompt": True,
     "messages": [{"role": "user"}]},
    {"name": "reasoning_and_named_tool", "add_generation_prompt": True, "tools": TOOLS,
     "messages": [{"role": "user", "name": "alice", "content": "Weather?"},
                  {"role": "assistant", "content": "Earlier answer.", "reasoning_content": "old thoughts"},
                  {"role": "user", "content": "And Oslo?"},
                  {"role": "assistant", "content": "", "reasoning_content": "need a tool",
                   "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                                   "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
                  {"role": "tool", "name": "get_weather", "tool_call_id": "functions.get_weather:0",
                   "content": "9C"}]},
]

# Small templates that exercise the interpreter's Jinja2 subset one feature at
# a time; rendered with {"xs": [1, 2, 3], "d": {"b": 1, "a": [true, null]}, "s": "  Hi  "}.
SNIPPET_VARS = {"xs": [1, 2, 3], "d": {"b": 1, "a": [True, None]}, "s": "  Hi  ", "n": None}
SNIPPETS = [
    "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
    "{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}a{% else %}empty{% endfor %}",
    "{% set ns = namespace(total=0, names='') %}{% for x in xs %}{% set ns.total = ns.total + x %}{% set t = x %}{% endfor %}{{ ns.total }}{{ t is defined }}",
    "{{ d | tojson }}|{{ xs | length }}|{{ s | trim }}|{{ s | length }}|{{ xs | join('-') }}|{{ u | default('dflt') }}",
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1.5 + 1 }} {{ 'a' ~ 1 ~ none ~ true }}",
    "{{ 'b' in d }} {{ 'z' in d }} {{ 2 in xs }} {{ 'i' in s }} {{ 4 not in xs }} {{ not xs }} {{ xs and 'yes' }} {{ n or 'fallback' }}",
    "{{ 'big' if xs | length > 2 else 'small' }}|{{ 'x' if n }}|{{ d.b }}{{ d['a'][0] }}{{ d.a[1] }}{{ xs[-1] }}{{ d.missing is defined }}",
    "{{ n is none }}{{ s is string }}{{ xs is sequence }}{{ d is mapping }}{{ 1 is number }}{{ n is not none }}{{ u is undefined }}",
    "{{ d.get('b') }}{{ d.get('zz', 'no') }}{{ d.get('zz') }}{% for k in d %}{{ k }}{% endfor %}{{ s.strip() }}{{ s.startswith('  H') }}",
    "a\n  {% if true %}\n    x\n  {% endif %}\n  b {# c #}\n{%- if xs %} c {% endif -%}  \n d\n",
    "{%- for x in xs -%}\n  [{{- x -}}]\n{%- endfor %}\n{{ '{{' }}{{ \"q'\" }}{{ 'tab\\there' }}",
    "{% if n %}1{% elif xs|length == 3 %}2{% else %}3{% endif %}{% if not u is defined %}{% set u = 5 %}{% endif %}{{ u }}",
    "{% macro m(a, b='B') -%}[{{ a }}{{ b }}{{ s | trim }}]{%- endmacro %}{{ m(1) }}{{ m(2, b=3) }}{{ m('x', 'y') }}",
    "{% for x in range(5) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"
    "|{% for i in range(xs|length-1, -1, -1) %}{{ i }}{% endfor %}|{{ range(2, 7, 2) | join(',') }}",
    "{{ xs[1:] }}{{ xs[:-1] | tojson }}{{ xs[::-1] | tojson }}{{ xs[5:] | tojson }}{{ 'héllo'[1:3] }}{{ 'abc'[::-1] }}{{ xs[-2:] | length }}",
    "{{ d }}{{ [1.5, 'it\\'s', \"q\\\"\", none, false] }}{{ {'k': 'v\\\\'} }}",
    "{{ raise_exception('bad role: ' ~ xs[0]) }}",
    "{{ u.attr }}",
    "{{ 'a' + 1 }}",
]


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def token_text(value):
    if isinstance(value, dict):
        return value.get("content", "")
    return value or ""


def load(model_dir):
    """Template text and special tokens, as trillion's load_chat_template reads them."""
    config = {}
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(config_path):
        with open(config_path, encoding="utf-8") as f:
            config = json.load(f)
    jinja_path = os.path.join(model_dir, "chat_template.jinja")
    if os.path.exists(jinja_path):
        with open(jinja_path, encoding="utf-8", newline="") as f:
            source = f.read()
    else:
        source = config["chat_template"]
    return source, token_text(config.get("bos_token")), token_text(config.get("eos_token"))


def main():
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(CASES, f, ensure_ascii=False, indent=1)
        f.write("\n")
    env = environment()
    snippets = []
    for source in SNIPPETS:
        try:
            snippets.append({"template": source, "output": env.from_string(source).render(**SNIPPET_VARS)})
        except Exception as e:  # noqa: BLE001
            snippets.append({"template": source, "error": f"{type(e).__name__}: {e}"})
    with open(os.path.join(HERE, "snippets.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump({"variables": SNIPPET_VARS, "snippets": snippets}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for family in FAMILIES:
        source, bos, eos = load(os.path.join(FIXTURES, family))
        template = env.from_string(source)
        out_dir = os.path.join(HERE, family)
        os.makedirs(out_dir, exist_ok=True)
        for old in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, old))
        for case in CASES:
            try:
                text = template.render(messages=case["messages"], tools=case.get("tools"), documents=None,
                                       add_generation_prompt=case["add_generation_prompt"],
                                       bos_token=bos, eos_token=eos)
                name, data = case["name"] + ".txt", text
            except Exception as e:  # noqa: BLE001 - any Jinja2 failure is a golden "must fail"
                name, data = case["name"] + ".error", f"{type(e).__name__}: {e}\n"
            with open(os.path.join(out_dir, name), "w", encoding="utf-8", newline="") as f:
                f.write(data)
            print(family, name, file=sys.stderr)


if __name__ == "__main__":
    main()
