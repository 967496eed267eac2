import type { Env as SluiceEnv } from "../../src/edge/settings.ts";

declare global {
  namespace Cloudflare {
    // Merges the Worker's bindings into `env` from cloudflare:test.
    interface Env extends SluiceEnv {}
  }
}
