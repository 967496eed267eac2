// long-file: one self-contained page (markup, style and script) served as a single string.
/**
 * The dashboard at `/_sluice/`: one self-contained HTML page (inline style and script, no external assets) that shows
 * the limiter at work through the admin API: the fleet view from Analytics Engine (or how to enable it), this
 * isolate's counters with per-second rates, its most recent denials (each row can be looked up or reset), a form to
 * look up a key (its state, account and overrides) or reset it after a confirmation, and the rules as deployed.
 *
 * Logging in is one call (`LOGIN_CHECK_PATH`), so one wrong token is one failed check of the admin guard; a refused
 * token is never kept, and a lockout (429) is shown with its time left. Times are UTC with the zone written out.
 *
 * How the token gets there: the page itself carries no data, so it is served without a token (but, like the rest of
 * `/_sluice/`, only when ADMIN_TOKEN is set). It asks for the token in a login form, keeps it in `sessionStorage`
 * (this tab only, gone when the tab closes) and sends it as `Authorization: Bearer` from `fetch`; it never travels in
 * a URL. The Content-Security-Policy allows only this page's own script and style (by hash) and requests to this
 * origin, forbids form submission (a form that did submit would put the token in the URL), framing and a base URL.
 * Every value is written with `textContent`, never parsed as HTML.
 */

/** The one admin call a login makes: it checks the token and loads the rules. */
export const LOGIN_CHECK_PATH = "/rules";

const STYLE = `
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --bad: #b91c1c; --ok: #047857; --warn: #b45309; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px; padding: 16px; }
header { display: flex; align-items: baseline; gap: 12px; border-bottom: 1px solid var(--line); margin-bottom: 12px; }
header h1 { font-size: 20px; margin: 8px 0; }
header .spacer { flex: 1; }
h2 { font-size: 16px; margin: 22px 0 6px; }
.note { color: var(--muted); margin: 4px 0 10px; }
.error { color: var(--bad); }
.ok { color: var(--ok); }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 10px; padding: 0 8px; font-size: 12px; }
.badge.fleet { border-color: var(--ok); color: var(--ok); }
.badge.isolate { border-color: var(--warn); color: var(--warn); }
.box { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 8px 0; }
.box.lockout { border-color: var(--bad); }
.box.confirm { border-color: var(--warn); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.desc { color: var(--muted); }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 6px 0; }
input, select, button { font: inherit; padding: 4px 8px; }
button.small { padding: 1px 6px; font-size: 12px; }
ol.steps { margin: 4px 0; padding-left: 22px; }
svg.chart { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
svg.chart text { font: 11px system-ui, sans-serif; fill: currentColor; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 4px 0; font-size: 12px; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }
[hidden] { display: none !important; }
`;

const SCRIPT = `
"use strict";
(() => {
  const TOKEN_KEY = "sluice-admin-token";
  const BASE = "/_sluice";
  const LOGIN_CHECK = "${LOGIN_CHECK_PATH}";
  const FLEET_EVERY_MS = 60000;
  const $ = (id) => document.getElementById(id);
  const SVG_NS = "http://www.w3.org/2000/svg";
  let timer = null;
  let lockTimer = null;
  let rules = [];
  // Recent snapshots of the counters: a rate is taken against one at least 2 s old, so a quick refresh (after a
  // reset) does not show the noise of half a second.
  let snapshots = [];
  let fleetAt = 0;
  let pending = null;

  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  const row = (cells) => {
    const tr = document.createElement("tr");
    for (const c of cells) tr.append(c instanceof Node ? c : el("td", c));
    return tr;
  };
  const fmt = (n) => (n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"));
  const num = (n) => el("td", fmt(n), "num");
  const pct = (part, whole) => (whole > 0 ? ((100 * part) / whole).toFixed(part > 0 && part < whole / 1000 ? 3 : 1) + "%" : "-");
  const rate = (n) => (n === null ? "-" : n < 10 ? n.toFixed(2) : fmt(Math.round(n)));
  // Times are UTC everywhere, with the zone said.
  const utc = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  const utcTime = (ms) => new Date(ms).toISOString().slice(11, 19) + " UTC";
  const short = (hash) => hash.slice(0, 12) + "\\u2026";
  // A wait: "850 ms", "59.7 s".
  const wait = (ms) => {
    if (ms === null || ms === undefined) return "-";
    return ms < 1000 ? fmt(ms) + " ms" : fmt(Math.round(ms / 100) / 10) + " s";
  };
  // A rule's limits as the algorithm table describes them, with thousands separators ("2,000,000 per month").
  const limitsOf = (r) => (r.limits || r.algorithm).replace(/\\d{4,}/g, (n) => fmt(n));

  // One admin API call. Never throws for an HTTP status: the caller decides what 401 and 429 mean.
  async function call(method, path, token) {
    let response;
    try {
      response = await fetch(BASE + path, {
        method,
        headers: { Authorization: "Bearer " + token },
        cache: "no-store",
        credentials: "omit",
      });
    } catch (error) {
      return { status: 0, body: null, detail: "the Worker did not answer (" + error.message + ")" };
    }
    let body = null;
    if ((response.headers.get("Content-Type") || "").includes("json")) body = await response.json();
    const retry = Number(response.headers.get("Retry-After"));
    return {
      status: response.status,
      body,
      retryAfterS: Number.isFinite(retry) && retry > 0 ? retry : null,
      detail: (body && (body.detail || body.title)) || "HTTP " + response.status,
    };
  }

  // A call made while logged in: a refused token logs out, a lockout is shown as one; else the body, or an Error.
  async function api(method, path) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token === null) throw new Error("not logged in");
    const r = await call(method, path, token);
    if (r.status === 401) {
      logout("The token was refused (has ADMIN_TOKEN changed?). Log in again.");
      throw new Error("logged out");
    }
    if (r.status === 429) {
      logout("");
      lockout(r.retryAfterS || 60);
      throw new Error("logged out");
    }
    if (r.status < 200 || r.status > 299) throw new Error(r.detail);
    return r.body;
  }

  // The rule's id, and under it what the rule is for (its description), when it says.
  function idCell(r) {
    const cell = el("td", r.id, "mono");
    if (r.description) cell.append(el("div", r.description, "note"));
    return cell;
  }

  function showRules(list) {
    rules = list;
    const body = $("rules-body");
    body.replaceChildren();
    const select = $("key-rule");
    const chosen = select.value;
    select.replaceChildren();
    for (const r of list) {
      const m = r.match;
      body.append(
        row([
          idCell(r),
          limitsOf(r),
          m.plans === null ? "any" : m.plans.join(", "),
          m.route === null ? "any" : m.route.source,
          m.identity,
          r.mode,
          r.scope,
          r.onError,
        ]),
      );
      const option = el("option", r.id + " (" + m.identity + ")");
      option.value = r.id;
      select.append(option);
    }
    if (chosen) select.value = chosen;
  }

  // What each of this isolate's counters counts; "total" counters also get a per-second rate between refreshes.
  const STATS = {
    requests: ["total", "requests through the gateway (admin requests excluded)"],
    denials: ["total", "requests denied, by any enforcing rule"],
    shadow_denials: ["total", "would-be denials of shadow rules"],
    fail_open: ["total", "rule decisions that failed and were skipped (on_error: open)"],
    fail_closed: ["total", "rule decisions that failed and refused the request (on_error: closed)"],
    object_calls: ["total", "Durable Object calls, retries included (a coalesced batch is one)"],
    object_retries: ["total", "retries after a retryable object error"],
    batched_requests: ["total", "requests sent to an object in a batch of 2 or more"],
    cache_answers: ["total", "rule decisions answered by the blocked-key cache, without a call"],
    lease_answers: ["total", "rule decisions answered from a lease, without a call"],
    leases: ["total", "leases granted to this isolate"],
    lease_units_returned: ["total", "lease units given back unused"],
    queue_overflows: ["total", "requests refused because too many already waited for their key"],
    plan_cache_hits: ["total", "API keys answered by the plan cache (no KV read)"],
    kv_reads: ["total", "account lookups sent to KV"],
    key_lookups_refused: ["total", "account lookups refused (the address used up KEY_LOOKUPS_PER_MIN)"],
    local_evictions: ["total", "scope: local keys evicted to make room"],
    local_keys: ["now", "keys held for scope: local rules", "max_keys", "per rule (MAX_KEYS)"],
    local_bytes: ["now", "bytes held for scope: local rules"],
    cache_entries: ["now", "entries in the blocked-key cache", "cache_max_entries", "at most"],
    leases_held: ["now", "leases this isolate holds now"],
  };
  const BOUNDS = new Set(["max_keys", "cache_max_entries"]);

  function showStats(stats, atMs) {
    const body = $("stats-body");
    body.replaceChildren();
    const base = snapshots.filter((x) => x.atMs <= atMs - 2000).pop() ?? null;
    const seconds = base === null ? null : (atMs - base.atMs) / 1000;
    for (const [name, value] of Object.entries(stats)) {
      if (BOUNDS.has(name)) continue;
      const [kind, what, boundName, boundText] = STATS[name] || ["total", name.replaceAll("_", " ")];
      let perSecond = "";
      if (kind === "total" && seconds !== null && base.values[name] !== undefined) {
        perSecond = rate(Math.max(0, value - base.values[name]) / seconds);
      }
      const bound = boundName && stats[boundName] !== undefined ? boundText + " " + fmt(stats[boundName]) : "";
      const tr = row([el("td", what), num(value), el("td", kind === "total" ? perSecond || "-" : "now", "num"), el("td", bound, "desc")]);
      tr.dataset.stat = name;
      body.append(tr);
    }
    $("stats-rate-note").textContent =
      seconds === null
        ? "Per-second rates appear from the next refresh (every 5 s)."
        : "Per second over the last " + seconds.toFixed(1) + " s.";
    snapshots = [...snapshots, { atMs, values: stats }].slice(-6);
  }

  function showDenials(list) {
    const body = $("denials-body");
    body.replaceChildren();
    $("denials-empty").hidden = list.denials.length > 0;
    $("denials-max").textContent = String(list.capacity);
    for (const d of list.denials) {
      const key = el("td", short(d.key), "mono");
      key.title = d.key;
      const actions = el("td");
      const look = el("button", "Look up", "small");
      look.type = "button";
      look.dataset.action = "lookup";
      look.addEventListener("click", () => lookUp(d.rule, { key_hash: d.key }));
      const reset = el("button", "Reset\\u2026", "small");
      reset.type = "button";
      reset.dataset.action = "reset";
      reset.addEventListener("click", () => askReset(d.rule, { key_hash: d.key }, short(d.key)));
      actions.append(look, " ", reset);
      body.append(
        row([utc(d.at_ms), el("td", d.rule, "mono"), key, wait(d.retry_after_ms), d.source, num(d.count), actions]),
      );
    }
  }

  function queryOf(rule, key) {
    const name = key.key_hash !== undefined ? "key_hash" : "key";
    return "?rule=" + encodeURIComponent(rule) + "&" + name + "=" + encodeURIComponent(key.key_hash ?? key.key);
  }

  function showKey(result, account) {
    const out = $("key-result");
    out.replaceChildren();
    const table = el("table");
    let fields;
    if (result.reset) {
      fields = [["rule", result.rule], ["hashed key", result.key], ["reset", result.existed ? "state forgotten" : "no state to forget"]];
    } else {
      const whose = result.override === null ? " (the rule's, unless the key's account overrides it)" : result.override ? " (this account's own limit)" : " (the rule's)";
      fields = [
        ["rule", result.rule],
        ["hashed key", result.key],
        ["scope", result.scope],
        ["quota", fmt(result.quota) + whose],
        ["remaining", fmt(result.remaining)],
        ["resets in", wait(result.reset_after_ms)],
        ["retry after", result.retry_after_ms === null ? "- (a request would be admitted)" : wait(result.retry_after_ms)],
      ];
      if (result.lease) fields.push(["lease here", fmt(result.lease.units_left) + " of " + fmt(result.lease.units) + " units, " + wait(result.lease.ends_in_ms) + " left"]);
    }
    if (account) {
      fields.push(["account", account.found ? "plan " + account.plan : "no account record (default plan " + account.plan + ")"]);
      const overrides = account.overrides.map((o) => o.id + ": " + limitsOf(o));
      fields.push(["overrides", overrides.length === 0 ? "none (every rule's own limits)" : overrides.join("; ")]);
    }
    for (const [name, value] of fields) {
      const tr = row([el("th", name), el("td", value, "mono")]);
      tr.dataset.field = name;
      table.append(tr);
    }
    out.append(table);
    $("key-section").scrollIntoView({ block: "nearest" });
  }

  async function lookUp(rule, key) {
    $("key-error").textContent = "";
    try {
      const state = await api("GET", "/state" + queryOf(rule, key));
      const r = rules.find((x) => x.id === rule);
      const account = key.key !== undefined && r && r.match.identity === "api_key"
        ? await api("GET", "/account?key=" + encodeURIComponent(key.key))
        : null;
      showKey(state, account);
    } catch (error) {
      if (error.message !== "logged out") $("key-error").textContent = error.message;
    }
  }

  function askReset(rule, key, shown) {
    pending = { rule, key };
    $("confirm-text").textContent =
      "Reset " + shown + " under " + rule + "? Its state is forgotten: its next request starts with a full allowance.";
    $("confirm").hidden = false;
    $("confirm-yes").focus();
  }

  async function confirmReset() {
    const action = pending;
    pending = null;
    $("confirm").hidden = true;
    if (action === null) return;
    $("key-error").textContent = "";
    try {
      showKey(await api("POST", "/reset" + queryOf(action.rule, action.key)), null);
      refresh();
    } catch (error) {
      if (error.message !== "logged out") $("key-error").textContent = error.message;
    }
  }

  function rawKey() {
    const key = $("key-value").value;
    if (key === "") $("key-error").textContent = "Enter the raw API key, client address or user id.";
    return key === "" ? null : { key };
  }

  function line(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  const COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d", "#475569", "#ea580c"];

  // Denials per rule over the period, one line per rule, zero where a bucket has no row.
  function drawChart(f) {
    const svg = $("fleet-chart");
    svg.replaceChildren();
    const legend = $("fleet-legend");
    legend.replaceChildren();
    const W = 960, H = 220, L = 56, R = 12, T = 10, B = 28;
    const bucketMs = f.bucket_s * 1000;
    const endMs = Math.floor(f.as_of_ms / bucketMs) * bucketMs;
    const spanMs = { "1h": 3600000, "6h": 21600000, "24h": 86400000, "7d": 604800000 }[f.period] || 3600000;
    const startMs = endMs - spanMs + bucketMs;
    const series = new Map();
    for (const p of f.denials_over_time) {
      if (!series.has(p.rule)) series.set(p.rule, new Map());
      series.get(p.rule).set(p.t_ms, p.denials);
    }
    const max = Math.max(1, ...f.denials_over_time.map((p) => p.denials));
    const x = (t) => L + ((t - startMs) / Math.max(1, endMs - startMs)) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    svg.append(line("line", { x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: "#9ca3af" }));
    svg.append(line("line", { x1: L, y1: T, x2: L, y2: y(0), stroke: "#9ca3af" }));
    svg.append(line("text", { x: L - 6, y: T + 9, "text-anchor": "end" }, fmt(max)));
    svg.append(line("text", { x: L - 6, y: y(0), "text-anchor": "end" }, "0"));
    svg.append(line("text", { x: L, y: H - 8 }, utc(startMs)));
    svg.append(line("text", { x: W - R, y: H - 8, "text-anchor": "end" }, utc(endMs)));
    let i = 0;
    for (const [rule, points] of series) {
      const color = COLORS[i++ % COLORS.length];
      const coords = [];
      for (let t = startMs; t <= endMs; t += bucketMs) coords.push(x(t).toFixed(1) + "," + y(points.get(t) || 0).toFixed(1));
      const path = line("polyline", { points: coords.join(" "), fill: "none", stroke: color, "stroke-width": 1.5 });
      path.dataset.rule = rule;
      svg.append(path);
      const item = el("span");
      const swatch = el("i");
      swatch.style.background = color;
      item.append(swatch, rule + " (" + fmt([...points.values()].reduce((a, b) => a + b, 0)) + ")");
      legend.append(item);
    }
    $("fleet-chart-empty").hidden = series.size > 0;
  }

  function showFleet(f) {
    $("fleet-off").hidden = f.configured;
    $("fleet-on").hidden = !f.configured;
    const badge = $("view");
    badge.hidden = false;
    if (!f.configured) {
      badge.textContent = "this isolate only";
      badge.className = "badge isolate";
      const steps = $("fleet-steps");
      steps.replaceChildren();
      $("fleet-how").textContent = f.how_to.summary;
      for (const step of f.how_to.steps) steps.append(el("li", step, "mono"));
      return;
    }
    badge.textContent = "fleet view + this isolate";
    badge.className = "badge fleet";
    $("fleet-source").textContent =
      "Every isolate, from Analytics Engine (dataset " + f.dataset + "), the last " + f.period + ", queried at " +
      utcTime(f.as_of_ms) + ". Points reach Analytics Engine within about a minute; counts are sampling-weighted.";
    drawChart(f);
    const top = $("fleet-keys-body");
    top.replaceChildren();
    for (const k of f.top_denied_keys) {
      const key = el("td", short(k.key_hash), "mono");
      key.title = k.key_hash;
      const look = el("button", "Look up", "small");
      look.type = "button";
      look.addEventListener("click", () => lookUp(k.rule, { key_hash: k.key_hash }));
      const act = el("td");
      act.append(look);
      top.append(row([key, el("td", k.rule, "mono"), k.plan, num(k.denials), wait(k.mean_retry_after_ms), act]));
    }
    $("fleet-keys-empty").hidden = f.top_denied_keys.length > 0;
    const spanS = { "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800 }[f.period] || 3600;
    const body = $("fleet-rules-body");
    body.replaceChildren();
    for (const t of f.rules) {
      const r = rules.find((x) => x.id === t.rule);
      body.append(
        row([
          el("td", t.rule, "mono"),
          r ? limitsOf(r) : "(not deployed now)",
          num(t.decisions),
          el("td", rate(t.decisions / spanS), "num"),
          num(t.denied),
          el("td", pct(t.denied, t.decisions), "num"),
          el("td", pct(t.shadow_denied, t.decisions), "num"),
          el("td", pct(t.fail_open, t.decisions), "num"),
          num(t.fail_closed),
        ]),
      );
    }
  }

  async function refreshFleet() {
    fleetAt = Date.now();
    try {
      const f = await api("GET", "/fleet?period=" + encodeURIComponent($("fleet-period").value));
      $("fleet-error").textContent = "";
      showFleet(f);
    } catch (error) {
      if (error.message !== "logged out") $("fleet-error").textContent = "Fleet view failed: " + error.message;
    }
  }

  // One call at a time: if the token is refused, nothing else is sent with it.
  async function refresh() {
    try {
      showRules((await api("GET", LOGIN_CHECK)).rules);
      const stats = await api("GET", "/stats");
      showStats(stats, Date.now());
      showDenials(await api("GET", "/denials"));
      $("updated").textContent = "updated " + utcTime(Date.now());
      $("status").textContent = "";
      if (Date.now() - fleetAt >= FLEET_EVERY_MS) await refreshFleet();
    } catch (error) {
      if (error.message !== "logged out") $("status").textContent = "Refresh failed: " + error.message;
    }
  }

  function enterApp(body) {
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = false;
    $("refresh").hidden = false;
    showRules(body.rules);
    fleetAt = 0;
    refresh();
    if (timer === null) timer = setInterval(() => { if (document.visibilityState === "visible") refresh(); }, 5000);
  }

  function lockout(seconds) {
    const until = Date.now() + seconds * 1000;
    $("lockout").hidden = false;
    $("login-button").disabled = true;
    $("login-error").textContent = "";
    const tick = () => {
      const left = Math.ceil((until - Date.now()) / 1000);
      if (left <= 0) {
        clearInterval(lockTimer);
        lockTimer = null;
        $("lockout").hidden = true;
        $("login-button").disabled = false;
        $("login-error").textContent = "The lockout has ended: you can try again.";
        return;
      }
      $("lockout-left").textContent = left + " s";
    };
    if (lockTimer !== null) clearInterval(lockTimer);
    lockTimer = setInterval(tick, 250);
    tick();
  }

  // One login attempt is one call: it checks the token and loads the rules. A refused token is never kept.
  async function login(token) {
    $("login-button").disabled = true;
    $("login-error").textContent = "Checking the token\\u2026";
    const r = await call("GET", LOGIN_CHECK, token);
    $("login-button").disabled = false;
    $("login-error").textContent = "";
    if (r.status === 200) {
      sessionStorage.setItem(TOKEN_KEY, token);
      enterApp(r.body);
    } else if (r.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      $("login-error").textContent = "The token was refused. Check it and try again (5 wrong tokens a minute lock this address out).";
      $("token").select();
    } else if (r.status === 429) {
      sessionStorage.removeItem(TOKEN_KEY);
      lockout(r.retryAfterS || 60);
    } else {
      sessionStorage.removeItem(TOKEN_KEY);
      $("login-error").textContent = "The admin API could not check the token: " + r.detail;
    }
  }

  function logout(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (timer !== null) clearInterval(timer);
    timer = null;
    snapshots = [];
    $("app").hidden = true;
    $("logout").hidden = true;
    $("refresh").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (token !== "" && !$("login-button").disabled) login(token);
  });
  $("logout").addEventListener("click", () => logout(""));
  $("refresh").addEventListener("click", () => { fleetAt = 0; refresh(); });
  $("key-form").addEventListener("submit", (event) => event.preventDefault());
  $("lookup").addEventListener("click", () => { const k = rawKey(); if (k) lookUp($("key-rule").value, k); });
  $("reset").addEventListener("click", () => { const k = rawKey(); if (k) askReset($("key-rule").value, k, "this key"); });
  $("confirm-yes").addEventListener("click", () => confirmReset());
  $("confirm-no").addEventListener("click", () => { pending = null; $("confirm").hidden = true; });
  $("fleet-period").addEventListener("change", () => refreshFleet());

  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved !== null) login(saved);
  else $("token").focus();
})();
`;

const BODY = `
<header>
  <h1>Sluice</h1>
  <span class="badge isolate" id="view" hidden></span>
  <span class="note" id="updated"></span>
  <span class="spacer"></span>
  <button type="button" id="refresh" hidden>Refresh</button>
  <button type="button" id="logout" hidden>Log out</button>
</header>

<section id="login">
  <h2>Log in</h2>
  <p class="note">Enter the admin token (the <code>ADMIN_TOKEN</code> secret; locally, the one <code>npm start</code>
  printed into <code>.dev.vars</code>). It stays in this tab's session storage and is sent only as an
  <code>Authorization</code> header to this origin.</p>
  <form id="login-form" method="post" autocomplete="off">
    <input type="password" id="token" name="token" autocomplete="current-password" placeholder="admin token" size="40" required>
    <button type="submit" id="login-button">Log in</button>
  </form>
  <p class="error" id="login-error" role="alert"></p>
  <div class="box lockout" id="lockout" role="alert" hidden>
    <strong>Locked out.</strong> Too many failed admin token checks from this address (5 a minute). Try again in
    <strong id="lockout-left"></strong>; the right token works as soon as the lockout ends.
  </div>
</section>

<main id="app" hidden>
  <p class="error" id="status" role="alert"></p>

  <section id="fleet">
    <h2>The fleet</h2>
    <div id="fleet-off" class="box" hidden>
      <p><strong>The fleet view is off: this page shows only the one isolate that answered it.</strong>
      <span id="fleet-how"></span></p>
      <ol class="steps" id="fleet-steps"></ol>
      <p class="note">Analytics Engine cannot be queried locally (<code>npm start</code>), so there the fleet view stays
      off. docs/operations.md has the queries it runs.</p>
    </div>
    <div id="fleet-on" hidden>
      <form id="fleet-form">
        <label for="fleet-period">Period</label>
        <select id="fleet-period">
          <option value="1h">last hour</option>
          <option value="6h">last 6 hours</option>
          <option value="24h">last 24 hours</option>
          <option value="7d">last 7 days</option>
        </select>
        <span class="note" id="fleet-source"></span>
      </form>
      <h3>Denials per rule</h3>
      <svg class="chart" id="fleet-chart" viewBox="0 0 960 220" role="img" aria-label="denials per rule over time"></svg>
      <div class="legend" id="fleet-legend"></div>
      <p class="note" id="fleet-chart-empty">No denials in this period.</p>
      <h3>Most denied keys</h3>
      <p class="note">Hashed: a hash names a key only to someone who has the key. Look up shows its state now.</p>
      <table>
        <thead><tr><th>hashed key</th><th>rule</th><th>plan</th><th class="num">denials</th><th>mean retry after</th><th></th></tr></thead>
        <tbody id="fleet-keys-body"></tbody>
      </table>
      <p class="note" id="fleet-keys-empty" hidden>No key was denied in this period.</p>
      <h3>Each rule's traffic beside its limit</h3>
      <table>
        <thead><tr><th>rule</th><th>limit</th><th class="num">decisions</th><th class="num">per second</th>
        <th class="num">denied</th><th class="num">denied %</th><th class="num">shadow-denied %</th><th class="num">fail-open %</th>
        <th class="num">fail-closed</th></tr></thead>
        <tbody id="fleet-rules-body"></tbody>
      </table>
    </div>
    <p class="error" id="fleet-error" role="alert"></p>
  </section>

  <h2>This isolate's counters</h2>
  <p class="note" id="per-isolate"><strong>Counters are per isolate.</strong> The counters, the recent denials and the
  state of <code>scope: local</code> rules below are those of the one isolate that answered this page; Cloudflare runs
  many. <code>scope: global</code> key state is exact everywhere: it lives in the key's Durable Object.
  <span id="stats-rate-note"></span></p>
  <table>
    <thead><tr><th>what it counts</th><th class="num">since the isolate started</th><th class="num">per second</th><th>bound</th></tr></thead>
    <tbody id="stats-body"></tbody>
  </table>

  <h2>Recent denials in this isolate</h2>
  <p class="note">The last <span id="denials-max"></span> (rule, key) denials, newest first; repeated denials of the same
  key in a row share a line. Keys are hashed; look one up or reset it from its row.</p>
  <table>
    <thead><tr><th>time</th><th>rule</th><th>hashed key</th><th>retry after</th><th>source</th><th class="num">count</th><th></th></tr></thead>
    <tbody id="denials-body"></tbody>
  </table>
  <p class="note" id="denials-empty">No denials in this isolate yet.</p>

  <section id="key-section">
    <h2>Look up or reset a key</h2>
    <p class="note">Looking up charges nothing and shows the key's account and overrides (api_key rules). Reset forgets
    the key's state after you confirm: its next request starts fresh.</p>
    <form id="key-form" method="post" autocomplete="off">
      <select id="key-rule" aria-label="rule"></select>
      <input type="text" id="key-value" placeholder="raw API key, client address or user id" size="40" aria-label="key">
      <button type="button" id="lookup">Look up</button>
      <button type="button" id="reset">Reset&hellip;</button>
    </form>
    <div class="box confirm" id="confirm" role="alertdialog" hidden>
      <p id="confirm-text"></p>
      <button type="button" id="confirm-yes">Reset this key</button>
      <button type="button" id="confirm-no">Cancel</button>
    </div>
    <p class="error" id="key-error" role="alert"></p>
    <div id="key-result"></div>
  </section>

  <h2>Rules as deployed</h2>
  <table>
    <thead><tr><th>id</th><th>limits</th><th>plans</th><th>route</th><th>identity</th><th>mode</th>
    <th>scope</th><th>on error</th></tr></thead>
    <tbody id="rules-body"></tbody>
  </table>
</main>
`;

const HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Sluice</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body>
${BODY}
<script>${SCRIPT}</script>
</body>
</html>
`;

let headers: Promise<[string, string][]> | null = null;

async function sha256Base64(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return btoa(String.fromCharCode(...digest));
}

/** The response headers: the CSP names the page's one script and one style by hash (computed once per isolate). */
function pageHeaders(): Promise<[string, string][]> {
  headers ??= Promise.all([sha256Base64(SCRIPT), sha256Base64(STYLE)]).then(([script, style]) => [
    ["Content-Type", "text/html; charset=utf-8"],
    ["Cache-Control", "no-store"],
    [
      "Content-Security-Policy",
      `default-src 'none'; script-src 'sha256-${script}'; style-src 'sha256-${style}'; connect-src 'self'; ` +
        "img-src data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
    ],
    ["X-Content-Type-Options", "nosniff"],
    ["X-Frame-Options", "DENY"],
    ["Referrer-Policy", "no-referrer"],
  ]);
  return headers;
}

/** The dashboard page. */
export async function dashboardPage(): Promise<Response> {
  return new Response(HTML, { headers: await pageHeaders() });
}
