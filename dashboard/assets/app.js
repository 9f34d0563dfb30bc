// altar dashboard: renders the /api/ JSON of the current page and polls it
// every few seconds, so the view updates without a reload. Read-only: it
// only ever sends GET. Text from the fleet goes in through textContent,
// never as HTML.
"use strict";

const POLL_MS = 2000;
const PAGE = 50;
let token = sessionStorage.getItem("altar.token") || "";
let updates = 0;
let timer = null;
let shownHash = null; // the address the filter bar was drawn for

if (location.hash.startsWith("#token=")) {
  token = decodeURIComponent(location.hash.slice(7));
  sessionStorage.setItem("altar.token", token);
  history.replaceState(null, "", "#/overview");
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function when(ts) {
  if (ts === null || ts === undefined) return "—";
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) + "Z";
}

function dur(s) {
  if (s === null || s === undefined) return "—";
  if (s < 60) return s.toFixed(0) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

function num(v, digits) {
  return v === null || v === undefined ? "—" : Number(v).toFixed(digits || 0);
}

function state(s) {
  return el("span", { class: "state-" + s }, s);
}

function card(value, label, id) {
  return el("div", { class: "card", "data-card": id }, el("div", { class: "v" }, value), el("div", { class: "k" }, label));
}

function table(headers, rows, id) {
  return el("table", { id: id || "" },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

async function api(path) {
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const r = await fetch("/api/" + path, { headers, cache: "no-store" });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// The filters a list takes (state, kind, label KEY=VALUE, worker), applied
// by the server: the page gets one page of matching rows and their total.
const FILTERS = ["state", "kind", "label", "worker"];

function route() {
  const h = location.hash.replace(/^#\/?/, "") || "overview";
  const [page, ...rest] = h.split("/");
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  const filters = {};
  for (const f of FILTERS) if (params.get(f)) filters[f] = params.get(f);
  return { page: page.split("?")[0], arg: rest.join("/").split("?")[0], offset: Number(params.get("offset") || 0), filters };
}

// The filters as query parameters ("&state=failed..."), for /api/ and the hash.
const filterQuery = (f) => Object.entries(f).map(([k, v]) => `&${k}=${encodeURIComponent(v)}`).join("");

// The filter bar of the jobs list or a job page: drawn when the address
// changes, not at each poll, so what is being typed stays.
function filterBar(r, base, states) {
  const input = (name, hint) => el("input", { name, placeholder: hint, value: r.filters[name] || "" });
  const select = el("select", { name: "state" }, el("option", { value: "" }, "any state"),
    states.map((s) => { const o = el("option", { value: s }, s); if (r.filters.state === s) o.selected = true; return o; }));
  const form = el("form", { "data-filter": r.page }, select, input("kind", "kind"), input("label", "label KEY=VALUE"),
    input("worker", "worker"), el("button", { type: "submit" }, "filter"),
    Object.keys(r.filters).length ? el("a", { href: base }, "clear") : null);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = {};
    for (const n of FILTERS) if (form.elements[n].value) f[n] = form.elements[n].value;
    const q = filterQuery(f);
    location.hash = base + (q ? "?" + q.slice(1) : "");
  });
  return form;
}

function pager(total, offset, base, filters) {
  if (total <= PAGE) return null;
  const go = (o) => () => { location.hash = base + "?offset=" + o + filterQuery(filters || {}); };
  return el("div", { class: "pager" },
    offset > 0 ? el("button", { onclick: go(Math.max(0, offset - PAGE)) }, "← newer") : null,
    `${offset + 1}–${Math.min(total, offset + PAGE)} of ${total}`,
    offset + PAGE < total ? el("button", { onclick: go(offset + PAGE) }, "older →") : null);
}

// Succeeded green, failed red, cancelled grey: a job whose shards were all
// cancelled must not look done. Waiting shards (on a jobs topic, no record
// yet) count in the total.
function progress(sh, waiting) {
  const total = sh.total + (waiting || 0);
  const cancelled = sh.cancelled || 0;
  const seg = (n, cls) => (n > 0 ? el("span", { class: cls, style: `width:${((100 * n) / total).toFixed(1)}%` }) : null);
  const notes = [cancelled ? `${cancelled} cancelled` : "", waiting ? `${waiting} waiting` : ""].filter((x) => x);
  return el("span", {}, el("span", { class: "bar" }, seg(sh.succeeded, "ok"), seg(sh.failed - cancelled, "bad"),
    seg(cancelled, "cancelled")), ` ${sh.succeeded + sh.failed}/${total}` + (notes.length ? ` (${notes.join(", ")})` : ""));
}

// Why a shard is not running, in a line (the reasons of README "Why a shard waits").
function whyText(w) {
  if (!w) return "—";
  switch (w.reason) {
    case "cancelled": return "its job was cancelled";
    case "group_held": return `group ${w.group} held by its rule's error: ${w.error}`;
    case "lease": return `held by worker ${w.worker}, which went silent; taken over when its lease ends`;
    case "starting": return `submitted by worker ${w.worker}, not running yet`;
    case "backoff": return `retry backing off until ${when(w.until)}`;
    case "forwarded": return `forwarded by ${w.by} (no free slot there) to a worker with one`;
    case "no_worker": return `no worker serves pool ${w.pool}`;
    case "behind": return `behind ${w.jobs_ahead} earlier job(s) (${w.shards_ahead} shard(s)) in its partition`;
    case "no_free_slot": return `every worker of pool ${w.pool} is busy`;
    default: return `waiting for a worker of pool ${w.pool}`;
  }
}
const whyCell = (w) => el("td", { class: "why", "data-why": w ? w.reason : "" }, w ? [el("b", {}, w.reason), " ", whyText(w)] : "—");

// A job's state in one word, for its badge.
function jobState(j) {
  if (j.groups.cancelled && !j.groups.open && !j.groups.dead_lettered) return "cancelled";
  if (j.groups.dead_lettered) return "dead_lettered";
  if (j.waiting) return "waiting";
  if (j.groups.open || j.shards.pending || j.shards.running) return "running";
  return j.groups.fired ? "fired" : "pending";
}

// A chart of the last hour (/api/history, 10 s buckets) as inline SVG: one
// polyline per series over a shared scale; the legend gives each series'
// total over the hour (lag: its newest value). data-chart / data-series /
// data-total carry the numbers drawn, for whoever checks the picture.
const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#2f6fdb", "#c0362c", "#1a7f37", "#9a6700", "#7c3aed", "#0e7490", "#be185d", "#4b5563"];
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}
function chart(id, title, series, lastValue) {
  const W = 360, H = 80;
  const vals = series.flatMap((s) => s.values.filter((v) => v !== null));
  const max = Math.max(1, ...vals);
  const pic = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W * 1.5, height: H * 1.5, "data-chart": id, role: "img" });
  pic.append(svg("rect", { x: 0, y: 0, width: W, height: H, fill: "#fff", stroke: "#e2e5ea" }));
  const legend = el("div", { class: "legend" });
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const pts = s.values.map((v, x) => (v === null ? null : `${x + 0.5},${(H - 2 - (v / max) * (H - 6)).toFixed(1)}`));
    const known = s.values.filter((v) => v !== null);
    const total = lastValue ? (known.length ? known[known.length - 1] : 0) : known.reduce((a, b) => a + b, 0);
    pic.append(svg("polyline", { points: pts.filter((p) => p).join(" "), fill: "none", stroke: color,
      "stroke-width": 1.2, "data-series": s.name, "data-total": String(total) }));
    legend.append(el("span", { style: "color:" + color }, `${s.name}: ${total}`));
  });
  const note = lastValue ? `now; highest ${max}` : `in the last hour; max ${max} per 10 s`;
  return el("figure", { class: "chart" }, el("figcaption", {}, `${title} (${note})`), pic, legend);
}

async function historyCharts() {
  let h;
  try {
    h = await api("history");
  } catch (e) {
    return el("p", { class: "muted" }, "No history here (" + e.message + ").");
  }
  const reasons = Object.keys(h.failures).sort();
  return el("div", { class: "charts" },
    chart("finished", "Shards finished", [{ name: "finished", values: h.finished }]),
    chart("groups", "Groups", [{ name: "fired", values: h.fired }, { name: "dead_lettered", values: h.dead_lettered }]),
    chart("failures", "Failures by reason", reasons.length ? reasons.map((r) => ({ name: r, values: h.failures[r] }))
      : [{ name: "none", values: h.finished.map(() => 0) }]),
    chart("lag", "Reconciler lag (status events)", [{ name: "lag", values: h.lag }], true));
}

// Bytes as MiB for a card or a cell; "—" when not reported.
const mib = (b) => (typeof b === "number" ? (b / 1048576).toFixed(1) + " MiB" : "—");
// A worker's kept task output from its heartbeat: "12 dirs, 0.1 MiB (next prune: 3, 0.0 MiB)".
const keptLogs = (k) => (k && typeof k.dirs === "number" && typeof k.prune_next_dirs === "number"
  ? `${k.dirs} dirs, ${mib(k.bytes)} (next prune: ${k.prune_next_dirs}, ${mib(k.prune_next_bytes)})` : "—");

const pages = {
  async overview() {
    const o = await api("overview");
    const lag = (l) => (l.lag === null ? "? (" + l.error + ")" : l.lag);
    return [
      el("h2", {}, "Fleet"),
      el("div", { class: "cards" },
        card(num(o.rates.shards_per_s, 2), "shards finished / s", "shards_per_s"),
        card(num(o.rates.fired_per_min, 1), "groups fired / min", "fired_per_min"),
        card(num(o.rates.dead_per_min, 1), "groups dead / min", "dead_per_min"),
        card(o.jobs, "jobs", "jobs"),
        card(o.shards.total, "shards recorded", "shards"),
        card(o.groups.fired, "groups fired", "fired"),
        card(o.groups.dead_lettered, "groups dead-lettered", "dead"),
        card(o.groups.cancelled, "groups cancelled", "cancelled"),
        card(`${o.workers.live} / ${o.workers.total}`, "workers live / known", "workers"),
        card(lag(o.lag.workers), "worker lag (jobs)", "worker_lag"),
        card(lag(o.lag.reconciler), "reconciler lag (status events)", "reconciler_lag"),
        card(o.dlq_records, "DLQ records", "dlq"),
        card(mib(o.server.rss_bytes), "memory of this server (RSS)", "server_rss"),
        card(mib(o.ledger.disk_bytes), "ledger on disk", "ledger_disk")),
      el("h2", {}, "Shards by state"),
      el("div", { class: "cards" }, ["pending", "running", "succeeded", "failed"].map((s) => card(o.shards[s], s, s))),
      el("h2", {}, "The last hour"),
      await historyCharts(),
      el("p", { class: "muted" }, `Rates over the last ${num(o.rates.window_s)} s. Ledger ${o.ledger.path} read ${when(o.ledger.read_at)}`,
        o.ledger.error ? el("span", { class: "error" }, " — " + o.ledger.error) : ""),
    ];
  },

  async jobs(r) {
    const o = await api(`jobs?offset=${r.offset}&limit=${PAGE}` + filterQuery(r.filters));
    const rows = o.jobs.map((j) => el("tr", { "data-job": j.job_id },
      el("td", {}, el("a", { href: "#/job/" + encodeURIComponent(j.job_id) }, j.job_id || "(no job id)")),
      el("td", {}, state(j.state || jobState(j))),
      el("td", {}, when(j.submitted_at)),
      el("td", {}, progress(j.shards, j.waiting)),
      el("td", { class: "num" }, j.waiting, j.waiting ? el("div", { class: "muted" }, Object.entries(j.waiting_pools).map(([p, n]) => `${p}: ${n}`).join(", ")) : null),
      el("td", { class: "num" }, j.shards.pending), el("td", { class: "num" }, j.shards.running),
      el("td", { class: "num" }, j.shards.succeeded), el("td", { class: "num" }, j.shards.failed),
      el("td", { class: "num" }, j.groups.fired), el("td", { class: "num" }, j.groups.dead_lettered),
      el("td", { class: "num" }, j.groups.cancelled), el("td", { class: "num" }, j.groups.open),
      el("td", {}, j.outputs.length ? j.outputs.map((u) => el("div", {}, el("code", {}, u))) : "—",
        j.outputs_total > j.outputs.length ? el("div", { class: "muted" }, `+${j.outputs_total - j.outputs.length} more`) : null)));
    return [
      el("h2", { "data-total": o.total }, o.total === o.total_all ? `Jobs (${o.total})` : `Jobs (${o.total} of ${o.total_all} match)`),
      table(["job", "state", "submitted", "progress", "waiting", "pending", "running", "succeeded", "failed", "fired", "dead", "cancelled", "open", "outputs"], rows, "jobs"),
      pager(o.total, o.offset, "#/jobs", r.filters),
    ];
  },

  async job(r) {
    const id = decodeURIComponent(r.arg);
    const o = await api(`job?id=${encodeURIComponent(id)}&offset=${r.offset}&limit=${PAGE}` + filterQuery(r.filters));
    // Every run of a shard that ran more than once, in order, each with what ended it.
    const runs = (s) => (s.attempt_list || []).length > 1 || s.attempts_dropped ? el("ol", { class: "attempts" },
      s.attempts_dropped ? el("li", { class: "muted" }, `${s.attempts_dropped} older attempt(s) dropped`) : null,
      s.attempt_list.map((a) => el("li", { "data-attempt": a.attempt, "data-state": a.state, "data-reason": a.reason || "" },
        `#${a.attempt} `, state(a.state), a.reason ? el("b", {}, " " + a.reason) : "",
        el("span", { class: "muted" }, ` · ${a.worker || "worker unknown"}`,
          a.started_at && a.ended_at ? ` · ran ${(a.ended_at - a.started_at).toFixed(1)} s` : "",
          a.ended_at ? ` · ended ${when(a.ended_at)}` : ""),
        a.detail ? el("div", { class: "detail" }, a.detail) : null))) : null;
    const shardRows = (ms) => ms.map((s) => el("tr", { "data-shard": s.external_id },
      // Named by its labels (the server sorts by them too); the backend's id below.
      el("td", { "data-name": s.name || "" }, s.task_key ? el("a", { href: "#/shard/" + encodeURIComponent(s.task_key) }, s.name || el("code", {}, s.external_id)) : (s.name || el("code", {}, s.external_id)),
        s.name ? el("div", { class: "muted" }, el("code", {}, s.external_id)) : null), el("td", {}, state(s.state)), el("td", { class: "num" }, s.attempts, runs(s)),
      el("td", {}, s.host || "—", s.forwarded_from ? el("div", { class: "muted", "data-forwarded": s.forwarded_from }, `forwarded from ${s.forwarded_from}`) : null),
      el("td", {}, s.failure ? [el("b", {}, s.failure.reason), s.failure.detail ? el("div", { class: "detail" }, s.failure.detail) : null] : "—"),
      el("td", {}, s.outputs.map((u) => el("div", {}, el("code", {}, u)))), whyCell(s.why)));
    const heads = ["shard", "state", "attempts", "host", "failure and log tail", "outputs", "why not running"];
    // Shards with no record yet: on a jobs topic, each with why it waits.
    const waitingRow = (s) => el("tr", { "data-waiting": s.task_key },
      el("td", {}, el("a", { href: "#/shard/" + encodeURIComponent(s.task_key) }, el("code", {}, s.task_key.slice(0, 12)))), el("td", {}, state("waiting")), el("td", {}, s.pool),
      el("td", { class: "num" }, `${s.partition} @ ${s.offset}`), whyCell(s.why));
    const waitingRows = (o.waiting_list || []).map(waitingRow);
    const counts = Object.entries(o.why_counts || {});
    const groups = o.group_list.map((g) => el("section", { "data-group": g.group_key },
      el("h2", {}, `${g.kind} · ${g.group_key} · `, state(g.state), g.ts ? el("span", { class: "muted" }, " at " + when(g.ts)) : ""),
      table(heads, shardRows(g.members)),
      g.members_total > g.members.length ? el("p", { class: "muted" }, `${g.members_total - g.members.length} more shards not shown`) : null));
    return [
      el("h2", {}, `Job ${o.job_id} · `, state(jobState(o))),
      el("div", { class: "cards" },
        card(when(o.submitted_at), "submitted"), card(o.shards.total, "shards"), card(o.waiting, "waiting", "waiting"),
        card(o.shards.succeeded, "succeeded"), card(o.shards.failed - (o.shards.cancelled || 0), "failed"),
        card(o.shards.cancelled || 0, "cancelled", "cancelled"), card(o.groups.fired, "groups fired"),
        card(o.groups.dead_lettered, "groups dead"), card(o.groups.cancelled, "groups cancelled"),
        card(o.groups.open, "groups open")),
      o.waiting ? el("p", {}, "Waiting for a worker: ", Object.entries(o.waiting_pools).map(([p, n]) => `${n} for pool ${p}`).join(", ")) : null,
      counts.length ? el("p", { "data-why-counts": "" }, "Not running: ", counts.map(([r, n]) => `${n} ${r}`).join(", ")) : null,
      waitingRows.length && !o.filtered ? [el("h2", {}, "Waiting shards (no record yet)"),
        table(["task", "state", "pool", "partition @ offset", "why not running"], waitingRows)] : null,
      o.filtered ? [el("h2", { "data-matched": o.shards_matched }, `${o.shards_matched} shard(s) match`,
        el("span", { class: "muted" }, " " + Object.entries(o.matched_states).map(([s, n]) => `${n} ${s}`).join(", "))),
        table(heads, o.shard_list.map((s) => (s.state === "waiting" && !s.external_id ? waitingRow(s) : shardRows([s])[0])), "matches"),
        pager(o.shards_matched, o.offset, "#/job/" + encodeURIComponent(id), r.filters)] : null,
      groups,
      o.filtered ? null : pager(o.groups_total, o.offset, "#/job/" + encodeURIComponent(id)),
      o.ungrouped.length ? [el("h2", {}, "Shards in no group"), table(heads, shardRows(o.ungrouped))] : null,
    ];
  },

  // One shard: its labels, state, why it is not running, every attempt in
  // order (state, reason, exit code, worker, times, the tail of its output)
  // and its outputs.
  async shard(r) {
    const key = decodeURIComponent(r.arg);
    const s = await api(`shard?key=${encodeURIComponent(key)}`);
    const attempts = (s.attempt_list || []).map((a) => el("tr", { "data-attempt": a.attempt, "data-state": a.state, "data-reason": a.reason || "" },
      el("td", { class: "num" }, `#${a.attempt}`), el("td", {}, state(a.state)), el("td", {}, a.reason || "—"),
      el("td", { class: "num" }, a.exit_code === null || a.exit_code === undefined ? "—" : a.exit_code),
      el("td", {}, a.deterministic ? "yes" : "no"), el("td", {}, a.worker || "—"),
      el("td", {}, when(a.started_at)), el("td", {}, when(a.ended_at)),
      el("td", {}, a.detail ? el("div", { class: "detail" }, a.detail) : "—")));
    return [
      el("h2", {}, "Shard ", el("code", {}, s.task_key), " · ", state(s.state)),
      el("p", {}, "Job ", el("a", { href: "#/job/" + encodeURIComponent(s.job_id) }, s.job_id),
        s.kind ? ` · kind ${s.kind}` : "", s.group_key ? ` · group ${s.group_key} (${s.group_state})` : "",
        s.worker ? ` · worker ${s.worker}` : "", s.forwarded_from ? ` · forwarded from ${s.forwarded_from}` : ""),
      el("dl", { class: "labels", "data-labels": "" }, Object.entries(s.labels || {}).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      el("table", { id: "why" }, el("tbody", {}, el("tr", {}, el("th", {}, "why not running"), whyCell(s.why)))),
      el("h2", {}, `Attempts (${s.attempts === undefined ? attempts.length : s.attempts})`),
      s.attempts_dropped ? el("p", { class: "muted" }, `${s.attempts_dropped} older attempt(s) dropped`) : null,
      table(["#", "state", "reason", "exit code", "deterministic", "worker", "started", "ended", "tail of its output"], attempts, "attempts"),
      el("h2", {}, "Outputs"),
      (s.outputs || []).length ? s.outputs.map((u) => el("div", {}, el("code", {}, u))) : el("p", { class: "muted" }, "none"),
    ];
  },

  async workers(r) {
    const o = await api(`workers?offset=${r.offset}&limit=${PAGE}`);
    const rows = o.workers.map((w) => el("tr", { "data-worker": w.worker },
      el("td", {}, el("code", {}, w.worker)), el("td", {}, state(w.state)), el("td", {}, w.host), el("td", {}, w.backend),
      el("td", {}, Object.entries(w.pools || {}).map(([p, n]) => `${p}: ${n === null ? "unbounded" : n}`).join(", ") || "—"),
      el("td", { class: "num" }, w.slots), el("td", { class: "num" }, w.running_total),
      el("td", { class: "num" }, mib(w.rss_bytes)),
      el("td", { class: "num" }, keptLogs(w.kept_logs)),
      el("td", {}, (w.running || []).slice(0, 5).map((k) => el("div", {}, el("code", {}, k.slice(0, 16) + "…")))),
      el("td", {}, dur(w.up_s)), el("td", {}, dur(w.age_s) + " ago"), el("td", {}, w.version)));
    return [
      el("h2", {}, `Workers (${o.live} live of ${o.total})`),
      table(["worker", "state", "host", "backend", "pools", "slots", "running", "memory", "kept output (next prune)", "tasks", "up", "last heartbeat", "version"], rows, "workers"),
      el("p", { class: "muted" }, `A worker is silent after ${o.stale_after_s} s without a heartbeat, gone after its goodbye.`),
      pager(o.total, o.offset, "#/workers"),
    ];
  },

  async dead(r) {
    const o = await api(`dead?offset=${r.offset}&limit=${PAGE}`);
    const dlq = o.dlq.map((d) => el("tr", {}, el("td", {}, when(d.ts)), el("td", {}, `${d.partition}/${d.offset}`),
      el("td", {}, d.reason), el("td", {}, d.source || "—"), el("td", { class: "num" }, d.size)));
    const groups = o.dead_groups.map((g) => el("section", { "data-dead-group": g.group_key },
      el("h2", {}, `${g.kind} · ${g.group_key} · job ${g.job_id || "—"} · `, state("dead_lettered"), el("span", { class: "muted" }, " at " + when(g.ts))),
      table(["shard", "state", "attempts", "reason", "detail"], g.members.map((s) => el("tr", {},
        el("td", {}, el("code", {}, s.external_id)), el("td", {}, state(s.state)), el("td", { class: "num" }, s.attempts),
        el("td", {}, s.failure ? s.failure.reason : "—"),
        el("td", {}, s.failure && s.failure.detail ? el("div", { class: "detail" }, s.failure.detail) : "—"))))));
    return [
      el("h2", {}, `Dead-lettered groups (${o.dead_groups_total})`),
      groups.length ? groups : el("p", { class: "muted" }, "none"),
      el("h2", {}, `DLQ records (${o.dlq_total})`),
      table(["time", "partition/offset", "reason", "source", "size (bytes)"], dlq, "dlq"),
      pager(Math.max(o.dlq_kept, o.dead_groups_total), o.offset, "#/dead"),
    ];
  },
};

async function render() {
  clearTimeout(timer);
  const r = route();
  const fn = pages[r.page] || pages.overview;
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === (["job", "shard"].includes(r.page) ? "jobs" : r.page)));
  if (location.hash !== shownHash) {
    shownHash = location.hash;
    const bar = r.page === "jobs" ? filterBar(r, "#/jobs", ["running", "waiting", "fired", "dead_lettered", "cancelled", "pending"])
      : r.page === "job" ? filterBar(r, "#/job/" + r.arg, ["pending", "running", "succeeded", "failed", "cancelled", "waiting"]) : null;
    document.getElementById("filters").replaceChildren(...(bar ? [bar] : []));
  }
  const status = document.getElementById("updated");
  try {
    const content = await fn(r);
    const main = document.getElementById("main");
    main.replaceChildren(...[content].flat(2).filter((x) => x));
    updates++;
    status.dataset.updates = String(updates);
    status.textContent = "updated " + new Date().toISOString().slice(11, 19) + "Z";
    status.classList.remove("error");
  } catch (e) {
    status.textContent = "update failed: " + e.message;
    status.classList.add("error");
  }
  timer = setTimeout(render, POLL_MS);
}

window.addEventListener("hashchange", render);
render();
