import type { SluiceBinding } from "../../src/client/types.ts";
import type { Env as SluiceEnv } from "../../src/edge/settings.ts";

declare global {
  namespace Cloudflare {
    // Merges the Worker's bindings into `env` from cloudflare:test, and the test's own (vitest.workers.config.ts).
    interface Env extends SluiceEnv {
      /** This Worker's `RateLimiter` entrypoint, through a service binding. */
      readonly SLUICE: SluiceBinding;
      /** The same, with `props = { rule = "login-per-ip" }`. */
      readonly SLUICE_LOGIN: SluiceBinding;
      /** The example consumers (examples/), bound to this Worker's entrypoint. */
      readonly PLAIN_WORKER: Fetcher;
      readonly HONO_API: Fetcher;
    }
  }
}
