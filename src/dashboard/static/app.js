// The dashboard's behaviour: refresh in place, and the actions. Served from /static/app.js (the
// Content-Security-Policy allows no inline script). Every value goes in as textContent or a DOM
// node: a run's output is never parsed as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
let fast = 0; // refreshes left at one a second (after an action)

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function field(card, name) {
  return card.querySelector('[data-field="' + name + '"]');
}

function say(text) {
  const s = document.querySelector('[data-field="status"]');
  if (s) s.textContent = text;
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

function update(card, a) {
  const verdict = a.health.verdict;
  card.className = "card " + verdict;
  setText(field(card, "verdict"), verdict);
  const reasons = field(card, "reasons");
  replaceIfChanged(reasons, a.health.reasons, () => a.health.reasons.map((r) => el("li", r.detail)));
  const state = field(card, "state");
  if (state) {
    const p = a.list && a.list.paused;
    const running = a.runs.length && a.runs[0].status === "running";
    const unreadable = a.health.reasons.some((r) => r.rule === "unreadable");
    setText(state, !a.list ? "no definition"
      : unreadable ? "unknown: its state cannot be read"
      : p ? (p.by === "auto" ? "paused automatically: " : "paused: ") + p.reason
      : running ? "running" : "active");
  }
  const next = field(card, "next");
  if (next) setText(next, (a.list && a.list.next_words) || "-");
  setText(field(card, "last"), lastRun(a.runs));
  replaceIfChanged(field(card, "runs"), a.runs, () => runRows(a.runs));
  const f = a.latest && a.latest.finished;
  if (f) replaceIfChanged(field(card, "latest"), f, () => latestResult(f));
  replaceIfChanged(field(card, "strip"), a.strip, () => stripMarks(a.strip));
}

function runRows(runs) {
  const rows = runs.map((r) => {
    const tr = el("tr", null, r.status);
    const when = el("td", (r.at || "").slice(5, 16).replace("T", " "));
    when.title = short(r.at);
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

function latestResult(f) {
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

function stripMarks(strip) {
  const marks = [];
  const rect = (cls, x, y, h) => {
    const r = document.createElementNS(SVG, "rect");
    r.setAttribute("class", cls);
    r.setAttribute("x", x);
    r.setAttribute("y", y);
    r.setAttribute("width", cls === "axis" ? 1440 : 6);
    r.setAttribute("height", h);
    return r;
  };
  marks.push(rect("axis", 0, 5, 2));
  strip.marks.forEach((m) => marks.push(rect("mark " + m.status, m.minute, 0, 12)));
  strip.missed.forEach((m) => marks.push(rect("missed", m, 1, 10)));
  return marks;
}

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

// Replaces the children of `node` only when `data` changed: a refresh must not reflow, or take
// away, what a person is reading or selecting.
function replaceIfChanged(node, data, build) {
  const key = JSON.stringify(data);
  if (node.dataset.key === key) return;
  node.dataset.key = key;
  node.replaceChildren(...build());
}

async function refresh() {
  try {
    const r = await fetch("/api/automations", { credentials: "same-origin" });
    if (!r.ok) { say("refresh failed: " + r.status); return; }
    const doc = await r.json();
    const sw = document.querySelector('[data-field="switch"]');
    sw.textContent = doc.stopped
      ? "kill switch ON since " + short(doc.stopped.at) + ": " + doc.stopped.reason
      : "kill switch off";
    // Cards stay where they are (no reflow); each is updated in place.
    doc.automations.forEach((a) => {
      const card = document.querySelector('article[data-name="' + CSS.escape(a.name) + '"]');
      if (card) update(card, a);
    });
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

async function act(action, form) {
  const name = form && form.dataset.name;
  const reason = form && form.querySelector('input[name="reason"]');
  try {
    if (action === "run") {
      await post("/api/run/" + encodeURIComponent(name));
      say(name + ": started");
    } else if (action === "pause") {
      await post("/api/pause/" + encodeURIComponent(name), { reason: reason.value });
      reason.value = "";
      say(name + ": paused");
    } else if (action === "resume") {
      await post("/api/resume/" + encodeURIComponent(name));
      say(name + ": resumed");
    } else if (action === "ack") {
      await post("/api/ack/" + encodeURIComponent(name), { reason: reason ? reason.value : "" });
      if (reason) reason.value = "";
      say(name + ": acknowledged");
    } else if (action === "resume-all") {
      await post("/api/resume-all");
      say("kill switch off");
    } else if (action === "stop-all") {
      const r = await post("/api/stop-all", { reason: reason.value });
      reason.value = "";
      say("kill switch on; stopped " + r.stopped + " running run(s)");
    }
    fast = 15;
    refresh();
  } catch (e) {
    say(action + " refused: " + e.message);
  }
}

document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button[data-action]");
  if (!b) return;
  ev.preventDefault();
  act(b.dataset.action, b.closest("form"));
});

// Enter in a reason field: stop-all in the header, pause on a card. Never a page load.
document.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const form = ev.target;
  if (form.dataset.action === "stop-all") act("stop-all", form);
  else if (form.classList.contains("actions")) act("pause", form);
});

function tick() {
  refresh();
  setTimeout(tick, fast-- > 0 ? 1000 : 5000);
}
setTimeout(tick, 5000);
