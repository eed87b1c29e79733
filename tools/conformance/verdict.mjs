// Reads a conformance run's results (one directory per scenario, each with
// checks.json) against an expected-failures file, prints one closing line
// by scenario and by check, and with --gate exits 1 on an unexpected
// failure or a stale entry.
//
// The rules are the suite's own (0.2.0-alpha.12): a check fails when its
// status is FAILURE or WARNING; '<scenario>' expects the whole scenario to
// fail and '<scenario>:<check-id>' only that check; an entry whose scenario
// or check passes is stale. The suite applies them only to the scenarios a
// --requirements revision scores, so this also covers the ones it runs but
// does not score (pending scenarios and extensions).
//
// usage: node verdict.mjs [--gate] LABEL RESULTS_DIR EXPECTED_FAILURES_YML
import fs from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
const gate = args[0] === "--gate";
if (gate) args.shift();
const [label, dir, baselineFile] = args;

const whole = new Set();
const perCheck = new Map();
for (const line of fs.readFileSync(baselineFile, "utf8").split("\n")) {
  const m = line.match(/^\s*-\s*(\S+)/);
  if (!m) continue;
  const i = m[1].indexOf(":");
  if (i < 0) {
    whole.add(m[1]);
    continue;
  }
  const [scenario, check] = [m[1].slice(0, i), m[1].slice(i + 1)];
  if (!perCheck.has(scenario)) perCheck.set(scenario, new Set());
  perCheck.get(scenario).add(check);
}

const bad = (s) => s === "FAILURE" || s === "WARNING";
const rank = (s) => (s === "FAILURE" ? 3 : s === "WARNING" ? 2 : s === "SUCCESS" ? 1 : 0);
const scenarios = { passed: 0, expected: 0, failed: 0, skipped: 0 };
const checks = { SUCCESS: 0, FAILURE: 0, WARNING: 0 };
const unexpected = [];
const stale = [];
const seen = new Set();
for (const d of fs.readdirSync(dir).sort()) {
  const name = d.replace(/^server-/, "").replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, "");
  seen.add(name);
  const list = JSON.parse(fs.readFileSync(path.join(dir, d, "checks.json"), "utf8"));
  // A check reported more than once counts by its worst status.
  const worst = new Map();
  for (const c of list) {
    if (c.status === "INFO") continue;
    if (c.status in checks) checks[c.status]++;
    if (!worst.has(c.id) || rank(c.status) >= rank(worst.get(c.id))) worst.set(c.id, c.status);
  }
  const failing = [...worst].filter(([, s]) => bad(s)).map(([id]) => id);
  const allowed = perCheck.get(name) ?? new Set();
  if (whole.has(name)) {
    if (failing.length === 0) {
      stale.push(name);
      scenarios.passed++;
    } else scenarios.expected++;
    continue;
  }
  for (const id of allowed) {
    if (worst.get(id) === "SUCCESS") stale.push(`${name}:${id}`);
  }
  const surprises = failing.filter((id) => !allowed.has(id));
  unexpected.push(...surprises.map((id) => `${name}:${id}`));
  if (surprises.length > 0) scenarios.failed++;
  else if (failing.length > 0) scenarios.expected++;
  else if ([...worst.values()].includes("SUCCESS")) scenarios.passed++;
  else scenarios.skipped++;
}
// An entry for a scenario that did not run is stale as well.
for (const name of [...whole, ...perCheck.keys()]) {
  if (!seen.has(name)) stale.push(`${name} (did not run)`);
}

console.log(
  `${label}: scenarios ${scenarios.passed} passed, ${scenarios.expected} with expected failures, ` +
    `${scenarios.failed} failed, ${scenarios.skipped} with nothing checked; ` +
    `checks ${checks.SUCCESS} passed, ${checks.FAILURE} failed, ${checks.WARNING} warned`,
);
for (const u of unexpected) console.log(`  unexpected failure: ${u}`);
for (const s of stale) console.log(`  stale expected failure (now passing): ${s}`);
if (gate && (unexpected.length > 0 || stale.length > 0)) process.exit(1);
