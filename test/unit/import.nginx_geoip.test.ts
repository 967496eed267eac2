/**
 * `sluice import nginx` on keys of where the client is (src/migrate/nginx_geoip.ts): the geoip module's country
 * variables and a `geoip2` block's country ISO code and autonomous system number become the `country` and `asn` key
 * parts Cloudflare's geolocation fills (approximate: two databases); other geoip2 paths, a `source=` address, and
 * callers named by a JWT claim or a Basic auth user are left out with what to do instead.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alpha2Of, COUNTRIES } from "../../src/migrate/iso_countries.ts";
import { readNginxConfig } from "../../src/migrate/nginx_conf.ts";
import { importNginx } from "../../src/migrate/nginx_import.ts";
import { type ImportResult, rulesYaml } from "../../src/migrate/report.ts";
import { parseRules } from "../../src/rules/yaml.ts";

const GEOIP2 = `geoip2 /etc/GeoLite2-Country.mmdb {
  auto_reload 5m;
  $geoip2_data_country_code default=US country iso_code;
  $geoip2_registered registered_country iso_code;
  $geoip2_city city names en;
  $geoip2_proxy_country source=$http_x_forwarded_for country iso_code;
}
geoip2 /etc/GeoLite2-ASN.mmdb { $geoip2_asn autonomous_system_number; }`;

function imported(key: string, maps = ""): ImportResult {
  const dir = mkdtempSync(join(tmpdir(), "sluice-nginx-geoip-"));
  const file = join(dir, "nginx.conf");
  writeFileSync(
    file,
    `http {\n${GEOIP2}\n${maps}\nlimit_req_zone ${key} zone=a:1m rate=5r/s;\nserver { limit_req zone=a; }\n}\n`,
  );
  const result = importNginx(readNginxConfig(file));
  expect(parseRules(rulesYaml(result, "test"), "imported.yaml").errors).toEqual([]);
  return result;
}

const said = (r: ImportResult) => r.report.map((i) => `${i.kind}: ${i.message}`).join("\n");

describe("keys of where the client is", () => {
  it.each([
    ["$geoip_country_code", ["country"]],
    ["$geoip_country_code3", ["country"]],
    ["$geoip_city_country_code$binary_remote_addr", ["country", "ip"]],
    ["$geoip2_data_country_code", ["country"]],
    ["$geoip2_registered", ["country"]],
    ["$geoip2_asn", ["asn"]],
    ["$geoip2_asn:$uri", ["asn", "path"]],
  ])("%s: key %j, approximate", (key, parts) => {
    const r = imported(key);
    expect(r.rules.map((x) => x.key)).toEqual([parts]);
    expect(said(r)).toMatch(/approximate: .*Cloudflare says it; NGINX reads its own GeoIP database/);
  });

  it.each([
    ["$geoip2_city", /\$geoip2_city is city names en of a geoip2 database, which Sluice has no key part for/],
    ["$geoip2_proxy_country", /\$geoip2_proxy_country is source=\$http_x_forwarded_for country iso_code of a geoip2/],
    [
      "$jwt_claim_sub",
      /no key part for \$jwt_claim_sub .*: \$jwt_claim_sub is a claim of a JWT NGINX Plus validated \(auth_jwt\); have the auth layer in front validate it and send the subject as a header, then count by user/,
    ],
    ["$remote_user", /\$remote_user is the Basic authentication user name; have the auth layer in front check it/],
  ])("%s: left out with what to do", (key, message) => {
    const r = imported(key);
    expect(r.rules).toEqual([]);
    expect(said(r)).toMatch(message);
  });

  it.each([
    [
      'map $geoip_country_code $k { default ""; CN $binary_remote_addr; RU $binary_remote_addr; }',
      '{ name: country, matches: "(?:^CN$)|(?:^RU$)", ignore_case: true }',
    ],
    [
      'map $geoip2_data_country_code $k { default $binary_remote_addr; US ""; }',
      '{ name: country, matches: "^US$", ignore_case: true, not: true, missing_as_empty: true }',
    ],
    [
      'map $geoip2_asn $k { default $binary_remote_addr; 64496 ""; }',
      '{ name: asn, matches: "^64496$", ignore_case: true, not: true, missing_as_empty: true }',
    ],
  ])("a map by where the client is: match.cf (%s)", (map, condition) => {
    const r = imported("$k", map);
    expect(r.rules.map((x) => [x.match.cf, x.match.identity])).toEqual([[[condition], "ip"]]);
    expect(said(r)).toMatch(/client's (country|asn) \(as Cloudflare locates it; NGINX's GeoIP database may differ\)/);
    expect(said(r)).toMatch(/map \$geoip(2_data)?(_country_code|2_asn) \$k/);
  });

  it("the ISO 3166-1 table: 249 countries, one two-letter code each", () => {
    expect(COUNTRIES).toBe(249);
    const twos = ["ABW", "DEU", "GBR", "USA", "ZWE", "ALA"].map(alpha2Of);
    expect(twos).toEqual(["AW", "DE", "GB", "US", "ZW", "AX"]);
    expect(alpha2Of("UK")).toBeUndefined();
  });

  it("a map of three-letter codes is the same map of Cloudflare's two-letter ones", () => {
    const r = imported(
      "$k",
      'map $geoip_country_code3 $k { default ""; CHN $binary_remote_addr; rus $binary_remote_addr; }',
    );
    expect(r.rules.map((x) => [x.match.cf, x.match.identity])).toEqual([
      [['{ name: country, matches: "(?:^CN$)|(?:^RU$)", ignore_case: true }'], "ip"],
    ]);
    expect(said(r)).toMatch(
      /\$geoip_country_code3's three-letter codes read as the two-letter ones Cloudflare gives \(CHN as CN\)/,
    );
  });

  it.each([
    [
      'map $geoip_country_code3 $k { default ""; "~^(CHN|RUS)$" $binary_remote_addr; }',
      /is a regex over three-letter codes/,
    ],
    [
      'map $geoip_country_code3 $k { default ""; XYZ $binary_remote_addr; }',
      /XYZ is not an ISO 3166-1 three-letter country code/,
    ],
    [
      'map $geoip_country_name $k { default ""; China $binary_remote_addr; }',
      /gives a country's name, which GeoIP databases spell their own way/,
    ],
  ])("left out with its reason: %s", (map, message) => {
    const r = imported("$k", map);
    expect(r.rules).toEqual([]);
    expect(said(r)).toMatch(message);
  });
});
