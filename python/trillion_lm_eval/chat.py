"""The model's own chat template rendered to text for the harness's
apply_chat_template. trillion has no command that returns a rendered
template (generate renders `messages` internally and answers with the
generation), and this package may not change the engine, so the template
is rendered here with Jinja2 the way Hugging Face's apply_chat_template
does (sandboxed, trim_blocks, lstrip_blocks, raise_exception, the special
tokens as variables). tests/chat/golden holds trillion's own renderer to
byte-identical output with Jinja2, so a generate request with the same
messages sees the same prompt."""
import json
import os

import jinja2
import jinja2.sandbox


class ChatTemplateError(ValueError):
    pass


def _token_text(v):
    return v.get("content") if isinstance(v, dict) else v


def load_template(model):
    """(template source, special-token variables) of a model directory:
    chat_template.jinja, else tokenizer_config.json's "chat_template"."""
    cfg = {}
    path = os.path.join(model, "tokenizer_config.json")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    jinja_file = os.path.join(model, "chat_template.jinja")
    if os.path.isfile(jinja_file):
        with open(jinja_file, encoding="utf-8") as f:
            source = f.read()
    else:
        source = cfg.get("chat_template")
        if isinstance(source, list):  # named templates: the default one
            source = next((t["template"] for t in source if t.get("name") == "default"), None)
    if not source:
        raise ChatTemplateError(f"model={model}: no chat template (neither chat_template.jinja nor "
                                f"\"chat_template\" in tokenizer_config.json); run without --apply_chat_template")
    specials = {k: _token_text(cfg.get(k)) or "" for k in ("bos_token", "eos_token", "unk_token", "pad_token")}
    return source, specials


class ChatTemplate:
    def __init__(self, model):
        self.source, self.specials = load_template(model)

        def raise_exception(message):
            raise ChatTemplateError(f"chat template: {message}")

        env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                           extensions=["jinja2.ext.loopcontrols"])
        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(self.source)

    def render(self, messages, add_generation_prompt=True):
        return self.template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                    **self.specials)
