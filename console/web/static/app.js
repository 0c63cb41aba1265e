// The gridbus console page: one view at a time (#slots, #queue, #job?schedd=..&id=.., #users,
// #daemons), fetched from /api when it is shown and again only when the daemon's event stream
// (/api/stream) says one of the view's topics changed. No view polls.
"use strict";

const STATUS = {1: "Idle", 2: "Running", 3: "Removed", 4: "Completed", 5: "Held", 6: "Transferring Output", 7: "Suspended"};
const $ = (sel) => document.querySelector(sel);
let stream = null, watching = null; // the stream, and the owner whose job events it asks for
let current = null; // {topics, render}

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function say(text, error = false) {
  const m = $("#message");
  m.textContent = text || "";
  m.className = error ? "error" : "";
}
async function api(path, body) {
  const opts = body === undefined ? {} : {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)};
  const r = await fetch(path, {credentials: "same-origin", ...opts});
  let data = {};
  try { data = await r.json(); } catch (e) { data = {error: r.statusText}; }
  if (r.status === 401) { showLogin(); throw new Error(data.error || "sign in first"); }
  if (!r.ok) { const err = new Error(data.error || r.statusText); err.status = r.status; throw err; }
  return data;
}
function table(cols, rows, cell) {
  const head = cols.map((c) => `<th>${esc(c)}</th>`).join("");
  const body = rows.map((r) => `<tr>${cols.map((c) => cell(r, c)).join("")}</tr>`).join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}
function ago(t) {
  if (!t) return "";
  const s = Math.max(0, Math.round(Date.now() / 1000 - t));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
}

// ------------------------------------------------------------------ views
const views = {
  async slots() {
    const d = await api("/api/slots");
    const cols = ["Name", "State", "Activity", "Cpus", "Memory", "GPUs", "RemoteOwner", "JobId", "SlotType"];
    return `<h1>Slots (${d.slots.length})</h1>` + table(cols, d.slots, (r, c) => `<td>${esc(r[c])}</td>`);
  },
  async queue(params) {
    const all = params.get("all") === "1";
    const d = await api(`/api/queue${all ? "?all=1" : ""}`);
    let html = `<h1>Queue ${all ? "of all users" : "of " + esc(d.user)}</h1>
      <p><a href="#queue${all ? "" : "?all=1"}">${all ? "only my jobs" : "all users (condor_q -allusers)"}</a></p>`;
    for (const s of d.schedds) {
      html += `<h2>${esc(s.schedd)}</h2>`;
      const groups = {};
      for (const j of s.jobs) {
        const key = j.DAGManJobId !== undefined ? `${j.Owner} / DAG ${j.DAGManJobId}` : `${j.Owner}`;
        (groups[key] = groups[key] || []).push(j);
      }
      if (!s.jobs.length) html += `<p class="muted">No jobs in the queue.</p>`;
      if (s.jobs.length >= s.limit) html += `<p class="muted">The first ${s.limit} jobs of the queue.</p>`;
      for (const [key, jobs] of Object.entries(groups).sort()) {
        html += `<h3>${esc(key)}</h3>` + jobTable(s.schedd, jobs, true);
      }
      if (s.history.length) html += `<h3>Recently finished</h3>` + jobTable(s.schedd, s.history, false);
    }
    return html;
  },
  async job(params) {
    const schedd = params.get("schedd") || "", id = params.get("id") || "";
    const d = await api(`/api/job?schedd=${encodeURIComponent(schedd)}&id=${encodeURIComponent(id)}`);
    const st = STATUS[d.ad.JobStatus] || d.ad.JobStatus;
    const attrs = Object.keys(d.ad).sort().map((k) => `${k} = ${JSON.stringify(d.ad[k])}`).join("\n");
    const history = (d.history || []).map((e) => `<li><time>${esc(new Date(e.time * 1000).toLocaleTimeString())}</time> <span class="event">${esc(e.event)}</span></li>`).join("");
    const events = d.events.map((e) => `<li><time>${esc(new Date((e.time || 0) * 1000).toLocaleTimeString())}</time> <span class="event">${esc(e.event)}</span>` +
      `${e.HoldReason ? " (" + esc(e.HoldReason) + ")" : ""}${e.RemoteHost ? " on " + esc(e.RemoteHost) : ""}</li>`).join("");
    if (watching !== d.ad.Owner) connect(d.ad.Owner); // this job's events come while the page shows it
    return `<h1>Job ${esc(d.id)} <span class="muted">on ${esc(d.schedd)}</span></h1>
      <p>Status: <strong id="job-status" class="${esc(st)}">${esc(st)}</strong> · Owner ${esc(d.ad.Owner)}
      ${actions(d.schedd, d.id, "")}</p>
      <h2>Its user log</h2><ol id="history">${history || "<li class=\"muted\">no user log</li>"}</ol>
      <h2>Events (since this page showed the job)</h2><ol id="events">${events}</ol>
      <h2>Job ad</h2><pre id="job-ad">${esc(attrs)}</pre>`;
  },
  async users() {
    const d = await api("/api/users");
    let html = `<h1>Users</h1><h2>Submitters</h2>` + table(["Name", "IdleJobs", "RunningJobs", "HeldJobs"], d.submitters,
      (r, c) => `<td${c === "Name" ? "" : ' class="num"'}>${esc(r[c])}</td>`);
    html += `<h2>Fair-share priorities</h2>`;
    if (d.error) html += `<p class="muted">${esc(d.error)}</p>`;
    const pcols = ["Name", "EffectivePriority", "Priority", "PriorityFactor", "ResourcesUsed", "AccumulatedUsage"];
    html += table(pcols, d.priorities, (r, c) => `<td>${esc(typeof r[c] === "number" ? +r[c].toFixed(2) : r[c])}</td>`);
    return html;
  },
  async daemons() {
    const d = await api("/api/daemons");
    const cols = ["Address", "MyType", "Machine", "DutyCycle", "RequestsServed", "RequestsFailed", "BrokerReconnects", "AdAge"];
    let html = `<h1>Daemons</h1>` + table(cols, d.daemons, (r, c) => {
      let v = r[c];
      if (c === "DutyCycle" && typeof v === "number") v = (100 * v).toFixed(1) + "%";
      if (c === "AdAge" && typeof v === "number") v = v.toFixed(0) + "s ago";
      return `<td>${esc(v)}</td>`;
    });
    for (const m of d.masters) {
      html += `<h2>Master ${esc(m.Name)}</h2>` + table(["Name", "State", "Pid", "Restarts"], m.Daemons, (r, c) => `<td>${esc(r[c])}</td>`);
    }
    return html;
  },
};
function actions(schedd, id, extra) {
  return ["hold", "release", "remove"].map((a) =>
    `<button data-action="${a}" data-schedd="${esc(schedd)}" data-job="${esc(id)}"${extra}>${a[0].toUpperCase() + a.slice(1)}</button>`).join(" ");
}
function jobTable(schedd, jobs, live) {
  const cols = ["ID", "Owner", "Status", "Submitted", "Cmd", live ? "Actions" : "Exit code"];
  return table(cols, jobs, (j, c) => {
    const id = `${j.ClusterId}.${j.ProcId}`;
    const st = STATUS[j.JobStatus] || j.JobStatus;
    if (c === "ID") return `<td><a href="#job?schedd=${encodeURIComponent(schedd)}&id=${id}">${id}</a></td>`;
    if (c === "Status") return `<td class="status ${esc(st)}" data-job="${id}">${esc(st)}${j.HoldReason && st === "Held" ? ": " + esc(j.HoldReason) : ""}</td>`;
    if (c === "Submitted") return `<td>${ago(j.QDate)} ago</td>`;
    if (c === "Cmd") return `<td>${esc(j.Cmd)} ${esc(j.Arguments || j.Args || "")}</td>`;
    if (c === "Actions") return `<td>${actions(schedd, id, "")}</td>`;
    if (c === "Exit code") return `<td>${esc(j.ExitCode)}</td>`;
    return `<td>${esc(j[c])}</td>`;
  });
}

// ------------------------------------------------------------------ routing and the live stream
const TOPICS = {slots: ["slots"], queue: ["queue"], users: ["users"], daemons: ["daemons"]};
function route() {
  say("");
  const [name, query] = (location.hash.slice(1) || "queue").split("?");
  const params = new URLSearchParams(query || "");
  const view = views[name] ? name : "queue";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.getAttribute("href") === "#" + view);
  let topics = TOPICS[view] || [];
  if (view === "job") topics = ["queue", `job:${params.get("schedd")}/${params.get("id")}`];
  current = {topics, render: () => views[view](params)};
  if (view !== "job" && watching) connect(null);
  return show();
}
let showing = null, again = false;
async function show() {
  if (!current) return;
  if (showing) { again = true; return showing; }
  showing = (async () => {
    do {
      again = false;
      const mine = current;
      try {
        const html = await mine.render();
        if (mine === current) $("#view").innerHTML = html;
      } catch (e) {
        if (e.status) say(e.message, true);
      }
    } while (again);
    showing = null;
  })();
  return showing;
}
function connect(owner) {
  if (stream) stream.close();
  watching = owner || null;
  stream = new EventSource("/api/stream" + (watching ? "?watch=" + encodeURIComponent(watching) : ""));
  stream.addEventListener("hello", () => $("#live").classList.add("on"));
  stream.addEventListener("change", (ev) => {
    const topics = JSON.parse(ev.data).topics;
    if (current && current.topics.some((t) => topics.includes(t))) show();
  });
  stream.onerror = () => $("#live").classList.remove("on");
}
function showLogin() {
  $("#login").hidden = false;
  $("#nav").hidden = true;
  $("#view").innerHTML = "";
  $("#who").textContent = "";
  if (stream) { stream.close(); stream = null; watching = null; }
}
async function signedIn(user) {
  $("#login").hidden = true;
  $("#nav").hidden = false;
  $("#who").innerHTML = `${esc(user)} <button id="logout">Sign out</button>`;
  connect();
  await route();
}

document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button[data-action]");
  if (b) {
    ev.preventDefault();
    say("");
    try {
      const r = await api("/api/job/action", {action: b.dataset.action, schedd: b.dataset.schedd, id: b.dataset.job});
      const t = r.totals || {};
      say(t.TotalSuccess ? `${b.dataset.action} ${b.dataset.job}: done` :
        `${b.dataset.action} ${b.dataset.job}: nothing done (${JSON.stringify(t)})`, !t.TotalSuccess);
    } catch (e) {
      say(e.message, true);
    }
  }
  if (ev.target.id === "logout") {
    await api("/api/logout", {});
    showLogin();
  }
});
$("#login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  say("");
  try {
    const d = await api("/api/login", {user: $("#login-user").value, password: $("#login-password").value});
    await signedIn(d.user);
  } catch (e) {
    say(e.message, true);
  }
});
window.addEventListener("hashchange", route);
api("/api/me").then((d) => signedIn(d.user)).catch(() => showLogin());
