#!/usr/bin/env python3
"""Refuses calls of C library functions the style guide bans in altar's own
sources: unbounded copies and formats (sprintf, strcpy, strcat, gets, ...),
conversions that cannot report errors (atoi, atol, atof), and functions with
hidden static state or races (strtok, tmpnam, mktemp). Comments and string
literals are skipped. Prints FILE:LINE: name (use instead) for each, exits 1.
usage: check-banned.py SOURCE_DIR"""
import os
import re
import sys

BANNED = {
    "atoi": "strtol with an end pointer",
    "atol": "strtol with an end pointer",
    "atoll": "strtoll with an end pointer",
    "atof": "strtod with an end pointer",
    "sprintf": "snprintf",
    "vsprintf": "vsnprintf",
    "strcpy": "snprintf or memcpy with a known length",
    "strcat": "snprintf or a growing buffer",
    "strncpy": "snprintf (strncpy may leave no terminator)",
    "strncat": "snprintf",
    "gets": "fgets",
    "strtok": "strtok_r",
    "tmpnam": "mkstemp",
    "tempnam": "mkstemp",
    "mktemp": "mkstemp or mkdtemp",
}
PARTS = ["core", "storage", "transports", "backends", "producer", "worker", "ledger", "reconciler", "dashboard", "cli",
         "include"]
CALL = re.compile(r"(?<![A-Za-z0-9_.>])(" + "|".join(BANNED) + r")\s*\(")


def strip(text):
    """text with comments and string/char literals blanked, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    root = sys.argv[1]
    bad = 0
    for part in PARTS:
        for dirpath, _, files in os.walk(os.path.join(root, part)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                code = strip(open(path, encoding="utf-8", errors="replace").read())
                for lineno, line in enumerate(code.split("\n"), 1):
                    for m in CALL.finditer(line):
                        # a definition or declaration of our own function of that name is a call site too
                        print(f"{os.path.relpath(path, root)}:{lineno}: {m.group(1)} is banned; use {BANNED[m.group(1)]}")
                        bad += 1
    if bad:
        print(f"{bad} banned call(s)", file=sys.stderr)
        return 1
    print("banned functions: none in", ", ".join(PARTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
