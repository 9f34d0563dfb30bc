"""A stand-in for the Modal SDK, for tests of altar's bridge only.

Implements the few calls tools/modal_bridge.py makes, against a directory
named by $FAKE_MODAL_STATE: volumes are directories, sandboxes are JSON
files recording how they were created. A sandbox's command says what poll
reports: ["exit", N] → running on the first poll, then N; ["sleep", ...] →
running until terminated (then 137); ["crash"] as the image → the whole
process dies (to test the bridge restarting). Never talks to Modal.
"""
import json
import os
import shutil

from . import exception

__version__ = "0.0-fake"


def _state(*parts):
    return os.path.join(os.environ["FAKE_MODAL_STATE"], *parts)


def _record(app_name, kind, **fields):
    os.makedirs(_state(), exist_ok=True)
    with open(_state("calls.jsonl"), "a") as f:
        f.write(json.dumps(dict(kind=kind, app=app_name, **fields)) + "\n")


class App:
    def __init__(self, name):
        self.name = name

    @staticmethod
    def lookup(name, create_if_missing=False):
        _record(name, "app.lookup", create_if_missing=create_if_missing)
        return App(name)


class Image:
    def __init__(self, ref):
        self.ref = ref

    @staticmethod
    def from_registry(ref):
        return Image(ref)


class _Batch:
    def __init__(self, root):
        self.root = root

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def put_file(self, local, remote):
        dst = os.path.join(self.root, remote.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(local, dst)


class Volume:
    def __init__(self, name):
        self.name = name
        self.root = _state("volumes", name)

    @staticmethod
    def from_name(name, create_if_missing=False):
        root = _state("volumes", name)
        if not os.path.isdir(root):
            if not create_if_missing:
                raise exception.NotFoundError("volume %s" % name)
            os.makedirs(root)
        return Volume(name)

    def batch_upload(self, force=False):
        return _Batch(self.root)

    def read_file(self, path):
        with open(os.path.join(self.root, path.lstrip("/")), "rb") as f:
            while True:
                chunk = f.read(4096)
                if not chunk:
                    return
                yield chunk


class Sandbox:
    def __init__(self, object_id):
        self.object_id = object_id

    def _path(self):
        return _state("sandboxes", self.object_id + ".json")

    def _load(self):
        with open(self._path()) as f:
            return json.load(f)

    def _save(self, rec):
        with open(self._path(), "w") as f:
            json.dump(rec, f)

    @staticmethod
    def create(*args, app=None, image=None, volumes=None, timeout=None, gpu=None, memory=None):
        if image is not None and image.ref == "crash":
            os._exit(1)
        os.makedirs(_state("sandboxes"), exist_ok=True)
        n = len(os.listdir(_state("sandboxes"))) + 1
        sb = Sandbox("sb-fake-%d" % n)
        sb._save({"command": list(args), "app": app.name, "image": image.ref,
                  "volumes": {k: v.name for k, v in (volumes or {}).items()},
                  "timeout": timeout, "gpu": gpu, "memory": memory, "tags": {}, "polls": 0,
                  "exit_code": None})
        return sb

    @staticmethod
    def from_id(object_id):
        sb = Sandbox(object_id)
        if not os.path.exists(sb._path()):
            raise exception.NotFoundError("sandbox %s" % object_id)
        return sb

    def set_tags(self, tags):
        rec = self._load()
        rec["tags"] = dict(tags)
        self._save(rec)

    def poll(self):
        rec = self._load()
        rec["polls"] += 1
        cmd = rec["command"]
        if rec["exit_code"] is None and cmd and cmd[0] == "exit" and rec["polls"] > 1:
            rec["exit_code"] = int(cmd[1])
        self._save(rec)
        return rec["exit_code"]

    def terminate(self):
        rec = self._load()
        if rec["exit_code"] is None:
            rec["exit_code"] = 137
        self._save(rec)
