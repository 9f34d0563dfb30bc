"""Specs through the binding: golden vectors, identity, defaults, unknown keys, field-named errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import altar.execution as ax
from altar.execution import (
    ContainerTaskSpec,
    InvalidArgument,
    ResourceRequest,
    Transfer,
    spec_from_dict,
    spec_to_dict,
    task_key,
)


def test_the_package_is_the_installed_copy() -> None:
    # The tests run against what pip installed, never the source tree.
    assert "site-packages" in ax.__file__


def spec_vectors(vectors: Path) -> list[Path]:
    out = sorted((vectors / "spec").glob("*.json"))
    assert len(out) >= 6
    return out


def test_every_spec_vector_round_trips(vectors: Path) -> None:
    for path in spec_vectors(vectors):
        want = json.loads(path.read_text())
        spec = spec_from_dict(want)
        assert spec_to_dict(spec) == want, path.name
        # The msgpack beside it is the canonical encoding, byte for byte.
        assert ax.encode_spec(spec) == path.with_suffix(".msgpack").read_bytes(), path.name
        assert ax.decode_spec(path.with_suffix(".msgpack").read_bytes()) == spec, path.name


def test_identity_vectors_give_their_task_key_and_job_name(vectors: Path) -> None:
    cases = json.loads((vectors / "identity" / "specs.json").read_text())
    assert len(cases) >= 10
    for case in cases:
        spec = spec_from_dict(case["spec"])
        assert task_key(spec) == case["task_key"], case["name"]
        assert ax.job_name(spec) == case["job_name"], case["name"]


def test_group_event_id_vectors(vectors: Path) -> None:
    cases = json.loads((vectors / "identity" / "group_event_ids.json").read_text())
    assert cases
    for case in cases:
        got = ax.group_event_id(case["kind"], case["group_key"], case["task_keys"])
        assert got == case["event_id"], case["name"]


def test_task_key_is_the_sha256_of_the_encoding() -> None:
    import hashlib
    spec = ContainerTaskSpec("score", "img", ["run"], labels={"job_id": "j1"})
    assert task_key(spec) == hashlib.sha256(ax.encode_spec(spec)).hexdigest()


def test_unknown_keys_are_ignored_and_missing_keys_take_defaults() -> None:
    spec = spec_from_dict({"kind": "score", "image": "img", "command": ["a"], "from_the_future": {"x": 1},
                           "resources": {"gpu": "a100", "newer_field": True}})
    assert spec == ContainerTaskSpec("score", "img", ["a"], resources=ResourceRequest(gpu="a100", count=1))
    assert spec.labels == {} and spec.inputs == [] and spec.outputs == []
    assert spec.timeout_s is None and spec.plugin_identity is None and spec.avoid_hosts == ()
    assert spec_to_dict(spec)["resources"] == {"gpu": "a100", "count": 1, "memory_mb": None}
    # Only the fields the dataclass itself requires are required, each named when missing.
    for missing in ("kind", "image", "command"):
        d = {"kind": "k", "image": "i", "command": ["a"]}
        del d[missing]
        with pytest.raises(InvalidArgument) as e:
            spec_from_dict(d)
        assert f"spec.{missing}: missing required field" in str(e.value)


def test_avoid_hosts_is_not_identity_and_not_written() -> None:
    a = ContainerTaskSpec("score", "img", ["a"])
    b = ContainerTaskSpec("score", "img", ["a"], avoid_hosts=("node-7",))
    assert task_key(a) == task_key(b)
    assert "avoid_hosts" not in spec_to_dict(b)
    assert spec_from_dict({**spec_to_dict(a), "avoid_hosts": ["node-7"]}).avoid_hosts == ()


def test_identity_changes_with_any_identity_field() -> None:
    base = ContainerTaskSpec("score", "img", ["a"], labels={"fold": "1"})
    keys = {task_key(base)}
    for other in (
        ContainerTaskSpec("score", "img2", ["a"], labels={"fold": "1"}),
        ContainerTaskSpec("score", "img", ["a", "b"], labels={"fold": "1"}),
        ContainerTaskSpec("score", "img", ["a"], labels={"fold": "2"}),
        ContainerTaskSpec("score", "img", ["a"], labels={"fold": "1"}, timeout_s=5),
        ContainerTaskSpec("score", "img", ["a"], labels={"fold": "1"}, resources=ResourceRequest(memory_mb=10)),
        ContainerTaskSpec("score", "img", ["a"], labels={"fold": "1"}, inputs=[Transfer("file:///x", "x")]),
    ):
        keys.add(task_key(other))
    assert len(keys) == 7


def test_wrong_types_raise_naming_the_field() -> None:
    with pytest.raises(InvalidArgument) as e:
        spec_from_dict({"kind": "k", "image": "i", "command": ["a", 3]})
    assert e.value.name == "EDECODE"
    assert "command[1]" in str(e.value)
    with pytest.raises(InvalidArgument) as e:
        spec_from_dict({"kind": "k", "image": "i", "command": ["a"], "labels": {"fold": 1}})
    assert "labels.fold" in str(e.value)
    with pytest.raises(InvalidArgument) as e:
        spec_from_dict({"kind": "k", "image": "i", "command": ["a"], "resources": {"count": "two"}})
    assert "resources.count" in str(e.value)
    with pytest.raises(TypeError):
        spec_from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument) as e:
        ax.decode_spec(b"\x93\x01\x02")
    assert e.value.name == "EDECODE"


def test_validation_names_the_field() -> None:
    ax.validate_spec(ContainerTaskSpec("k", "i", ["a"]))
    with pytest.raises(InvalidArgument) as e:
        ax.validate_spec(ContainerTaskSpec("k", "i", ["a"], inputs=[Transfer("file:///x", "../etc/passwd")]))
    assert "inputs[0].logical_path" in e.value.message
    with pytest.raises(InvalidArgument) as e:
        ax.validate_spec(ContainerTaskSpec("k", "i", ["a"], inputs=[Transfer("file:///x", "x", digest="md5:1")]))
    assert "inputs[0].digest" in e.value.message
    with pytest.raises(InvalidArgument) as e:
        ax.validate_spec(ContainerTaskSpec("k", "i", ["a"], resources=ResourceRequest(gpu="gpu", count=0)))
    assert "resources.count" in e.value.message
    with pytest.raises(InvalidArgument) as e:
        ax.validate_spec(ContainerTaskSpec("k", "i", []))
    assert "command" in e.value.message
    with pytest.raises(InvalidArgument) as e:
        ax.validate_spec(ContainerTaskSpec("k", "i", ["a"], timeout_s=0))
    assert "timeout_s" in e.value.message


def test_plugin_identity_travels_beside_labels() -> None:
    spec = ContainerTaskSpec("k", "i", ["a"], labels={"fold": "0"},
                             plugin_identity=ax.PluginRunIdentity(plugin="p", version="1"))
    d = spec_to_dict(spec)
    assert d["plugin_identity"] == {"plugin": "p", "version": "1"}
    assert d["labels"] == {"fold": "0"}
    back = spec_from_dict(d)
    assert isinstance(back.plugin_identity, ax.PluginRunIdentity)
    assert back == spec


def test_enums_are_their_strings() -> None:
    assert ax.TaskState.SUCCEEDED == "succeeded"
    assert json.dumps([ax.TaskState.FAILED]) == '["failed"]'
    assert ax.GpuPool.NORMAL_GPU == "gpu" and ax.GpuPool.A100 == "a100"
    # A GpuPool member is an ordinary pool string on the wire.
    spec = ContainerTaskSpec("k", "i", ["a"], resources=ResourceRequest(gpu=ax.GpuPool.A100))
    assert spec_to_dict(spec)["resources"]["gpu"] == "a100"
