/** Placeholder: the gateway replaces this. Answers with a summary of the compiled rules. */
import { DurableObject } from "cloudflare:workers";
import { RULES } from "../generated/rules.ts";

export class SluiceLimiter extends DurableObject {}

export default {
  async fetch(): Promise<Response> {
    return Response.json({ rules: RULES.map((r) => ({ id: r.id, algorithm: r.algorithm })) });
  },
} satisfies ExportedHandler;
