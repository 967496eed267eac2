/**
 * Debian's NGINX as the origin server in front of the recording origin (test/support/recording_origin.ts), as most
 * APIs run: NGINX terminates HTTP and proxies to the application, streaming both ways (`proxy_request_buffering off`,
 * `proxy_buffering off`, WebSocket upgrades passed on). Run in the foreground with everything under a temp directory,
 * on a free port, stopped by its pid. Needs the `nginx` binary: `.ci/run` installs it; without it this throws, saying
 * how to install it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fetchWithin, freePort } from "./wrangler_dev.ts";

export interface NginxOrigin {
  readonly base: string;
  stop(): Promise<void>;
}

export function nginxBinary(): string {
  for (const candidate of ["/usr/sbin/nginx", "/usr/local/sbin/nginx"]) if (existsSync(candidate)) return candidate;
  const found = execFileSync("sh", ["-c", "command -v nginx || true"], { encoding: "utf8" }).trim();
  if (found !== "") return found;
  throw new Error(
    "nginx not found: the real-origin suite runs Debian's NGINX as an origin. Install it: apt-get update && apt-get install -y nginx (.ci/run does)",
  );
}

function conf(dir: string, port: number, upstreamPort: number): string {
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  return `${user}worker_processes 1;
pid ${dir}/nginx.pid;
events { worker_connections 256; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/tmp;
  proxy_temp_path ${dir}/tmp;
  fastcgi_temp_path ${dir}/tmp;
  uwsgi_temp_path ${dir}/tmp;
  scgi_temp_path ${dir}/tmp;
  map $http_upgrade $connection_upgrade { default upgrade; "" close; }
  server {
    listen 127.0.0.1:${port};
    client_max_body_size 0;
    location / {
      proxy_pass http://127.0.0.1:${upstreamPort};
      proxy_http_version 1.1;
      proxy_request_buffering off;
      proxy_buffering off;
      proxy_set_header Host $http_host;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
    }
  }
}
`;
}

/** Start NGINX proxying to 127.0.0.1:`upstreamPort`. */
export async function startNginxOrigin(upstreamPort: number): Promise<NginxOrigin> {
  const binary = nginxBinary();
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-origin-"));
  mkdirSync(join(dir, "tmp"));
  const port = await freePort();
  writeFileSync(join(dir, "nginx.conf"), conf(dir, port, upstreamPort));
  const output: string[] = [];
  const nginx: ChildProcess = spawn(
    binary,
    ["-p", dir, "-c", join(dir, "nginx.conf"), "-g", "daemon off; master_process on; error_log stderr;"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  nginx.stderr?.on("data", (d: Buffer) => output.push(d.toString()));
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (nginx.exitCode === null && nginx.pid !== undefined) {
      const exited = new Promise((resolve) => nginx.once("exit", resolve));
      process.kill(nginx.pid, "SIGTERM");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 200; i++) {
    if (nginx.exitCode !== null) throw new Error(`nginx exited (${nginx.exitCode}):\n${output.join("")}`);
    try {
      await fetchWithin(`${base}/nginx-probe`, 1000);
      return { base, stop };
    } catch {
      await sleep(50); // not listening yet
    }
  }
  await stop();
  throw new Error(`nginx did not start listening:\n${output.join("")}`);
}
