#!/usr/bin/env python3
"""altar's bridge to Modal.

The `modal` execution backend (backends/modal_*.c) runs this program as a
child process and drives Modal through the official Python SDK with it.
Protocol: JSON Lines over stdin/stdout, one request per line, one reply per
line, in order.

On start the bridge imports `modal` and prints a greeting:
    {"ok": true, "ready": true, "modal_version": "..."}
or, when the SDK cannot be imported, a refusal and exits with status 3:
    {"ok": false, "kind": "sdk_missing", "error": "... pip install modal"}

Requests ("op" names the call) and their successful replies:
    {"op": "ping"}                                 -> {"ok": true, "modal_version": ...}
    {"op": "run_sandbox", "app_name", "volume_name", "mount_root", "image",
     "command": [argv], "gpu": str|null, "memory_mb": int|null,
     "timeout_s": int, "tags": {str: str},
     "task_key": str|null}                        -> {"ok": true, "sandbox_id": "sb-...", "adopted": bool}
       (with a task_key the sandbox is tagged TASK_KEY_TAG=<task_key>, and a
       sandbox of the app that holds that tag and still runs is returned
       instead of creating one: "adopted": true. A finished one is never
       adopted, so a retry after a failure really runs.)
    {"op": "poll_sandbox", "sandbox_id"}           -> {"ok": true, "exit_code": int|null}  (null: running)
    {"op": "sandbox_oom_killed", "sandbox_id"}     -> {"ok": true, "oom_killed": bool}
       (true only when Modal ended the sandbox with its kernel-OOM status;
       poll's exit code folds that into 137 with every other SIGKILL)
    {"op": "terminate_sandbox", "sandbox_id"}      -> {"ok": true}
    {"op": "sandbox_output", "sandbox_id", "max_bytes": int}
        -> {"ok": true, "stdout": str, "stderr": str, "stdout_cut": bool, "stderr_cut": bool}
       (the last at most max_bytes of each stream, read to its end through
       the SDK's stream readers; *_cut: earlier bytes were dropped)
    {"op": "upload", "volume_name", "local_path", "remote_path"}   -> {"ok": true}
    {"op": "download", "volume_name", "remote_path", "local_path"} -> {"ok": true}
A failure replies {"ok": false, "kind": K, "error": message} with K one of
"invalid" (a malformed request), "not_found" (no such sandbox or file),
"modal" (the SDK or the platform refused), "cancelled" (see below). The
bridge keeps serving after a failed request and exits when stdin closes.

SIGINT cancels the request in flight: the SDK's coroutine is cancelled and
its own clean-up runs (a sandbox that `Sandbox.create` made but that was not
yet scheduled is terminated; one already scheduled is found by its task key
and terminated too), then the request is answered "cancelled" and
the bridge goes on serving. SIGINT between requests is ignored, so a Ctrl-C
meant for the worker leaves the bridge able to terminate what it started.

Credentials come from the usual Modal places (MODAL_TOKEN_ID and
MODAL_TOKEN_SECRET in the environment, or ~/.modal.toml from `modal token
new`); the bridge never prints them.
"""
import collections
import json
import os
import signal
import sys

SDK_MISSING_EXIT = 3
# The sandbox tag that carries the spec's task key (its identity hash): the
# same key as docker's container label, kubernetes' and process' keys.
TASK_KEY_TAG = "altar.task_key"
# Bounds on what sandbox_output keeps of one stream.
MAX_OUTPUT_BYTES = 1 << 20


def reply(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class NotFound(Exception):
    pass


def stream_tail(reader, max_bytes):
    """The last at most max_bytes (UTF-8) of a sandbox stream read to its
    end, and whether anything before them was dropped. Only the tail is
    held, however much the sandbox wrote."""
    kept = collections.deque()
    size = 0
    cut = False
    try:
        for chunk in reader:
            data = chunk.encode("utf-8", "replace")
            kept.append(data)
            size += len(data)
            while size - len(kept[0]) >= max_bytes:
                size -= len(kept.popleft())
                cut = True
    except UnicodeDecodeError:
        # The SDK decodes strictly: bytes that are not UTF-8 end the read
        # there. What came before is still evidence.
        pass
    data = b"".join(kept)
    if len(data) > max_bytes:
        data = data[-max_bytes:]
        cut = True
    # A character split by the cut is dropped, not mangled.
    return data.decode("utf-8", "ignore"), cut


def need(req, key, kind):
    value = req.get(key)
    if not isinstance(value, kind):
        raise ValueError("%s: missing or of the wrong type" % key)
    return value


class Bridge:
    """Holds the SDK objects between requests: apps, volumes and images are
    looked up once, and a hydrated Image is not resolved again."""

    def __init__(self, modal):
        self.modal = modal
        self.apps = {}
        self.volumes = {}
        self.images = {}

    def app(self, name):
        if name not in self.apps:
            self.apps[name] = self.modal.App.lookup(name, create_if_missing=True)
        return self.apps[name]

    def volume(self, name):
        if name not in self.volumes:
            self.volumes[name] = self.modal.Volume.from_name(name, create_if_missing=True)
        return self.volumes[name]

    def image(self, ref):
        if ref not in self.images:
            self.images[ref] = self.modal.Image.from_registry(ref)
        return self.images[ref]

    def sandbox(self, sandbox_id):
        try:
            return self.modal.Sandbox.from_id(sandbox_id)
        except self.modal.exception.NotFoundError as exc:
            raise NotFound("no sandbox %s (%s)" % (sandbox_id, exc))

    # ---- operations ----

    def op_ping(self, req):
        return {"modal_version": getattr(self.modal, "__version__", "unknown")}

    def op_run_sandbox(self, req):
        command = need(req, "command", list)
        if not command or not all(isinstance(a, str) for a in command):
            raise ValueError("command: want a non-empty list of strings")
        tags = req.get("tags") or {}
        if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
            raise ValueError("tags: want an object of strings")
        task_key = req.get("task_key")
        if task_key is not None:
            if not isinstance(task_key, str) or not task_key:
                raise ValueError("task_key: want a non-empty string or null")
            tags = dict(tags)
            tags[TASK_KEY_TAG] = task_key  # ours wins over a label of that name
        app = self.app(need(req, "app_name", str))
        if task_key is not None:
            running = self.running_with_key(app, task_key)
            if running is not None:
                return {"sandbox_id": running, "adopted": True}
        kwargs = {
            "app": app,
            "image": self.image(need(req, "image", str)),
            "volumes": {need(req, "mount_root", str): self.volume(need(req, "volume_name", str))},
            "timeout": need(req, "timeout_s", int),
            "tags": tags,
        }
        if req.get("gpu") is not None:
            kwargs["gpu"] = need(req, "gpu", str)
        if req.get("memory_mb") is not None:
            kwargs["memory"] = need(req, "memory_mb", int)
        # With a GPU the SDK waits here until the sandbox is scheduled (up
        # to 21 minutes); SIGINT cancels the wait and the SDK terminates it.
        try:
            sb = self.modal.Sandbox.create(*command, **kwargs)
        except KeyboardInterrupt:
            # The SDK cleans up only a sandbox it had not yet seen scheduled;
            # one scheduled just before the SIGINT would run on with nobody
            # holding its id. "cancelled" must mean nothing runs.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if task_key is not None:
                self.terminate_with_key(app, task_key)
            raise
        return {"sandbox_id": sb.object_id, "adopted": False}

    def terminate_with_key(self, app, task_key):
        """Terminates every unfinished sandbox of app tagged with task_key."""
        for sb in self.modal.Sandbox.list(app_id=app.app_id, tags={TASK_KEY_TAG: task_key}):
            if sb.returncode is None:
                sb.terminate()

    def running_with_key(self, app, task_key):
        """The id of the newest sandbox of app tagged with task_key that has
        not ended, or None. Sandbox.list asks only for unfinished ones; the
        result it carries is checked too, so one that ended since is not
        taken."""
        for sb in self.modal.Sandbox.list(app_id=app.app_id, tags={TASK_KEY_TAG: task_key}):
            if sb.returncode is None:
                return sb.object_id
        return None

    def op_poll_sandbox(self, req):
        # from_id already asks for the result without waiting (timeout 0).
        sb = self.sandbox(need(req, "sandbox_id", str))
        return {"exit_code": sb.returncode}

    def op_sandbox_oom_killed(self, req):
        sb = self.sandbox(need(req, "sandbox_id", str))
        # The SDK keeps the sandbox's GenericResult but exposes only the
        # exit code. Its status is private SDK state (pinned in
        # tests/modal/requirements.txt), read defensively: anything missing
        # is no evidence, and no evidence is never taken for an OOM kill.
        try:
            from modal._utils.async_utils import synchronizer
            from modal_proto import api_pb2
            result = synchronizer._translate_in(sb)._impl.result
            oom = result is not None and result.status == api_pb2.GenericResult.GENERIC_STATUS_KERNEL_OOM_KILL
        except (ImportError, AttributeError):
            oom = False
        return {"oom_killed": bool(oom)}

    def op_terminate_sandbox(self, req):
        try:
            sb = self.sandbox(need(req, "sandbox_id", str))
        except NotFound:
            return {}  # already gone: nothing to stop
        sb.terminate()
        return {}

    def op_sandbox_output(self, req):
        max_bytes = need(req, "max_bytes", int)
        if not 0 < max_bytes <= MAX_OUTPUT_BYTES:
            raise ValueError("max_bytes: want 1..%d" % MAX_OUTPUT_BYTES)
        sb = self.sandbox(need(req, "sandbox_id", str))
        err, err_cut = stream_tail(sb.stderr, max_bytes)
        out, out_cut = stream_tail(sb.stdout, max_bytes)
        return {"stderr": err, "stderr_cut": err_cut, "stdout": out, "stdout_cut": out_cut}

    def op_upload(self, req):
        local = need(req, "local_path", str)
        remote = "/" + need(req, "remote_path", str).lstrip("/")
        if not os.path.isfile(local):
            raise NotFound("local file %s does not exist" % local)
        vol = self.volume(need(req, "volume_name", str))
        with vol.batch_upload(force=True) as batch:
            batch.put_file(local, remote)
        return {}

    def op_download(self, req):
        local = need(req, "local_path", str)
        remote = "/" + need(req, "remote_path", str).lstrip("/")
        vol = self.volume(need(req, "volume_name", str))
        tmp = local + ".altar-part"
        try:
            with open(tmp, "wb") as out:
                for chunk in vol.read_file(remote):
                    out.write(chunk)
            os.replace(tmp, local)
        except FileNotFoundError as exc:
            raise NotFound("%s not in volume: %s" % (remote, exc))
        except self.modal.exception.NotFoundError as exc:
            raise NotFound("%s not in volume: %s" % (remote, exc))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return {}


def next_line():
    """The next request line ("" at EOF), with SIGINT ignored while idle."""
    while True:
        try:
            return sys.stdin.readline()
        except KeyboardInterrupt:  # landed before SIG_IGN took hold
            continue


def serve(modal):
    bridge = Bridge(modal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        line = next_line()
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("a request is a JSON object")
        except ValueError as exc:
            reply({"ok": False, "kind": "invalid", "error": "bad request: %s" % exc})
            continue
        op = req.get("op")
        fn = getattr(bridge, "op_%s" % op, None) if isinstance(op, str) and op.isidentifier() else None
        if fn is None:
            reply({"ok": False, "kind": "invalid", "error": "unknown op %r" % (op,)})
            continue
        try:
            # The SDK turns the first SIGINT into a cancellation of its
            # coroutine (clean-up included), then raises KeyboardInterrupt.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                result = fn(req)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        except KeyboardInterrupt:
            reply({"ok": False, "kind": "cancelled", "error": "%s: cancelled by SIGINT" % op})
        except NotFound as exc:
            reply({"ok": False, "kind": "not_found", "error": str(exc)})
        except (ValueError, TypeError) as exc:
            reply({"ok": False, "kind": "invalid", "error": "%s: %s" % (op, exc)})
        except Exception as exc:  # the SDK's and the platform's errors
            reply({"ok": False, "kind": "modal", "error": "%s: %s: %s" % (op, type(exc).__name__, exc)})
        else:
            result["ok"] = True
            reply(result)
    return 0


def main():
    try:
        import modal
        import modal.exception  # noqa: F401
    except Exception as exc:  # ImportError, or a broken installation
        msg = ("the Modal SDK is not importable (%s: %s); install it with: pip install modal"
               % (type(exc).__name__, exc))
        sys.stderr.write("altar modal bridge: %s\n" % msg)
        reply({"ok": False, "kind": "sdk_missing", "error": msg})
        return SDK_MISSING_EXIT
    reply({"ok": True, "ready": True, "modal_version": getattr(modal, "__version__", "unknown")})
    return serve(modal)


if __name__ == "__main__":
    sys.exit(main())
