/**
 * What the dashboard shows, as script text that runs inside the page's script (dashboard_script.ts), sharing its
 * helpers and state: the rules as deployed, this isolate's counters with per-second rates, its recent denials (each
 * row can be looked up or reset), a key's state, account and overrides, a reset after a confirmation, and the fleet
 * view from Analytics Engine (or how to enable it).
 */
export const VIEWS = `
  // The rule's id, and under it what the rule is for (its description), when it says.
  function idCell(r) {
    const cell = el("td", r.id, "mono");
    if (r.description) cell.append(el("div", r.description, "note"));
    return cell;
  }

  // A rule's plans and routes, as two cells.
  function whereCells(m) {
    const routes = m.route === null ? "any" : [m.route, ...m.moreRoutes].map((x) => x.source).join(", ");
    const except = m.except.length === 0 ? "" : " except " + m.except.map((x) => x.source).join(", ");
    return [m.plans === null ? "any" : m.plans.join(", "), routes + except];
  }

  // Deny rules (deny: true) are listed after the limits, with their status; they have no key to look up.
  function showRules(list, denies) {
    rules = list;
    const body = $("rules-body");
    body.replaceChildren();
    const select = $("key-rule");
    const chosen = select.value;
    select.replaceChildren();
    for (const r of list) {
      const m = r.match;
      body.append(row([idCell(r), limitsOf(r), ...whereCells(m), m.identity, r.mode, r.scope, r.onError]));
      const option = el("option", r.id + " (" + m.identity + ")");
      option.value = r.id;
      select.append(option);
    }
    for (const r of denies) body.append(row([idCell(r), limitsOf(r), ...whereCells(r.match), "-", r.mode, "-", "-"]));
    if (chosen) select.value = chosen;
  }

  // What each of this isolate's counters counts; "total" counters also get a per-second rate between refreshes.
  // A request asks each rule that applies to it: counters of rule decisions can exceed the count of requests.
  const STATS = {
    requests: ["total", "requests through the gateway (admin requests excluded)"],
    denials: ["total", "requests denied, by any enforcing rule"],
    shadow_denials: ["total", "would-be denials of shadow rules"],
    fail_open: ["total", "rule decisions that failed and were skipped (on_error: open)"],
    fail_closed: ["total", "rule decisions that failed and refused the request (on_error: closed)"],
    object_calls: ["total", "Durable Object calls, retries included (a coalesced batch is one)"],
    object_retries: ["total", "retries after a retryable object error"],
    batched_requests: ["total", "rule decisions sent to an object in a batch of 2 or more (one per rule a request asks)"],
    cache_answers: ["total", "rule decisions answered by the blocked-key cache, without a call"],
    lease_answers: ["total", "rule decisions answered from a lease, without a call"],
    leases: ["total", "leases granted to this isolate"],
    lease_units_returned: ["total", "lease units given back unused"],
    queue_overflows: ["total", "requests refused because too many already waited for their key"],
    plan_cache_hits: ["total", "API keys answered by the plan cache (no KV read)"],
    kv_reads: ["total", "account lookups sent to KV"],
    key_lookups_refused: ["total", "account lookups refused (the address used up KEY_LOOKUPS_PER_MIN)"],
    charges: ["total", "charges sent after the origin answered (count_when, cost_header)"],
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

  function showBans(list) {
    const body = $("bans-body");
    body.replaceChildren();
    $("bans-empty").hidden = list.bans.length > 0;
    $("bans-max").textContent = String(list.max);
    for (const b of list.bans) {
      const actions = el("td");
      actions.append(resetButton(b.rule, b.key_hash));
      body.append(row([el("td", b.rule, "mono"), hashCell(b.key_hash), wait(b.ends_in_ms), actions]));
    }
  }

  // A key hash, shortened, with the whole hash on hover.
  function hashCell(hash) {
    const cell = el("td", short(hash), "mono");
    cell.title = hash;
    return cell;
  }

  // A small button; \`action\` (data-action) names it for the browser tests.
  function button(label, action, onClick) {
    const b = el("button", label, "small");
    b.type = "button";
    if (action !== null) b.dataset.action = action;
    b.addEventListener("click", onClick);
    return b;
  }

  function resetButton(rule, hash) {
    return button("Reset\\u2026", "reset", () => askReset(rule, { key_hash: hash }, short(hash)));
  }

  function showDenials(list) {
    const body = $("denials-body");
    body.replaceChildren();
    $("denials-empty").hidden = list.denials.length > 0;
    $("denials-max").textContent = String(list.capacity);
    for (const d of list.denials) {
      const actions = el("td");
      const look = button("Look up", "lookup", () => lookUp(d.rule, { key_hash: d.key }));
      actions.append(look, " ", resetButton(d.rule, d.key));
      const key = hashCell(d.key);
      body.append(
        row([utc(d.at_ms), el("td", d.rule, "mono"), key, wait(d.retry_after_ms), d.source, num(d.count), actions]),
      );
    }
  }

  // A raw key travels in a header, never in the URL (URLs reach request logs); a hash may.
  function keyCall(method, route, rule, key) {
    const query = rule === null ? "" : "?rule=" + encodeURIComponent(rule);
    if (key.key_hash !== undefined) return api(method, route + query + "&key_hash=" + encodeURIComponent(key.key_hash));
    // Header values are ISO-8859-1: say so rather than let fetch fail as if the Worker had not answered.
    if (/[^\\x20-\\x7e]/.test(key.key)) throw new Error("A key is sent in a header: printable ASCII only.");
    return api(method, route + query, { "X-Sluice-Key": key.key });
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
      if (result.ban_ends_in_ms != null) fields.push(["banned", "for " + wait(result.ban_ends_in_ms) + " more (block_for; Reset lifts it)"]);
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
      const state = await keyCall("GET", "/state", rule, key);
      const r = rules.find((x) => x.id === rule);
      const account = key.key !== undefined && r && r.match.identity === "api_key"
        ? await keyCall("GET", "/account", null, key)
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
      showKey(await keyCall("POST", "/reset", action.rule, action.key), null);
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

  // The y axis's ticks: 0 and round steps (1, 2 or 5 times a power of ten) up to the first at or above max.
  function niceTicks(max) {
    const raw = Math.max(1, max) / 4;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    const ticks = [0];
    while (ticks[ticks.length - 1] < max) ticks.push(ticks[ticks.length - 1] + Math.max(1, step));
    return ticks.length > 1 ? ticks : [0, 1];
  }

  // A bucket's width in words: "1-minute", "15-minute", "1-hour".
  const bucketName = (s) => (s % 3600 === 0 ? s / 3600 + "-hour" : s / 60 + "-minute");

  // Denials per rule over the period, one line per rule, zero where a bucket has no row; each point counts the
  // denials (rule decisions, fleet-wide, sampling-weighted) in one bucket of f.bucket_s seconds.
  function drawChart(f) {
    const svg = $("fleet-chart");
    svg.replaceChildren();
    const legend = $("fleet-legend");
    legend.replaceChildren();
    const W = 960, H = 240, L = 64, R = 16, T = 12, B = 44;
    const bucketMs = f.bucket_s * 1000;
    const endMs = Math.floor(f.as_of_ms / bucketMs) * bucketMs;
    const spanMs = { "1h": 3600000, "6h": 21600000, "24h": 86400000, "7d": 604800000 }[f.period] || 3600000;
    const startMs = endMs - spanMs + bucketMs;
    const series = new Map();
    for (const p of f.denials_over_time) {
      if (!series.has(p.rule)) series.set(p.rule, new Map());
      series.get(p.rule).set(p.t_ms, p.denials);
    }
    const ticks = niceTicks(Math.max(0, ...f.denials_over_time.map((p) => p.denials)));
    const max = ticks[ticks.length - 1];
    const x = (t) => L + ((t - startMs) / Math.max(1, endMs - startMs)) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    for (const v of ticks) {
      svg.append(line("line", { x1: L, y1: y(v), x2: W - R, y2: y(v), stroke: v === 0 ? "#9ca3af" : "#e5e7eb" }));
      svg.append(line("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "data-axis": "y" }, fmt(v)));
    }
    svg.append(line("line", { x1: L, y1: T, x2: L, y2: y(0), stroke: "#9ca3af" }));
    const unit = "denials per " + bucketName(f.bucket_s) + " bucket";
    svg.append(line("text", { x: 12, y: T + (H - T - B) / 2, transform: "rotate(-90 12 " + (T + (H - T - B) / 2) + ")", "text-anchor": "middle", "data-axis": "y-title" }, unit));
    const long = spanMs > 86400000;
    for (let k = 0; k <= 6; k++) {
      const t = startMs + Math.round((k * (endMs - startMs)) / 6 / bucketMs) * bucketMs;
      const anchor = k === 0 ? "start" : k === 6 ? "end" : "middle";
      const label = long ? utc(t).slice(5, 16) : utc(t).slice(11, 16);
      svg.append(line("line", { x1: x(t), y1: y(0), x2: x(t), y2: y(0) + 4, stroke: "#9ca3af" }));
      svg.append(line("text", { x: x(t), y: H - 24, "text-anchor": anchor, "data-axis": "x" }, label));
    }
    svg.append(line("text", { x: L + (W - L - R) / 2, y: H - 6, "text-anchor": "middle", "data-axis": "x-title" }, "time (UTC), each point one " + bucketName(f.bucket_s) + " bucket"));
    $("fleet-chart-unit").textContent = "Each point: the " + unit + ", summed over every isolate and key (sampling-weighted).";
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
      item.append(swatch, rule + " (" + fmt([...points.values()].reduce((a, b) => a + b, 0)) + " in the period)");
      legend.append(item);
    }
    $("fleet-chart-empty").hidden = series.size > 0;
  }

  // What one rule's limit is a budget of: a key's (the usual), an isolate's, or the whole fleet's (key: global).
  function limitApplies(r) {
    const fleetWide = Array.isArray(r.key) && r.key.length === 0;
    if (r.scope === "local") return fleetWide ? "each isolate, all keys together" : "each key, in each isolate";
    return fleetWide ? "the whole fleet, all keys together" : "each key on its own";
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
      const act = el("td");
      act.append(button("Look up", null, () => lookUp(k.rule, { key_hash: k.key_hash })));
      const key = hashCell(k.key_hash);
      top.append(row([key, el("td", k.rule, "mono"), k.plan, num(k.denials), wait(k.mean_retry_after_ms), act]));
    }
    $("fleet-keys-empty").hidden = f.top_denied_keys.length > 0;
    const spanS = { "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800 }[f.period] || 3600;
    const body = $("fleet-rules-body");
    body.replaceChildren();
    const limits = $("fleet-limits-body");
    limits.replaceChildren();
    for (const t of f.rules) {
      body.append(
        row([
          el("td", t.rule, "mono"),
          num(t.decisions),
          el("td", rate(t.decisions / spanS), "num"),
          num(t.denied),
          el("td", pct(t.denied, t.decisions), "num"),
          el("td", pct(t.shadow_denied, t.decisions), "num"),
          el("td", pct(t.fail_open, t.decisions), "num"),
          num(t.fail_closed),
        ]),
      );
      const r = rules.find((x) => x.id === t.rule);
      limits.append(row([el("td", t.rule, "mono"), r ? limitsOf(r) : "(not deployed now)", r ? limitApplies(r) : "-"]));
    }
  }

  async function refreshFleet() {
    fleetAt = Date.now();
    try {
      const f = await api("GET", "/fleet?period=" + encodeURIComponent($("fleet-period").value));
      $("fleet-error").textContent = "";
      $("fleet-data").hidden = false;
      showFleet(f);
    } catch (error) {
      if (error.message === "logged out") return;
      // What was shown is no longer known to be true: take it down rather than leave a stale chart up (the period
      // stays to choose from).
      $("fleet-data").hidden = true;
      $("fleet-source").textContent = "";
      $("fleet-error").textContent = "Fleet view failed: " + error.message;
    }
  }
`;
