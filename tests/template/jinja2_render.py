#!/usr/bin/python3
"""Renders every case of jinja2_cases.json with Python's Jinja2, set up as Hugging Face transformers'
apply_chat_template sets it up (sandboxed, trim_blocks, lstrip_blocks, loop controls, tojson without ASCII
escaping, raise_exception, strftime_now), and writes one <name>.txt per case into OUT_DIR. A case whose template
calls raise_exception writes "raise_exception: <message>".

usage: /usr/bin/python3 jinja2_render.py SHARED_DIR OUT_DIR   (Debian: apt-get install python3-jinja2)

The committed jinja2_golden/ folder is this script's output; TemplateJinja2.GoldenFilesAreJinja2sOutput reruns it
at test time and compares.
"""
import datetime
import json
import os
import struct
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

# 2024-07-26 12:00 UTC, the clock the C++ test pins (strftime_now gives "26 Jul 2024").
CLOCK = datetime.datetime.fromtimestamp(1721995200)


def gguf_string(path, key):
    """The string value of `key` in a GGUF file's metadata (a minimal reader: the tests' vocab files only)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        raise ValueError(path + ": not a GGUF file")
    pos = 8
    _, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def read_str(p):
        (n,) = struct.unpack_from("<Q", data, p)
        return data[p + 8 : p + 8 + n], p + 8 + n

    def skip(p, t):
        if t == 8:
            return read_str(p)[1]
        if t == 9:
            et, count = struct.unpack_from("<IQ", data, p)
            p += 12
            if et == 8:
                for _ in range(count):
                    p = read_str(p)[1]
                return p
            return p + sizes[et] * count
        return p + sizes[t]

    for _ in range(n_kv):
        name, pos = read_str(pos)
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if name.decode() == key and t == 8:
            return read_str(pos)[0].decode()
        pos = skip(pos, t)
    raise KeyError(path + ": no " + key)


def load_template(shared, spec):
    """spec: a path under SHARED_DIR (a .gguf: its tokenizer.chat_template), or local:PATH beside this script."""
    if spec.startswith("local:"):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), spec[len("local:") :])
    else:
        path = os.path.join(shared, spec)
    if spec.endswith(".gguf"):
        return gguf_string(path, "tokenizer.chat_template")
    with open(path, encoding="utf-8") as f:
        return f.read()


class TemplateRaised(Exception):
    pass


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: CLOCK.strftime(fmt)
    return env


def render_case(env, shared, spec, case):
    template = env.from_string(load_template(shared, case["template"]))
    tools = spec["tools"][case["tools"]] if "tools" in case else None
    variables = dict(
        messages=spec["conversations"][case["messages"]],
        tools=tools,
        add_generation_prompt=case["add_generation_prompt"],
        bos_token=case["bos"],
        eos_token=case["eos"],
    )
    variables.update(case.get("extra", {}))
    try:
        return template.render(**variables)
    except TemplateRaised as e:
        return "raise_exception: " + str(e)


def main():
    shared, out_dir = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "jinja2_cases.json"), encoding="utf-8") as f:
        spec = json.load(f)
    env = make_env()
    os.makedirs(out_dir, exist_ok=True)
    for case in spec["cases"]:
        text = render_case(env, shared, spec, case)
        with open(os.path.join(out_dir, case["name"] + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)


if __name__ == "__main__":
    main()
