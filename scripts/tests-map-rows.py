#!/usr/bin/env python3
"""Writes the rows of tests/MAP.md from a build: which ctest tests reach each
C source of the parts and of cli/, found from the objects with nm (the rules
are in MAP.md's header). Prints the "## By part" section, or only the rows of
the FILEs given; --write replaces that section of tests/MAP.md.
usage: tests-map-rows.py SOURCE_DIR BUILD_DIR [--write | FILE ...]"""
import collections
import glob
import os
import re
import subprocess
import sys

SHOWN = 6  # tests named in a row before "and N more"
LABELS = ["unit", "cli", "python", "integration"]  # the order tests are named in, at equal relevance
HEADS = {
    "core": "The model, codec, identity, config, plug-in plumbing (handles and defaults of every plug-in kind).",
    "storage": "The storage adapters: local, http(s), gs://, s3://.",
    "transports": "The embedded log and Kafka.",
    "backends": "Process, docker, kubernetes, modal, python.",
    "producer": "Submit, the job queue, cancel.",
    "worker": "The worker daemon.",
    "ledger": "The memory and RocksDB ledgers.",
    "reconciler": "The reconciler daemon, rebuild, checkpoints.",
    "dashboard": "The read-only web dashboard and fleet view.",
    "cli": "The `altar` binary (not a library part: it reaches every part).",
}


def nm(obj):
    """(defined global symbols, undefined symbols) of an object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "U":
            undefined.add(f[1])
        elif len(f) == 3 and f[1] in "TDBRVWGS":
            defined.add(f[2])
    return defined, undefined


def source_of(obj):
    """The source an object was compiled from, relative to the source dir."""
    return re.search(r"\.dir/(.*)\.o$", obj).group(1).replace("__/", "")


class Build:
    def __init__(self, src, build):
        self.src, self.build = src, build
        text = open(os.path.join(src, "CMakeLists.txt"), encoding="utf-8").read()
        self.parts = re.search(r"^set\(ALTAR_PARTS ([^)]*)\)", text, re.M).group(1).split()
        self.objs = {}  # source -> (defined, undefined)
        for o in glob.glob(f"{build}/CMakeFiles/*.dir/**/*.c.o", recursive=True):
            s = source_of(o)
            if s.split("/")[0] in self.parts + ["cli"] and s not in self.objs:
                self.objs[s] = nm(o)
        self.owner = {}
        for s, (d, _) in sorted(self.objs.items()):
            for sym in d:
                self.owner.setdefault(sym, s)
        self.calls = {s: {self.owner[u] for u in und if u in self.owner and self.owner[u] != s}
                      for s, (_, und) in self.objs.items()}
        # The supervisor program is built from these on its own and carried
        # inside process_supervisor_blob.c: whoever runs a process task runs it.
        blob = "backends/process_supervisor_blob.c"
        if blob in self.calls:
            self.calls[blob] |= {s for s in ("backends/process_supervisor_main.c", "backends/process_zygote.c",
                                              "backends/process_supervisor.c") if s in self.objs}

    def reach(self, start, part):
        """Sources of a part reached from start by calls within that part
        (cli/main.c, the dispatcher, is not gone through)."""
        seen, todo = set(), [start]
        while todo:
            s = todo.pop()
            if s in seen:
                continue
            seen.add(s)
            todo += [g for g in self.calls.get(s, ()) if g.split("/")[0] == part and g != "cli/main.c"]
        return seen


def ctest_tests(build):
    """{test name: (command and environment text)} from the CTestTestfiles."""
    tests = {}
    for path in glob.glob(f"{build}/**/CTestTestfile.cmake", recursive=True):
        for line in open(path, encoding="utf-8"):
            m = re.match(r"(add_test|set_tests_properties)\(\[=\[([\w.]+)\]=\](.*)", line)
            if m:
                tests[m.group(2)] = tests.get(m.group(2), "") + " " + m.group(3)
    return tests


def direct_calls(b, tests):
    """{source: {test: how many of its symbols the test's own code uses}}."""
    common = {source_of(o): nm(o) for o in glob.glob(f"{b.build}/tests/CMakeFiles/altar_testutil.dir/**/*.o",
                                                      recursive=True)}
    common_owner = {sym: s for s, (d, _) in common.items() for sym in d}
    by_exe = {}
    for name, text in tests.items():
        for exe in re.findall(r"/tests/(\w+)\b", text):
            if os.path.isdir(f"{b.build}/tests/CMakeFiles/{exe}.dir"):
                by_exe.setdefault(exe, []).append(name)
    direct = collections.defaultdict(dict)
    for exe, names in by_exe.items():
        count, used, seen = collections.Counter(), set(), set()
        todo = []
        for o in glob.glob(f"{b.build}/tests/CMakeFiles/{exe}.dir/**/*.o", recursive=True):
            s = source_of(o)
            if s in b.objs:  # a library source compiled into the test
                count[s] += 1000
            todo += list(nm(o)[1])
        while todo:  # the test's own code and the shared suites it runs
            sym = todo.pop()
            if sym in seen:
                continue
            seen.add(sym)
            if sym in common_owner and common_owner[sym] not in used:
                used.add(common_owner[sym])
                todo += list(common[common_owner[sym]][1])
            elif sym in b.owner:
                count[b.owner[sym]] += 1
        for s, n in count.items():
            for name in names:
                direct[s][name] = n
    # python.contract: the functions the Python package calls (an ops table
    # it only registers is not counted)
    if "python.contract" in tests:
        for p in glob.glob(f"{b.src}/python/altar/**/*.py", recursive=True):
            for sym in set(re.findall(r"\.(altar_\w+)\(", open(p, encoding="utf-8").read())):
                s = b.owner.get(sym)
                if s and not s.startswith("cli/"):
                    direct[s]["python.contract"] = direct[s].get("python.contract", 0) + 1
    return direct


def commands_run(b, tests):
    """{test: altar commands its scripts run}, for shell and pytest tests."""
    table = re.findall(r'\{"([a-z]+)", altar_cmd_(\w+)', open(f"{b.src}/cli/main.c", encoding="utf-8").read())
    cmds = dict(table)
    runs = {}
    for name, text in tests.items():
        body = ""
        for path in re.findall(r'"(/[^"]+\.(?:sh|py))"', text) + \
                [f"{b.src}/python/tests/{p}" for p in re.findall(r'"(test_\w+\.py)"', text)]:
            if os.path.basename(path) in ("with-venv.sh", "python-test.sh") or not os.path.exists(path):
                continue
            body += open(path, encoding="utf-8").read()
        # sourced bodies (X_e2e.sh), the README's walk-through, the bench script
        for rel in re.findall(r'^\. "[^"]*/(tests/[^"]+\.sh)"', body, re.M):
            body += open(os.path.join(b.src, rel), encoding="utf-8").read()
        for rel in re.findall(r'(README\.md|bench/\w+\.sh)"', body):
            if os.path.exists(os.path.join(b.src, rel)):
                body += open(os.path.join(b.src, rel), encoding="utf-8").read()
        if not body:
            continue
        aliases = {"ALTAR_BIN"} | set(re.findall(r'^\s*(\w+)="\$\{?ALTAR_BIN', body, re.M)) | \
            set(re.findall(r'^\s*(\w+)="\$\(cd [^\n]*/altar"', body, re.M))
        tok = r'(?:\$\{?(?:' + "|".join(sorted(aliases)) + r')\b[^"\s]*["\']?|(?<![\w/.-])altar)'
        found = {c for c in cmds if re.search(tok + r'\s+(?:--?[\w-]+(?:[ =][^-\s]\S*)?\s+)*' + c + r'\b', body)}
        found |= {c for c in re.findall(r'\[altar_bin, "(\w+)"', body) if c in cmds}
        for group in re.findall(r'for cmd in \(([^)]*)\)', body):
            found |= {c for c in re.findall(r'"(\w+)"', group) if c in cmds}
        if found:
            runs[name] = found
    return runs, cmds


def through_binary(b, runs, cmds):
    """{source: {test: 1}} for sources a command's code calls."""
    defined_in = {sym: s for s, (d, _) in b.objs.items() if s.startswith("cli/") for sym in d}
    reached = collections.defaultdict(dict)
    for test, found in runs.items():
        for c in found:
            start = defined_in.get("altar_cmd_" + cmds[c])
            if not start:
                continue
            for s in b.reach(start, "cli") | {"cli/main.c"}:
                reached[s][test] = 1
                for g in b.calls.get(s, ()):
                    if not g.startswith("cli/"):
                        reached[g][test] = 1
    return reached


def listed(source, tests):
    """Tests named after the source, or sharing a word with it, first; then by use."""
    stem = os.path.basename(source)[:-2]

    def key(t):
        n = t.split(".", 1)[1]
        bare = n[5:] if n.startswith("test_") else n
        words = {w for w in stem.split("_") if len(w) >= 4} & set(n.split("_"))
        rank = 0 if n == "test_" + stem else 1 if stem in n or bare in stem else 2 if words else 3
        return rank, LABELS.index(t.split(".")[0]), -tests[t], t

    names = sorted(tests, key=key)
    text = ", ".join(f"`{t}`" for t in names[:SHOWN])
    return text + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def cells(b, direct, binary):
    sources = sorted(b.objs)
    out = {}
    for s in sources:
        part, mine = s.split("/")[0], direct.get(s, {})
        if len(mine) >= 3:
            out[s] = listed(s, mine)
            continue
        via = [g for g in sources if g.split("/")[0] == part and direct.get(g) and s in b.reach(g, part) - {g}]
        via += [g for g in sources if g.split("/")[0] not in (part, "cli") and direct.get(g) and s in b.calls.get(g, ())]
        more = {}
        for g in via:
            for t, n in direct[g].items():
                if t not in mine:
                    more[t] = more.get(t, 0) + n
        lead = listed(s, mine) if mine else ""
        if more:
            shown = [g for g in via if set(direct[g]) & set(more)]
            names = ", ".join(f"`{g}`" for g in shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
            out[s] = (lead + "; " if lead else "") + f"through {names}: " + listed(s, more)
        elif lead:
            out[s] = lead
        elif binary.get(s):
            out[s] = ("" if part == "cli" else "through the `altar` binary: ") + listed(s, binary[s])
        else:
            out[s] = "none"
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, build, rest = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:]
    b = Build(src, build)
    tests = ctest_tests(build)
    runs, cmds = commands_run(b, tests)
    row = cells(b, direct_calls(b, tests), through_binary(b, runs, cmds))
    if rest and rest != ["--write"]:
        for f in rest:
            print(f"| `{f}` | {row.get(f, 'not built: build it first')} |")
        return 0
    md = ["## By part", ""]
    for part in b.parts + ["cli"]:
        md += [f"### {part}/", "", HEADS.get(part, ""), "", "| file | tests |", "|---|---|"]
        md += [f"| `{s}` | {row[s]} |" for s in sorted(row) if s.split("/")[0] == part] + [""]
    text = "\n".join(md)
    if rest == ["--write"]:
        path = os.path.join(src, "tests", "MAP.md")
        old = open(path, encoding="utf-8").read()
        open(path, "w", encoding="utf-8").write(old[:old.index("## By part")] + text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
