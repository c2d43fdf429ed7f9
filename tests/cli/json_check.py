#!/usr/bin/env python3
"""Checks gdunlock --json output against the documented schemas.

usage: json_check.py DOCS_DIR OUTPUT EXIT_STATUS [COMMAND]
       json_check.py --batch DOCS_DIR MANIFEST    (see batch())

OUTPUT must be exactly one JSON document with the envelope of
docs/cli-json.md (schema, command, command_line, exit_code = EXIT_STATUS,
command = COMMAND when given); the error document when its schema says so;
and every member it holds must be documented in the tables of
docs/cli-json.md or docs/doctor-json.md for its schema (a row names a member
or an object or array that holds it and whose own members no row names;
NAME_escaped goes with NAME). Every
top-level member a table names must be there, unless the row says when it is
present ("with --...", "when ..."). A NAME_escaped twin must undo to bytes
that are not UTF-8 and that decode (errors replaced) to NAME. Prints why and
exits 1 otherwise.
"""
import json
import re
import sys

SCHEMA_HEADING = re.compile(r'^#+ .*"schema": "(gdunlock-[a-z0-9]+/\d+)"')


def documented(docs_dir):
    """{schema: {member: optional}} from the tables; "envelope" for the envelope."""
    tables, current = {}, None
    for name in ("cli-json.md", "doctor-json.md"):
        with open(f"{docs_dir}/{name}", encoding="utf-8") as f:
            for line in f:
                if line.startswith("#"):
                    m = SCHEMA_HEADING.match(line)
                    current = m.group(1) if m else ("envelope" if "The envelope" in line else None)
                    continue
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if current is None or not line.startswith("| `") or len(cells) < 3:
                    continue
                names = re.findall(r"`([^`]+)`", cells[0])
                meaning = cells[2]
                optional = meaning.startswith(("with `--", "when", "present only", "a path that"))
                parent = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
                rows = tables.setdefault(current, {})
                rows[names[0]] = optional
                for sibling in names[1:]:
                    rows[parent + sibling] = optional
    return tables


def members(doc, prefix=""):
    """Every member path: a.b, list[].c (arrays of objects looked into)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = prefix + key
            yield path
            yield from members(value, path + ".")
    elif isinstance(doc, list):
        for item in doc:
            yield from members(item, prefix[:-1] + "[].")


def under(path, name):
    """Whether path is name's own member or one of its members'."""
    n = name[:-2] if name.endswith("[]") else name
    return path.startswith((n + ".", n + "[]"))


def covered(path, names):
    """A row names the member, or names an object or array that holds it and
    no row names anything inside that one (its meaning lists them)."""
    for candidate in {path, re.sub(r"_escaped$", "", path)}:
        for name in names:
            if candidate in (name, re.sub(r"\[\]$", "", name)) or under(name, candidate):
                return True
            if under(candidate, name) and not any(under(o, name) for o in names if o != name):
                return True
    return False


def unescape(text):
    """The bytes an escaped twin stands for (docs/cli-json.md, "Text")."""
    out, i = bytearray(), 0
    for m in re.finditer(r"\\\\|\\x([0-9a-f]{2})|\\u([0-9a-f]{4})", text):
        out += text[i:m.start()].encode()
        out += (b"\\" if m.group(0) == "\\\\" else bytes([int(m.group(1), 16)]) if m.group(1)
                else chr(int(m.group(2), 16)).encode())
        i = m.end()
    return bytes(out + text[i:].encode())


def twins(doc):
    """Every (NAME_escaped, its value, NAME's value) in doc."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key.endswith("_escaped"):
                yield key, value, doc.get(key[: -len("_escaped")])
            yield from twins(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from twins(item)


def check(tables, output, status, command):
    """Why the document in output is wrong, or None."""
    try:
        with open(output, encoding="utf-8") as f:
            doc = json.load(f)
    except Exception as e:  # not UTF-8, not JSON, or more than one document
        return f"stdout is not one JSON document ({e})"
    if not isinstance(doc, dict):
        return "the document is not an object"
    schema = doc.get("schema")
    if not isinstance(schema, str) or schema not in tables:
        return f"schema {schema!r} is not one docs/cli-json.md documents"
    first = [key for key in doc if not key.endswith("_escaped")][:4]
    if first != ["schema", "command", "command_line", "exit_code"]:
        return f"the envelope does not begin the document: {first}"
    if doc["exit_code"] != status:
        return f"exit_code {doc['exit_code']} in the document, exit status {status}"
    if not isinstance(doc["command_line"], str) or not doc["command_line"].startswith("gdunlock"):
        return f"command_line {doc['command_line']!r}"
    if command and doc["command"] != command:
        return f"command {doc['command']!r}, expected {command!r}"
    if schema == "gdunlock-error/1":
        err = doc.get("error")
        if status == 0 or not isinstance(err, dict) or not err.get("code") \
                or not isinstance(err.get("message"), str):
            return "not the error document: " + json.dumps(doc)[:300]
    for key, exact, plain in twins(doc):
        raw = unescape(exact)
        if raw.decode("utf-8", "replace") != plain or raw.decode("utf-8", "ignore") == raw.decode(
                "utf-8", "replace"):
            return f"{key} {exact!r} is not the exact form of {plain!r} (or it was UTF-8)"
    names = dict(tables["envelope"], **tables[schema])
    for path in members(doc):
        if not covered(path, names):
            return f"{schema}: member {path} is not documented"
    for name, optional in tables[schema].items():
        top = re.sub(r"\[\]$", "", name)
        if "." not in name and not optional and top not in doc:
            return f"{schema}: documented member {top} is missing"
    return None


def batch(tables, manifest):
    """Each line: OUTPUT, STATUS, COMMAND, LABEL (tab-separated) checks a
    document; a line "has", EXPRESSION, LABEL checks the document before it
    (d). Prints ok/FAIL per line; returns the failures."""
    failed, last = 0, None
    sys.stdout.reconfigure(errors="backslashreplace")  # labels hold the test's Latin-1 names
    with open(manifest, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "has":
                try:
                    with open(last, encoding="utf-8") as g:
                        d = json.load(g)  # noqa: F841 (the expression's)
                    why = None if eval(fields[1]) else "false"
                except Exception as e:
                    why = f"{type(e).__name__}: {e}"
                label = fields[1]
            else:
                last, status, command, label = fields
                why = check(tables, last, int(status), command)
            print(f"{'FAIL' if why else 'ok  '} {label}" + (f": {why}" if why else ""))
            failed += why is not None
    return failed


def main():
    if sys.argv[1] == "--batch":
        sys.exit(1 if batch(documented(sys.argv[2]), sys.argv[3]) else 0)
    docs_dir, output, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
    command = sys.argv[4] if len(sys.argv) > 4 else None
    why = check(documented(docs_dir), output, status, command)
    if why:
        sys.exit(why)


main()
