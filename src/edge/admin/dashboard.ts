/**
 * The dashboard at `/_sluice/`: one self-contained HTML page (inline style and script, no external assets) that shows
 * the limiter at work through the admin API: the rules as deployed, this isolate's counters, its most recent denials,
 * and a form to look up or reset one key's state.
 *
 * How the token gets there: the page itself carries no data, so it is served without a token (but, like the rest of
 * `/_sluice/`, only when ADMIN_TOKEN is set). It asks for the token in a login form, keeps it in `sessionStorage`
 * (this tab only, gone when the tab closes) and sends it as `Authorization: Bearer` from `fetch`; it never travels in
 * a URL. The Content-Security-Policy allows only this page's own script and style (by hash) and requests to this
 * origin, forbids form submission (a form that did submit would put the token in the URL), framing and a base URL.
 * Every value is written with `textContent`, never parsed as HTML.
 */

const STYLE = `
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --bad: #b91c1c; --ok: #047857; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px; }
header { display: flex; align-items: baseline; gap: 12px; border-bottom: 1px solid var(--line); margin-bottom: 12px; }
header h1 { font-size: 20px; margin: 8px 0; }
header .spacer { flex: 1; }
h2 { font-size: 16px; margin: 20px 0 6px; }
.note { color: var(--muted); margin: 4px 0 10px; }
.error { color: var(--bad); }
.ok { color: var(--ok); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
form { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 6px 0; }
input, select, button { font: inherit; padding: 4px 8px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(210px, 1fr)); gap: 6px 16px; }
.grid div { display: flex; justify-content: space-between; border-bottom: 1px solid var(--line); }
[hidden] { display: none !important; }
`;

const SCRIPT = `
"use strict";
(() => {
  const TOKEN_KEY = "sluice-admin-token";
  const BASE = "/_sluice";
  const $ = (id) => document.getElementById(id);
  let timer = null;

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
  const num = (n) => el("td", n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"), "num");
  // A wait: "850 ms", "59.7 s".
  const wait = (ms) => {
    if (ms === null || ms === undefined) return "-";
    return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s";
  };

  async function api(method, path) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token === null) throw new Error("not logged in");
    const response = await fetch(BASE + path, {
      method,
      headers: { Authorization: "Bearer " + token },
      cache: "no-store",
      credentials: "omit",
    });
    let body = null;
    try {
      body = await response.json();
    } catch (error) {
      body = null;
    }
    if (response.status === 401) {
      logout("The token was refused.");
      throw new Error("unauthorized");
    }
    if (!response.ok) throw new Error((body && (body.detail || body.title)) || "HTTP " + response.status);
    return body;
  }

  // The rule's id, and under it what the rule is for (its description), when it says.
  function idCell(r) {
    const cell = el("td", r.id, "mono");
    if (r.description) cell.append(el("div", r.description, "note"));
    return cell;
  }

  function showRules(rules) {
    const body = $("rules-body");
    body.replaceChildren();
    const select = $("key-rule");
    const chosen = select.value;
    select.replaceChildren();
    for (const r of rules) {
      const m = r.match;
      body.append(
        row([
          idCell(r),
          r.limits,
          m.plans === null ? "any" : m.plans.join(", "),
          m.route === null ? "any" : m.route.source,
          m.identity,
          r.mode + ", " + r.scope + ", on_error " + r.onError,
        ]),
      );
      const option = el("option", r.id + " (" + m.identity + ")");
      option.value = r.id;
      select.append(option);
    }
    if (chosen) select.value = chosen;
  }

  function showStats(stats) {
    const grid = $("stats");
    grid.replaceChildren();
    for (const [name, value] of Object.entries(stats)) {
      const d = el("div");
      d.append(el("span", name.replaceAll("_", " ")), el("span", Number(value).toLocaleString("en-US"), "mono"));
      d.dataset.stat = name;
      grid.append(d);
    }
  }

  function showDenials(list) {
    const body = $("denials-body");
    body.replaceChildren();
    $("denials-empty").hidden = list.denials.length > 0;
    $("denials-max").textContent = String(list.capacity);
    for (const d of list.denials) {
      const key = el("td", d.key.slice(0, 16) + "\\u2026", "mono");
      key.title = d.key;
      body.append(
        row([new Date(d.at_ms).toISOString().replace("T", " ").slice(0, 23), el("td", d.rule, "mono"), key,
          d.retry_after_ms === null ? "-" : wait(d.retry_after_ms), d.source, num(d.count)]),
      );
    }
  }

  async function refresh() {
    try {
      const [rules, stats, denials] = await Promise.all([api("GET", "/rules"), api("GET", "/stats"), api("GET", "/denials")]);
      showRules(rules.rules);
      showStats(stats);
      showDenials(denials);
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      $("status").textContent = "";
    } catch (error) {
      if (String(error.message) !== "unauthorized") $("status").textContent = "Refresh failed: " + error.message;
    }
  }

  function showKey(result) {
    const out = $("key-result");
    out.replaceChildren();
    const table = el("table");
    const fields = result.reset
      ? [["rule", result.rule], ["hashed key", result.key], ["reset", result.existed ? "state forgotten" : "no state to forget"]]
      : [
          ["rule", result.rule],
          ["hashed key", result.key],
          ["scope", result.scope],
          ["quota", result.quota + (result.override ? " (this account's own limit)" : " (the rule's)")],
          ["remaining", result.remaining],
          ["resets in", wait(result.reset_after_ms)],
          ["retry after", result.retry_after_ms === null ? "- (a request would be admitted)" : wait(result.retry_after_ms)],
        ];
    for (const [name, value] of fields) {
      const tr = row([el("th", name), el("td", value, "mono")]);
      tr.dataset.field = name;
      table.append(tr);
    }
    out.append(table);
  }

  async function keyAction(method, path) {
    const rule = $("key-rule").value;
    const key = $("key-value").value;
    $("key-error").textContent = "";
    if (key === "") {
      $("key-error").textContent = "Enter the raw API key, client address or user id.";
      return;
    }
    const query = "?rule=" + encodeURIComponent(rule) + "&key=" + encodeURIComponent(key);
    try {
      showKey(await api(method, path + query));
      if (method === "POST") refresh();
    } catch (error) {
      if (String(error.message) !== "unauthorized") $("key-error").textContent = error.message;
    }
  }

  function login(token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = false;
    refresh();
    if (timer === null) timer = setInterval(() => { if (document.visibilityState === "visible") refresh(); }, 5000);
  }

  function logout(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (timer !== null) clearInterval(timer);
    timer = null;
    $("app").hidden = true;
    $("logout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }

  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (token !== "") login(token);
  });
  $("logout").addEventListener("click", () => logout(""));
  $("refresh").addEventListener("click", () => refresh());
  $("key-form").addEventListener("submit", (event) => event.preventDefault());
  $("lookup").addEventListener("click", () => keyAction("GET", "/state"));
  $("reset").addEventListener("click", () => keyAction("POST", "/reset"));

  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved !== null) login(saved);
  else $("token").focus();
})();
`;

const BODY = `
<header>
  <h1>Sluice</h1>
  <span class="note" id="updated"></span>
  <span class="spacer"></span>
  <button type="button" id="refresh">Refresh</button>
  <button type="button" id="logout" hidden>Log out</button>
</header>

<section id="login">
  <h2>Log in</h2>
  <p class="note">Enter the admin token (the <code>ADMIN_TOKEN</code> secret). It stays in this tab's session storage
  and is sent only as an <code>Authorization</code> header to this origin.</p>
  <form id="login-form" method="post" autocomplete="off">
    <input type="password" id="token" name="token" autocomplete="current-password" placeholder="admin token" size="40" required>
    <button type="submit" id="login-button">Log in</button>
  </form>
  <p class="error" id="login-error" role="alert"></p>
</section>

<main id="app" hidden>
  <p class="note" id="per-isolate"><strong>Counters are per isolate.</strong> The counters, the recent denials and the
  state of <code>scope: local</code> rules below are those of the one isolate that answered this page; Cloudflare runs
  many. For the fleet-wide view, query Analytics Engine (docs/operations.md). <code>scope: global</code> key state is
  exact everywhere: it lives in the key's Durable Object.</p>
  <p class="error" id="status" role="alert"></p>

  <h2>This isolate's counters</h2>
  <div class="grid" id="stats"></div>

  <h2>Recent denials in this isolate</h2>
  <p class="note">The last <span id="denials-max"></span> (rule, key) denials, newest first; repeated denials of the same
  key in a row share a line. Keys are hashed.</p>
  <table>
    <thead><tr><th>time (UTC)</th><th>rule</th><th>hashed key</th><th>retry after</th><th>source</th><th>count</th></tr></thead>
    <tbody id="denials-body"></tbody>
  </table>
  <p class="note" id="denials-empty">No denials in this isolate yet.</p>

  <h2>Look up or reset a key</h2>
  <p class="note">Looking up charges nothing. Reset forgets the key's state: its next request starts fresh.</p>
  <form id="key-form" method="post" autocomplete="off">
    <select id="key-rule" aria-label="rule"></select>
    <input type="text" id="key-value" placeholder="raw API key, client address or user id" size="40" aria-label="key">
    <button type="button" id="lookup">Look up</button>
    <button type="button" id="reset">Reset</button>
  </form>
  <p class="error" id="key-error" role="alert"></p>
  <div id="key-result"></div>

  <h2>Rules as deployed</h2>
  <table>
    <thead><tr><th>id</th><th>limits</th><th>plans</th><th>route</th><th>identity</th><th>mode</th></tr></thead>
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
