#!/usr/bin/env python3
"""Keeps tests/MAP.md (every library source file and its tests) true: each
.c of a part (ALTAR_PARTS in CMakeLists.txt, and cli/) has exactly one row,
under its part's heading; each row's file exists; each test a row names is
defined by tests/CMakeLists.txt (or a .cmake file it includes). Test names
come from the CMake files, not from `ctest -N`, so that a build configured
without some tests (the sanitizer build has no python.* tests) checks the
same map. Prints FILE:LINE: problem (and, for a file without a row, the row
to add), exits 1.
usage: check-tests-map.py SOURCE_DIR"""
import os
import re
import sys

MAP = "tests/MAP.md"
TEST_NAME = re.compile(r"^(unit|cli|integration|python)\.\w+$")


def parts(root):
    """The library parts, from the one list the build reads, and cli/."""
    text = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"^set\(ALTAR_PARTS ([^)]*)\)", text, re.M)
    if not m:
        sys.exit("CMakeLists.txt: no set(ALTAR_PARTS ...) to read the parts from")
    return m.group(1).split() + ["cli"]


def sources(root, part):
    """Every .c under a part's folder, as the build's GLOB_RECURSE finds them."""
    found = []
    for dirpath, _, files in os.walk(os.path.join(root, part)):
        found += [os.path.relpath(os.path.join(dirpath, f), root) for f in files if f.endswith(".c")]
    return sorted(found)


def test_names(root):
    """Names of the tests the CMake files define: literal add_test(NAME x) and
    the glob loops (file(GLOB VAR .../DIR/test_*.EXT) then foreach over VAR
    with add_test(NAME PREFIX.${name}))."""
    names, todo, seen = set(), [os.path.join(root, "tests", "CMakeLists.txt")], set()
    while todo:
        path = todo.pop()
        if path in seen or not os.path.exists(path):
            continue
        seen.add(path)
        here = os.path.dirname(path)
        text = open(path, encoding="utf-8").read()
        for inc in re.findall(r"include\(\$\{CMAKE_CURRENT_SOURCE_DIR\}/([^)\s]+)\)", text):
            todo.append(os.path.join(here, inc))
        names |= set(re.findall(r"add_test\(NAME ([\w.]+)\s", text))
        globs = dict(re.findall(r"file\(GLOB (\w+) CONFIGURE_DEPENDS \$\{CMAKE_CURRENT_SOURCE_DIR\}/(\S+)\)", text))
        for var, body in re.findall(r"foreach\(src \$\{(\w+)\}\)(.*?)endforeach\(\)", text, re.S):
            m = re.search(r"add_test\(NAME (\w+)\.\$\{name\}", body)
            if not m or var not in globs:
                continue
            folder, pattern = os.path.split(globs[var])
            rx = re.compile("^" + re.escape(pattern).replace(r"\*", ".*") + "$")
            for f in os.listdir(os.path.join(here, folder)):
                if rx.match(f):
                    names.add(m.group(1) + "." + f.rsplit(".", 1)[0])
    return names


def read_map(root):
    """{file: (line, part heading it sits under, [test names], has 'none')}, and problems."""
    rows, problems, part = {}, [], None
    path = os.path.join(root, MAP)
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        h = re.match(r"^### (\w+)/\s*$", line)
        if h:
            part = h.group(1)
            continue
        r = re.match(r"^\| `([^`]+\.c)` \|(.*)\|\s*$", line)
        if not r:
            continue
        f, cell = r.group(1), r.group(2)
        tests = [t for t in re.findall(r"`([^`]+)`", cell) if TEST_NAME.match(t)]
        if f in rows:
            problems.append(f"{MAP}:{lineno}: {f} has a second row (the first is line {rows[f][0]}); keep one")
            continue
        rows[f] = (lineno, part, tests, cell.strip() == "none")
    return rows, problems


def suggestion(root, f, rows, names):
    """Tests for a file's new row, and how they were found: the tests whose
    sources name a function the file defines; failing that, the tests of the
    mapped files that call it (the map's "through"); failing that, those of
    the file of its part whose name it extends (worker_emit.c, worker.c).
    Whoever adds the row checks them."""
    text = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
    # names too short to be searched for alone (main, f) are left out
    funcs = [fn for fn in set(re.findall(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\(", text, re.M)) if len(fn) > 6]
    named = re.compile(r"\b(" + "|".join(re.escape(fn) for fn in sorted(funcs)) + r")\b") if funcs else None

    def names_one(path):
        body = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
        return bool(named and named.search(body))

    hits = set()
    for folder in ("unit", "integration"):
        d = os.path.join(root, "tests", folder)
        for t in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if t.startswith("test_") and t.endswith(".c") and names_one(os.path.join("tests", folder, t)):
                hits.add(f"{folder}.{t[:-2]}")
    hits &= names
    if hits:
        return ", ".join(f"`{t}`" for t in sorted(hits)), "tests naming its functions"
    callers = [g for g, (_, _, tests, _) in sorted(rows.items())
               if tests and g != f and not g.startswith("cli/") and os.path.exists(os.path.join(root, g))
               and names_one(g)]
    if callers:
        tests = []
        for g in callers:
            tests += [t for t in rows[g][2] if t not in tests]
        cell = "through " + ", ".join(f"`{g}`" for g in callers[:3]) + \
            (f" and {len(callers) - 3} more" if len(callers) > 3 else "") + ": " + \
            ", ".join(f"`{t}`" for t in tests[:6]) + (f" and {len(tests) - 6} more" if len(tests) > 6 else "")
        return cell, "the tests of the mapped files calling it"
    stem = os.path.basename(f)[:-2]
    for g, (_, _, tests, _) in sorted(rows.items(), key=lambda kv: -len(kv[0])):
        if g.split("/")[0] == f.split("/")[0] and tests and stem.startswith(os.path.basename(g)[:-2] + "_"):
            return ", ".join(f"`{t}`" for t in tests), f"the tests of {g}, the file whose name it extends; check them"
    return "none", "no test found: write none, or name its tests"


def main():
    root = sys.argv[1]
    if not os.path.exists(os.path.join(root, MAP)):
        print(f"{MAP}: missing")
        return 1
    rows, problems = read_map(root)
    names = test_names(root)
    wanted = {f: p for p in parts(root) for f in sources(root, p)}
    for f, p in sorted(wanted.items()):
        if f in rows:
            continue
        cell, how = suggestion(root, f, rows, names)
        problems.append(f"{MAP}: no row for {f}; add under \"### {p}/\" ({how}):\n| `{f}` | {cell} |")
    for f, (lineno, part, tests, none) in sorted(rows.items(), key=lambda kv: kv[1][0]):
        if f not in wanted:
            why = "does not exist" if not os.path.exists(os.path.join(root, f)) else "is not a library source"
            problems.append(f"{MAP}:{lineno}: {f} {why}; remove its row")
            continue
        if part != wanted[f]:
            problems.append(f"{MAP}:{lineno}: {f} sits under \"### {part}/\"; move it under \"### {wanted[f]}/\"")
        if not tests and not none:
            problems.append(f"{MAP}:{lineno}: {f} names no test; name its tests, or write none")
        for t in tests:
            if t not in names:
                problems.append(f"{MAP}:{lineno}: {f}: no test named {t} in tests/CMakeLists.txt")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {MAP}; rows computed from a build: "
              "python3 scripts/tests-map-rows.py . build FILE...", file=sys.stderr)
        return 1
    print(f"{MAP}: {len(wanted)} files, each with its row; every test named exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
