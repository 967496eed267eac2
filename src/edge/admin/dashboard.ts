/**
 * The dashboard at `/_sluice/`: one self-contained HTML page (inline style and script, no external assets) over the
 * admin API. The page carries no data, so it is served without a token (but, like the rest of `/_sluice/`, only when
 * ADMIN_TOKEN is set); it asks for the token in a login form (dashboard_script.ts). The Content-Security-Policy
 * allows only this page's own script and style (by hash) and requests to this origin, and forbids form submission (a
 * form that did submit would put the token in the URL), framing and a base URL.
 */
import { BODY, STYLE } from "./dashboard_markup.ts";
import { SCRIPT } from "./dashboard_script.ts";

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
