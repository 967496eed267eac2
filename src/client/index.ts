/**
 * `sluice/client`: what a Worker that binds to Sluice imports. The binding's types, `requestForCheck` (a request for
 * `check`, with the start of a body `_method` may be read from) and `requestLike` (without its body), `withSluice`
 * for plain `fetch` handlers, and the gateway's way of answering a decision. The Hono middleware is `sluice/hono`.
 */
export { DEFAULT_BINDING, refusalResponse, withHeaders } from "./respond.ts";
export type {
  CheckResult,
  LimitOptions,
  LimitOutcome,
  LimitResult,
  Problem,
  Refusal,
  RequestLike,
  RuleOutcome,
  RuleResult,
  SluiceBinding,
} from "./types.ts";
export { CHECK_BODY_MAX_BYTES, MAX_LIMIT_KEY_CHARS, requestForCheck, requestLike } from "./types.ts";
export { type FetchHandler, type SluicedHandler, type WithSluiceOptions, withSluice } from "./with_sluice.ts";
