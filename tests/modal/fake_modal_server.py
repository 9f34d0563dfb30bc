#!/usr/bin/env python3
"""A fake Modal control plane for altar's tests, on the Modal SDK's own protocol.

The gRPC side implements `modal_proto.api_grpc.ModalClientBase` (grpclib) for
the calls the bridge (tools/modal_bridge.py) makes through the real SDK; every
other call answers UNIMPLEMENTED and is recorded, so a test sees when the SDK
starts needing something new. The HTTP side (aiohttp) stores and serves the
8 MiB volume blocks the SDK PUTs and GETs, and has a small inspection API for
the tests under /_fake/.

Sandboxes run their command for real, as local processes: a volume's files
live in <volume-root>/<volume name>, and a sandbox's volume mount path must be
that directory (the tests point the backend's mount_root at it), so inputs
staged through the SDK are what the command reads. Timeouts kill the process
(the SDK reports 124), terminate kills it (137), and so does going past the
sandbox's memory (resident set size, checked every 20 ms; reported as a
kernel OOM kill with exit code 137). A GPU type given with --unschedulable-gpu
is never scheduled. A sandbox's stdout and stderr are kept and served the
two ways the SDK reads them: SandboxGetLogs for the older family (sb- ids
of 22 characters) and, for V2 sandboxes, a task command router (a second
gRPC server, plain HTTP/2 on loopback, which the SDK allows for a localhost
control plane) reached through SandboxGetCommandRouterAccess.

Run it with the SDK's Python (both grpclib and aiohttp come with `modal`):
    python fake_modal_server.py --volume-root DIR --token-id ID --token-secret S
It prints one JSON line {"grpc": URL, "http": URL} when it listens (both on
127.0.0.1, ephemeral ports) and exits when its stdin closes or on SIGTERM.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import random
import signal
import string
import sys
import time

import grpclib.server
from aiohttp import web
from google.protobuf import empty_pb2
from grpclib import GRPCError, Status
from modal_proto import api_grpc, api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as sr_pb2

BLOCK_SIZE = 8 * 1024 * 1024
# An image builder version this SDK release accepts (modal/_image.py).
IMAGE_BUILDER_VERSION = "2025.06"
BASE62 = string.digits + string.ascii_letters


def rand_id(prefix, n=22):
    return prefix + "".join(random.choice(BASE62) for _ in range(n))


def make_jwt(lifetime_s):
    def b64(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return "%s.%s.fake" % (b64({"alg": "none", "typ": "JWT"}), b64({"exp": int(time.time()) + lifetime_s}))


def rss_kib(pid):
    """Resident set size of pid and its children (one level is enough for sh -c)."""
    total = 0
    pids = [pid]
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def clean_path(path):
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise GRPCError(Status.INVALID_ARGUMENT, "bad volume path %r" % path)
    return "/".join(parts)


class Sandbox:
    def __init__(self, sid, family, app_id, definition, tags, schedulable):
        self.id = sid
        self.family = family  # "v1" (SandboxCreate) or "v2" (SandboxCreateV2)
        self.app_id = app_id
        self.definition = definition
        self.tags = tags
        self.schedulable = schedulable
        # Creation times are distinct and increasing: SandboxList pages by them.
        self.created_at = time.time()
        self.task_id = ""
        self.proc = None
        self.result = None  # api_pb2.GenericResult once finished
        self.done = asyncio.Event()
        self.timer = None
        self.ended_by = None  # "timeout" | "terminate" | "oom"
        # What the command wrote, by file descriptor (1 stdout, 2 stderr),
        # complete once output_done is set.
        self.output = {1: bytearray(), 2: bytearray()}
        self.output_grew = asyncio.Event()
        self.output_done = asyncio.Event()
        self.readers = []

    def record(self):
        d = self.definition
        res = d.resources
        return {
            "family": self.family,
            "app_id": self.app_id,
            "image_id": d.image_id,
            "args": list(d.entrypoint_args),
            "timeout_secs": d.timeout_secs,
            "memory_mb": res.memory_mb or None,
            "gpu": ("%s:%d" % (res.gpu_config.gpu_type, res.gpu_config.count)) if res.gpu_config.gpu_type else None,
            "volumes": {m.mount_path: m.volume_id for m in d.volume_mounts},
            "tags": self.tags,
            "scheduled": bool(self.task_id),
            "status": self.result.status if self.result else None,
            "exitcode": self.result.exitcode if self.result else None,
        }


class FakeModal(api_grpc.ModalClientBase):
    def __init__(self, opts):
        self.opts = opts
        self.http_url = ""
        self.calls = {}
        self.unimplemented = []
        self.auth_failures = 0
        self.apps = {}  # name -> id
        self.images = {}  # id -> {"ref":, "builds":}
        self.image_by_key = {}
        self.volumes = {}  # id -> name
        self.volume_by_name = {}
        self.blocks = {}  # sha256 hex -> bytes
        self.sandboxes = {}
        self.tokens = set()
        self.router_url = ""
        self.router_tokens = set()

    # ---- plumbing ----

    async def begin(self, stream, name, need_jwt=False):
        """Counts the call, checks the credentials, returns the request."""
        self.calls[name] = self.calls.get(name, 0) + 1
        md = stream.metadata or {}
        if md.get("x-modal-token-id") != self.opts.token_id or md.get("x-modal-token-secret") != self.opts.token_secret:
            self.auth_failures += 1
            raise GRPCError(Status.UNAUTHENTICATED, "token id or secret not recognized")
        if need_jwt and md.get("x-modal-auth-token") not in self.tokens:
            self.auth_failures += 1
            raise GRPCError(Status.UNAUTHENTICATED, "missing or unknown x-modal-auth-token")
        return await stream.recv_message()

    def state(self):
        return {
            "calls": self.calls,
            "unimplemented": self.unimplemented,
            "auth_failures": self.auth_failures,
            "apps": self.apps,
            "images": self.images,
            "volumes": self.volume_by_name,
            "sandboxes": {sid: sb.record() for sid, sb in self.sandboxes.items()},
        }

    def volume_dir(self, volume_id):
        name = self.volumes.get(volume_id)
        if name is None:
            raise GRPCError(Status.NOT_FOUND, "no volume %s" % volume_id)
        return os.path.join(self.opts.volume_root, name)

    def sandbox(self, sid):
        sb = self.sandboxes.get(sid)
        if sb is None:
            raise GRPCError(Status.NOT_FOUND, "Sandbox %s not found" % sid)
        return sb

    def sandbox_by_task(self, task_id):
        for sb in self.sandboxes.values():
            if task_id and sb.task_id == task_id:
                return sb
        raise GRPCError(Status.NOT_FOUND, "no task %s" % task_id)

    # ---- apps, environments, auth, images ----

    async def AppGetOrCreate(self, stream):
        req = await self.begin(stream, "AppGetOrCreate")
        app_id = self.apps.setdefault(req.app_name, rand_id("ap-"))
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def EnvironmentGetOrCreate(self, stream):
        req = await self.begin(stream, "EnvironmentGetOrCreate")
        settings = api_pb2.EnvironmentSettings(image_builder_version=IMAGE_BUILDER_VERSION)
        meta = api_pb2.EnvironmentMetadata(name=req.deployment_name or "main", settings=settings)
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(environment_id="en-fake", metadata=meta))

    async def AuthTokenGet(self, stream):
        await self.begin(stream, "AuthTokenGet")
        token = make_jwt(3600)
        self.tokens.add(token)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=token))

    async def ImageGetOrCreate(self, stream):
        req = await self.begin(stream, "ImageGetOrCreate")
        cmds = list(req.image.dockerfile_commands)
        key = json.dumps([cmds, req.builder_version])
        ref = next((c[5:].strip() for c in cmds if c.startswith("FROM ")), "")
        image_id = self.image_by_key.get(key)
        if image_id:  # built before: answer from the cache
            result = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
            await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id, result=result))
            return
        image_id = rand_id("im-")
        self.image_by_key[key] = image_id
        self.images[image_id] = {"ref": ref, "builder_version": req.builder_version}
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id))

    async def ImageJoinStreaming(self, stream):
        req = await self.begin(stream, "ImageJoinStreaming")
        if req.image_id not in self.images:
            raise GRPCError(Status.NOT_FOUND, "no image %s" % req.image_id)
        result = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
        await stream.send_message(api_pb2.ImageJoinStreamingResponse(result=result, entry_id="1", eof=True))

    # ---- sandboxes ----

    async def create_sandbox(self, req, family):
        if req.app_id not in self.apps.values():
            raise GRPCError(Status.NOT_FOUND, "no app %s" % req.app_id)
        d = req.definition
        if d.image_id not in self.images:
            raise GRPCError(Status.NOT_FOUND, "no image %s" % d.image_id)
        if not d.entrypoint_args:
            raise GRPCError(Status.INVALID_ARGUMENT, "no command")
        for m in d.volume_mounts:
            want = self.volume_dir(m.volume_id)
            if os.path.realpath(m.mount_path) != os.path.realpath(want):
                raise GRPCError(Status.INVALID_ARGUMENT,
                                "fake: mount %s must be the volume's directory %s" % (m.mount_path, want))
        gpu = d.resources.gpu_config.gpu_type or None
        # V1 ids are sb- + 22 base-62 characters; V2 ids must not look like that.
        sid = rand_id("sb-") if family == "v1" else rand_id("sb-v2x", 24)
        tags = {t.tag_name: t.tag_value for t in req.tags}
        sb = Sandbox(sid, family, req.app_id, d, tags, gpu not in self.opts.unschedulable_gpu)
        self.sandboxes[sid] = sb
        if family == "v2":
            await self.schedule(sb)
        return sb

    async def schedule(self, sb):
        sb.task_id = rand_id("ta-")
        d = sb.definition
        try:
            sb.proc = await asyncio.create_subprocess_exec(
                *d.entrypoint_args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            sb.output_done.set()
            self.finish(sb, api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_FAILURE,
                                                  exception=str(exc), exitcode=127))
            return
        sb.readers = [asyncio.create_task(self.collect(sb, 1, sb.proc.stdout)),
                      asyncio.create_task(self.collect(sb, 2, sb.proc.stderr))]
        if d.timeout_secs:
            sb.timer = asyncio.get_running_loop().call_later(d.timeout_secs, self.kill, sb, "timeout")
        if d.resources.memory_mb:
            asyncio.create_task(self.watch_memory(sb, d.resources.memory_mb))
        asyncio.create_task(self.reap(sb))

    async def collect(self, sb, fd, pipe):
        while True:
            chunk = await pipe.read(65536)
            if not chunk:
                return
            sb.output[fd] += chunk
            sb.output_grew.set()

    async def watch_memory(self, sb, limit_mb):
        while sb.result is None and not sb.ended_by:
            if rss_kib(sb.proc.pid) > limit_mb * 1024:
                self.kill(sb, "oom")
                return
            await asyncio.sleep(0.02)

    def kill(self, sb, why):
        if sb.proc and sb.proc.returncode is None and not sb.ended_by:
            sb.ended_by = why
            try:
                os.killpg(sb.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def reap(self, sb):
        code = await sb.proc.wait()
        # A child that left the process group may hold the pipes: bounded.
        await asyncio.wait(sb.readers, timeout=5.0)
        sb.output_done.set()
        sb.output_grew.set()
        if sb.timer:
            sb.timer.cancel()
        G = api_pb2.GenericResult
        if sb.ended_by == "timeout":
            res = G(status=G.GENERIC_STATUS_TIMEOUT, exception="Sandbox timed out")
        elif sb.ended_by == "terminate":
            res = G(status=G.GENERIC_STATUS_TERMINATED)
        elif sb.ended_by == "oom":
            res = G(status=G.GENERIC_STATUS_KERNEL_OOM_KILL, exitcode=137, exception="out of memory")
        elif code == 0:
            res = G(status=G.GENERIC_STATUS_SUCCESS, exitcode=0)
        else:
            res = G(status=G.GENERIC_STATUS_FAILURE, exitcode=code if code > 0 else 128 - code)
        self.finish(sb, res)

    def finish(self, sb, result):
        if sb.proc is None:  # never ran: no output will come
            sb.output_done.set()
        if sb.result is None:
            sb.result = result
            sb.done.set()

    async def SandboxCreate(self, stream):
        req = await self.begin(stream, "SandboxCreate")
        sb = await self.create_sandbox(req, "v1")
        await stream.send_message(api_pb2.SandboxCreateResponse(sandbox_id=sb.id))

    async def SandboxCreateV2(self, stream):
        req = await self.begin(stream, "SandboxCreateV2", need_jwt=True)
        sb = await self.create_sandbox(req, "v2")
        await stream.send_message(api_pb2.SandboxCreateV2Response(sandbox_id=sb.id, task_id=sb.task_id))

    async def SandboxGetTaskId(self, stream):
        req = await self.begin(stream, "SandboxGetTaskId")
        sb = self.sandbox(req.sandbox_id)
        if not sb.task_id and sb.schedulable and sb.result is None:
            await self.schedule(sb)
        resp = api_pb2.SandboxGetTaskIdResponse(task_id=sb.task_id)
        if not sb.task_id and sb.result is not None:
            resp.task_result.CopyFrom(sb.result)
        await stream.send_message(resp)

    async def SandboxGetTaskIdV2(self, stream):
        req = await self.begin(stream, "SandboxGetTaskIdV2", need_jwt=True)
        sb = self.sandbox(req.sandbox_id)
        resp = api_pb2.SandboxGetTaskIdResponse(task_id=sb.task_id)
        if not sb.task_id and sb.result is not None:
            resp.task_result.CopyFrom(sb.result)
        await stream.send_message(resp)

    async def SandboxGetLogs(self, stream):
        """The older family's output: all of a stream once the sandbox ended
        (entry ids are byte offsets), then eof. Before that the call waits
        (bounded) and ends empty, and the SDK asks again."""
        req = await self.begin(stream, "SandboxGetLogs")
        sb = self.sandbox(req.sandbox_id)
        fd = 2 if req.file_descriptor == api_pb2.FILE_DESCRIPTOR_STDERR else 1
        if not sb.output_done.is_set():
            try:
                await asyncio.wait_for(sb.output_done.wait(), min(req.timeout or 5.0, 5.0))
            except asyncio.TimeoutError:
                return
        data = bytes(sb.output[fd])
        start = int(req.last_entry_id) if req.last_entry_id.isdigit() else 0
        if start < len(data):
            item = api_pb2.TaskLogs(data=data[start:].decode("utf-8", "replace"), file_descriptor=req.file_descriptor)
            await stream.send_message(api_pb2.TaskLogsBatch(items=[item], entry_id=str(len(data)), task_id=sb.task_id))
        await stream.send_message(api_pb2.TaskLogsBatch(entry_id=str(len(data)), eof=True, task_id=sb.task_id))

    async def SandboxGetCommandRouterAccess(self, stream):
        req = await self.begin(stream, "SandboxGetCommandRouterAccess", need_jwt=True)
        sb = self.sandbox(req.sandbox_id) if req.sandbox_id else self.sandbox_by_task(req.task_id)
        if not sb.task_id:
            raise GRPCError(Status.FAILED_PRECONDITION, "Sandbox %s has no task yet" % sb.id)
        token = make_jwt(3600)
        self.router_tokens.add(token)
        await stream.send_message(api_pb2.SandboxGetCommandRouterAccessResponse(url=self.router_url, jwt=token))

    async def wait(self, stream, name, need_jwt):
        req = await self.begin(stream, name, need_jwt)
        sb = self.sandbox(req.sandbox_id)
        if req.timeout > 0 and sb.result is None:
            try:
                await asyncio.wait_for(sb.done.wait(), min(req.timeout, 5.0))
            except asyncio.TimeoutError:
                pass
        resp = api_pb2.SandboxWaitResponse()
        if sb.result is not None:
            resp.result.CopyFrom(sb.result)
        await stream.send_message(resp)

    async def SandboxWait(self, stream):
        await self.wait(stream, "SandboxWait", False)

    async def SandboxWaitV2(self, stream):
        await self.wait(stream, "SandboxWaitV2", True)

    async def terminate(self, stream, name, need_jwt, response):
        req = await self.begin(stream, name, need_jwt)
        sb = self.sandbox(req.sandbox_id)
        if sb.result is None:
            if sb.proc:
                self.kill(sb, "terminate")
            else:  # never scheduled: it ends here
                self.finish(sb, api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED))
        await stream.send_message(response)

    async def SandboxTerminate(self, stream):
        await self.terminate(stream, "SandboxTerminate", False, api_pb2.SandboxTerminateResponse())

    async def SandboxTerminateV2(self, stream):
        await self.terminate(stream, "SandboxTerminateV2", True, api_pb2.SandboxTerminateResponse())

    async def tags_set(self, stream, name, need_jwt):
        req = await self.begin(stream, name, need_jwt)
        self.sandbox(req.sandbox_id).tags = {t.tag_name: t.tag_value for t in req.tags}
        await stream.send_message(empty_pb2.Empty())

    async def list_sandboxes(self, stream, name, need_jwt):
        """SandboxList(V2): newest first, filtered as the real control plane
        does (app, tags the sandbox holds at least, unfinished unless
        include_finished), paged by before_timestamp (0: from the newest)."""
        req = await self.begin(stream, name, need_jwt)
        want = {t.tag_name: t.tag_value for t in req.tags}
        infos = []
        for sb in sorted(self.sandboxes.values(), key=lambda s: s.created_at, reverse=True):
            if req.app_id and sb.app_id != req.app_id:
                continue
            if req.before_timestamp and sb.created_at >= req.before_timestamp:
                continue
            if not req.include_finished and sb.result is not None:
                continue
            if any(sb.tags.get(k) != v for k, v in want.items()):
                continue
            task = api_pb2.TaskInfo(id=sb.task_id, sandbox_id=sb.id, result=sb.result)
            infos.append(api_pb2.SandboxInfo(
                id=sb.id, created_at=sb.created_at, app_id=sb.app_id, task_info=task,
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in sb.tags.items()],
                metadata=api_pb2.SandboxHandleMetadata(app_id=sb.app_id)))
            if len(infos) == 100:
                break
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=infos))

    async def SandboxList(self, stream):
        await self.list_sandboxes(stream, "SandboxList", False)

    async def SandboxListV2(self, stream):
        await self.list_sandboxes(stream, "SandboxListV2", True)

    async def SandboxTagsSet(self, stream):
        await self.tags_set(stream, "SandboxTagsSet", False)

    async def SandboxTagsSetV2(self, stream):
        await self.tags_set(stream, "SandboxTagsSetV2", True)

    # ---- volumes ----

    async def VolumeGetOrCreate(self, stream):
        req = await self.begin(stream, "VolumeGetOrCreate")
        name = req.deployment_name
        if not name or "/" in name or name.startswith("."):
            raise GRPCError(Status.INVALID_ARGUMENT, "bad volume name %r" % name)
        vid = self.volume_by_name.get(name)
        if vid is None:
            if req.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
                raise GRPCError(Status.NOT_FOUND, "Volume %r not found" % name)
            vid = rand_id("vo-")
            self.volume_by_name[name] = vid
            self.volumes[vid] = name
            os.makedirs(os.path.join(self.opts.volume_root, name), exist_ok=True)
        meta = api_pb2.VolumeMetadata(name=name, version=api_pb2.VOLUME_FS_VERSION_V2)
        await stream.send_message(api_pb2.VolumeGetOrCreateResponse(volume_id=vid, metadata=meta))

    async def VolumePutFiles2(self, stream):
        req = await self.begin(stream, "VolumePutFiles2")
        root = self.volume_dir(req.volume_id)
        missing = []
        for fi, f in enumerate(req.files):
            for bi, b in enumerate(f.blocks):
                sha = b.contents_sha256.hex()
                if sha not in self.blocks:
                    missing.append(api_pb2.VolumePutFiles2Response.MissingBlock(
                        file_index=fi, block_index=bi, put_url="%s/blocks/%s" % (self.http_url, sha)))
        if not missing:
            for f in req.files:
                rel = clean_path(f.path)
                dest = os.path.join(root, rel)
                if req.disallow_overwrite_existing_files and os.path.exists(dest):
                    raise GRPCError(Status.ALREADY_EXISTS, "%s exists" % f.path)
                data = b"".join(self.blocks[b.contents_sha256.hex()] for b in f.blocks)
                if len(data) != f.size:
                    raise GRPCError(Status.INVALID_ARGUMENT, "%s: blocks hold %d bytes, size says %d"
                                    % (f.path, len(data), f.size))
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as out:
                    out.write(data)
                if f.mode:
                    os.chmod(dest, f.mode & 0o777)
        await stream.send_message(api_pb2.VolumePutFiles2Response(missing_blocks=missing))

    async def VolumeGetFile2(self, stream):
        req = await self.begin(stream, "VolumeGetFile2")
        path = os.path.join(self.volume_dir(req.volume_id), clean_path(req.path))
        if not os.path.isfile(path):
            raise GRPCError(Status.NOT_FOUND, "No such file: %s" % req.path)
        with open(path, "rb") as f:
            data = f.read()
        start = req.start
        length = req.len or len(data) - start
        urls = []
        for off in range(start - start % BLOCK_SIZE, start + length, BLOCK_SIZE):
            block = data[off:off + BLOCK_SIZE]
            sha = hashlib.sha256(block).hexdigest()
            self.blocks[sha] = block
            urls.append("%s/blocks/%s" % (self.http_url, sha))
        await stream.send_message(api_pb2.VolumeGetFile2Response(get_urls=urls, size=len(data), start=start,
                                                                 len=length))

    # ---- HTTP: blocks and inspection ----

    async def put_block(self, request):
        sha = request.match_info["sha"]
        self.calls["PUT /blocks"] = self.calls.get("PUT /blocks", 0) + 1
        body = await request.read()
        if len(body) > BLOCK_SIZE or hashlib.sha256(body).hexdigest() != sha:
            return web.Response(status=400, text="block does not match its sha256")
        self.blocks[sha] = body
        return web.Response(body=b"")

    async def get_block(self, request):
        sha = request.match_info["sha"]
        self.calls["GET /blocks"] = self.calls.get("GET /blocks", 0) + 1
        block = self.blocks.get(sha)
        if block is None:
            return web.Response(status=404, text="no such block")
        digest = base64.b64encode(hashlib.sha256(block).digest()).decode()
        return web.Response(body=block, headers={"Repr-Digest": "sha-256=:%s:" % digest})

    async def get_state(self, request):
        return web.json_response(self.state())

    async def vanish(self, request):
        """Forgets a sandbox, as if the platform lost it (its process is killed)."""
        sb = self.sandboxes.pop(request.match_info["sid"], None)
        if sb is None:
            return web.Response(status=404)
        self.kill(sb, "terminate")
        return web.json_response({})


class FakeRouter(task_command_router_grpc.TaskCommandRouterBase):
    """The worker-side task command router of V2 sandboxes: their stdio."""

    def __init__(self, fake):
        self.fake = fake

    async def SandboxStdioReadV2(self, stream):
        fake = self.fake
        fake.calls["SandboxStdioReadV2"] = fake.calls.get("SandboxStdioReadV2", 0) + 1
        auth = (stream.metadata or {}).get("authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in fake.router_tokens:
            fake.auth_failures += 1
            raise GRPCError(Status.UNAUTHENTICATED, "missing or unknown router token")
        req = await stream.recv_message()
        sb = fake.sandbox_by_task(req.task_id)
        fd = 2 if req.file_descriptor == sr_pb2.SANDBOX_STDIO_FILE_DESCRIPTOR_STDERR else 1
        offset = req.offset
        while True:
            data = sb.output[fd]
            if offset < len(data):  # never an empty message: the SDK refuses those
                chunk = bytes(data[offset:])
                await stream.send_message(sr_pb2.SandboxStdioReadV2Response(data=chunk, starting_offset=offset))
                offset += len(chunk)
                continue
            if sb.output_done.is_set():
                return
            sb.output_grew.clear()
            try:
                await asyncio.wait_for(sb.output_grew.wait(), 1.0)
            except asyncio.TimeoutError:
                pass


def unimplemented(name):
    async def handler(self, stream):
        self.calls[name] = self.calls.get(name, 0) + 1
        self.unimplemented.append(name)
        raise GRPCError(Status.UNIMPLEMENTED, "fake Modal: %s is not implemented" % name)

    return handler


def with_unimplemented(base, name):
    # Everything the service declares and base leaves out answers UNIMPLEMENTED.
    missing = {m: unimplemented(m) for m in base.__abstractmethods__}
    return type(name, (base,), missing)


def make_service(opts):
    return with_unimplemented(FakeModal, "FakeModalService")(opts)


def unimplemented_on_router(name):
    async def handler(self, stream):
        await unimplemented(name)(self.fake, stream)

    return handler


def make_router(fake):
    missing = {m: unimplemented_on_router(m) for m in FakeRouter.__abstractmethods__}
    return type("FakeRouterService", (FakeRouter,), missing)(fake)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--volume-root", required=True)
    ap.add_argument("--token-id", required=True)
    ap.add_argument("--token-secret", required=True)
    ap.add_argument("--unschedulable-gpu", action="append", default=[])
    opts = ap.parse_args()
    os.makedirs(opts.volume_root, exist_ok=True)

    fake = make_service(opts)
    app = web.Application(client_max_size=BLOCK_SIZE + 1024)
    app.router.add_put("/blocks/{sha}", fake.put_block)
    app.router.add_get("/blocks/{sha}", fake.get_block)
    app.router.add_get("/_fake/state", fake.get_state)
    app.router.add_post("/_fake/vanish/{sid}", fake.vanish)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    http_port = site._server.sockets[0].getsockname()[1]
    fake.http_url = "http://127.0.0.1:%d" % http_port

    server = grpclib.server.Server([fake])
    await server.start("127.0.0.1", 0)
    grpc_port = server._server.sockets[0].getsockname()[1]
    router = grpclib.server.Server([make_router(fake)])
    await router.start("127.0.0.1", 0)
    fake.router_url = "http://127.0.0.1:%d" % router._server.sockets[0].getsockname()[1]

    sys.stdout.write(json.dumps({"grpc": "http://127.0.0.1:%d" % grpc_port, "http": fake.http_url}) + "\n")
    sys.stdout.flush()

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def watch_stdin():
        while await reader.read(4096):
            pass
        stop.set()

    asyncio.create_task(watch_stdin())
    await stop.wait()  # SIGTERM, or stdin closed
    for sb in fake.sandboxes.values():
        fake.kill(sb, "terminate")
    server.close()
    router.close()
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main())
