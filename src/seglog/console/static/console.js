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
    if (page.refresh) setTimeout(() => mine === drawing && route(true), REFRESH_MS);
    return;
  }
  view.replaceChildren(el("p", { class: "error", role: "alert", id: "error" }, `No page at ${location.hash}`));
  view.dataset.loaded = "none";
}

// --- pages ------------------------------------------------------------------------------------------

async function clusterPage() {
  const c = await api("cluster");
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
  ];
}
clusterPage.refresh = true;

async function topicsPage() {
  const { topics } = await api("topics");
  const rows = topics.map((t) => [
    topicLink(t.name),
    t.partitions,
    t.replicationFactor,
    t.underReplicated ? el("span", { class: "bad" }, t.underReplicated) : 0,
    t.internal ? "yes" : "",
  ]);
  const list = table("topics", ["Topic", "Partitions", "Replication", "Under-replicated", "Internal"], rows, [1, 2, 3]);
  topics.forEach((t, i) => (list.tBodies[0].rows[i].dataset.topic = t.name));
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

function createTopicForm() {
  const message = el("div", { id: "create-message", role: "status" });
  const confirmBox = el("div", { id: "create-confirm", class: "confirm", hidden: true });
  const form = el(
    "form",
    { id: "create-topic", class: "inline" },
    el("label", {}, "Name", el("input", { name: "name", required: true, pattern: "[a-zA-Z0-9._-]+" })),
    el("label", {}, "Partitions", el("input", { name: "partitions", type: "number", min: 1, placeholder: "default" })),
    el(
      "label",
      {},
      "Replication factor",
      el("input", { name: "replicationFactor", type: "number", min: 1, placeholder: "default" }),
    ),
    el("button", { type: "submit", id: "create-button" }, "Create topic…"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const asked = {
      name: form.elements.name.value.trim(),
      partitions: form.elements.partitions.value,
      replicationFactor: form.elements.replicationFactor.value,
    };
    const counts = `${asked.partitions || "the default number of"} partitions, replication factor ${
      asked.replicationFactor || "the default"
    }`;
    message.replaceChildren();
    confirmBox.replaceChildren(
      el("p", {}, `Create topic ${asked.name} with ${counts}?`),
      el("button", { type: "button", id: "create-confirm-button", onclick: () => create(asked) }, "Create"),
      " ",
      el("button", { type: "button", class: "secondary", onclick: () => (confirmBox.hidden = true) }, "Cancel"),
    );
    confirmBox.hidden = false;
  });

  async function create(asked) {
    confirmBox.hidden = true;
    try {
      const made = await api("topics", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(asked),
      });
      sessionStorage.setItem("created", `Created topic ${made.name}.`);
      route(); // the list again, with the new topic
    } catch (e) {
      message.replaceChildren(el("p", { class: "error", role: "alert", id: "create-error" }, e.message));
    }
  }

  const created = sessionStorage.getItem("created");
  sessionStorage.removeItem("created");
  if (created) message.append(el("p", { class: "ok", id: "create-done" }, created));
  return el("section", { class: "action" }, el("h2", {}, "Create a topic"), form, confirmBox, message);
}

async function topicPage(encoded) {
  const name = decodeURIComponent(encoded);
  const t = await api("topics/" + encodeURIComponent(name));
  const messages = (p) => `#/topics/${encodeURIComponent(name)}/messages?partition=${p}`;
  const partitions = t.partitionList.map((p) => [
    p.partition,
    p.leader < 0 ? el("span", { class: "bad" }, "none") : p.leader,
    p.replicas.join(", "),
    p.isr.length < p.replicas.length ? el("span", { class: "bad" }, p.isr.join(", ")) : p.isr.join(", "),
    orDash(p.logStartOffset),
    orDash(p.highWatermark),
    p.highWatermark === null ? "-" : p.highWatermark - p.logStartOffset,
    el("a", { href: messages(p.partition) }, "messages"),
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

async function messagesPage(encoded, query) {
  const name = decodeURIComponent(encoded);
  const asked = new URLSearchParams((query || "").slice(1));
  const partition = asked.get("partition") || "0";
  const offset = asked.get("offset") || "";
  const timestamp = asked.get("timestamp") || "";
  const limit = asked.get("limit") || "50";
  const wanted = new URLSearchParams({ partition, limit });
  if (offset) wanted.set("offset", offset);
  if (timestamp) wanted.set("timestamp", timestamp);
  const field = (label, key, value, attrs = {}) =>
    el("label", {}, label, el("input", { name: key, value, inputmode: "numeric", ...attrs }));
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
    el("button", { type: "submit" }, "Show"),
  );
  const here = `#/topics/${encodeURIComponent(name)}/messages?`;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const typed = (key) => form.elements[key].value.trim();
    const next = new URLSearchParams();
    for (const key of ["partition", "offset", "limit"]) if (typed(key)) next.set(key, typed(key));
    if (typed("time")) next.set("timestamp", typedTime(typed("time")));
    location.hash = here + next;
  });
  const heading = [el("h1", {}, "Messages of ", topicLink(name)), form];
  let m;
  try {
    m = await api(`topics/${encodeURIComponent(name)}/messages?${wanted}`);
  } catch (e) {
    return [...heading, el("p", { class: "error", role: "alert", id: "error" }, e.message)];
  }
  // a control record (a transaction's COMMIT or ABORT marker) is named, not shown as bytes
  const rows = m.messages.map((r) => [
    el("span", {}, r.offset, r.transactional ? el("span", { class: "muted", title: "written in a transaction" }, " txn") : null),
    time(r.timestamp),
    r.control ? "" : data(r.key),
    r.control ? el("span", { class: "muted control" }, `control record: ${r.control}`) : data(r.value),
    r.headers.map((h) => el("div", {}, `${h.key}: `, data(h.value))),
  ]);
  const last = m.messages.length ? m.messages[m.messages.length - 1].offset : null;
  const more =
    last !== null && last + 1 < m.highWatermark
      ? el("a", { id: "next-page", href: here + new URLSearchParams({ partition, offset: last + 1, limit }) }, "Next page")
      : null;
  const list = table("messages", ["Offset", "Timestamp", "Key", "Value", "Headers"], rows, [0]);
  for (const row of list.tBodies[0].rows) for (const i of [2, 3, 4]) row.cells[i].classList.add("data");
  return [
    ...heading,
    el("p", { class: "muted" }, `Partition ${m.partition}: log start ${m.logStartOffset}, high watermark ${m.highWatermark}; ${m.messages.length} shown.`),
    list,
    more,
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
