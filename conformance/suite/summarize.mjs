// Summarize a run of scripts/conformance.sh: node summarize.mjs RESULTS_DIR
//
// RESULTS_DIR/manifest.tsv has one line per scenario:
//   scenario <TAB> exit code of the conformance CLI <TAB> seconds <TAB> subdir
// and RESULTS_DIR/scenarios/<subdir>/ holds what the CLI wrote there with
// -o (…/checks.json).
//
// A scenario FAILs when the CLI exited non-zero (124/137: our timeout), wrote
// no checks.json, or recorded a FAILURE check; it is SKIP when it recorded
// only INFO/WARNING checks (the suite itself counts that as passed); else PASS.
// The last line counts checks as the suite's own "Total:" line does (SUCCESS,
// FAILURE), plus one failure for each failed scenario with no FAILURE check.
// Exit code: 0 when no scenario failed, else 1.
import fs from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: summarize.mjs RESULTS_DIR');
  process.exit(2);
}

function findChecks(d) {
  if (!fs.existsSync(d)) return null;
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) {
      const found = findChecks(p);
      if (found) return found;
    } else if (e.name === 'checks.json') {
      return p;
    }
  }
  return null;
}

const rows = fs.readFileSync(path.join(dir, 'manifest.tsv'), 'utf8').split('\n').filter(Boolean).sort().map((line) => {
  const [scenario, rc, secs, subdir] = line.split('\t');
  const file = findChecks(path.join(dir, 'scenarios', subdir || scenario));
  let checks = [];
  let note = '';
  try {
    if (file) checks = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    note = 'unreadable checks.json';
  }
  const count = (status) => checks.filter((c) => c.status === status).length;
  const row = { scenario, rc: Number(rc), secs: Number(secs), pass: count('SUCCESS'), fail: count('FAILURE'), warn: count('WARNING') };
  if (row.rc === 124 || row.rc === 137) { row.verdict = 'FAIL'; note = 'timed out'; }
  else if (!file || note) { row.verdict = 'FAIL'; note ||= `no checks.json (cli exit ${row.rc})`; }
  else if (row.fail > 0) row.verdict = 'FAIL';
  else if (row.rc !== 0) { row.verdict = 'FAIL'; note = `cli exit ${row.rc}`; }
  else if (row.pass === 0) { row.verdict = 'SKIP'; note = 'only INFO/WARNING checks'; }
  else row.verdict = 'PASS';
  if (row.warn > 0 && row.verdict !== 'FAIL') note ||= `${row.warn} warning(s)`;
  row.note = note;
  row.failures = checks.filter((c) => c.status === 'FAILURE').map((c) => `${c.id}: ${c.errorMessage || c.description || ''}`);
  row.warnings = checks.filter((c) => c.status === 'WARNING').map((c) => `${c.id}: ${c.errorMessage || c.description || ''}`);
  return row;
});

const w = Math.max(8, ...rows.map((r) => r.scenario.length));
console.log(`${'scenario'.padEnd(w)}  verdict  pass fail warn   secs  note`);
for (const r of rows) {
  const num = (n) => String(n).padStart(4);
  console.log(`${r.scenario.padEnd(w)}  ${r.verdict.padEnd(7)} ${num(r.pass)} ${num(r.fail)} ${num(r.warn)} ${r.secs.toFixed(1).padStart(6)}  ${r.note}`);
  for (const f of r.failures.slice(0, 3)) console.log(`${' '.repeat(w)}    FAILURE ${f.slice(0, 200)}`);
  for (const f of r.warnings.slice(0, 3)) console.log(`${' '.repeat(w)}    WARNING ${f.slice(0, 200)}`);
}

const n = { PASS: 0, FAIL: 0, SKIP: 0 };
let passed = 0;
let failed = 0;
for (const r of rows) {
  n[r.verdict]++;
  passed += r.pass;
  failed += r.fail + (r.verdict === 'FAIL' && r.fail === 0 ? 1 : 0);
}
console.log('');
console.log(`results: ${dir}`);
console.log(`scenarios: ${n.PASS} passed, ${n.FAIL} failed, ${n.SKIP} skipped`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(n.FAIL > 0 ? 1 : 0);
