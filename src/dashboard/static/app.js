// The dashboard's behaviour: refresh in place, filter, open any run, and the actions. Served from
// /static/app.js (the Content-Security-Policy allows no inline script). Every value goes in as
// textContent or a DOM node: a run's output is never parsed as markup. The one markup parsed is
// the pictures (the timeline's lines, an open row's trend), which the server rendered with every
// value escaped.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const CATEGORIES = ["degraded", "unknown", "paused", "healthy"];
let fast = 0; // refreshes left at one a second (after an action)
let category = new URLSearchParams(location.search).get("filter") || "";
if (!CATEGORIES.includes(category)) category = "";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function svg(tag, attrs, title) {
  const e = document.createElementNS(SVG, tag);
  Object.entries(attrs).forEach(([k, v]) => e.setAttribute(k, v));
  if (title) {
    const t = document.createElementNS(SVG, "title");
    t.textContent = title;
    e.append(t);
  }
  return e;
}

function field(row, name) {
  return row.querySelector('[data-field="' + name + '"]');
}

function say(text) {
  const s = document.querySelector('[data-field="status"]');
  if (s) s.textContent = text;
}

// A message next to the control that was used (and in the header for the kill switch).
function sayAt(form, text, refused) {
  const said = form && form.querySelector('[data-field="said"]');
  if (said) {
    said.textContent = text;
    said.classList.toggle("refused", !!refused);
  } else {
    say(text);
  }
}

function short(at) {
  return at ? at.slice(0, 19).replace("T", " ") + "Z" : "";
}

function statusWords(r) {
  if (r.reason) return "skipped (" + r.reason + ")";
  if (r.error_class && r.status !== "ok") return r.status + " (" + r.error_class + ")";
  return r.status;
}

function seconds(ms) {
  return ms === null || ms === undefined ? "" : (ms / 1000).toFixed(2) + " s";
}

function lastRun(runs) {
  const r = runs.find((x) => x.run);
  if (!r) return "never";
  const parts = [statusWords(r), short(r.at)];
  if (r.duration_ms !== null) parts.push(seconds(r.duration_ms));
  parts.push(r.trigger);
  return parts.join(" · ");
}

// "42 s", "17 min", "3 h 5 min", "2 d 4 h", as health prints ages.
function human(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 10) return (ms / 1000).toFixed(1) + " s";
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}

function lastShort(runs) {
  const r = runs.find((x) => x.run);
  if (!r) return "never";
  const status = r.reason ? "skipped" : r.status;
  const t = Date.parse(r.at);
  return isNaN(t) ? status : status + " · " + human(Math.max(0, Date.now() - t)) + " ago";
}

function update(row, a) {
  const running = a.runs.length > 0 && a.runs[0].status === "running";
  const paused = !!(a.list && a.list.paused);
  row.className = "row " + a.category + (paused ? " is-paused" : "") + (running ? " is-running" : "");
  row.dataset.category = a.category;
  setText(field(row, "verdict"), a.category);
  field(row, "verdict").title = "verdict: " + a.health.verdict;
  replaceIfChanged(field(row, "reasons"), a.health.reasons, () => a.health.reasons.map((r) => el("li", r.detail)));
  const state = field(row, "state");
  if (state) {
    const p = a.list && a.list.paused;
    const unreadable = a.health.reasons.some((r) => r.rule === "unreadable");
    const words = !a.list ? "no definition"
      : unreadable ? "unknown: its state cannot be read"
      : p ? (p.by === "auto" ? "paused automatically: " : "paused: ") + p.reason
      : running ? "running" : "active";
    setText(state, words + ((a.list && a.list.snoozed_words) || ""));
  }
  const next = (a.list && a.list.next_words) || "-";
  ["next", "next-short"].forEach((f) => { const n = field(row, f); if (n) setText(n, next); });
  setText(field(row, "last"), lastRun(a.runs));
  const ls = field(row, "last-short");
  setText(ls, lastShort(a.runs));
  ls.title = lastRun(a.runs);
  replaceIfChanged(field(row, "runs"), a.runs, () => runRows(a.runs));
  replaceIfChanged(field(row, "recent"), a.firings, () => recentMarks(field(row, "recent"), a.firings));
  const f = a.latest && a.latest.finished;
  if (f) replaceIfChanged(field(row, "latest"), f, () => output(f));
  replaceIfChanged(field(row, "strip"), a.strip, () => stripMarks(a.strip));
  const run = row.querySelector('button[data-action="run"]');
  if (run) run.disabled = running;
}

function runRows(runs) {
  const rows = runs.map((r) => {
    const tr = el("tr", null, r.status);
    // Month, day and second: runs in the same minute read apart.
    const whenText = (r.at || "").slice(5, 19).replace("T", " ");
    const when = el("td");
    when.title = short(r.at);
    if (r.run) {
      const b = el("button", whenText, "open");
      b.type = "button";
      b.dataset.action = "open-run";
      b.dataset.run = r.run;
      b.setAttribute("aria-label", "Open the run of " + short(r.at));
      when.append(b);
    } else {
      when.textContent = whenText;
    }
    const status = el("td", r.reason ? "skipped" : r.status);
    status.title = statusWords(r);
    tr.append(when, el("td", r.trigger), status,
      el("td", seconds(r.duration_ms)),
      el("td", r.headline ? r.headline.name + "=" + r.headline.value : ""));
    return tr;
  });
  if (!rows.length) {
    const tr = el("tr");
    const td = el("td", "no runs yet");
    td.colSpan = 5;
    tr.append(td);
    rows.push(tr);
  }
  return rows;
}

// The recent firings as the server draws them (a retried firing is one mark, its last attempt):
// oldest left, a shape and colour per status.
function recentMarks(node, runs) {
  const marks = runs.slice().reverse().map((r, i) => {
    const status = r.reason ? "skipped" : r.status;
    const title = short(r.at) + " · " + statusWords(r);
    const x = i * 14 + 1, cx = x + 5;
    if (status === "ok") return svg("circle", { class: "m ok", cx, cy: 6, r: 5 }, title);
    if (status === "timeout") return svg("polygon", { class: "m timeout", points: x + ",11 " + cx + ",1 " + (x + 10) + ",11" }, title);
    if (status === "skipped") return svg("polygon", { class: "m skipped", points: cx + ",1 " + (x + 10) + ",6 " + cx + ",11 " + x + ",6" }, title);
    if (status === "running") return svg("circle", { class: "m running", cx, cy: 6, r: 4 }, title);
    return svg("rect", { class: "m failed " + status, x, y: 1, width: 10, height: 10 }, title);
  });
  const counts = {};
  runs.forEach((r) => { const s = r.reason ? "skipped" : r.status; counts[s] = (counts[s] || 0) + 1; });
  const parts = Object.entries(counts).map(([k, n]) => n + " " + k);
  node.setAttribute("aria-label", runs.length ? "last " + runs.length + " firings: " + parts.join(", ") : "no runs yet");
  return marks;
}

function output(f) {
  const facts = el("p", null, "facts");
  const names = Object.keys(f.facts);
  if (!names.length) facts.textContent = "no facts";
  names.forEach((k) => facts.append(el("span", k + "=" + f.facts[k], "fact"), " "));
  return [facts,
    el("h3", "stdout" + (f.dropped.stdout ? " (" + f.dropped.stdout + " earlier bytes dropped)" : "")),
    el("pre", f.stdout_tail, "output"),
    el("h3", "stderr" + (f.dropped.stderr ? " (" + f.dropped.stderr + " earlier bytes dropped)" : "")),
    el("pre", f.stderr_tail, "output")];
}

// One run, any run: the same document as `automations show <id> --json`.
function openRun(button) {
  return openRunIn(button.closest("article"), button.dataset.run);
}

// A past mark of the timeline: its automation's row opens, with the run shown in it.
function openFromTimeline(mark) {
  const line = mark.closest(".tl-row");
  const row = line && document.querySelector('article[data-name="' + CSS.escape(line.dataset.tl) + '"]');
  if (!row) return;
  row.hidden = false;
  row.querySelector("details").open = true;
  row.scrollIntoView({ block: "start" });
  openRunIn(row, mark.dataset.openRun);
}

// The duration trend and the calendar strip of an opened row, drawn by the server (SVG, every
// value escaped by it), fetched the first time the row opens.
async function loadPictures(row) {
  const box = field(row, "pictures");
  if (!box || box.dataset.loaded) return;
  box.dataset.loaded = "1";
  try {
    const r = await fetch("/api/pictures/" + encodeURIComponent(row.dataset.name), { credentials: "same-origin" });
    if (!r.ok) throw new Error(r.status);
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    box.replaceChildren(...doc.body.childNodes);
  } catch (e) {
    delete box.dataset.loaded;
    box.replaceChildren(el("p", "cannot draw its history: " + e.message));
  }
}

// The timeline's line per automation, drawn by the server, fetched each time "Per automation"
// opens (the page's own pictures are of its load; these are of now).
async function loadTimelineLines(details) {
  const box = details.querySelector('[data-field="tl-lines"]');
  try {
    const r = await fetch("/api/timeline", { credentials: "same-origin" });
    if (!r.ok) throw new Error(r.status);
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    box.replaceChildren(...doc.body.childNodes);
  } catch (e) {
    box.replaceChildren(el("p", "cannot draw the timeline: " + e.message));
  }
}

async function openRunIn(row, id) {
  const box = field(row, "run-detail");
  try {
    // With the automation's name, the server reads only its lines (through its index).
    const r = await fetch("/api/runs/" + encodeURIComponent(row.dataset.name) + "/" + encodeURIComponent(id),
      { credentials: "same-origin" });
    const doc = await r.json();
    if (!r.ok) throw new Error(doc.error || r.status);
    const run = doc.run;
    const head = el("h4", short(run.at) + " · " + statusWords(run) + " · " + run.trigger
      + (run.duration_ms !== null ? " · " + seconds(run.duration_ms) : "")
      + (run.exit_code !== null && run.exit_code !== undefined ? " · exit " + run.exit_code : ""));
    const parts = [head, el("p", "run " + run.run, "run-id")];
    if (doc.finished) parts.push(...output(doc.finished));
    else parts.push(el("p", "this run has not finished"));
    box.replaceChildren(...parts);
    box.setAttribute("tabindex", "-1");
    box.focus();
  } catch (e) {
    box.replaceChildren(el("p", "cannot open the run: " + e.message));
  }
}

// The strip as the server draws it: one shape per status (a busy day is hundreds of marks).
function stripMarks(strip) {
  const marks = [svg("rect", { class: "axis", x: 0, y: 5, width: 1440, height: 2 })];
  const shapes = {};
  strip.marks.forEach((m) => {
    shapes[m.status] = (shapes[m.status] || "") + "M" + m.minute + " 0h6v12h-6z";
  });
  Object.keys(shapes).forEach((status) => marks.push(svg("path", { class: "mark " + status, d: shapes[status] })));
  strip.missed.forEach((m) => marks.push(svg("rect", { class: "missed", x: m, y: 1, width: 6, height: 10 })));
  return marks;
}

function setText(node, text) {
  if (node && node.textContent !== text) node.textContent = text;
}

// Replaces the children of `node` only when `data` changed: a refresh must not reflow, or take
// away, what a person is reading or selecting.
function replaceIfChanged(node, data, build) {
  if (!node) return;
  const key = JSON.stringify(data);
  if (node.dataset.key === key) return;
  node.dataset.key = key;
  node.replaceChildren(...build());
}

// Shows the rows of the chosen category whose name holds the filter text.
function applyFilter() {
  const text = (document.querySelector('[data-field="filter"]').value || "").trim().toLowerCase();
  document.querySelectorAll("article.row").forEach((row) => {
    // Paused counts every paused row, also one that is degraded (paused automatically).
    const inCategory = category === "paused" ? row.classList.contains("is-paused") : row.dataset.category === category;
    const show = (!category || inCategory) && row.dataset.name.includes(text);
    row.hidden = !show;
  });
  document.querySelectorAll("a.count").forEach((a) => {
    a.setAttribute("aria-current", a.dataset.filter === category ? "true" : "false");
  });
}

function counts() {
  const n = {};
  CATEGORIES.forEach((c) => { n[c] = 0; });
  document.querySelectorAll("article.row").forEach((row) => {
    if (row.dataset.category !== "paused") n[row.dataset.category] += 1;
    if (row.classList.contains("is-paused")) n.paused += 1;
  });
  CATEGORIES.forEach((c) => setText(document.querySelector('[data-field="count-' + c + '"]'), String(n[c])));
}

async function refresh() {
  try {
    const r = await fetch("/api/automations", { credentials: "same-origin" });
    if (!r.ok) { say("refresh failed: " + r.status); return; }
    const doc = await r.json();
    setText(document.querySelector('[data-field="switch"]'), doc.stopped
      ? "kill switch ON since " + short(doc.stopped.at) + ": " + doc.stopped.reason
      : "kill switch off");
    // Rows stay where they are (no reflow); each is updated in place.
    doc.automations.forEach((a) => {
      const row = document.querySelector('article[data-name="' + CSS.escape(a.name) + '"]');
      if (row) update(row, a);
    });
    counts();
    applyFilter();
    setText(document.querySelector('[data-field="refreshed"]'), "as of " + new Date().toISOString().slice(11, 19) + " UTC");
  } catch (e) {
    say("refresh failed: " + e);
  }
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  let doc = {};
  try { doc = await r.json(); } catch (e) { /* a refusal in plain text */ }
  if (!r.ok) throw new Error(doc.error || r.status);
  return doc;
}

// What an action did to the remote Healthchecks checks, when it did anything: "; healthchecks: …".
function remote(doc) {
  const lines = (doc && doc.healthchecks) || [];
  return lines.length ? "; " + lines.join("; ") : "";
}

async function act(action, form, button) {
  if (action === "open-run") return openRun(button);
  const name = form && form.dataset.name;
  const reason = form && form.querySelector('input[name="reason"]');
  try {
    if (action === "run") {
      await post("/api/run/" + encodeURIComponent(name));
      sayAt(form, "started");
    } else if (action === "pause") {
      const r = await post("/api/pause/" + encodeURIComponent(name), { reason: reason.value });
      reason.value = "";
      sayAt(form, "paused" + remote(r));
    } else if (action === "resume") {
      const r = await post("/api/resume/" + encodeURIComponent(name));
      sayAt(form, "resumed" + remote(r));
    } else if (action === "ack") {
      await post("/api/ack/" + encodeURIComponent(name), { reason: reason ? reason.value : "" });
      if (reason) reason.value = "";
      sayAt(form, "acknowledged");
    } else if (action === "snooze") {
      const r = await post("/api/snooze/" + encodeURIComponent(name), { duration: "4h", reason: reason ? reason.value : "" });
      if (reason) reason.value = "";
      sayAt(form, "snoozed until " + new Date(r.snoozed.until).toLocaleString());
    } else if (action === "unsnooze") {
      const r = await post("/api/unsnooze/" + encodeURIComponent(name));
      sayAt(form, r.unsnoozed ? "no longer snoozed" : "was not snoozed");
    } else if (action === "resume-all") {
      const r = await post("/api/resume-all");
      say("kill switch off" + remote(r));
    } else if (action === "stop-all") {
      const r = await post("/api/stop-all", { reason: reason.value });
      reason.value = "";
      say("kill switch on; stopped " + r.stopped + " running run(s)" + remote(r));
    }
    fast = 15;
    refresh();
  } catch (e) {
    sayAt(form && form.classList.contains("actions") ? form : null, action + " refused: " + e.message, true);
  }
}

document.addEventListener("click", (ev) => {
  const count = ev.target.closest("a.count");
  if (count) {
    ev.preventDefault();
    category = count.dataset.filter;
    history.replaceState(null, "", category ? "?filter=" + category : location.pathname);
    applyFilter();
    return;
  }
  const mark = ev.target.closest("[data-open-run]");
  if (mark) {
    ev.preventDefault();
    openFromTimeline(mark);
    return;
  }
  const b = ev.target.closest("button[data-action]");
  if (!b) return;
  ev.preventDefault();
  act(b.dataset.action, b.closest("form"), b);
});

// `toggle` does not bubble: listened for on the way down.
document.addEventListener("toggle", (ev) => {
  if (ev.target.matches && ev.target.matches("details.tl-rows") && ev.target.open) {
    loadTimelineLines(ev.target);
    return;
  }
  const row = ev.target.parentElement && ev.target.parentElement.closest("article.row");
  if (row && ev.target === row.querySelector("details") && ev.target.open) loadPictures(row);
}, true);

// Enter on a focused mark of the timeline opens its run, as a click does.
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "Enter") return;
  const mark = ev.target.closest && ev.target.closest("[data-open-run]");
  if (!mark) return;
  ev.preventDefault();
  openFromTimeline(mark);
});

document.addEventListener("input", (ev) => {
  if (ev.target.matches('[data-field="filter"]')) applyFilter();
});

// Enter in a reason field: stop-all in the header, pause on a row. Never a page load.
document.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const form = ev.target;
  if (form.dataset.action === "stop-all") act("stop-all", form);
  else if (form.classList.contains("actions")) act("pause", form);
});

applyFilter();

function tick() {
  refresh();
  setTimeout(tick, fast-- > 0 ? 1000 : 5000);
}
setTimeout(tick, 5000);
