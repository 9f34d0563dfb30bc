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
    # A clean run grows by nothing measurable; leaking a spec's C form per
    # iteration grows by some 460 MB, and even 10 bytes per spec would pass 1 MiB.
    assert grown < 1024 * 1024, f"RSS grew by {grown} bytes over {N} specs"


def test_handles_records_and_predicates_leave_rss_flat() -> None:
    import asyncio

    h = ax.TaskHandle("fake", "t1", {"job_id": "j", "fold": "0"}, ax.PluginRunIdentity(plugin="p"))
    spec = ax.spec_to_dict(ax.ContainerTaskSpec("train", "img", ["run"], labels=dict(h.labels)))
    pred, key, cap = ax.all_folds(1), ax.group_by("job_id", "fold"), ax.Capacity({"normal": 3, "gpu": 1})

    async def cycles(ledger: ax.InMemoryTaskLedger, n: int) -> None:
        for i in range(n):
            # The same handle recorded, failed, read back and consumed: the ledger keeps one row.
            await ledger.record(h, "train", spec)
            await ledger.set_state(h, ax.TaskState.FAILED, ax.TaskFailure("exit_1", "detail " * 8, True, 1))
            (rec,) = await ledger.active_failed()
            await ledger.consume([rec.handle])
            assert pred([h]) and key(h) == "j:0" and cap.free_for(ax.ResourceRequest(gpu="gpu")) == 1

    async def go() -> int:
        ledger = ax.InMemoryTaskLedger()
        await cycles(ledger, 2_000)
        gc.collect()
        before = rss_bytes()
        await cycles(ledger, 20_000)
        gc.collect()
        ledger.close()
        return rss_bytes() - before

    grown = asyncio.run(go())
    # A clean run grows by 0.1 MiB or less; leaking one failure per cycle grows by 3 MiB.
    assert grown < 1024 * 1024, f"RSS grew by {grown} bytes over 20000 cycles"
