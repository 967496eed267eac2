/**
 * The dashboard page's script: its state, its helpers, the admin API calls, logging in and out, and the refresh loop;
 * what it shows is in dashboard_views.ts. Logging in is one call (`LOGIN_CHECK_PATH`), so one wrong token is one
 * failed check of the admin guard; a refused token is never kept, and a lockout (429) is shown with its time left.
 * The token lives in `sessionStorage` (this tab only) and travels only as `Authorization: Bearer` from `fetch`.
 */
import { VIEWS } from "./dashboard_views.ts";

/** The one admin call a login makes: it checks the token and loads the rules. */
export const LOGIN_CHECK_PATH = "/rules";

export const SCRIPT = `
"use strict";
(() => {
  const TOKEN_KEY = "sluice-admin-token";
  const BASE = "/_sluice";
  const LOGIN_CHECK = "${LOGIN_CHECK_PATH}";
  const FLEET_EVERY_MS = 60000;
  // How long the page waits for the Worker: above the Worker's own wait for Analytics Engine (fleet.ts, 10 s), so a
  // hung API is reported by the Worker by name; a Worker that does not answer at all is reported here.
  const CALL_TIMEOUT_MS = 20000;
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
  // A share: one decimal from 0.1%; below it two significant digits, so 12 of 2,916,000 is 0.00041%, never 0.000%.
  const pct = (part, whole) => {
    if (!(whole > 0)) return "-";
    const p = (100 * part) / whole;
    return (p === 0 || p >= 0.1 ? p.toFixed(1) : p.toPrecision(2)) + "%";
  };
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
  async function call(method, path, token, headers) {
    let response;
    try {
      response = await fetch(BASE + path, {
        method,
        headers: { ...headers, Authorization: "Bearer " + token },
        cache: "no-store",
        credentials: "omit",
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
    } catch (error) {
      const why = error.name === "TimeoutError" ? "within " + CALL_TIMEOUT_MS / 1000 + " s" : "(" + error.message + ")";
      return { status: 0, body: null, detail: "the Worker did not answer " + why };
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
  async function api(method, path, headers) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token === null) throw new Error("not logged in");
    const r = await call(method, path, token, headers);
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
${VIEWS}
  // One call at a time: if the token is refused, nothing else is sent with it.
  async function refresh() {
    try {
      const deployed = await api("GET", LOGIN_CHECK);
      showRules(deployed.rules, deployed.denies || []);
      const stats = await api("GET", "/stats");
      showStats(stats, Date.now());
      showDenials(await api("GET", "/denials"));
      showBans(await api("GET", "/bans"));
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
    showRules(body.rules, body.denies || []);
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
