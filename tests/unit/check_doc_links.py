#!/usr/bin/env python3
"""check_doc_links.py SOURCE: every relative link and image in the tree's
Markdown files (README.md, docs/, bench/results/, ...) names a file or
folder that exists, and every #anchor a heading of its page (GitHub's
slugs); the README stays a front door: at most 200 lines, with the two
set-up commands of a fresh Debian machine, the second the command .ci/run
runs. Web links are not fetched (CI has no network to spare for it)."""
import os
import re
import sys

SKIP_DIRS = {".git", "fixtures", "node_modules"}
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
README_LINES = 200
SETUP = "apt-get update && apt-get install -y $(cat scripts/debian-packages.txt) && cmake -S . -B build && cmake --build build -j && ./build/bin/gdunlock doctor"
TESTS = "scripts/test.sh"


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but - and _
    dropped, spaces as -."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        fence = False
        for line in open(path, encoding="utf-8"):
            if line.startswith("```"):
                fence = not fence
            if fence:
                continue
            m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def markdown_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def link_problems(root):
    problems = []
    for path in markdown_files(root):
        text = open(path, encoding="utf-8").read()
        # Code (fenced and inline) holds no links.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file_part, _, anchor = target.partition("#")
            where = os.path.relpath(path, root)
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{where}: {target}: no {os.path.relpath(dest, root)}")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{where}: {target}: no heading #{anchor} in {os.path.relpath(dest, root)}")
    return problems


def readme_problems(root):
    lines = open(os.path.join(root, "README.md"), encoding="utf-8").read().splitlines()
    problems = []
    if len(lines) > README_LINES:
        problems.append(f"README.md has {len(lines)} lines, more than {README_LINES}: move detail to docs/")
    commands = [line.strip() for line in lines if line.startswith("    ")]
    for command in (SETUP, TESTS):
        if command not in commands:
            problems.append(f"README.md lacks the set-up command '{command}'")
    ci = open(os.path.join(root, ".ci", "run"), encoding="utf-8").read().split("\n")
    if TESTS not in (line.strip() for line in ci):
        problems.append(f".ci/run does not run '{TESTS}', the README's test command")
    return problems


def main():
    root = os.path.realpath(sys.argv[1])
    problems = link_problems(root) + readme_problems(root)
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    print(f"PASS: every relative link and anchor in {sum(1 for _ in markdown_files(root))} "
          f"Markdown files resolves; README.md within {README_LINES} lines with its two set-up commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
