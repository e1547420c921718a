// The stream-perceptron dashboard: polls /api/state?since=<version> and draws each series' curves
// in SVG. No framework, no build step, nothing fetched from elsewhere.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 600, H = 150, L = 46, R = 8, T = 8, B = 20;

const state = {
  version: 0, history: 600, refreshMs: 1000, series: [], points: new Map(), events: [],
  group: null, now: 0, updates: 0, cards: new Map(), failures: 0,
};

// ------------------------------------------------------------------ formatting

function fmt(v, digits) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "n/a";
  if (digits === undefined) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(digits);
}
function sig(v, n) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "n/a";
  return Number(v.toPrecision(n)).toLocaleString("en-US", {maximumSignificantDigits: n});
}
function ago(seconds) {
  if (seconds === null || !Number.isFinite(seconds)) return "n/a";
  if (seconds < 60) return seconds.toFixed(1) + " s ago";
  if (seconds < 3600) return Math.floor(seconds / 60) + " min ago";
  return Math.floor(seconds / 3600) + " h ago";
}
function el(tag, attrs, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// ------------------------------------------------------------------ data

async function poll() {
  try {
    const response = await fetch(`/api/state?since=${state.version}`, {cache: "no-store"});
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    take(await response.json());
    render();
    state.failures = 0;
    status(`live · ${state.series.length} series · version ${state.version}`, "live");
  } catch (err) {
    state.failures += 1;
    status(`no answer from the dashboard (${err.message}); retrying`, "down");
  }
  setTimeout(poll, state.refreshMs);
}

function take(snap) {
  if (snap.version < state.version) {  // the dashboard restarted: start over
    state.points.clear();
    state.events = [];
  }
  state.history = snap.history;
  state.refreshMs = Math.max(100, snap.refresh_s * 1000);
  for (const p of snap.points) {
    let pts = state.points.get(p.series);
    if (!pts) state.points.set(p.series, pts = []);
    pts.push(p);
    if (pts.length > state.history) pts.splice(0, pts.length - state.history);
  }
  state.events.push(...snap.events);
  if (state.events.length > 200) state.events.splice(0, state.events.length - 200);
  if (snap.points.length || snap.events.length) state.updates += 1;
  state.series = snap.series;
  state.group = snap.group;
  state.now = snap.now;
  state.topic = snap.topic;
  state.version = snap.version;
}

function status(text, kind) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = "status " + kind;
}

// ------------------------------------------------------------------ drawing

function scale(lo, hi, a, b) {
  const span = hi - lo || 1;
  return (v) => a + (v - lo) / span * (b - a);
}

function pathOf(pts, key, x, y) {
  let d = "", pen = false;
  for (const p of pts) {
    const v = p[key], at = p.labeled;
    if (v === null || v === undefined || at === null) { pen = false; continue; }
    d += (pen ? "L" : "M") + x(at).toFixed(1) + " " + y(v).toFixed(1);
    pen = true;
  }
  return d;
}

// One chart: ``lines`` ([key, class]) of ``pts`` against their labeled examples, drift alarms
// (``events``, at their labeled count) as red dashed lines with a marker on top.
function chart(svg, pts, lines, events, zeroBased) {
  svg.replaceChildren();
  const xs = pts.map((p) => p.labeled).filter((v) => v !== null);
  const ys = [];
  for (const p of pts) for (const [key] of lines) if (p[key] !== null && p[key] !== undefined) ys.push(p[key]);
  if (!xs.length || !ys.length) {
    svg.append(el("svg:text", {x: L, y: H / 2}, "no labeled examples yet"));
    return 0;
  }
  const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
  let y0 = zeroBased ? 0 : Math.min(...ys), y1 = Math.max(...ys);
  if (zeroBased) y1 = Math.max(y1 * 1.1, 0.01);
  else { const pad = (y1 - y0) * 0.1 || Math.abs(y1) * 0.1 || 0.01; y0 -= pad; y1 += pad; }
  const x = scale(x0, x1, L, W - R), y = scale(y0, y1, H - B, T);
  svg.append(el("svg:line", {class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B}));
  svg.append(el("svg:line", {class: "axis", x1: L, y1: T, x2: L, y2: H - B}));
  for (const v of [y0, (y0 + y1) / 2, y1]) {
    svg.append(el("svg:text", {x: L - 4, y: y(v) + 3, "text-anchor": "end"}, sig(v, 3)));
  }
  svg.append(el("svg:text", {x: L, y: H - 6}, fmt(x0)));
  svg.append(el("svg:text", {x: W - R, y: H - 6, "text-anchor": "end"}, fmt(x1)));
  if (!zeroBased && y0 < 0 && y1 > 0) {
    svg.append(el("svg:line", {class: "zero", x1: L, y1: y(0), x2: W - R, y2: y(0)}));
  }
  let marks = 0;
  for (const e of events) {
    if (e.labeled === null || e.labeled < x0 || e.labeled > x1) continue;
    const g = el("svg:g", {class: "drift"});
    const at = x(e.labeled).toFixed(1);
    g.append(el("svg:line", {x1: at, y1: T, x2: at, y2: H - B}));
    g.append(el("svg:path", {d: `M${at} ${T + 7}l-5 -7h10z`}));
    g.append(el("svg:title", {}, `drift alarm ${fmt(e.drifts)} at offset ${fmt(e.offset)}: ${e.stream || "mistakes"}`
      + ` rate ${fmt(e.rate_before, 4)} → ${fmt(e.rate_after, 4)} (${e.detector || "?"})`));
    svg.append(g);
    marks += 1;
  }
  for (const [key, cls] of lines) {
    svg.append(el("svg:path", {class: `curve ${cls}`, d: pathOf(pts, key, x, y), "data-key": key}));
  }
  return marks;
}

function card(s) {
  let c = state.cards.get(s.id);
  if (c) return c;
  const root = el("article", {class: "card", "data-series": s.id});
  const title = el("h3");
  const rates = el("svg:svg", {class: "chart rates", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "mistake rates"});
  const margins = el("svg:svg", {class: "chart margins", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "margins"});
  const charts = el("div", {class: "charts"});
  charts.append(rates, margins);
  const stats = el("dl", {class: "stats"});
  const classes = el("section", {class: "classes"});
  root.append(title, charts, stats, classes);
  document.getElementById("series").append(root);
  document.getElementById("waiting")?.remove();
  c = {root, title, rates, margins, stats, classes};
  state.cards.set(s.id, c);
  return c;
}

function stat(dl, name, value, cls) {
  dl.append(el("dt", {}, name));
  dl.append(el("dd", cls ? {class: cls} : {}, value));
}

function renderSeries(s) {
  const c = card(s);
  const pts = state.points.get(s.id) || [];
  const events = state.events.filter((e) => e.series === s.id);
  const r = s.latest;
  const where = s.partition === null ? "worker " : (s.label.match(/^\d+$/) ? "partition " : "");
  c.title.replaceChildren(where + s.label + " ");
  c.title.append(el("span", {class: "dim"}, [s.model ? `model ${s.model}` : "", r.client_id || ""]
    .filter(Boolean).join(" · ")));
  if (s.drifts) c.title.append(el("span", {class: "alarms"}, `▲ ${s.drifts} drift alarm${s.drifts > 1 ? "s" : ""}`));
  c.root.dataset.marks = chart(c.rates, pts, [["mistake_rate", "en"], ["window_mistake_rate", "window"],
    ["ewma_mistake_rate", "ewma"]], events, true);
  chart(c.margins, pts, [["margin_min", "margin-min"], ["margin_mean", "margin-mean"]], events, false);
  c.root.dataset.points = pts.length;
  const dl = c.stats;
  dl.replaceChildren();
  stat(dl, "E_n", fmt(r.mistake_rate, 4));
  stat(dl, "window", fmt(r.window_mistake_rate, 4));
  stat(dl, "EWMA", fmt(r.ewma_mistake_rate, 4));
  stat(dl, "labeled", fmt(r.labeled));
  stat(dl, "mistakes", fmt(r.mistakes));
  stat(dl, "window mistakes", fmt(r.window_mistakes));
  const within = r.bound !== null && r.window_mistakes !== null && r.window_mistakes <= r.bound;
  stat(dl, s.classes ? "2(R/γ)²" : "(R/γ)²", r.bound === null ? "n/a" : sig(r.bound, 4), r.bound === null ? "" : (within ? "within" : "past"));
  stat(dl, "R", sig(r.R, 4));
  stat(dl, "γ", sig(r.gamma, 3));
  stat(dl, "margin min", sig(r.margin_min, 3));
  stat(dl, "margin mean", sig(r.margin_mean, 3));
  stat(dl, "ex/s", fmt(r.examples_per_s));
  stat(dl, "lag", fmt(r.lag));
  stat(dl, "drifts", fmt(s.drifts), s.drifts ? "alarm" : "");
  stat(dl, "last drift offset", fmt(s.last_drift_offset));
  if (r.pending_labels !== null) {
    stat(dl, "pending labels", fmt(r.pending_labels));
    stat(dl, "label joins", fmt(r.label_joins));
    stat(dl, "label expiries", fmt(r.label_expiries));
    stat(dl, "label delay", r.label_delay_s === null ? "n/a" : sig(r.label_delay_s, 3) + " s");
  }
  stat(dl, "dead letters", fmt(r.dead_letters));
  stat(dl, "record", ago(r.ts === null ? null : state.now - r.ts));
  renderClasses(c.classes, s.classes);
}

function share(v) {
  return v === null || v === undefined || !Number.isFinite(v) ? "n/a" : (100 * v).toFixed(1) + "%";
}

// A K-class series' classes (its newest record's, as /api/state keeps them): a row per class
// shown, numbered, with its rates, then its row of the confusion matrix (columns numbered as the
// rows: the served prediction), the other classes summed last. Every name is set as text.
function renderClasses(box, v) {
  box.replaceChildren();
  if (!v) return;
  const n = v.per_class.length, other = v.other !== null;
  let caption = `${fmt(v.count)} classes`;
  if (other) caption += ` (${n} with the most labeled examples shown, ${fmt(v.other.classes)} summed in "other")`;
  if (v.confusion) caption += "; rows: the true class, numbered columns: the served prediction";
  const table = el("table", {class: "classes"});
  table.append(el("caption", {}, caption));
  const head = el("tr");
  for (const h of ["#", "class", "labeled", "mistakes", "mistake rate", "predicted share"]) head.append(el("th", {}, h));
  const numbers = v.per_class.map((_, k) => String(k + 1)).concat(other ? ["other"] : []);
  const names = v.per_class.map((row) => row.class === null ? "?" : row.class).concat(other ? ["other classes"] : []);
  if (v.confusion) numbers.forEach((number, j) => head.append(el("th", {class: "served", title: names[j]}, number)));
  const thead = el("thead");
  thead.append(head);
  table.append(thead);
  const body = el("tbody");
  const rows = v.per_class.concat(other ? [v.other] : []);
  rows.forEach((row, k) => {
    const tr = el("tr", k < n ? {} : {class: "other"});
    const name = k < n ? (row.class === null ? "?" : (row.class === "" ? '""' : row.class)) : `other (${fmt(v.other.classes)})`;
    tr.append(el("td", {}, k < n ? numbers[k] : ""), el("td", {class: "name", title: name}, name),
      el("td", {}, fmt(row.labeled)), el("td", {}, fmt(row.mistakes)), el("td", {}, fmt(row.mistake_rate, 4)),
      el("td", {}, share(row.predicted_share)));
    if (v.confusion) {
      const line = v.confusion[k];
      const total = line.reduce((a, b) => a + (b || 0), 0);
      line.forEach((count, j) => {
        const td = el("td", {class: j === k ? "cell diagonal" : "cell", title: `${names[k]} served as ${names[j]}`},
          fmt(count));
        // shaded by the cell's share of its row (set through the CSSOM: the page allows no inline style)
        if (total && count) td.style.setProperty("--share", (count / total).toFixed(3));
        tr.append(td);
      });
    }
    body.append(tr);
  });
  table.append(body);
  box.append(table);
}

function renderGroup() {
  const g = state.group, box = document.getElementById("group");
  box.replaceChildren();
  if (!g) return;
  const figures = [
    [`partitions`, fmt(g.partitions)], ["labeled", fmt(g.labeled)], ["mistakes", fmt(g.mistakes)],
    ["E_n (Σ mistakes / Σ labeled)", fmt(g.mistake_rate, 4)], ["window (pooled)", fmt(g.window_mistake_rate, 4)],
    ["ex/s", fmt(g.examples_per_s)], ["lag", fmt(g.lag)], ["drift alarms", fmt(g.drifts)],
    ["dead letters", fmt(g.dead_letters)],
  ];
  if (state.series.some((s) => s.latest.pending_labels !== null)) figures.push(["pending labels", fmt(g.pending_labels)]);
  for (const [name, value] of figures) {
    const f = el("div", {class: "figure"});
    f.append(el("b", {}, value), el("span", {}, name));
    box.append(f);
  }
}

function renderEvents() {
  const body = document.querySelector("#events tbody");
  body.replaceChildren();
  const labels = new Map(state.series.map((s) => [s.id, s.label]));
  for (const e of state.events.slice(-20).reverse()) {
    const tr = el("tr");
    for (const v of [labels.get(e.series) || e.series, fmt(e.offset), fmt(e.labeled), e.stream || "mistakes",
      fmt(e.rate_before, 4), fmt(e.rate_after, 4), e.detector || "?", fmt(e.drifts), e.client_id || "",
      ago(e.ts === null ? null : state.now - e.ts)]) tr.append(el("td", {}, v));
    body.append(tr);
  }
}

function render() {
  document.getElementById("topic").textContent = state.topic ? `· ${state.topic}` : "";
  renderGroup();
  for (const s of state.series) renderSeries(s);
  renderEvents();
  let total = 0;
  for (const pts of state.points.values()) total += pts.length;
  document.body.dataset.updates = state.updates;
  document.body.dataset.points = total;
  document.body.dataset.version = state.version;
}

// A table as the page shows it: its caption, header and the text of each body row's cells.
function tableText(table) {
  if (!table) return null;
  const cells = (tr) => [...tr.children].map((td) => td.textContent);
  return {caption: table.caption?.textContent ?? "", head: cells(table.tHead.rows[0]),
    rows: [...table.tBodies[0].rows].map(cells)};
}

// What a test reads of the page: how often it took new data, the points held, each series' curves,
// its bound's name and its per-class table.
window.spDashboard = {
  snapshot() {
    const series = {};
    for (const [id, c] of state.cards) {
      series[id] = {
        points: Number(c.root.dataset.points), marks: Number(c.root.dataset.marks),
        lastLabeled: (state.points.get(id) || []).at(-1)?.labeled ?? null,
        paths: Object.fromEntries([...c.rates.querySelectorAll("path.curve")].map((p) => [p.dataset.key, p.getAttribute("d")])),
        bound: [...c.stats.querySelectorAll("dt")].find((dt) => dt.textContent.endsWith("(R/γ)²"))?.textContent ?? null,
        classes: tableText(c.classes.querySelector("table")),
      };
    }
    return {updates: state.updates, version: state.version, series,
      group: state.group, events: state.events.length, rows: document.querySelectorAll("#events tbody tr").length};
  },
};

poll();
