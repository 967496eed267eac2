/**
 * What a rate-based rule's Action makes of the Sluice rule: Count a shadow rule, Block an enforcing one (its
 * CustomResponse's ResponseCode, else AWS's 403, as `status`), Captcha and Challenge an enforcing one that refuses where AWS would
 * challenge (approximate, as for Cloudflare's challenges). AWS lets a rate-based rule take any action but Allow.
 */
import {
  AwsImportError,
  field,
  here,
  isInteger,
  isObject,
  isString,
  type Obj,
  type Place,
  soleKey,
} from "./aws_file.ts";
import type { Findings } from "./cloudflare_count.ts";
import type { FieldValue } from "./report.ts";

/** The action's name and the fields it gives. */
export function actionFields(
  place: Place,
  action: Obj,
  path: string,
  found: Findings,
): [string, [string, FieldValue][]] {
  const [verb, body] = soleKey(place, action, `${path}.Action`, "an action");
  const at = here(place, action, verb);
  if (!isObject(body)) throw new AwsImportError(`${at}: ${path}.Action.${verb}: must be an object`);
  if (verb === "Count") return [verb, [["mode", "shadow"]]];
  if (verb === "Captcha" || verb === "Challenge") {
    // Refusing is what a rate limiter can do where AWS would challenge; a shadow rule would stop limiting.
    found.approximate.push({
      message: `action ${verb}: Sluice refuses (429) where AWS would challenge, so a visitor who would pass the ${verb.toLowerCase()} is refused too (mode: shadow to watch it first)`,
      at,
    });
    return [verb, []];
  }
  if (verb !== "Block") {
    found.leftOut.push({
      message: `action ${verb}: not a rate-based rule's action (AWS takes Block, Count, Captcha or Challenge)`,
      at,
    });
    return [verb, []];
  }
  // AWS answers a Block with 403 Forbidden unless a CustomResponse says otherwise ("Using rule actions in AWS WAF");
  // Sluice's refusal is 429 unless `status` says otherwise, so a plain Block keeps its 403 as `status: 403`.
  const response = field(place, body, "CustomResponse", `${path}.Action.Block`, isObject, "an object");
  if (response === undefined) return [verb, [["status", 403]]];
  const where = `${path}.Action.Block.CustomResponse`;
  const status = field(place, response, "ResponseCode", where, isInteger, "a whole number");
  if (field(place, response, "CustomResponseBodyKey", where, isString, "a string") !== undefined)
    found.notes.push({
      message: "its custom response body: Sluice answers a refusal with its own problem+json body",
      at: here(place, response, "CustomResponseBodyKey"),
    });
  if (response.ResponseHeaders !== undefined)
    found.notes.push({
      message: "its response headers: Sluice answers a refusal with its own (Retry-After, RateLimit)",
      at: here(place, response, "ResponseHeaders"),
    });
  if (status === undefined || status === 429) return [verb, []];
  if (status >= 400 && status <= 599) return [verb, [["status", status]]];
  found.leftOut.push({
    message: `CustomResponse.ResponseCode ${status}: a Sluice refusal's status is 400 to 599`,
    at: here(place, response, "ResponseCode"),
  });
  return [verb, []];
}
