/**
 * Ratelimit service configurations with the service's verdict on each: `REFUSED` (the shapes of its own invalid test
 * configurations and the rest of its loader's checks, with its message) and `ACCEPTED` (files it loads, YAML 1.1's
 * corners among them). test/unit/import.envoy_validity.test.ts holds the import to them; scripts/ratelimit-config-check.ts
 * runs the service's own loader on them, by hand, to show the verdicts are the service's.
 */
/** A one-descriptor configuration: `key: remote_address` with the given lines under it (indented 4). */
export const one = (lines: string) =>
  `domain: edge\ndescriptors:\n  - key: remote_address\n${lines.replace(/^/gm, "    ")}\n`;

export const REFUSED: [string, string, RegExp][] = [
  [
    "an unknown key: ratelimit for rate_limit (service test misspelled_key)",
    one("ratelimit:\n  unit: day\n  requests_per_unit: 5"),
    /unknown key 'ratelimit'/,
  ],
  [
    "an unknown key inside rate_limit (service test misspelled_key2)",
    one("rate_limit:\n  unit: day\n  requestsperunit: 5"),
    /unknown key 'requestsperunit'/,
  ],
  ["an unknown key beside domain", "domain: edge\ntimeout: 5\ndescriptors: []\n", /unknown key 'timeout'/],
  [
    "a list of something other than mappings (service test non_map_list)",
    "domain: edge\ndescriptors:\n  - a\n  - b\n",
    /list of something other than mappings/,
  ],
  [
    "a descriptor without a key (service test empty_key)",
    "domain: edge\ndescriptors:\n  - value: v1\n",
    /descriptor has empty key/,
  ],
  [
    "the same key and value twice in one level (service test duplicate_key)",
    "domain: edge\ndescriptors:\n  - key: k1\n    value: v1\n\n  - key: k1\n    value: v1\n",
    /duplicate descriptor composite key 'k1_v1'/,
  ],
  [
    "a key a_b beside key a with value b: one composite key",
    "domain: edge\ndescriptors:\n  - key: a\n    value: b\n  - key: a_b\n",
    /duplicate descriptor composite key 'a_b'/,
  ],
  [
    "an unknown unit (service test bad_limit_unit)",
    one("rate_limit:\n  unit: foo\n  requests_per_unit: 5"),
    /invalid rate limit unit 'foo'/,
  ],
  ["no unit", one("rate_limit:\n  requests_per_unit: 5"), /invalid rate limit unit ''/],
  [
    "unlimited with a unit (service test unlimited_with_unit)",
    one("rate_limit:\n  unlimited: true\n  unit: day\n  requests_per_unit: 25"),
    /should not specify rate limit unit when unlimited/,
  ],
  [
    "replaces naming its own limit (service test replaces_self)",
    one("rate_limit:\n  name: self\n  replaces:\n    - name: self\n  unit: second\n  requests_per_unit: 5"),
    /replaces should not contain name of same descriptor/,
  ],
  [
    "replaces with an empty name (service test replaces_empty)",
    one("rate_limit:\n  name: self\n  replaces:\n    - name:\n  unit: second\n  requests_per_unit: 5"),
    /should not have an empty replaces entry/,
  ],
  [
    "share_threshold without a wildcard",
    one("share_threshold: true\nrate_limit:\n  unit: second\n  requests_per_unit: 5"),
    /share_threshold can only be used with wildcard values/,
  ],
  ["a float count", one("rate_limit:\n  unit: second\n  requests_per_unit: 1.0"), /1\.0 is a float/],
  [
    "a negative count",
    one("rate_limit:\n  unit: second\n  requests_per_unit: -1"),
    /cannot unmarshal -1 into a whole number/,
  ],
  [
    "a count above 2^32-1",
    one("rate_limit:\n  unit: second\n  requests_per_unit: 4294967296"),
    /cannot unmarshal 4294967296 into a whole number/,
  ],
  [
    "a quoted yes for a boolean (a string to yaml.v2)",
    one('shadow_mode: "yes"\nrate_limit:\n  unit: second\n  requests_per_unit: 5'),
    /shadow_mode: cannot unmarshal "yes" into a boolean/,
  ],
  [
    "a number for a boolean",
    one("shadow_mode: 1\nrate_limit:\n  unit: second\n  requests_per_unit: 5"),
    /into a boolean/,
  ],
  [
    "descriptors as a mapping",
    "domain: edge\ndescriptors:\n  key: remote_address\n",
    /descriptors: cannot unmarshal a mapping into a list/,
  ],
  ["an empty domain", 'domain: ""\ndescriptors: []\n', /config file cannot have empty domain/],
];

export const ACCEPTED: [string, string][] = [
  ["a plain limit", one("rate_limit:\n  unit: second\n  requests_per_unit: 5")],
  ["shadow_mode: yes (YAML 1.1)", one("shadow_mode: yes\nrate_limit:\n  unit: second\n  requests_per_unit: 5")],
  ["shadow_mode: on", one("shadow_mode: on\nrate_limit:\n  unit: second\n  requests_per_unit: 5")],
  ["shadow_mode: y", one("shadow_mode: y\nrate_limit:\n  unit: second\n  requests_per_unit: 5")],
  ["shadow_mode: off", one("shadow_mode: off\nrate_limit:\n  unit: second\n  requests_per_unit: 5")],
  ["a unit in mixed case", one("rate_limit:\n  unit: Minute\n  requests_per_unit: 5")],
  ["a unit of week", one("rate_limit:\n  unit: week\n  requests_per_unit: 5")],
  ["no requests_per_unit (0)", one("rate_limit:\n  unit: second")],
  ["unlimited without a unit", one("rate_limit:\n  unlimited: true")],
  [
    "metadata of any keys and floats",
    one("metadata:\n  anything: { goes: [1, 2.5] }\nrate_limit:\n  unit: second\n  requests_per_unit: 5"),
  ],
  ["a key that looks like a timestamp", "domain: edge\ndescriptors:\n  - key: 2001-12-14\n"],
  [
    "share_threshold with a wildcard",
    "domain: edge\ndescriptors:\n  - key: path\n    value: /files/*\n    share_threshold: true\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
  ],
  [
    "a wildcard inside a value",
    "domain: edge\ndescriptors:\n  - key: path\n    value: /a*/b\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
  ],
  ["quota_mode", one("quota_mode: true\nrate_limit:\n  unit: second\n  requests_per_unit: 5")],
  [
    "a number and a hex in text fields",
    "domain: 5\ndescriptors:\n  - key: remote_address\n    value: 0x1F\n    rate_limit: { unit: second, requests_per_unit: 5 }\n",
  ],
  [
    "replaces naming another limit",
    one("rate_limit:\n  name: mine\n  replaces:\n    - name: other\n  unit: second\n  requests_per_unit: 5"),
  ],
  ["the same key with two values", "domain: edge\ndescriptors:\n  - key: k\n    value: a\n  - key: k\n    value: b\n"],
  ["a requests_per_unit of 2^32-1", one("rate_limit:\n  unit: second\n  requests_per_unit: 4294967295")],
];
