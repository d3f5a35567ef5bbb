// seglog console: one page, routed by the URL's hash, drawn from the JSON API under /api/.
// Every text from the cluster goes in through textContent (el below): a record holding
// <script> shows as text.
"use strict";

let consoleInfo = { readOnly: true, bootstrap: "" };
let drawing = 0; // the current route's number: an answer for a route left since is dropped
const REFRESH_MS = 5000; // how often the pages that follow the cluster ask again
const HISTORY_POINTS = 120; // of a chart: ten minutes of refreshes
const lagHistory = new Map(); // group id -> [{t, lag}], gathered while its page is open

// --- helpers ----------------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path, options = {}) {
  const answer = await fetch("/api/" + path, options);
  let body;
  try {
    body = await answer.json();
  } catch (e) {
    throw new Error(`${answer.status} ${answer.statusText}: the console's answer is not JSON`);
  }
  if (!answer.ok) throw new Error(body.error || `${answer.status} ${answer.statusText}`);
  return body;
}

function table(id, headings, rows, numeric = []) {
  const head = el("tr", {}, headings.map((h, i) => el("th", { class: numeric.includes(i) ? "num" : null }, h)));
  const body = rows.map((cells) =>
    el("tr", {}, cells.map((c, i) => el("td", { class: numeric.includes(i) ? "num" : null }, c))),
  );
  return el("table", { id }, el("thead", {}, head), el("tbody", {}, body));
}

function summary(pairs) {
  return el(
    "dl",
    { class: "summary" },
    pairs.map(([label, value, id, cls]) => el("div", {}, el("dt", {}, label), el("dd", { id, class: cls }, value))),
  );
}

// bytes as the API gives them: {text} when UTF-8, {hex} else, null for none
function data(value) {
  if (value === null || value === undefined) return el("span", { class: "null" }, "null");
  const cut = value.size ? el("span", { class: "muted" }, ` … (${value.size} bytes in all)`) : null;
  if ("text" in value) return el("span", {}, value.text, cut);
  return el("span", {}, el("span", { class: "hex" }, value.hex), cut);
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) (n /= 1024), i++;
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

// retention.ms as a person reads it; -1 is Kafka's "forever"
function duration(ms) {
  if (ms === null || ms === undefined) return "-";
  const n = Number(ms);
  if (n < 0) return "forever";
  for (const [unit, size] of [["d", 86400000], ["h", 3600000], ["min", 60000], ["s", 1000]]) {
    if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  }
  return `${n} ms`;
}

function orDash(value) {
  return value === null || value === undefined ? "-" : value;
}

function topicLink(name) {
  return el("a", { href: "#/topics/" + encodeURIComponent(name) }, name);
}

function time(ms) {
  if (ms === null || ms < 0) return "";
  const when = new Date(ms);
  return isNaN(when) ? String(ms) : when.toISOString();
}

// one more point {t, value} of a series kept in ``store`` under ``key``; the series, at most
// HISTORY_POINTS long
function remember(store, key, value) {
  const series = store.get(key) || [];
  series.push({ t: Date.now(), value });
  if (series.length > HISTORY_POINTS) series.shift();
  store.set(key, series);
  return series;
}

// a line chart of a series, drawn as SVG: time across, the value up from 0 to its highest
function chart(id, series) {
  const width = 600, height = 120, pad = 4;
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  const top = Math.max(1, ...series.map((p) => p.value));
  const first = series[0].t, span = Math.max(1, series[series.length - 1].t - first);
  const x = (p) => pad + ((p.t - first) / span) * (width - 2 * pad);
  const y = (p) => height - pad - (p.value / top) * (height - 2 * pad);
  const line = document.createElementNS(svgNS, "polyline");
  line.setAttribute("points", series.map((p) => `${x(p).toFixed(1)},${y(p).toFixed(1)}`).join(" "));
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "chart");
  svg.append(line);
  const last = series[series.length - 1].value;
  const seconds = Math.round(span / 1000);
  return el(
    "figure",
    { id, "data-points": series.length, "data-last": last },
    svg,
    el("figcaption", { class: "muted" }, `now ${last}, highest ${top}, over the last ${seconds} s (${series.length} points)`),
  );
}

// --- routing ----------------------------------------------------------------------------------------

const routes = [
  [/^#?\/?(cluster)?$/, clusterPage, "cluster"],
  [/^#\/topics$/, topicsPage, "topics"],
  [/^#\/topics\/([^/?]+)$/, topicPage, "topics"],
  [/^#\/topics\/([^/?]+)\/messages(\?.*)?$/, messagesPage, "topics"],
  [/^#\/topics\/([^/?]+)\/partitions\/(\d+)\/layout$/, layoutPage, "topics"],
  [/^#\/groups$/, groupsPage, "groups"],
  [/^#\/groups\/(.+)$/, groupPage, "groups"],
  [/^#\/transactions$/, transactionsPage, "transactions"],
  [/^#\/transactions\/(.+)$/, transactionPage, "transactions"],
];

// draws the page of the hash; a page that follows the cluster (refresh set) is drawn again every
// REFRESH_MS while it stays open
async function route(refreshing = false) {
  const mine = ++drawing;
  const view = document.getElementById("view");
  if (!refreshing) view.removeAttribute("data-loaded");
  for (const [pattern, page, tab] of routes) {
    const found = location.hash.match(pattern);
    if (!found) continue;
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.id === "nav-" + tab);
    let nodes;
    try {
      nodes = await page(...found.slice(1));
    } catch (e) {
      nodes = [el("h1", {}, "Error"), el("p", { class: "error", role: "alert", id: "error" }, e.message)];
    }
    if (mine !== drawing) return;
    view.replaceChildren(...nodes.filter((n) => n !== null)); // a page leaves out what does not apply as null
    view.dataset.loaded = page.name;
    if (page.refresh) refreshLater(mine, view);
    return;
  }
  view.replaceChildren(el("p", { class: "error", role: "alert", id: "error" }, `No page at ${location.hash}`));
  view.dataset.loaded = "none";
}

// the page drawn again after REFRESH_MS, unless another was drawn since; not while an action is
// being typed or confirmed there (drawing again would lose it): later
function refreshLater(mine, view) {
  setTimeout(() => {
    if (mine !== drawing) return;
    const typing =
      [...view.querySelectorAll("form.action input")].some((i) => i.value || i === document.activeElement) ||
      [...view.querySelectorAll("form.action select")].some((s) => s.selectedIndex > 0 || s === document.activeElement);
    const asking = [...view.querySelectorAll(".confirm")].some((box) => !box.hidden);
    if (typing || asking) refreshLater(mine, view);
    else route(true);
  }, REFRESH_MS);
}

// --- pages ------------------------------------------------------------------------------------------

async function clusterPage() {
  const [c, throughput] = await Promise.all([api("cluster"), api("throughput").catch((e) => ({ error: e.message }))]);
  return [
    el("h1", {}, "Cluster ", el("span", { class: "muted" }, c.clusterId || "")),
    summary([
      ["Brokers", c.brokers.length, "count-brokers"],
      ["Topics", c.topics, "count-topics"],
      ["Partitions", c.partitions, "count-partitions"],
      ["Under-replicated", c.underReplicated, "count-under-replicated", c.underReplicated ? "bad" : null],
      ["Offline", c.offline, "count-offline", c.offline ? "bad" : null],
      ["Controller", c.controller < 0 ? "none" : c.controller, "controller"],
    ]),
    el("h2", {}, "Brokers"),
    table(
      "brokers",
      ["ID", "Host", "Port", "Rack", "Controller", "Status"],
      c.brokers.map((b) => [
        b.id,
        b.host ?? "",
        b.port ?? "",
        b.rack ?? "",
        b.controller ? "yes" : "",
        b.alive ? "up" : el("span", { class: "bad" }, "down"),
      ]),
      [0, 2],
    ),
    el("h2", {}, "Throughput"),
    ...throughputCharts(throughput, c.brokers.filter((b) => b.alive).length),
  ];
}
clusterPage.refresh = true;

// bytes in and out and requests per second, summed over the seglog brokers this console reads
// (their counters, sampled by the console at each refresh); other brokers count them where
// Kafka's protocol cannot ask (JMX), which the page says
function throughputCharts(t, alive) {
  if (t.error) return [el("p", { class: "error", id: "throughput-error" }, t.error)];
  if (!t.seglogBrokers) {
    return [
      el(
        "p",
        { class: "muted", id: "throughput-none" },
        "No throughput: brokers count bytes and requests themselves, and Kafka's protocol has no request for " +
          "them (Kafka's brokers give them over JMX). seglog brokers give them on their HTTP port: start this " +
          "console with --broker-http, or open a broker's own console (seglog broker --http-port).",
      ),
    ];
  }
  const failed = t.sources.filter((s) => s.error);
  const notes = [
    el("p", { class: "muted", id: "throughput-sources" }, `Counters of ${t.sources.length - failed.length} of ${alive} live brokers (${t.sources.map((s) => s.source).join(", ")}), per second between the console's samples.`),
    ...failed.map((s) => el("p", { class: "error" }, `${s.source}: ${s.error}`)),
  ];
  if (!t.points.length) return [...notes, el("p", { class: "muted", id: "throughput-wait" }, "The first rates come at the next refresh.")];
  const series = (key) => t.points.map((p) => ({ t: p.timeMs, value: p[key] }));
  return [
    ...notes,
    el("div", { class: "charts" },
      el("div", {}, el("h3", {}, "Bytes in per second"), chart("chart-bytes-in", series("bytesIn"))),
      el("div", {}, el("h3", {}, "Bytes out per second"), chart("chart-bytes-out", series("bytesOut"))),
      el("div", {}, el("h3", {}, "Requests per second"), chart("chart-requests", series("requests"))),
    ),
  ];
}

async function topicsPage() {
  const { topics, metadata } = await api("topics");
  const rows = topics.map((t) => [
    topicLink(t.name),
    t.partitions,
    t.replicationFactor,
    t.underReplicated ? el("span", { class: "bad" }, t.underReplicated) : 0,
    "…",
    "…",
    "…",
    t.internal ? "yes" : "",
  ]);
  const headings = ["Topic", "Partitions", "Replication", "Under-replicated", "Size", "Retention", "Cleanup", "Internal"];
  const list = table("topics", headings, rows, [1, 2, 3, 4, 5]);
  topics.forEach((t, i) => (list.tBodies[0].rows[i].dataset.topic = t.name));
  fillDetails(list, metadata);
  const filter = el("input", {
    id: "topic-filter",
    type: "search",
    placeholder: "Filter topics",
    "aria-label": "Filter topics",
    oninput: (e) => {
      const wanted = e.target.value.toLowerCase();
      for (const row of list.tBodies[0].rows) row.hidden = !row.dataset.topic.toLowerCase().includes(wanted);
    },
  });
  return [
    el("h1", {}, "Topics ", el("span", { class: "muted" }, `(${topics.length})`)),
    consoleInfo.readOnly ? null : createTopicForm(),
    el("p", {}, filter),
    list,
  ];
}

// the topics' size, retention and cleanup policy, asked after the list is drawn: on a large
// cluster they are the slow part of the list (DescribeLogDirs of every broker, DescribeConfigs of
// every topic); naming the list's Metadata (``metadata``), which they reuse rather than ask again
async function fillDetails(list, metadata) {
  const cells = (row) => [row.cells[4], row.cells[5], row.cells[6]];
  let topics;
  try {
    ({ topics } = await api(`topics?details=true&after=${metadata}`));
  } catch (e) {
    for (const row of list.tBodies[0].rows) for (const cell of cells(row)) cell.textContent = "?";
    return;
  }
  const byName = new Map(topics.map((t) => [t.name, t]));
  for (const row of list.tBodies[0].rows) {
    const t = byName.get(row.dataset.topic) || {};
    const shown = [bytes(t.size), duration(t.retentionMs), t.cleanupPolicy ?? "-"];
    cells(row).forEach((cell, i) => (cell.textContent = shown[i]));
  }
}

// an action of the console (absent from a read-only one): a form, then a question to confirm,
// then the request; the broker's refusal is shown under the form, a success after the page is
// drawn again. Its elements' ids start with ``id``: id (the form), id-button, id-confirm,
// id-confirm-button, id-error, id-done.
function actionForm({ id, title, fields, button, question, run }) {
  const message = el("div", { role: "status" });
  const confirmBox = el("div", { id: `${id}-confirm`, class: "confirm", hidden: true });
  const form = el(
    "form",
    { id, class: "inline action" },
    fields.map(([label, name, attrs]) => el("label", {}, label, field(name, attrs))),
    el("button", { type: "submit", id: `${id}-button` }, button),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(fields.map(([, name]) => [name, form.elements[name].value.trim()]));
    message.replaceChildren();
    confirmBox.replaceChildren(
      el("p", {}, question(values)),
      el("button", { type: "button", id: `${id}-confirm-button`, onclick: () => act(values) }, "Confirm"),
      " ",
      el("button", { type: "button", class: "secondary", onclick: () => (confirmBox.hidden = true) }, "Cancel"),
    );
    confirmBox.hidden = false;
  });

  async function act(values) {
    confirmBox.hidden = true;
    try {
      sessionStorage.setItem(`done:${id}`, await run(values));
      form.reset();
      route(); // the page again, with what changed
    } catch (e) {
      message.replaceChildren(el("p", { class: "error", role: "alert", id: `${id}-error` }, e.message));
    }
  }

  const done = sessionStorage.getItem(`done:${id}`);
  sessionStorage.removeItem(`done:${id}`);
  if (done) message.append(el("p", { class: "ok", id: `${id}-done` }, done));
  return el("section", { class: "action" }, el("h2", {}, title), form, confirmBox, message);
}

// an action's field: a choice among ``options`` ([value, label]), else an input
function field(name, { options, ...attrs }) {
  if (!options) return el("input", { name, ...attrs });
  return el("select", { name, ...attrs }, options.map(([value, label]) => el("option", { value }, label)));
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

function createTopicForm() {
  return actionForm({
    id: "create-topic",
    title: "Create a topic",
    fields: [
      ["Name", "name", { required: true, pattern: "[a-zA-Z0-9._-]+" }],
      ["Partitions", "partitions", { type: "number", min: 1, placeholder: "default" }],
      ["Replication factor", "replicationFactor", { type: "number", min: 1, placeholder: "default" }],
    ],
    button: "Create topic…",
    question: (v) =>
      `Create topic ${v.name} with ${v.partitions || "the default number of"} partitions, replication factor ${
        v.replicationFactor || "the default"
      }?`,
    run: async (v) => `Created topic ${(await post("topics", v)).name}.`,
  });
}

function topicActions(name, partitions) {
  const path = "topics/" + encodeURIComponent(name);
  const grow = actionForm({
    id: "add-partitions",
    title: "Add partitions",
    fields: [["New number of partitions", "count", { type: "number", min: 1, required: true }]],
    button: "Add partitions…",
    question: (v) => `Grow topic ${name} from ${partitions} to ${v.count} partitions? Partitions cannot be removed.`,
    run: async (v) => `Topic ${name} has ${(await post(path + "/partitions", v)).partitions} partitions.`,
  });
  const alter = actionForm({
    id: "alter-config",
    title: "Change a config",
    fields: [
      ["Name", "key", { required: true, placeholder: "retention.ms" }],
      ["Value", "value", { placeholder: "empty: the broker's" }],
    ],
    button: "Change…",
    question: (v) =>
      v.value
        ? `Set ${v.key} = ${v.value} on topic ${name}?`
        : `Remove topic ${name}'s own ${v.key}, for the broker's value?`,
    run: async (v) => {
      await post(path + "/configs", v.value ? { set: { [v.key]: v.value } } : { delete: [v.key] });
      return v.value ? `Set ${v.key} = ${v.value}.` : `Removed the topic's own ${v.key}.`;
    },
  });
  const trim = actionForm({
    id: "delete-records",
    title: "Delete records",
    fields: [
      ["Partition", "partition", { type: "number", min: 0, required: true }],
      ["Below offset", "offset", { type: "number", min: -1, required: true, placeholder: "-1: high watermark" }],
    ],
    button: "Delete records…",
    question: (v) =>
      `Delete the records of ${name}-${v.partition} below offset ${v.offset === "-1" ? "its high watermark" : v.offset}? ` +
      "They cannot be brought back.",
    run: async (v) => {
      const done = await post(path + "/delete-records", v);
      return `Partition ${done.partition} of ${name} starts at offset ${done.lowWatermark}.`;
    },
  });
  return [grow, alter, trim];
}

function resetOffsetsForm(id) {
  const to = { earliest: "the log start", latest: "the high watermark" };
  return actionForm({
    id: "reset-offsets",
    title: "Reset offsets",
    fields: [
      ["To", "to", { options: [["earliest", "earliest"], ["latest", "latest"], ["offset", "an offset"], ["timestamp", "a time"]] }],
      ["Offset or time", "at", { placeholder: "123, or 2026-12-06T23:05:00Z" }],
      ["Topic", "topic", { placeholder: "every committed topic" }],
    ],
    button: "Reset offsets…",
    question: (v) =>
      `Reset group ${id}'s offsets of ${v.topic ? "topic " + v.topic : "every topic it committed"} to ` +
      `${to[v.to] || `${v.to} ${v.at}`}? Its consumers will read from there.`,
    run: async (v) => {
      const body = { to: v.to, topic: v.topic || null };
      if (v.to === "offset") body.offset = v.at;
      if (v.to === "timestamp") body.timestamp = typedTime(v.at);
      const done = await post(`groups/${encodeURIComponent(id)}/reset-offsets`, body);
      return `Reset ${done.offsets.length} offsets of group ${id}.`;
    },
  });
}

async function topicPage(encoded) {
  const name = decodeURIComponent(encoded);
  const t = await api("topics/" + encodeURIComponent(name));
  const messages = (p) => `#/topics/${encodeURIComponent(name)}/messages?partition=${p}`;
  const layout = (p) => `#/topics/${encodeURIComponent(name)}/partitions/${p}/layout`;
  const partitions = t.partitionList.map((p) => [
    p.partition,
    p.leader < 0 ? el("span", { class: "bad" }, "none") : p.leader,
    p.replicas.join(", "),
    p.isr.length < p.replicas.length ? el("span", { class: "bad" }, p.isr.join(", ")) : p.isr.join(", "),
    orDash(p.logStartOffset),
    orDash(p.highWatermark),
    p.highWatermark === null ? "-" : p.highWatermark - p.logStartOffset,
    el("span", {}, el("a", { href: messages(p.partition) }, "messages"), " · ", el("a", { href: layout(p.partition) }, "layout")),
  ]);
  const configs = t.configs.map((c) => [c.name, c.sensitive ? el("span", { class: "null" }, "(sensitive)") : c.value ?? "", c.source]);
  const configTable = table("configs", ["Name", "Value", "Source"], configs);
  t.configs.forEach((c, i) => (configTable.tBodies[0].rows[i].dataset.config = c.name));
  return [
    el("h1", {}, "Topic ", el("span", { id: "topic-name" }, name)),
    summary([
      ["Partitions", t.partitions],
      ["Replication factor", t.replicationFactor],
      ["Under-replicated", t.underReplicated, null, t.underReplicated ? "bad" : null],
      ["Internal", t.internal ? "yes" : "no"],
    ]),
    el("h2", {}, "Partitions"),
    table(
      "partitions",
      ["Partition", "Leader", "Replicas", "ISR", "Log start", "High watermark", "Messages", ""],
      partitions,
      [0, 4, 5, 6],
    ),
    el("h2", {}, "Configs"),
    configTable,
    ...(consoleInfo.readOnly ? [] : topicActions(name, t.partitions)),
  ];
}
topicPage.refresh = true;

// a time typed in: milliseconds as they are, else a date the browser reads (2026-12-06T23:05:00Z);
// else the text itself, for the API to say what it expects
function typedTime(text) {
  if (/^\d+$/.test(text)) return text;
  const ms = Date.parse(text);
  return isNaN(ms) ? text : String(ms);
}

// bytes as the view asks: "json" pretty-prints a text that parses as a JSON object or array (any
// other text as it is), "hex" shows a text's UTF-8 bytes too; else data()'s text or hex
function viewed(value, view) {
  if (value === null || value === undefined || !("text" in value)) return data(value);
  if (view === "hex") {
    const hex = [...new TextEncoder().encode(value.text)].map((b) => b.toString(16).padStart(2, "0")).join("");
    return data({ hex, size: value.size });
  }
  if (view === "json") {
    let parsed;
    try {
      parsed = JSON.parse(value.text);
    } catch (e) {
      return data(value);
    }
    if (parsed !== null && typeof parsed === "object") return el("pre", { class: "json" }, JSON.stringify(parsed, null, 2));
  }
  return data(value);
}

const VIEWS = [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]];

async function messagesPage(encoded, query) {
  const name = decodeURIComponent(encoded);
  const asked = new URLSearchParams((query || "").slice(1));
  const partition = asked.get("partition") || "0";
  const offset = asked.get("offset") || "";
  const timestamp = asked.get("timestamp") || "";
  const limit = asked.get("limit") || "50";
  const filter = asked.get("filter") || "";
  const view = VIEWS.some(([v]) => v === asked.get("view")) ? asked.get("view") : "text";
  const wanted = new URLSearchParams({ partition, limit });
  if (offset) wanted.set("offset", offset);
  if (timestamp) wanted.set("timestamp", timestamp);
  if (filter) wanted.set("filter", filter);
  const field = (label, key, value, attrs = {}) =>
    el("label", {}, label, el("input", { name: key, value, inputmode: "numeric", ...attrs }));
  const views = el("select", { name: "view", "aria-label": "View" }, VIEWS.map(([v, label]) => el("option", { value: v, selected: v === view }, label)));
  const form = el(
    "form",
    { id: "browse", class: "inline" },
    field("Partition", "partition", partition, { size: 6 }),
    field("From offset", "offset", offset, { placeholder: "log start", size: 12 }),
    field("or from time", "time", /^\d+$/.test(timestamp) ? time(Number(timestamp)) : timestamp, {
      placeholder: "2026-12-06T23:05:00Z or ms",
      inputmode: "text",
      size: 24,
    }),
    field("Limit", "limit", limit, { size: 5 }),
    field("Key or value holds", "filter", filter, { inputmode: "text", size: 16, type: "search" }),
    el("label", {}, "View", views),
    el("button", { type: "submit" }, "Show"),
  );
  const here = `#/topics/${encodeURIComponent(name)}/messages?`;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const typed = (key) => form.elements[key].value.trim();
    const next = new URLSearchParams();
    for (const key of ["partition", "offset", "limit", "filter"]) if (typed(key)) next.set(key, typed(key));
    if (typed("time")) next.set("timestamp", typedTime(typed("time")));
    if (typed("view") !== "text") next.set("view", typed("view"));
    location.hash = here + next;
  });
  const heading = [el("h1", {}, "Messages of ", topicLink(name)), form];
  let m;
  try {
    m = await api(`topics/${encodeURIComponent(name)}/messages?${wanted}`);
  } catch (e) {
    return [...heading, el("p", { class: "error", role: "alert", id: "error" }, e.message)];
  }
  // a control record (a transaction's COMMIT or ABORT marker) is named, not shown as bytes; a
  // record of an aborted transaction is marked (a read_committed consumer never sees it)
  const rows = m.messages.map((r) => [
    el(
      "span",
      {},
      r.offset,
      r.transactional ? el("span", { class: "muted", title: "written in a transaction" }, " txn") : null,
      r.aborted ? el("span", { class: "bad aborted", title: "its transaction aborted" }, " aborted") : null,
    ),
    time(r.timestamp),
    r.control ? "" : viewed(r.key, view),
    r.control ? el("span", { class: "muted control" }, `control record: ${r.control}`) : viewed(r.value, view),
    r.headers.map((h) => el("div", {}, `${h.key}: `, data(h.value))),
  ]);
  const more =
    m.nextOffset < m.highWatermark
      ? el("a", { id: "next-page", href: here + nextQuery(asked, m.nextOffset) }, "Next page")
      : null;
  const list = table("messages", ["Offset", "Timestamp", "Key", "Value", "Headers"], rows, [0]);
  m.messages.forEach((r, i) => {
    const row = list.tBodies[0].rows[i];
    for (const cell of [2, 3, 4]) row.cells[cell].classList.add("data");
    if (r.aborted) row.classList.add("aborted");
    if (r.control) row.classList.add("control");
  });
  const looked = m.filter ? ` ${m.scanned} records looked through for "${m.filter}".` : "";
  return [
    ...heading,
    el("p", { class: "muted", id: "messages-summary" }, `Partition ${m.partition}: log start ${m.logStartOffset}, high watermark ${m.highWatermark}; ${m.messages.length} shown.${looked}`),
    list,
    more,
  ];
}

// the query of the page after this one: the same, from ``offset`` (not from a time)
function nextQuery(asked, offset) {
  const next = new URLSearchParams(asked);
  next.delete("timestamp");
  next.set("offset", offset);
  return next;
}

// a partition's segments on disk (seglog brokers only), drawn to scale by their bytes; a
// segment clicked shows its index entries below. Log start and the cleaner checkpoint are
// marked where their offsets fall (between a segment's base offset and the next one's).
async function layoutPage(encoded, partition) {
  const name = decodeURIComponent(encoded);
  const path = `topics/${encodeURIComponent(name)}/partitions/${partition}`;
  const l = await api(path + "/layout");
  const segments = l.segments;
  const entries = el("div", { id: "segment-indexes" });
  const show = async (s) => {
    for (const node of document.querySelectorAll(".segment.selected")) node.classList.remove("selected");
    for (const node of document.querySelectorAll(`[data-base="${s.baseOffset}"]`)) node.classList.add("selected");
    entries.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    try {
      const found = await api(`${path}/segments/${s.baseOffset}`);
      entries.replaceChildren(...indexTables(found).filter((n) => n !== null));
    } catch (e) {
      entries.replaceChildren(el("p", { class: "error", role: "alert", id: "segment-error" }, e.message));
    }
  };
  // where an offset falls along the bar: inside the segment holding it, in proportion to its offsets
  const marker = (offset, id, label) => {
    if (offset === null || offset === undefined) return null;
    let i = segments.findIndex((s, j) => offset >= s.baseOffset && (j + 1 === segments.length || offset < segments[j + 1].baseOffset));
    if (i < 0) return null;
    const s = segments[i];
    const next = i + 1 < segments.length ? segments[i + 1].baseOffset : Math.max(l.logEndOffset, s.baseOffset + 1);
    const before = segments.slice(0, i).reduce((sum, x) => sum + x.size, 0);
    const within = next > s.baseOffset ? (offset - s.baseOffset) / (next - s.baseOffset) : 0;
    const at = l.size ? (before + within * s.size) / l.size : 0;
    const node = el("div", { class: "marker", id, title: `${label} ${offset}` }, el("span", {}, `${label} ${offset}`));
    node.style.left = `${(Math.min(1, at) * 100).toFixed(2)}%`;
    return node;
  };
  const bar = el(
    "div",
    { class: "segments", id: "segment-bar" },
    segments.map((s) => {
      const node = el(
        "button",
        {
          type: "button",
          class: "segment" + (s.active ? " active" : ""),
          "data-base": s.baseOffset,
          title: `segment ${s.baseOffset}: ${bytes(s.size)}`,
          onclick: () => show(s),
        },
        String(s.baseOffset),
      );
      node.style.flexGrow = String(Math.max(s.size, 1));
      return node;
    }),
  );
  const track = el("div", { class: "track" }, bar, marker(l.logStartOffset, "mark-log-start", "log start"), marker(l.cleanerCheckpoint, "mark-cleaner", "cleaner checkpoint"));
  const rows = segments.map((s) => [
    el("a", { href: "#" + location.hash.slice(1), "data-base": s.baseOffset, onclick: (e) => (e.preventDefault(), show(s)) }, String(s.baseOffset)),
    bytes(s.size),
    time(s.firstTimestamp ?? -1),
    time(s.lastTimestamp ?? -1),
    s.offsetIndexEntries,
    s.timeIndexEntries,
    s.active ? "active" : "",
  ]);
  return [
    el("h1", {}, "Layout of ", topicLink(name), ` partition ${partition}`),
    summary([
      ["Broker", l.broker, "layout-broker"],
      ["Segments", segments.length, "layout-segments"],
      ["Size", bytes(l.size), "layout-size"],
      ["Log start", l.logStartOffset, "layout-log-start"],
      ["High watermark", l.highWatermark, "layout-high-watermark"],
      ["Log end", l.logEndOffset, "layout-log-end"],
      ["Cleaner checkpoint", l.cleanerCheckpoint ?? "none", "layout-cleaner"],
    ]),
    el("p", { class: "muted" }, `Its segments in ${l.dir}, each as wide as its bytes; click one for its index entries.`),
    track,
    table("segments", ["Base offset", "Size", "First timestamp", "Last timestamp", "Offset index", "Time index", ""], rows, [0, 1, 4, 5]),
    entries,
  ];
}

function indexTables(found) {
  const more = (shown, all) => (shown < all ? el("p", { class: "muted" }, `the first ${shown} of ${all} entries`) : null);
  return [
    el("h2", {}, `Segment ${found.baseOffset}: offset index (${found.offsetIndexEntries} entries)`),
    table("offset-index", ["Offset", "Position"], found.offsetIndex.map((e) => [e.offset, e.position]), [0, 1]),
    more(found.offsetIndex.length, found.offsetIndexEntries),
    el("h2", {}, `Time index (${found.timeIndexEntries} entries)`),
    table("time-index", ["Timestamp", "Offset"], found.timeIndex.map((e) => [`${time(e.timestamp)} (${e.timestamp})`, e.offset]), [1]),
    more(found.timeIndex.length, found.timeIndexEntries),
  ];
}

async function groupsPage() {
  const { groups } = await api("groups");
  const rows = groups.map((g) => [
    el("a", { href: "#/groups/" + encodeURIComponent(g.id) }, g.id),
    g.state,
    g.members,
    g.totalLag,
  ]);
  return [
    el("h1", {}, "Consumer groups ", el("span", { class: "muted" }, `(${groups.length})`)),
    table("groups", ["Group", "State", "Members", "Total lag"], rows, [2, 3]),
  ];
}
groupsPage.refresh = true;

async function groupPage(encoded) {
  const id = decodeURIComponent(encoded);
  const g = await api("groups/" + encodeURIComponent(id));
  const members = g.members.map((m) => [
    m.memberId,
    m.clientId,
    m.host,
    m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", "),
  ]);
  const offsets = g.offsets.map((o) => [
    topicLink(o.topic),
    o.partition,
    o.committed ?? "-",
    o.highWatermark,
    o.lag ?? "-",
    o.member ?? "-",
  ]);
  return [
    el("h1", {}, "Consumer group ", el("span", { id: "group-id" }, id)),
    summary([
      ["State", g.state, "group-state"],
      ["Protocol", g.protocol || "-"],
      ["Members", g.members.length],
      ["Total lag", g.totalLag, "total-lag"],
    ]),
    el("h2", {}, "Total lag while this page is open"),
    chart("lag-chart", remember(lagHistory, id, g.totalLag)),
    el("h2", {}, "Members"),
    table("members", ["Member", "Client", "Host", "Assignment"], members),
    el("h2", {}, "Offsets and lag"),
    table("offsets", ["Topic", "Partition", "Committed", "High watermark", "Lag", "Member"], offsets, [1, 2, 3, 4]),
    consoleInfo.readOnly ? null : resetOffsetsForm(id),
  ];
}
groupPage.refresh = true;

async function transactionsPage() {
  const { transactions } = await api("transactions");
  const rows = transactions.map((t) => [
    el("a", { href: "#/transactions/" + encodeURIComponent(t.transactionalId) }, t.transactionalId),
    t.state,
    t.producerId,
    t.coordinator,
  ]);
  return [
    el("h1", {}, "Transactions ", el("span", { class: "muted" }, `(${transactions.length})`)),
    table("transactions", ["Transactional id", "State", "Producer id", "Coordinator"], rows, [2, 3]),
  ];
}
transactionsPage.refresh = true;

async function transactionPage(encoded) {
  const id = decodeURIComponent(encoded);
  const t = await api("transactions/" + encodeURIComponent(id));
  const partitions = t.partitions.map((p) => [topicLink(p.topic), p.partition]);
  return [
    el("h1", {}, "Transaction ", el("span", { id: "transactional-id" }, id)),
    summary([
      ["State", t.state, "transaction-state"],
      ["Producer id", t.producerId],
      ["Producer epoch", t.producerEpoch],
      ["Coordinator", t.coordinator],
      ["Started", t.startTimeMs === null ? "-" : time(t.startTimeMs)],
      ["Timeout", `${t.timeoutMs} ms`],
    ]),
    el("h2", {}, "Partitions in the transaction"),
    table("transaction-partitions", ["Topic", "Partition"], partitions, [1]),
  ];
}
transactionPage.refresh = true;

// --- start ------------------------------------------------------------------------------------------

async function start() {
  try {
    consoleInfo = await api("console");
    document.getElementById("bootstrap").textContent = consoleInfo.bootstrap + (consoleInfo.readOnly ? " · read-only" : "");
  } catch (e) {
    // the console's own answer failed: every page will say why as it asks its own
  }
  window.addEventListener("hashchange", () => route());
  route();
}

start();
