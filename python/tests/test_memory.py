"""No leak across the binding: 10^5 specs made, encoded, decoded and dropped with flat RSS."""

from __future__ import annotations

import gc
import os

import altar.execution as ax

N = 100_000


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def churn(n: int) -> None:
    for i in range(n):
        spec = ax.ContainerTaskSpec(
            kind="score", image="img", command=["python", "-m", "score", str(i)],
            labels={"job_id": "j", "fold": str(i % 5)},
            inputs=[ax.Transfer("gs://b/x", f"jobs/j/{i}.bed", digest="sha256:" + "a" * 64)],
            plugin_identity=ax.PluginRunIdentity(plugin="p"),
        )
        d = ax.spec_to_dict(spec)
        back = ax.spec_from_dict(d)
        ax.task_key(back)
        ax.decode_spec(ax.encode_spec(back))
        if i % 10 == 0:
            try:
                ax.spec_from_dict({"kind": "k", "image": "i", "command": [i]})
            except ax.InvalidArgument:
                pass


def test_specs_through_the_binding_leave_rss_flat() -> None:
    churn(5_000)  # warm up: allocator pools, cffi's type cache
    gc.collect()
    before = rss_bytes()
    churn(N)
    gc.collect()
    grown = rss_bytes() - before
    # Leaking even one 100-byte string per spec would grow RSS by 10 MB; a
    # spec's C form is several times that. Allow 4 MiB of allocator noise.
    assert grown < 4 * 1024 * 1024, f"RSS grew by {grown} bytes over {N} specs"
