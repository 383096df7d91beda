// contextengine inspector: a read-only view of the sidecar's sessions.
//
// Plain JavaScript, no framework, no build step, nothing loaded from elsewhere (the page's
// Content-Security-Policy is `default-src 'self'`). Every string that comes from the sidecar goes
// into the DOM through textContent or an attribute, never through innerHTML.
"use strict";

const API = "api/";
const TOKEN_KEY = "contextengine.inspector.token";

const $ = (id) => document.getElementById(id);

/** An element with a class, a text and children (strings become text nodes). */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  if (props.class) node.className = props.class;
  if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
  if (props.title) node.title = String(props.title);
  if (props.data) for (const [k, v] of Object.entries(props.data)) node.dataset[k] = String(v);
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

const state = {
  app: null,
  user: null,
  session: null,
  view: null, // the session view (events, agents, branches)
  stream: null, // AbortController of the live stream
  lastSequence: 0,
  refreshing: false, // a refresh is scheduled or running
  dirty: false, // events arrived since the running refresh started
  open: new Set(), // "log:<sequence>" / "context:<index>" of the rows showing their JSON
};

// --------------------------------------------------------------------------- fetching and auth

class ApiError extends Error {
  constructor(status, body) {
    const detail = body && body.error ? body.error : {};
    super(detail.message || `HTTP ${status}`);
    this.status = status;
    this.reason = detail.reason || "";
  }
}

function authHeaders() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function api(path, params = {}) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") query.set(k, v);
  const url = API + path + (query.toString() ? `?${query}` : "");
  const response = await fetch(url, { headers: authHeaders() });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, body);
    if (response.status === 401 || response.status === 403) askForToken(error);
    throw error;
  }
  return body;
}

function askForToken(error) {
  $("auth-reason").textContent = `${error.status}: ${error.message}`;
  $("auth-form").hidden = false;
  $("layout").hidden = error.status === 401;
  $("token").focus();
}

function setStatus(text, isError = false) {
  const node = $("status");
  node.textContent = text;
  node.classList.toggle("error", isError);
}

function seg(value) {
  return encodeURIComponent(value);
}

function sessionPath() {
  return `apps/${seg(state.app)}/users/${seg(state.user)}/sessions/${seg(state.session)}`;
}

// --------------------------------------------------------------------------- the location hash

function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  return {
    app: params.get("app"),
    user: params.get("user"),
    session: params.get("session"),
    agent: params.get("agent"),
  };
}

function writeHash() {
  const params = new URLSearchParams();
  if (state.app) params.set("app", state.app);
  if (state.user) params.set("user", state.user);
  if (state.session) params.set("session", state.session);
  const agent = $("agent").value;
  if (state.session && agent) params.set("agent", agent);
  history.replaceState(null, "", `#${params}`);
}

// --------------------------------------------------------------------------- apps, users, sessions

/**
 * Fills a pick list page by page: ``fetchPage(cursor)`` gives ``{items, next}`` (``next``: the
 * cursor of the following page, or null); a "more" entry loads the next page.
 */
async function fillPick(list, fetchPage, selected, label, onPick) {
  list.replaceChildren();
  const add = async (cursor) => {
    const { items, next } = await fetchPage(cursor);
    for (const item of items) {
      const [value, note] = label(item);
      const li = el("li", { data: { value } }, value, note ? el("span", { class: "muted", text: ` ${note}` }) : null);
      if (value === selected) li.classList.add("selected");
      li.addEventListener("click", () => onPick(value).catch((error) => setStatus(error.message, true)));
      list.append(li);
    }
    if (next) {
      const more = el("li", { class: "muted more", text: "more…" });
      more.addEventListener("click", () => {
        more.remove();
        add(next).catch((error) => setStatus(error.message, true));
      });
      list.append(more);
    }
    if (!list.children.length) list.append(el("li", { class: "muted", text: "none" }));
  };
  await add(null);
}

async function loadApps() {
  await fillPick(
    $("apps"),
    async (after) => {
      const body = await api("apps", { after });
      return { items: body.apps, next: body.next_after };
    },
    state.app,
    (a) => [a, ""],
    pickApp,
  );
}

async function pickApp(app, keep = false) {
  state.app = app;
  if (!keep) {
    state.user = null;
    state.session = null;
  }
  for (const li of $("apps").children) li.classList.toggle("selected", li.dataset.value === app);
  $("sessions").replaceChildren();
  await fillPick(
    $("users"),
    async (after) => {
      const body = await api(`apps/${seg(app)}/users`, { after });
      return { items: body.users, next: body.next_after };
    },
    state.user,
    (u) => [u, ""],
    (u) => pickUser(u),
  );
  writeHash();
}

async function pickUser(user, keep = false) {
  state.user = user;
  if (!keep) state.session = null;
  for (const li of $("users").children) li.classList.toggle("selected", li.dataset.value === user);
  const app = state.app;
  await fillPick(
    $("sessions"),
    async (page_token) => {
      const body = await api(`apps/${seg(app)}/users/${seg(user)}/sessions`, { page_token });
      return { items: body.sessions, next: body.next_page_token || null };
    },
    state.session,
    (s) => [s.id, `${s.last_sequence} events`],
    (s) => openSession(s),
  );
  writeHash();
}

// --------------------------------------------------------------------------- one session

async function openSession(session, agent = null) {
  state.session = session;
  state.open.clear();
  state.lastSequence = 0;
  for (const li of $("sessions").children) li.classList.toggle("selected", li.dataset.value === session);
  $("session").hidden = false;
  $("session-title").textContent = `${state.app} / ${state.user} / ${session}`;
  await loadSession(agent);
  startLive();
}

function fillSelect(select, values, noneLabel, wanted) {
  const previous = wanted !== null && wanted !== undefined ? wanted : select.value;
  select.replaceChildren(el("option", { text: noneLabel }));
  select.firstChild.value = "";
  for (const value of values) {
    const option = el("option", { text: value });
    option.value = value;
    select.append(option);
  }
  select.value = values.includes(previous) ? previous : values.length ? values[0] : "";
  if (wanted === "" || (noneLabel === "(all branches)" && !values.includes(previous))) select.value = "";
}

async function loadSession(agent = null) {
  const view = await api(sessionPath());
  state.view = view;
  state.lastSequence = Math.max(state.lastSequence, view.last_sequence);
  fillSelect($("agent"), view.agents, "(no agent)", agent);
  fillSelect($("branch"), view.branches, "(all branches)", null);
  $("log-count").textContent = view.events_truncated
    ? `(newest ${view.events.length} of ${view.events_total})`
    : `(${view.events_total} events, tokens by ${view.token_counter})`;
  $("state").textContent = JSON.stringify(view.state, null, 2);
  renderTimeline(view);
  await loadAgentViews();
  writeHash();
}

function contextParams() {
  return {
    agent: $("agent").value,
    branch: $("branch").value,
    provider: $("provider").value,
    model: $("model").value.trim(),
  };
}

async function loadAgentViews() {
  const params = contextParams();
  const [context, tokens] = await Promise.all([
    api(`${sessionPath()}/context`, params),
    api(`${sessionPath()}/tokens`, { ...params, points: 200 }),
  ]);
  renderContext(context);
  renderPlot(tokens);
  setStatus(`loaded up to event #${context.last_sequence}`);
}

// --------------------------------------------------------------------------- rendering

function renderParts(parts) {
  const box = el("div", { class: "parts" });
  for (const part of parts) {
    let node;
    switch (part.kind) {
      case "text":
        node = el("div", { class: "part", text: part.text });
        break;
      case "thought":
        node = el("div", { class: "part muted" }, el("span", { class: "label", text: "thought" }), part.text);
        break;
      case "function_call":
        node = el("div", { class: "part mono" }, el("span", { class: "label", text: "call" }), `${part.name}(${part.args})`);
        break;
      case "function_response":
        node = el("div", { class: "part mono" }, el("span", { class: "label", text: "response" }), `${part.name} → ${part.response}`);
        break;
      case "blob":
        node = el("div", { class: "part muted", text: `[${part.mime_type}, ${part.bytes} bytes]` });
        break;
      case "file":
        node = el("div", { class: "part muted", text: `[file ${part.uri}]` });
        break;
      default:
        node = el("div", { class: "part muted", text: `[${part.kind}]` });
    }
    box.append(node);
  }
  return box;
}

function rawBox(raw) {
  return el("pre", { class: "raw", text: JSON.stringify(raw, null, 2) });
}

function toggleOpen(li, key) {
  if (state.open.has(key)) li.classList.add("open"); // kept across live refreshes
  li.addEventListener("click", (event) => {
    if (event.target.closest("pre.raw")) return; // selecting JSON text keeps it open
    if (li.classList.toggle("open")) state.open.add(key);
    else state.open.delete(key);
  });
}

function highlight(sequences) {
  const wanted = new Set(sequences.map(String));
  for (const li of $("timeline").children) li.classList.toggle("highlight", wanted.has(li.dataset.sequence));
}

function renderTimeline(view) {
  const list = $("timeline");
  list.replaceChildren();
  for (const event of view.events) {
    const li = el("li", { data: { sequence: event.sequence, kind: event.kind } });
    li.classList.add(`kind-${event.kind}`);
    if (event.covered_by !== null || event.hidden_by !== null) li.classList.add("covered");
    if (event.rewound) li.classList.add("rewound");
    if (event.pinned) li.classList.add("pinned");
    if (event.summary) li.classList.add("summary-row");
    const head = el(
      "div",
      { class: "row-head" },
      el("span", { class: "seq", text: `#${event.sequence}` }),
      el("span", { class: "author", text: event.author || "(no author)" }),
      el("span", { class: `kind ${event.kind}`, text: event.kind.replace("_", " ") }),
      event.branch ? el("span", { class: "muted", text: event.branch }) : null,
      event.pinned ? el("span", { class: "pin", text: "pinned", title: "never compacted" }) : null,
      event.pinned_by !== null
        ? el("span", { class: "pin", text: `pinned by #${event.pinned_by}`, title: "pinned by the model (context_pin)" })
        : null,
      el("span", { class: "tokens", text: `${event.tokens} tok` }),
    );
    li.append(head);
    if (event.summary) {
      const covers = event.summary.covers;
      const range = covers.length ? `#${covers[0]}–#${covers[covers.length - 1]}` : "nothing";
      const note = el("div", {
        class: "note",
        text: `summary of ${covers.length} events (${range})${event.summary.surviving ? "" : ", subsumed by a later summary"}`,
      });
      li.append(note, renderParts(event.summary.parts));
      li.addEventListener("mouseenter", () => highlight(covers));
      li.addEventListener("mouseleave", () => highlight([]));
    } else {
      li.append(renderParts(event.parts));
    }
    if (event.covered_by !== null) li.append(el("div", { class: "note", text: `covered by summary #${event.covered_by}` }));
    if (event.hidden_by !== null) {
      li.append(el("div", { class: "note", text: `hidden from the context by the model (edit recorded on #${event.hidden_by})` }));
    }
    for (const edit of event.context_edits || []) {
      const span = edit.first === edit.last ? `#${edit.first}` : `#${edit.first}–#${edit.last}`;
      const text =
        edit.kind === "hide"
          ? `model edit: hides ${span} (stub: ${edit.stub})`
          : edit.kind === "summary"
            ? `model edit: wrote the summary #${edit.summary_sequence}`
            : `model edit: ${edit.kind}s ${span}`;
      const note = el("div", { class: "note edit", text });
      if (edit.kind !== "summary") {
        const range = [];
        for (let s = edit.first; s <= edit.last; s += 1) range.push(s);
        note.addEventListener("mouseenter", () => highlight(range));
        note.addEventListener("mouseleave", () => highlight([]));
      } else {
        note.addEventListener("mouseenter", () => highlight([edit.summary_sequence]));
        note.addEventListener("mouseleave", () => highlight([]));
      }
      li.append(note);
    }
    if (event.rewind_before_invocation_id) {
      li.append(el("div", { class: "note", text: `rewinds before invocation ${event.rewind_before_invocation_id}` }));
    }
    const delta = Object.keys(event.state_delta || {});
    if (delta.length) li.append(el("div", { class: "note mono", text: `state: ${JSON.stringify(event.state_delta)}` }));
    li.append(rawBox(event.raw));
    toggleOpen(li, `log:${event.sequence}`);
    list.append(li);
  }
}

function renderContext(context) {
  $("context-agent").textContent = context.agent || "(no agent)";
  $("context-size").textContent = `${context.contents.length} contents, ${context.token_estimate} tokens (${context.token_counter})`;
  const list = $("context");
  list.replaceChildren();
  context.contents.forEach((content, index) => {
    if (index === context.cacheable_contents_count && index > 0) list.append(boundary(context));
    const li = el("li", { data: { index, role: content.role } });
    if (content.summary_of !== null) li.classList.add("summary-row");
    li.append(
      el(
        "div",
        { class: "row-head" },
        el("span", { class: "seq", text: String(index) }),
        el("span", { class: "author", text: content.role || "(no role)" }),
        content.summary_of !== null ? el("span", { class: "kind summary", text: `summary #${content.summary_of}` }) : null,
        el("span", { class: "tokens", text: `${content.tokens} tok` }),
      ),
      renderParts(content.parts),
      rawBox(content.raw),
    );
    toggleOpen(li, `context:${index}`);
    list.append(li);
  });
  if (context.cacheable_contents_count === context.contents.length && context.contents.length) list.append(boundary(context));
  if (!context.contents.length) list.append(el("li", { class: "muted", text: "no contents" }));
}

function boundary(context) {
  return el("li", {
    class: "boundary",
    text: `cacheable prefix: first ${context.cacheable_contents_count} contents (${context.cacheable_rule})`,
  });
}

// Why no chart library: the page has no build step and loads nothing it does not ship, and the
// wheel stays self-contained; a line with a few marks is a dozen SVG elements made by hand.
const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

function renderPlot(tokens) {
  const box = $("plot");
  const points = tokens.points;
  const width = 900;
  const height = 170;
  const pad = { left: 46, right: 10, top: 10, bottom: 22 };
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img" });
  root.append(svg("title", {}, `tokens of ${tokens.agent || "(no agent)"}'s context after each invocation`));
  if (!points.length) {
    root.append(svg("text", { x: pad.left, y: height / 2 }, "no events yet"));
    box.replaceChildren(root);
    return;
  }
  const first = Math.min(1, points[0].sequence); // the axis starts at the log's first event
  const last = Math.max(points[points.length - 1].sequence, first + 1);
  const top = Math.max(1, ...points.map((p) => p.tokens));
  const x = (seq) => pad.left + ((seq - first) / (last - first)) * (width - pad.left - pad.right);
  const y = (tok) => height - pad.bottom - (tok / top) * (height - pad.top - pad.bottom);
  root.append(
    svg("line", { class: "axis", x1: pad.left, y1: height - pad.bottom, x2: width - pad.right, y2: height - pad.bottom }),
    svg("line", { class: "axis", x1: pad.left, y1: pad.top, x2: pad.left, y2: height - pad.bottom }),
    svg("text", { x: 4, y: pad.top + 8 }, `${top} tok`),
    svg("text", { x: 4, y: height - pad.bottom }, "0"),
    svg("text", { x: pad.left, y: height - 6 }, `#${first}`),
    svg("text", { x: width - pad.right - 30, y: height - 6 }, `#${last}`),
  );
  for (const seq of tokens.compactions) {
    const mark = svg("line", { class: "compaction-mark", x1: x(seq), y1: pad.top, x2: x(seq), y2: height - pad.bottom });
    mark.append(svg("title", {}, `summary #${seq}`));
    root.append(mark);
  }
  for (const seq of tokens.rewinds) {
    const mark = svg("line", { class: "rewind-mark", x1: x(seq), y1: pad.top, x2: x(seq), y2: height - pad.bottom });
    mark.append(svg("title", {}, `rewind #${seq}`));
    root.append(mark);
  }
  root.append(svg("polyline", { class: "line", points: points.map((p) => `${x(p.sequence)},${y(p.tokens)}`).join(" ") }));
  for (const p of points) {
    const dot = svg("circle", { class: `point ${p.kind}`, cx: x(p.sequence), cy: y(p.tokens), r: p.kind === "summary" || p.kind === "rewind" ? 4 : 2.5 });
    dot.dataset.sequence = p.sequence;
    dot.append(svg("title", {}, `#${p.sequence} ${p.author}: ${p.tokens} tokens`));
    root.append(dot);
  }
  box.replaceChildren(root);
  const plural = (n, word) => (n === 1 ? `1 ${word}` : `${n} ${word.replace(/y$/, "ie")}s`);
  $("plot-legend").textContent =
    `${plural(points.length, "point")}, ${plural(tokens.compactions.length, "summary")} (dashed), ` +
    `${plural(tokens.rewinds.length, "rewind")} (dotted); tokens by ${tokens.token_counter}`;
}

// --------------------------------------------------------------------------- live updates

// Server-sent events through fetch() and a stream reader: EventSource cannot send the
// Authorization header.
function startLive() {
  if (state.stream) state.stream.abort();
  const controller = new AbortController();
  state.stream = controller;
  follow(controller, sessionPath(), 0).catch(() => {});
}

async function follow(controller, path, attempt) {
  const live = $("live");
  while (!controller.signal.aborted) {
    try {
      const response = await fetch(`${API}${path}/events?after=${state.lastSequence}`, {
        headers: authHeaders(),
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      live.textContent = "live";
      live.classList.add("on");
      attempt = 0;
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          handleFrame(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
    }
    live.textContent = "reconnecting";
    live.classList.remove("on");
    attempt += 1;
    await new Promise((resolve) => setTimeout(resolve, Math.min(10000, 500 * 2 ** attempt)));
  }
}

function handleFrame(text) {
  let kind = "message";
  let data = "";
  for (const line of text.split("\n")) {
    if (line.startsWith("event: ")) kind = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  if (kind === "appended") {
    const event = JSON.parse(data);
    state.lastSequence = Math.max(state.lastSequence, event.sequence);
    scheduleRefresh();
  } else if (kind === "error") {
    setStatus(`live stream ended: ${JSON.parse(data).message}`, true);
  }
}

// One refresh at a time: events arriving while one runs make one more run after it (at most one
// a second while the session grows fast), so a busy session is followed without flooding the
// sidecar and without missing the last events.
function scheduleRefresh() {
  state.dirty = true;
  if (state.refreshing) return;
  state.refreshing = true;
  const again = async () => {
    state.dirty = false;
    try {
      await loadSession($("agent").value);
    } catch (error) {
      setStatus(error.message, true);
    }
    if (state.dirty) setTimeout(again, 1000);
    else state.refreshing = false;
  };
  setTimeout(again, 250);
}

// --------------------------------------------------------------------------- start

async function start() {
  $("layout").hidden = false;
  $("auth-form").hidden = true;
  $("sign-out").hidden = !sessionStorage.getItem(TOKEN_KEY);
  try {
    await loadApps();
    const wanted = readHash();
    if (wanted.app) {
      await pickApp(wanted.app, true);
      if (wanted.user) {
        await pickUser(wanted.user, true);
        if (wanted.session) await openSession(wanted.session, wanted.agent);
      }
    }
    setStatus(state.session ? $("status").textContent : "pick an app");
  } catch (error) {
    setStatus(error.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    start();
  });
  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    if (state.stream) state.stream.abort();
    location.reload();
  });
  for (const id of ["agent", "branch", "provider"]) {
    $(id).addEventListener("change", () => {
      writeHash();
      loadAgentViews().catch((error) => setStatus(error.message, true));
    });
  }
  $("model").addEventListener("change", () => loadAgentViews().catch((error) => setStatus(error.message, true)));
  start();
});
