// --kv-disk-key end to end: after two tenants' prompts, no file of the disk tier holds a run of their token ids
// (as little-endian u32s, or as text) and no file is named by a block key; the modes are 0700/0600; a restart with the
// same key loads the blocks back with the same answer; a restart with another key loads nothing, removes and counts
// the old entries, and answers the same; key files that are readable by others, inside the tier or malformed stop
// the server at start.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { metrics, startServer, tokenize, waitFor } from './helpers.mjs';

const root = mkdtempSync(path.join(os.tmpdir(), `hearth-disk-key-${process.pid}-`));
after(() => rmSync(root, { recursive: true, force: true }));

// Two tenants, each a prompt of several 16-token blocks (stories260K's context is 512 tokens).
const TENANTS = {
  alice: 'Alice wrote in her diary that the blue door key hides under the third flower pot by the gate. '.repeat(3),
  bob: 'Bob told the doctor his secret: he keeps a small green frog named Pip in the bath every night. '.repeat(3),
};

function keyFile(name, bytes, mode = 0o600) {
  const file = path.join(root, name);
  writeFileSync(file, bytes, { mode });
  chmodSync(file, mode); // exactly, whatever the umask
  return file;
}

// Every path under `dir` (itself included).
function tree(dir) {
  return [dir, ...readdirSync(dir, { recursive: true }).map((name) => path.join(dir, name))];
}

const entryFiles = (dir) => tree(dir).filter((p) => p.endsWith('.kvb'));

// The runs of 4 consecutive ids of `ids` that some file under `dir` holds: as little-endian u32s, or as text
// (joined by ',', ', ' or ' ').
function leakedRuns(dir, ids) {
  const files = tree(dir)
    .filter((p) => statSync(p).isFile())
    .map((p) => readFileSync(p));
  const found = [];
  for (let i = 0; i + 4 <= ids.length; i++) {
    const run = ids.slice(i, i + 4);
    const needles = [Buffer.from(new Uint32Array(run).buffer), ...[',', ', ', ' '].map((sep) => Buffer.from(run.join(sep)))];
    if (files.some((bytes) => needles.some((n) => bytes.includes(n)))) found.push(run);
  }
  return found;
}

async function settled(server) {
  return waitFor(
    async () => {
      const m = await metrics(server);
      return m['hearth_kv_tier_queued_writes{tier="disk"}'] === 0 && m['hearth_kv_tier_writes_total{tier="disk"}'] > 0
        ? m
        : null;
    },
    10000,
    'the disk tier to finish writing',
  );
}

const ask = (server, tenant) =>
  server.client().completions.create({ prompt: TENANTS[tenant], max_tokens: 8, temperature: 0, cache_salt: tenant });

// Both tenants' prompts on a server with `args`; their answers, token ids and the server's last metrics.
async function runTenants(args) {
  const server = await startServer(args);
  try {
    const out = { answers: {}, ids: {}, stdout: '' };
    for (const tenant of Object.keys(TENANTS)) {
      const r = await ask(server, tenant);
      out.answers[tenant] = r.choices[0].text;
      out.ids[tenant] = await tokenize(server, TENANTS[tenant]);
      assert.equal(out.ids[tenant].length, r.usage.prompt_tokens);
      assert.ok(r.usage.prompt_tokens >= 64, JSON.stringify(r.usage));
    }
    out.metrics = await settled(server);
    out.stdout = server.stdout();
    return out;
  } finally {
    await server.stop();
  }
}

test('with --kv-disk-key two tenants leave no token ids and no block-key names on disk; the same key warms, another does not', async () => {
  process.umask(0o022); // the usual umask: the tier's 0700/0600 must not depend on a strict one
  // Without a key, the same prompts' ids are on disk and the files are named by block keys: the checks have teeth.
  const plainDir = path.join(root, 'plain');
  const plain = await runTenants(['--kv-disk', plainDir]);
  for (const tenant of Object.keys(TENANTS)) assert.ok(leakedRuns(plainDir, plain.ids[tenant]).length > 0, tenant);
  const plainNames = new Set(entryFiles(plainDir).map((p) => path.basename(p)));

  const dir = path.join(root, 'sealed');
  const key = keyFile('kv-disk.key', randomBytes(32).toString('hex') + '\n');
  const first = await runTenants(['--kv-disk', dir, '--kv-disk-key', key]);
  assert.match(first.stdout, /KV disk tier: .*encrypted with --kv-disk-key/);
  assert.deepEqual(first.answers, plain.answers);
  const files = entryFiles(dir);
  assert.ok(files.length >= 8, `${files.length} entries`);
  assert.equal(files.length, plainNames.size); // the same blocks were written ...
  for (const f of files) {
    assert.ok(!plainNames.has(path.basename(f)), `${f} is named by its block key`); // ... under other names
    assert.equal(readFileSync(f).subarray(0, 8).toString(), 'HEARTHKS', f);
  }
  for (const tenant of Object.keys(TENANTS)) {
    assert.deepEqual(leakedRuns(dir, first.ids[tenant]), [], `${tenant}'s token ids are on disk`);
    for (const word of ['flower pot', 'green frog']) assert.ok(!tree(dir).some((p) => statSync(p).isFile() && readFileSync(p).includes(word)));
  }
  for (const p of tree(dir)) {
    const want = statSync(p).isDirectory() ? '700' : '600';
    assert.equal((statSync(p).mode & 0o777).toString(8), want, p);
  }

  // The same key: both tenants' blocks load back, and the answers are those of the first (cold) run.
  const same = await startServer(['--kv-disk', dir, '--kv-disk-key', key, '--kv-disk-load', 'always']);
  try {
    assert.match(same.stdout(), new RegExp(`KV disk tier: .*\\(${files.length} entries, .*encrypted with --kv-disk-key;`));
    for (const tenant of Object.keys(TENANTS)) {
      const r = await ask(same, tenant);
      assert.ok(r.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(r.usage));
      assert.equal(r.usage.hearth.tiers.disk, r.usage.prompt_tokens_details.cached_tokens);
      assert.equal(r.choices[0].text, first.answers[tenant]);
    }
    const m = await metrics(same);
    assert.ok(m['hearth_kv_tier_hits_total{tier="disk"}'] >= 8);
    assert.equal(m['hearth_kv_tier_key_mismatch_removed_total{tier="disk"}'], 0);
    assert.equal(m['hearth_kv_tier_corrupt_removed_total{tier="disk"}'], 0);
  } finally {
    await same.stop();
  }

  // Another key (32 raw bytes this time): nothing loads, every old entry is counted and removed, the answers hold.
  const before = new Set(entryFiles(dir));
  const other = await startServer(['--kv-disk', dir, '--kv-disk-key', keyFile('other.key', randomBytes(32)), '--kv-disk-load', 'always']);
  try {
    assert.match(other.stdout(), new RegExp(`KV disk tier: .*\\(0 entries, .*, ${before.size} entries of another key \\(or none\\) removed`));
    const m = await metrics(other);
    assert.equal(m['hearth_kv_tier_key_mismatch_removed_total{tier="disk"}'], before.size);
    assert.equal(m['hearth_kv_tier_corrupt_removed_total{tier="disk"}'], before.size);
    for (const tenant of Object.keys(TENANTS)) {
      const r = await ask(other, tenant);
      assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(r.usage.hearth.tiers.disk, 0);
      assert.equal(r.choices[0].text, first.answers[tenant]);
    }
    await settled(other);
    assert.ok(entryFiles(dir).every((f) => !before.has(f)), 'no entry of the old key is left');
  } finally {
    await other.stop();
  }
});

test('a key file others may read, one inside the tier, a malformed one, or a key with --kv-disk off stops the server', async () => {
  const dir = path.join(root, 'refused');
  mkdirSync(dir, { mode: 0o700 });
  const hex = randomBytes(32).toString('hex');
  const cases = [
    [['--kv-disk', dir, '--kv-disk-key', keyFile('loose.key', hex, 0o644)], /the key file .*loose\.key is accessible by other users \(mode 0644\)/],
    [['--kv-disk', dir, '--kv-disk-key', keyFile('short.key', hex.slice(0, 40))], /the key file .*short\.key holds 40 bytes; expected 32 random bytes, or 64 hex digits/],
    [['--kv-disk', dir, '--kv-disk-key', path.join(root, 'missing.key')], /cannot open the key file .*missing\.key/],
    [['--kv-disk', 'off', '--kv-disk-key', keyFile('ok.key', hex)], /--kv-disk-key encrypts the disk and Redis tiers' entries, and --kv-disk is off/],
  ];
  const inside = path.join(dir, 'inside.key');
  writeFileSync(inside, hex, { mode: 0o600 });
  cases.push([['--kv-disk', dir, '--kv-disk-key', inside], /the key file .*inside\.key lies inside the disk tier directory/]);
  for (const [args, message] of cases) {
    await assert.rejects(startServer(args), (err) => {
      assert.match(err.message, /hearth serve exited with 1/);
      assert.match(err.message, message);
      return true;
    });
  }
});
