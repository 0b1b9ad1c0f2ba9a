// The live page: reads the stream with the token from the URL fragment (never sent in a URL
// to the server), keeps a small model of Intents, Runs and alerts, and redraws on change.
// All text goes in through textContent: nothing from the cluster is ever parsed as HTML.
"use strict";

const TERMINAL = new Set(["Succeeded", "Failed", "Canceled", "Deleted"]);
const MAX_ALERTS = 20;
const state = { intents: new Map(), runs: new Map(), alerts: [], lastId: null };

function token() {
  const params = new URLSearchParams(location.hash.slice(1));
  return params.get("token");
}

function key(ev) {
  return `${ev.payload.namespace}/${ev.payload.name}`;
}

function apply(type, ev) {
  if (type === "intent.updated") {
    state.intents.set(key(ev), ev);
  } else if (type === "run.output") {
    const previous = state.runs.get(key(ev));
    const lines = ev.payload.lines || [];
    const last = lines.length ? lines[lines.length - 1] : previous ? previous.lastLine : "";
    state.runs.set(key(ev), { ev, lastLine: last });
  } else if (type === "system.alert") {
    state.alerts.unshift(ev);
    state.alerts.length = Math.min(state.alerts.length, MAX_ALERTS);
  }
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  row.appendChild(td);
}

function fill(tbody, rows, columns) {
  tbody.replaceChildren();
  if (!rows.length) {
    const tr = document.createElement("tr");
    cell(tr, "none", "empty");
    tr.firstChild.colSpan = 6;
    tbody.appendChild(tr);
    return;
  }
  for (const r of rows) {
    const tr = document.createElement("tr");
    tr.dataset.name = r.name;
    for (const [text, cls] of columns(r)) cell(tr, text, cls);
    tbody.appendChild(tr);
  }
}

function render() {
  const approvals = [...state.intents.values()]
    .filter((ev) => ev.payload.phase === "AwaitingApproval")
    .map((ev) => ({ name: key(ev), ev }));
  fill(document.querySelector("#approvals tbody"), approvals, ({ name, ev }) => {
    const p = ev.payload;
    const by = p.proposedBy ? [p.proposedBy.type, p.proposedBy.name].filter(Boolean).join(" ") : "";
    return [[name], [p.kind], [p.summary], [by], [p.risk],
      [`${p.approvals}/${p.approversRequired ?? "?"}`]];
  });
  const runs = [...state.runs.values()]
    .filter(({ ev }) => !TERMINAL.has(ev.payload.phase) || Date.now() - Date.parse(ev.ts) < 60000)
    .map((r) => ({ name: key(r.ev), ...r }));
  fill(document.querySelector("#runs tbody"), runs, ({ name, ev, lastLine }) => {
    const p = ev.payload;
    const progress = p.progress && p.progress.percent != null
      ? `${p.progress.percent}% ${p.progress.message || ""}` : (p.currentPhase || "");
    return [[name], [ev.sprite ? ev.sprite.name : ""], [p.phase, "phase"], [p.events],
      [progress], [lastLine]];
  });
  const list = document.getElementById("alerts");
  list.replaceChildren();
  for (const ev of state.alerts) {
    const li = document.createElement("li");
    li.className = ev.payload.severity || "";
    li.textContent = `${ev.ts} ${key(ev)} ${ev.payload.reason}: ${ev.payload.message || ""}`;
    list.appendChild(li);
  }
}

function status(text, s) {
  const el = document.getElementById("connection");
  el.textContent = text;
  el.dataset.state = s;
}

async function connect() {
  const t = token();
  if (!t) {
    document.getElementById("login").hidden = false;
    status("no token", "denied");
    return;
  }
  const headers = { Authorization: `Bearer ${t}` };
  if (state.lastId) headers["Last-Event-ID"] = state.lastId;
  const ns = new URLSearchParams(location.search).get("namespace");
  let response;
  try {
    response = await fetch(ns ? `/events?namespace=${encodeURIComponent(ns)}` : "/events", { headers });
  } catch (err) {
    status("disconnected, retrying", "closed");
    setTimeout(connect, 2000);
    return;
  }
  if (response.status === 401 || response.status === 403) {
    status(`${response.status}: ${(await response.text()).trim()}`, "denied");
    return;
  }
  status("live", "live");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null, type = "message", data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("event: ")) type = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      if (id) state.lastId = id;
      apply(type, JSON.parse(data));
      render();
    }
  }
  status("disconnected, retrying", "closed");
  setTimeout(connect, 1000);
}

render();
connect();
