// The local admin token for `npm start`: `.dev.vars` (git-ignored, read by wrangler dev) gets an ADMIN_TOKEN line
// when it has none, a fresh random one, printed once when made; after that it is only pointed at, never printed.
//
//   node scripts/dev-admin-token.mjs [--file PATH] [--port N]
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";

/**
 * Makes sure `file` holds an ADMIN_TOKEN; returns what to tell the user (the token itself only when just made).
 * Other lines of the file are kept as they are.
 */
export function ensureAdminToken(file = ".dev.vars", pageUrl = "http://127.0.0.1:8787/_sluice/") {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "";
  if (/^\s*ADMIN_TOKEN\s*=\s*\S/m.test(text)) {
    return `admin page: ${pageUrl} (log in with ADMIN_TOKEN from ${file})\n`;
  }
  const token = randomBytes(24).toString("hex");
  const separator = text === "" || text.endsWith("\n") ? "" : "\n";
  writeFileSync(
    file,
    `${text}${separator}# The local admin token for /_sluice/ (written by npm start).\nADMIN_TOKEN=${token}\n`,
    {
      mode: 0o600,
    },
  );
  return (
    `generated a local admin token into ${file} (git-ignored; shown this once):\n` +
    `  ${token}\n` +
    `admin page: ${pageUrl} (log in with that token)\n`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const value = (name, fallback) => (args.includes(name) ? args[args.indexOf(name) + 1] : fallback);
  process.stdout.write(
    ensureAdminToken(value("--file", ".dev.vars"), `http://127.0.0.1:${value("--port", "8787")}/_sluice/`),
  );
}
