/**
 * The dashboard page's markup and style (dashboard.ts serves them). Every value the script writes into the markup is
 * written with `textContent`, never parsed as HTML.
 */

export const STYLE = `
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

export const BODY = `
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
      <div id="fleet-data">
      <h3>Denials per rule over time</h3>
      <p class="note" id="fleet-chart-unit"></p>
      <svg class="chart" id="fleet-chart" viewBox="0 0 960 240" role="img" aria-label="denials per rule over time"></svg>
      <div class="legend" id="fleet-legend"></div>
      <p class="note" id="fleet-chart-empty">No denials in this period.</p>
      <h3>Most denied keys</h3>
      <p class="note">Hashed: a hash names a key only to someone who has the key. Look up shows its state now.</p>
      <table>
        <thead><tr><th>hashed key</th><th>rule</th><th>plan</th><th class="num">denials</th><th>mean retry after</th><th></th></tr></thead>
        <tbody id="fleet-keys-body"></tbody>
      </table>
      <p class="note" id="fleet-keys-empty" hidden>No key was denied in this period.</p>
      <h3>Each rule's decisions, fleet-wide</h3>
      <p class="note">Over every isolate and every key: one decision per rule a request asks, so a request asked by
      three rules counts three times here. Sampling-weighted, over the whole period.</p>
      <table>
        <thead><tr><th>rule</th><th class="num">decisions, all keys</th><th class="num">per second, all keys</th>
        <th class="num">denied</th><th class="num">denied %</th><th class="num">shadow-denied %</th><th class="num">fail-open %</th>
        <th class="num">fail-closed</th></tr></thead>
        <tbody id="fleet-rules-body"></tbody>
      </table>
      <h3>The limits these decisions were made under</h3>
      <p class="note">Not comparable to the fleet-wide rates above: most limits are a budget of each key on its own,
      so the fleet admits many times a limit when many keys call. The last column says whose budget each limit is.</p>
      <table>
        <thead><tr><th>rule</th><th>limit</th><th>a budget of</th></tr></thead>
        <tbody id="fleet-limits-body"></tbody>
      </table>
      </div>
    </div>
    <p class="error" id="fleet-error" role="alert"></p>
  </section>

  <h2>This isolate's counters</h2>
  <p class="note" id="per-isolate"><strong>Counters are per isolate.</strong> The counters, the recent denials and the
  state of <code>scope: local</code> rules below are those of the one isolate that answered this page; Cloudflare runs
  many. <code>scope: global</code> key state is exact everywhere: it lives in the key's Durable Object.
  <span id="stats-rate-note"></span></p>
  <table>
    <thead><tr><th>what it counts (requests, or rule decisions: one per rule a request asks)</th><th class="num">since the isolate started</th><th class="num">per second</th><th>bound</th></tr></thead>
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

  <h2>Active bans (block_for)</h2>
  <p class="note">Keys held out by a rule's <code>block_for</code>, longest first, from the ban index: a ban is listed
  once an isolate has met it (a refusal or a charge that started it, or a request it refused), up to
  <span id="bans-max"></span>. Keys are hashed; Reset lifts a ban.</p>
  <table>
    <thead><tr><th>rule</th><th>hashed key</th><th>ends in</th><th></th></tr></thead>
    <tbody id="bans-body"></tbody>
  </table>
  <p class="note" id="bans-empty">No bans running.</p>

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
