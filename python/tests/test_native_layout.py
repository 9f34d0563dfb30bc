"""The package declares libaltar's structs to cffi by hand (ABI mode), so a
field added to a C header and not to _native.CDEF would make Python and C
disagree on a struct's size: memory corruption, not an error. This test
compiles a small C program against the public headers and checks that
every struct the declarations name has the size cffi computes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from altar.execution import _native
from conftest import source_dir


def test_every_declared_struct_has_the_c_size(tmp_path: Path) -> None:
    names = sorted(set(re.findall(r"\}\s*(altar_\w+_t)\s*;", _native.CDEF)))
    structs = [n for n in names if re.search(r"typedef struct \w*\s*\{[^{}]*(\{[^{}]*\}[^{}]*)*\}\s*" + n + r"\s*;",
                                             _native.CDEF, re.S)]
    assert len(structs) >= 10, structs
    src = source_dir()
    lib = os.environ.get("ALTAR_LIBRARY")
    assert lib, "ALTAR_LIBRARY is not set"
    generated = Path(lib).resolve().parent / "include"  # altar/version.h lives in the build tree
    headers = sorted(p.relative_to(src / "include") for p in (src / "include" / "altar").rglob("*.h"))
    prog = "".join(f'#include "{h}"\n' for h in headers) + "#include <stdio.h>\nint main(void) {\n"
    prog += "".join(f'  printf("{n} %zu\\n", sizeof({n}));\n' for n in structs) + "  return 0;\n}\n"
    (tmp_path / "sizes.c").write_text(prog)
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    assert cc, "no C compiler to check the declarations with"
    subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", f"-I{src / 'include'}", f"-I{generated}", "-o",
                    str(tmp_path / "sizes"), str(tmp_path / "sizes.c")], check=True, capture_output=True, text=True)
    out = subprocess.run([str(tmp_path / "sizes")], check=True, capture_output=True, text=True).stdout
    c_sizes = {n: int(v) for n, v in (line.split() for line in out.splitlines())}
    ffi = _native.ffi
    wrong = {n: (ffi.sizeof(n), c_sizes[n]) for n in structs if ffi.sizeof(n) != c_sizes[n]}
    assert not wrong, f"cffi size != C size (declare the new fields in _native.CDEF): {wrong}"


def test_capability_bits_are_the_headers() -> None:
    # The Python names of ALTAR_BACKEND_CAP_* against altar/backend.h's own values.
    from altar.execution import _backends

    src = (source_dir() / "include" / "altar" / "backend.h").read_text()
    c_bits = {m.group(1).lower(): int(m.group(2), 16)
              for m in re.finditer(r"#define ALTAR_BACKEND_CAP_(\w+) (0x[0-9a-f]+)u", src)}
    c_bits["await_completion"] = c_bits.pop("await")
    assert _backends.CAPABILITY_BITS == c_bits
    L = _native.lib()
    for name, bit in _backends.CAPABILITY_BITS.items():
        assert _native.s(L.altar_backend_cap_name(bit)) != "?", name
