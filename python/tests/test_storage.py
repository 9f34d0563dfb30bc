"""Storage through Python: the registry holds libaltar's adapters; the local one end to end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import altar.execution as ax


def test_the_storage_registry_holds_altars_adapters() -> None:
    reg = ax.get_storage_registry()
    for name in ("local", "file", "http", "https", "gs", "gcs", "s3"):
        assert issubclass(reg[name], ax.Storage), name
    assert reg["gcs"] is reg["gs"]
    with pytest.raises(ax.NotFound):
        reg["ftp"]


def test_local_storage(tmp_path: Path) -> None:
    async def go() -> None:
        s = ax.get_storage_registry()["local"]()
        assert isinstance(s, ax.NativeStorage)
        d = tmp_path / "a" / "b"
        await s.mkdirs(str(d))
        assert d.is_dir()
        await s.write_text(str(d / "t.txt"), "héllo\nworld\n")
        assert await s.read_text(str(d / "t.txt")) == "héllo\nworld\n"
        await s.write_bytes(str(d / "b.bin"), b"\x00\x01\xff")
        assert await s.read_bytes(str(d / "b.bin")) == b"\x00\x01\xff"
        assert await s.exists(str(d / "b.bin")) and not await s.exists(str(d / "none"))
        with pytest.raises(ax.AltarError) as e:
            await s.read_bytes(str(d / "none"))
        assert e.value.name == "ENOTFOUND"
        src = tmp_path / "src"
        src.write_bytes(b"x" * 100000)
        await s.upload(str(src), str(tmp_path / "up" / "dst"))
        assert (tmp_path / "up" / "dst").read_bytes() == b"x" * 100000
        async with s.as_local_file(str(src)) as local:
            assert Path(local).read_bytes() == b"x" * 100000
        rows = [{"name": "a", "n": "1"}, {"name": "b", "n": "2"}]
        await s.write_csv(str(tmp_path / "r.tsv"), rows, fieldnames=["name", "n"])
        assert (tmp_path / "r.tsv").read_text().splitlines()[0] == "name\tn"
        assert await s.read_csv(str(tmp_path / "r.tsv")) == rows
        async with s.open_text_writer(str(tmp_path / "w.txt")) as w:
            w.write("one ")
            w.write("two")
        assert (tmp_path / "w.txt").read_text() == "one two"
        with pytest.raises(RuntimeError):
            async with s.open_text_writer(str(tmp_path / "never.txt")) as w:
                w.write("dropped")
                raise RuntimeError("the block failed")
        assert not (tmp_path / "never.txt").exists()
        assert (await s.open_text(str(d / "t.txt"))).readline() == "héllo\n"
        s.close()
    asyncio.run(go())
