#!/usr/bin/env python3
"""Drives Debian's chromium (headless) through its DevTools protocol against
a running altar dashboard and checks what a person would see.

usage: dashboard_browser.py URL JOB_ID SHOTS_DIR SUBMIT_CMD...
       dashboard_browser.py --attempts URL JOB_ID SHOTS_DIR

URL is the dashboard's root; JOB_ID the job with one fired and one
dead-lettered group; SUBMIT_CMD a command that submits a second job and
prints its id (run while the jobs page is open, to see it arrive without a
reload). Screenshots go to SHOTS_DIR. Exit 0 when every check passed.

With --attempts, JOB_ID is a job one of whose shards timed out (stderr
"ERROR: ... GPU worker stalled") and succeeded on its retry: its page must show
that shard's two attempts in order, each with its own reason, and no
"superseded" row (tests/integration/test_attempts_local.sh).

Only the standard library and python3-websocket (Debian) are used."""

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import websocket  # python3-websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--window-size=1280,860",
         "--remote-debugging-port=0", "--remote-allow-origins=*"]
WAIT_S = 60  # an upper bound for a condition to become true, not an assertion on time

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


class Browser:
    def __init__(self, profile):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            raise SystemExit("FAIL: chromium is not installed (scripts/install-deps.sh test)")
        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(profile, "chromium.log"), "w"))
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + WAIT_S
        while not (os.path.exists(port_file) and len(open(port_file).read().split()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("FAIL: chromium did not start: " + open(os.path.join(profile, "chromium.log")).read()[-2000:])
            time.sleep(0.1)
        port, path = open(port_file).read().split()[:2]
        # The browser endpoint: make a page target and attach to it.
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=WAIT_S,
                                              suppress_origin=True)
        self.next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def call(self, method, session=False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def js(self, expr):
        r = self.call("Runtime.evaluate", session=True, expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    def goto(self, url):
        self.call("Page.navigate", session=True, url=url)

    def wait_for(self, expr, what):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                if self.js(expr):
                    return True
            except RuntimeError:
                pass
            time.sleep(0.2)
        check(False, what + " (not seen in the page)")
        return False

    def shot(self, path):
        # Cut at the end of the content, so the picture holds no empty page.
        bottom = self.js("Math.ceil(document.querySelector('main').getBoundingClientRect().bottom) + 12") or 860
        clip = {"x": 0, "y": 0, "width": 1280, "height": max(200, min(int(bottom), 860)), "scale": 1}
        data = self.call("Page.captureScreenshot", session=True, format="png", clip=clip)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def text_of(selector):
    return f"(document.querySelector({json.dumps(selector)}) || {{innerText: ''}}).innerText"


def main():
    url, job, shots, submit = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4:]
    cancelled_job, waiting_job = os.environ["CANCELLED_JOB"], os.environ["WAITING_JOB"]
    retried_job, retried_key = os.environ["RETRIED_JOB"], os.environ["RETRIED_KEY"]
    expected_lag = os.environ["RECONCILER_LAG"]
    os.makedirs(shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="altar-chromium-")
    b = Browser(profile)
    try:
        # Jobs: the job's row with its counts.
        b.goto(url + "/#/jobs")
        row = f'document.querySelector(\'tr[data-job="{job}"]\')'
        if b.wait_for(f"{row} !== null", "the job's row on the jobs page"):
            cells = b.js(f"Array.from({row}.cells).map(c => c.innerText)")
            # job, state, submitted, progress, waiting, pending, running, succeeded, failed, fired, dead,
            # cancelled, open, outputs
            check(cells[0] == job, f"the row names job {job}: {cells[0]!r}")
            check(cells[1] == "dead_lettered", f"the job's badge says dead_lettered: {cells[1]!r}")
            check(cells[3].strip().endswith("4/4"), f"progress shows 4/4 shards done: {cells[3]!r}")
            check(cells[7:13] == ["3", "1", "1", "1", "0", "0"],
                  f"succeeded 3, failed 1, fired 1, dead 1, cancelled 0, open 0: {cells[7:13]}")
            check("alpha-0.txt" in cells[13] and "alpha-1.txt" in cells[13],
                  f"the fired group's outputs are listed: {cells[13]!r}")
        # A job cancelled while running: its own badge and grey, not a green full bar.
        crow = f'document.querySelector(\'tr[data-job="{cancelled_job}"]\')'
        if b.wait_for(f"{crow} !== null", "the cancelled job's row"):
            cells = b.js(f"Array.from({crow}.cells).map(c => c.innerText)")
            check(cells[1] == "cancelled", f"the cancelled job's badge says cancelled: {cells[1]!r}")
            check("(2 cancelled)" in cells[3], f"its progress names 2 cancelled shards: {cells[3]!r}")
            check(b.js(f"{crow}.querySelectorAll('.bar .ok').length") == 0 and
                  b.js(f"{crow}.querySelectorAll('.bar .cancelled').length") == 1,
                  "its bar has a cancelled segment and no succeeded one")
            check(cells[10:12] == ["0", "1"], f"dead 0, cancelled 1: {cells[10:12]}")
        # A job whose one shard waits for a pool no worker serves is listed.
        wrow = f'document.querySelector(\'tr[data-job="{waiting_job}"]\')'
        if b.wait_for(f"{wrow} !== null", "the waiting job's row"):
            cells = b.js(f"Array.from({wrow}.cells).map(c => c.innerText)")
            check(cells[1] == "waiting", f"the waiting job's badge says waiting: {cells[1]!r}")
            check(cells[4].split("\n")[0] == "1" and "h100: 1" in cells[4], f"1 shard waits for pool h100: {cells[4]!r}")
        b.shot(os.path.join(shots, "jobs.png"))

        # An update arrives without a reload: a marker set in the page survives
        # while a newly submitted job appears.
        b.js("window.__altarMarker = 42")
        before = int(b.js("document.getElementById('updated').dataset.updates") or 0)
        new_job = subprocess.run(submit, check=True, capture_output=True, text=True).stdout.strip().split("\n")[-1]
        if b.wait_for(f"document.querySelector('tr[data-job=\"{new_job}\"]') !== null",
                      f"the new job {new_job} on the open jobs page"):
            check(b.js("window.__altarMarker") == 42, "the page was not reloaded (marker kept)")
            after = int(b.js("document.getElementById('updated').dataset.updates") or 0)
            check(after > before, f"the page re-rendered from polling ({before} -> {after} updates)")

        # A filter, applied by the server: state=cancelled leaves the one
        # cancelled job of the five listed.
        rows = "document.querySelectorAll('tr[data-job]').length"
        before = b.js(rows)
        check(before == 5, f"the jobs page lists 5 jobs before filtering: {before}")
        b.js("document.querySelector('form[data-filter] select[name=state]').value = 'cancelled'")
        b.js("document.querySelector('form[data-filter] button[type=submit]').click()")
        if b.wait_for(f"{rows} === 1 && document.querySelector('h2[data-total=\"1\"]') !== null",
                      "one row left after filtering by state cancelled"):
            check(b.js(f"document.querySelector('tr[data-job]').dataset.job") == cancelled_job,
                  "the row left is the cancelled job")
            check("state=cancelled" in b.js("location.hash"), "the filter is in the page's address")
        b.shot(os.path.join(shots, "jobs-filtered.png"))

        # The retried shard's page, reached from its row on the job page: both
        # attempts in order, the first failed with its stderr tail.
        b.goto(url + "/#/job/" + retried_job)
        link = f"document.querySelector('tr[data-shard] a[href=\"#/shard/{retried_key}\"]')"
        if b.wait_for(f"{link} !== null", "the retried shard's row links to its page"):
            b.js(f"{link}.click()")
        attempts = "document.querySelectorAll('#attempts tr[data-attempt]')"
        if b.wait_for(f"{attempts}.length === 2", "the shard page lists the retried shard's two attempts"):
            items = b.js(f"Array.from({attempts}).map(t => [t.dataset.attempt, t.dataset.state, t.dataset.reason, t.innerText])")
            check([i[0] for i in items] == ["1", "2"], f"attempts in order: {[i[0] for i in items]}")
            check(items[0][1] == "failed" and items[0][2] == "exit_143", f"attempt 1 failed exit_143 (SIGTERM): {items[0][:3]}")
            check("ERROR: first try" in items[0][3], f"attempt 1 shows its stderr tail: {items[0][3]!r}")
            check(items[1][1] == "succeeded", f"attempt 2 succeeded: {items[1][:3]}")
            main_text = b.js(text_of("main"))
            check(retried_key in main_text, f"the page names the shard's task key {retried_key}: {main_text[:300]!r}")
            labels = b.js(text_of("[data-labels]"))
            check("model" in labels and "m1" in labels, f"the page lists the shard's labels: {labels!r}")
            check(b.js("document.querySelector('main h2 .state-succeeded') !== null"), "the shard is shown succeeded")
        b.shot(os.path.join(shots, "shard.png"))

        # The job's drill-down: both groups, shard states, the failure's text.
        b.goto(url + "/#/job/" + job)
        if b.wait_for(f"{text_of('main')}.includes('Job {job}') && {text_of('main')}.includes('dead_lettered') && "
                      f"{text_of('main')}.includes('fired')",
                      "the job page with its fired and dead-lettered groups"):
            main_text = b.js(text_of("main"))
            check("exit_3" in main_text, "the failure's reason exit_3 is shown")
            check("command exited with code 3" in main_text, "the failure's detail is shown")
            check("FileNotFoundError: weights.h5" in main_text, "the failed shard's log tail (its stderr) is shown")
            check(main_text.count("succeeded") >= 3, "the succeeded shards are listed")
        b.shot(os.path.join(shots, "job.png"))
        b.goto(url + "/#/job/" + cancelled_job)
        if b.wait_for(f"document.querySelector('main h2 .state-cancelled') !== null", "the cancelled job's badge on its page"):
            main_text = b.js(text_of("main"))
            check("dead_lettered" not in main_text, "the cancelled job's page shows nothing dead-lettered")
            check(b.js("document.querySelectorAll('tr[data-shard] .state-cancelled').length") == 2,
                  "both of its shards are shown cancelled")

        # The waiting job's page says why its shard waits: no worker serves h100.
        b.goto(url + "/#/job/" + waiting_job)
        cell = "document.querySelector('tr[data-waiting] td[data-why]')"
        if b.wait_for(f"{cell} !== null", "the waiting shard with its reason on its job's page"):
            check(b.js(f"{cell}.dataset.why") == "no_worker", f"its reason is no_worker: {b.js(cell + '.dataset.why')!r}")
            check("no worker serves pool h100" in b.js(text_of("main")), "the reason is said in words")
            check("1 no_worker" in b.js(text_of("[data-why-counts]")), "the job's reasons are counted")

        # Workers: both listed, live, with their backend.
        b.goto(url + "/#/workers")
        if b.wait_for("document.querySelectorAll('tr[data-worker]').length >= 2", "two workers on the workers page"):
            rows = b.js("Array.from(document.querySelectorAll('tr[data-worker]')).map(r => r.innerText)")
            for w in ("dash-w1", "dash-w2"):
                mine = [r for r in rows if r.startswith(w)]
                check(bool(mine) and "live" in mine[0] and "process" in mine[0], f"worker {w} is listed live: {mine}")
        b.shot(os.path.join(shots, "workers.png"))

        # Dead letters: the dead-lettered group with its member's reason, the DLQ record.
        b.goto(url + "/#/dead")
        if b.wait_for(f"document.querySelector('section[data-dead-group]') !== null",
                      "a dead-lettered group on the dead letters page"):
            text = b.js(text_of("main"))
            check(f"{job}:beta" in text, "the dead group beta is named")
            check("command exited with code 3" in text, "its member's failure detail is shown")
            check("undecodable" in text or "decode" in text, "the poison message's DLQ reason is shown")
        b.shot(os.path.join(shots, "dead.png"))

        # Overview last: its rates need two samples.
        b.goto(url + "/#/overview")
        b.wait_for("document.querySelector('[data-card=\"workers\"]') !== null", "the overview cards")
        check(b.js(text_of('[data-card="workers"] .v')) == "2 / 2", "the overview counts 2 live workers")
        lag = b.js(text_of('[data-card="reconciler_lag"] .v'))
        check(lag == expected_lag, f"reconciler lag {lag!r} is altar log offsets' {expected_lag!r}")
        check(b.js(text_of('[data-card="cancelled"] .v')) == "1", "the overview counts 1 cancelled group")
        # The last hour's charts (the reconciler's memory, /api/history), once
        # the second job settled: every terminal event the reconciler applied
        # since it started, which is this whole fleet's life. Recorded: job 1
        # and the second job, 4 shards each (one exits 3) with one group fired
        # and one dead-lettered each; the cancelled job's 2 shards and its
        # cancelled group; the retried shard's 2 runs (exit_143, then success)
        # and its fired group.
        want = {"finished": {"finished": 12}, "groups": {"fired": 3, "dead_lettered": 3},
                "failures": {"exit_3": 2, "exit_143": 1, "cancelled": 2}}
        totals = ("Object.fromEntries(Array.from(document.querySelectorAll('svg[data-chart]')).map(c => [c.dataset.chart, "
                  "Object.fromEntries(Array.from(c.querySelectorAll('polyline[data-series]')).map(p => "
                  "[p.dataset.series, Number(p.dataset.total)]))]))")
        def charted():
            try:
                got = b.js(totals) or {}
            except RuntimeError:
                return None
            return {k: {n: got.get(k, {}).get(n) for n in v} for k, v in want.items()}, got
        deadline = time.monotonic() + WAIT_S
        seen, got = charted() or ({}, {})
        while seen != want and time.monotonic() < deadline:  # the page polls; the second job may still run
            time.sleep(0.5)
            seen, got = charted() or ({}, {})
        for chart_id, series in want.items():
            for name, n in series.items():
                check(got.get(chart_id, {}).get(name) == n, f"chart {chart_id}: {name} {got.get(chart_id, {}).get(name)} == {n}")
        check("lag" in got.get("lag", {}), "the reconciler's lag is charted")
        check(b.js("document.querySelectorAll('svg[data-chart] polyline').length") >= 6, "every series is drawn as a line")
        b.shot(os.path.join(shots, "overview.png"))
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"{len(failures)} failure(s); screenshots in {shots}")
    return 1 if failures else 0


def attempts_main():
    url, job, shots = sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4]
    os.makedirs(shots, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="altar-chromium-")
    b = Browser(profile)
    try:
        b.goto(url + "/#/job/" + job)
        first = "document.querySelector('li[data-attempt=\"1\"]')"
        second = "document.querySelector('li[data-attempt=\"2\"]')"
        if b.wait_for(f"{first} !== null && {second} !== null", "the retried shard's two attempts on the job page"):
            row = f"{first}.closest('tr')"
            items = b.js(f"Array.from({row}.querySelectorAll('li[data-attempt]')).map(li => [li.dataset.attempt, li.dataset.state, li.dataset.reason, li.innerText])")
            check([i[0] for i in items] == ["1", "2"], f"the attempts are listed in order: {[i[0] for i in items]}")
            check(items[0][1] == "failed" and items[0][2] == "timeout", f"attempt 1 failed with reason timeout: {items[0][:3]}")
            check("GPU worker stalled" in items[0][3], f"attempt 1 shows its stderr tail: {items[0][3]!r}")
            check(items[1][1] == "succeeded" and items[1][2] == "", f"attempt 2 succeeded: {items[1][:3]}")
            check(b.js(f"{row}.cells[1].innerText") == "succeeded", "the shard itself is shown succeeded")
            check(b.js(f"{row}.cells[2].innerText").split("\n")[0] == "2", "the shard counts 2 attempts")
            main_text = b.js(text_of("main"))
            check("superseded" not in main_text, "no superseded row or reason on the job page")
            check(b.js("document.querySelectorAll('tr[data-shard] .state-failed').length") ==
                  b.js("document.querySelectorAll('li[data-attempt] .state-failed').length"),
                  "no shard row is shown failed: the only failure is the first attempt's")
        b.shot(os.path.join(shots, "attempts.png"))
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(f"{len(failures)} failure(s); screenshot in {shots}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(attempts_main() if sys.argv[1:2] == ["--attempts"] else main())
