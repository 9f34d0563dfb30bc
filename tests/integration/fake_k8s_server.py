#!/usr/bin/env python3
"""A small stand-in for the Kubernetes API server, for tests only.

Serves, over TLS on 127.0.0.1, the endpoints altar's libcurl runtime uses:
  POST   /apis/batch/v1/namespaces/NS/jobs          create (201; 409 AlreadyExists)
  GET    /apis/batch/v1/namespaces/NS/jobs          list (labelSelector, limit/continue)
  GET    …/jobs?watch=1&resourceVersion=RV          watch: one JSON event per line from RV on
                                                    (ERROR 410 when RV was compacted away)
  GET    /apis/batch/v1/namespaces/NS/jobs/NAME     read (404 NotFound)
  DELETE /apis/batch/v1/namespaces/NS/jobs/NAME     delete (preconditions.uid → 409 Conflict)
  GET    /api/v1/namespaces/NS/pods                 list pods (labelSelector)
Every API request must carry `Authorization: Bearer TOKEN` or a client
certificate signed by --client-ca; otherwise 401 with a Status body.

Test control (no auth) under /_test/: reset, fail (next N requests answer a
status, optionally with Retry-After), delay (next N requests sleep), jobs
(insert a Job as-is), job_status (replace a Job's status), pods (add a pod),
linger (the next delete leaves the Job "being deleted" for N reads),
page_size (cap list pages), log (every API request seen); for watches:
inject (raw bytes sent on the open watches), hold (open watches send
nothing until the next hangup), hangup (open watches end at once), compact (versions up to now expire), gone_status (expired versions
answer HTTP 410 instead of an ERROR event).

Standard library only (http.server + ssl). Writes the bound port to
--port-file once it listens.
"""
import argparse
import json
import os
import re
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LOCK = threading.Lock()
STATE = {}


def reset():
    STATE.clear()
    STATE.update(jobs={}, pods={}, fail=[], delay=[], linger=0, page_size=None, log=[], rv=1, events=[],
                 compacted=0, inject=[], hangup=0, gone_status=False, hold=False)


def record(kind, job):
    """Appends a watch event for job (under LOCK), stamping a new version."""
    STATE["rv"] += 1
    job["metadata"]["resourceVersion"] = str(STATE["rv"])
    obj = json.loads(json.dumps({k: v for k, v in job.items() if not k.startswith("_")}))
    STATE["events"].append((STATE["rv"], job["metadata"].get("namespace"), kind, obj))


reset()

JOBS = re.compile(r"^/apis/batch/v1/namespaces/([a-z0-9.-]+)/jobs$")
JOB = re.compile(r"^/apis/batch/v1/namespaces/([a-z0-9.-]+)/jobs/([a-z0-9.-]+)$")
PODS = re.compile(r"^/api/v1/namespaces/([a-z0-9.-]+)/pods$")


def status_body(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def selector_matches(selector, labels):
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("==", 1) if "==" in term else term.split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes
    token = None

    def log_message(self, fmt, *args):  # quiet
        pass

    def send_json(self, code, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw else None

    def auth(self):
        if self.headers.get("Authorization") == "Bearer " + self.token:
            return "token"
        try:
            if self.connection.getpeercert():
                return "cert"
        except (AttributeError, ValueError):
            pass
        return None

    def handle_any(self, method):
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        try:
            body = self.read_body()
        except ValueError:
            return self.send_json(400, status_body(400, "BadRequest", "body is not JSON"))
        if url.path.startswith("/_test/"):
            return self.control(method, url.path[len("/_test/"):], body)
        who = self.auth()
        with LOCK:
            STATE["log"].append({"method": method, "path": url.path, "query": url.query, "auth": who,
                                 "body": body})
            fail = STATE["fail"].pop(0) if STATE["fail"] else None
            delay = STATE["delay"].pop(0) if STATE["delay"] else None
        if who is None:
            return self.send_json(401, status_body(401, "Unauthorized", "Unauthorized"))
        if delay:
            time.sleep(delay)
        if fail:
            code, retry_after = fail
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
            return self.send_json(code, status_body(code, "Injected", "injected failure"), headers)
        m = JOBS.match(url.path)
        if m and method == "POST":
            return self.create(m.group(1), body)
        if m and method == "GET":
            return self.list_jobs(m.group(1), query)
        m = JOB.match(url.path)
        if m and method == "GET":
            return self.read(m.group(1), m.group(2))
        if m and method == "DELETE":
            return self.delete(m.group(1), m.group(2), body or {})
        m = PODS.match(url.path)
        if m and method == "GET":
            sel = query.get("labelSelector", [""])[0]
            with LOCK:
                items = [p for p in STATE["pods"].get(m.group(1), [])
                         if selector_matches(sel, p.get("metadata", {}).get("labels", {}))]
            return self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        return self.send_json(404, status_body(404, "NotFound", "no route " + url.path))

    def create(self, ns, job):
        if not isinstance(job, dict) or job.get("apiVersion") != "batch/v1" or job.get("kind") != "Job":
            return self.send_json(400, status_body(400, "BadRequest", "want a batch/v1 Job"))
        name = (job.get("metadata") or {}).get("name")
        if not name:
            return self.send_json(422, status_body(422, "Invalid", "metadata.name: Required value"))
        with LOCK:
            if (ns, name) in STATE["jobs"]:
                return self.send_json(409, status_body(409, "AlreadyExists",
                                                       'jobs.batch "%s" already exists' % name))
            job = json.loads(json.dumps(job))
            meta = job["metadata"]
            meta.update(namespace=ns, uid=str(uuid.uuid4()), resourceVersion="1",
                        creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            job["status"] = {}
            STATE["jobs"][(ns, name)] = job
            record("ADDED", job)
        return self.send_json(201, job)

    def watch_jobs(self, ns, query):
        rv = int(query.get("resourceVersion", ["0"])[0] or 0)
        timeout = float(query.get("timeoutSeconds", ["30"])[0] or 30)
        with LOCK:
            expired = rv < STATE["compacted"]
            as_status = STATE["gone_status"]
            hangups = STATE["hangup"]
            sent = len(STATE["inject"])  # injections from now on reach this watch
        gone = status_body(410, "Expired", "too old resource version: %d (%d)" % (rv, STATE["compacted"]))
        if expired and as_status:
            return self.send_json(410, gone)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            if expired:
                self.wfile.write((json.dumps({"type": "ERROR", "object": gone}) + "\n").encode())
                return None
            end = time.time() + timeout
            while time.time() < end:
                with LOCK:
                    if STATE["hangup"] != hangups:
                        return None
                    if STATE["hold"]:
                        out, raw = [], []
                        hang = False
                        continue_later = True
                    else:
                        continue_later = False
                if continue_later:
                    time.sleep(0.02)
                    continue
                with LOCK:
                    out = [(r, k, o) for (r, n, k, o) in STATE["events"] if r > rv and n == ns]
                    raw = STATE["inject"][sent:]
                    sent = len(STATE["inject"])
                    hang = STATE["hangup"] != hangups
                for chunk in raw:  # injected before what was recorded after it
                    self.wfile.write(chunk.encode())
                for r, k, o in out:
                    self.wfile.write((json.dumps({"type": k, "object": o}) + "\n").encode())
                    rv = r
                self.wfile.flush()
                if hang:
                    return None
                time.sleep(0.02)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            pass
        return None

    def list_jobs(self, ns, query):
        if query.get("watch", ["0"])[0] in ("1", "true"):
            return self.watch_jobs(ns, query)
        sel = query.get("labelSelector", [""])[0]
        limit = int(query.get("limit", ["0"])[0] or 0)
        start = int(query.get("continue", ["0"])[0] or 0)
        with LOCK:
            if STATE["page_size"]:
                limit = min(limit or STATE["page_size"], STATE["page_size"])
            items = [j for (n, _), j in sorted(STATE["jobs"].items())
                     if n == ns and selector_matches(sel, j["metadata"].get("labels", {}))]
        page = items[start:start + limit] if limit else items[start:]
        meta = {"resourceVersion": str(STATE["rv"])}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        return self.send_json(200, {"kind": "JobList", "apiVersion": "batch/v1", "metadata": meta, "items": page})

    def read(self, ns, name):
        with LOCK:
            job = STATE["jobs"].get((ns, name))
            if job and job.get("_linger") is not None:
                job["_linger"] -= 1
                if job["_linger"] < 0:
                    del STATE["jobs"][(ns, name)]
                    job = None
        if not job:
            return self.send_json(404, status_body(404, "NotFound", 'jobs.batch "%s" not found' % name))
        return self.send_json(200, {k: v for k, v in job.items() if not k.startswith("_")})

    def delete(self, ns, name, opts):
        with LOCK:
            job = STATE["jobs"].get((ns, name))
            if not job:
                return self.send_json(404, status_body(404, "NotFound", 'jobs.batch "%s" not found' % name))
            want = (opts.get("preconditions") or {}).get("uid")
            if want and want != job["metadata"]["uid"]:
                return self.send_json(409, status_body(
                    409, "Conflict", "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                    % (want, job["metadata"]["uid"])))
            if STATE["linger"]:
                job["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                job["_linger"] = STATE["linger"]
                STATE["linger"] = 0
                record("MODIFIED", job)
            else:
                del STATE["jobs"][(ns, name)]
                record("DELETED", job)
        return self.send_json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def control(self, method, what, body):
        body = body or {}
        with LOCK:
            if what == "reset":
                reset()
            elif what == "fail":
                STATE["fail"] += [(body.get("code", 503), body.get("retry_after"))] * body.get("count", 1)
            elif what == "delay":
                STATE["delay"] += [body.get("seconds", 1.0)] * body.get("count", 1)
            elif what == "linger":
                STATE["linger"] = body.get("count", 1)
            elif what == "inject":
                STATE["inject"].append(body.get("text", ""))
            elif what == "hangup":
                STATE["hangup"] += 1
                STATE["hold"] = False
            elif what == "hold":
                STATE["hold"] = True
            elif what == "compact":
                STATE["compacted"] = STATE["rv"]
            elif what == "gone_status":
                STATE["gone_status"] = bool(body.get("on", True))
            elif what == "page_size":
                STATE["page_size"] = body.get("size")
            elif what == "jobs":
                job = body["job"]
                job["metadata"].setdefault("uid", str(uuid.uuid4()))
                job.setdefault("status", {})
                STATE["jobs"][(body["namespace"], job["metadata"]["name"])] = job
                return self.send_json(200, job)
            elif what == "job_status":
                job = STATE["jobs"].get((body["namespace"], body["name"]))
                if not job:
                    return self.send_json(404, {"error": "no such job"})
                job["status"] = body["status"]
                record("MODIFIED", job)
            elif what == "pods":
                STATE["pods"].setdefault(body["namespace"], []).append(body["pod"])
            elif what == "log":
                return self.send_json(200, {"requests": STATE["log"]})
            elif what == "job":
                job = STATE["jobs"].get((body["namespace"], body["name"]))
                return self.send_json(200, job or {})
            else:
                return self.send_json(404, {"error": "unknown control " + what})
        return self.send_json(200, {"ok": True})

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # Clients that hang up (the timeout test) are expected; stay quiet.
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    Handler.token = args.token
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.load_verify_locations(args.client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(httpd.server_address[1]))
    os.rename(tmp, args.port_file)

    # Never outlive the test that started us (a crashed test leaves no server).
    parent = os.getppid()

    def watchdog():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    httpd.serve_forever()


if __name__ == "__main__":
    main()
