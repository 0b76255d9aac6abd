// Tenants by key (`hearth serve --api-keys FILE`, docs/tenants.md) through the official openai client: each key's
// tenant is its own cache namespace, so two tenants sending the same long prompt (and the same cache_salt) never
// share a block; explain, pins, /v1/cache, stored responses, /v1/stats and /metrics show each tenant only its own;
// max_concurrent is enforced; SIGHUP re-reads the file (a broken one keeps the old keys); bad files and --api-key
// beside --api-keys are refused at start.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { BIN, MODEL, metrics, startServer, waitFor } from './helpers.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), `hearth-tenants-${process.pid}-`));
const keysFile = path.join(dir, 'keys');
const ALICE = 'sk-alice-0123456789abcdef';
const ALICE_2 = 'sk-alice-rotated-0123456789';
const BOB = 'sk-bob-0123456789abcdef';
const CAROL = 'sk-carol-0123456789abcdef'; // max_concurrent=1
const DAVE = 'sk-dave-added-by-sighup-0123';
const KEYS = `# tenants of the test household
${ALICE}   alice
${ALICE_2} alice   # a second key of the same tenant
${BOB}     bob

${CAROL}   carol  max_concurrent=1
`;

// Long enough for several full 16-token blocks of stories260K.
const STORY =
  'Once upon a time, there was a little house. In the little house lived a girl named Lily and a boy named Tom. '.repeat(3);

let server;
before(async () => {
  writeFileSync(keysFile, KEYS);
  server = await startServer(['--api-keys', keysFile]);
});
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
  rmSync(dir, { recursive: true, force: true });
});

const auth = (key) => ({ Authorization: `Bearer ${key}` });
const call = async (key, method, route, body) => {
  const res = await fetch(server.baseURL + route, {
    method,
    headers: { 'content-type': 'application/json', ...auth(key) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
};
const complete = (key, extra = {}) =>
  server.client(key).completions.create({ prompt: STORY, max_tokens: 2, temperature: 0, ...extra });
const cached = (r) => r.usage.prompt_tokens_details.cached_tokens;

test('two tenants sending the same long prompt and the same cache_salt never share a block', async () => {
  for (const extra of [{}, { cache_salt: 'household' }]) {
    const first = await complete(ALICE, extra);
    assert.equal(cached(first), 0, 'a cold prompt');
    const repeat = await complete(ALICE, extra);
    assert.ok(cached(repeat) >= 32, `the same tenant's repeat is cached (${cached(repeat)})`);
    const other = await complete(BOB, extra);
    assert.equal(cached(other), 0, 'another tenant computes it itself');
    const rotated = await complete(ALICE_2, extra);
    assert.ok(cached(rotated) >= 32, "a tenant's second key shares the tenant's cache");
  }
  // A client salt narrows within the tenant: alice with a salt of her own does not see her unsalted blocks.
  assert.equal(cached(await complete(ALICE, { cache_salt: 'narrower' })), 0);
});

test('an unknown key is a 401; a key of the file is not one of the others', async () => {
  await assert.rejects(complete('sk-nobody-0123456789'), (err) => err instanceof OpenAI.AuthenticationError);
  await assert.rejects(complete(ALICE + 'x'), { status: 401 });
  assert.equal((await fetch(`${server.baseURL}/v1/models`)).status, 401);
  const viaHeader = await fetch(`${server.baseURL}/v1/models`, { headers: { 'x-api-key': BOB } });
  assert.equal(viaHeader.status, 200);
});

test('/v1/cache/explain and /v1/cache show each tenant only its own prefixes', async () => {
  const prompt = 'In a quiet village by the sea, an old fisherman mended his nets every morning. The explain prompt. '.repeat(3);
  await complete(ALICE, { prompt });
  const mine = await call(ALICE, 'POST', '/v1/cache/explain', { prompt });
  assert.equal(mine.status, 200);
  assert.ok(mine.body.cached_tokens >= 32, JSON.stringify(mine.body));
  const theirs = await call(BOB, 'POST', '/v1/cache/explain', { prompt });
  assert.equal(theirs.status, 200);
  // At most the BOS token, which bob's own earlier prompts cached in his namespace.
  assert.ok(theirs.body.cached_tokens <= 1, JSON.stringify(theirs.body));
  assert.doesNotMatch(JSON.stringify(theirs.body), /different_salt/);

  const aliceList = await call(ALICE, 'GET', '/v1/cache');
  assert.equal(aliceList.body.salted, false);
  assert.ok(aliceList.body.prefixes.some((p) => p.text.includes('fisherman')), 'alice sees her prompt');
  await call(BOB, 'POST', '/v1/completions', { prompt: 'Bob has his own story about a red car and a big dog.', max_tokens: 1 });
  const bobText = (await call(BOB, 'GET', '/v1/cache')).body.prefixes.map((p) => p.text).join('\n');
  assert.ok(bobText.includes('red car'), 'bob sees his own prompt');
  assert.ok(!bobText.includes('fisherman'), 'bob never sees alice\'s text');
  const aliceText = (await call(ALICE, 'GET', '/v1/cache')).body.prefixes.map((p) => p.text).join('\n');
  assert.ok(!aliceText.includes('red car'), 'alice never sees bob\'s text');
});

test('pins: a tenant cannot remove another tenant\'s pin, nor see it in its listing', async () => {
  const prompt = 'House rules: shoes off at the door, dishes washed after dinner, lights out at nine. '.repeat(3);
  await complete(ALICE, { prompt });
  const pinned = await call(ALICE, 'POST', '/v1/cache/pin', { prompt });
  assert.equal(pinned.status, 200, JSON.stringify(pinned.body));
  assert.ok(pinned.body.pinned_tokens >= 32);
  assert.ok((await call(ALICE, 'GET', '/v1/cache')).body.prefixes.some((p) => p.pinned));
  assert.ok(!(await call(BOB, 'GET', '/v1/cache')).body.prefixes.some((p) => p.pinned));
  // Bob cannot pin alice's prefix either: nothing of it is cached in his namespace.
  assert.equal((await call(BOB, 'POST', '/v1/cache/pin', { prompt })).status, 400);
  assert.equal((await call(BOB, 'DELETE', `/v1/cache/pin/${pinned.body.key}`)).status, 404);
  assert.equal((await call(ALICE, 'DELETE', `/v1/cache/pin/${pinned.body.key}`)).status, 200);
});

test('stored responses: another tenant gets 404 on GET and DELETE, and previous_response_id is not found', async () => {
  const first = await server.client(ALICE).responses.create({ input: 'Once upon a time', max_output_tokens: 4, temperature: 0 });
  assert.equal((await call(ALICE, 'GET', `/v1/responses/${first.id}`)).status, 200);
  assert.equal((await call(BOB, 'GET', `/v1/responses/${first.id}`)).status, 404);
  assert.equal((await call(BOB, 'DELETE', `/v1/responses/${first.id}`)).status, 404);
  await assert.rejects(
    server.client(BOB).responses.create({ input: 'and then', previous_response_id: first.id, max_output_tokens: 2 }),
    (err) => err instanceof OpenAI.BadRequestError && /no stored response has the id/.test(err.message),
  );
  const next = await server.client(ALICE_2).responses.create({
    input: 'and then',
    previous_response_id: first.id,
    max_output_tokens: 2,
    temperature: 0,
  });
  assert.ok(next.usage.input_tokens_details.cached_tokens > 0, "the tenant's other key continues it");
});

test('/v1/stats and /metrics show each tenant only its own counters', async () => {
  const a = (await call(ALICE, 'GET', '/v1/stats')).body.tenant;
  const c = (await call(CAROL, 'GET', '/v1/stats')).body.tenant;
  assert.ok(a.requests > 0 && a.cached_tokens > 0, JSON.stringify(a));
  assert.equal(c.requests, 0, 'carol has sent nothing yet');
  const am = await metrics(server, auth(ALICE));
  assert.ok(am['hearth_tenant_requests_total{tenant="alice"}'] > 0);
  assert.ok(am['hearth_tenant_cached_tokens_total{tenant="alice"}'] > 0);
  assert.ok(!Object.keys(am).some((k) => k.includes('tenant="bob"')), 'alice does not see bob\'s series');
  const bm = await metrics(server, auth(BOB));
  assert.ok(bm['hearth_tenant_requests_total{tenant="bob"}'] > 0);
  assert.ok(!Object.keys(bm).some((k) => k.includes('tenant="alice"')));
  assert.ok(bm['hearth_requests_total{endpoint="completions",finish_reason="length"}'] > 0, 'server-wide series stay');
});

test('max_concurrent: a tenant past its limit gets 429 while others are served', async () => {
  const stream = await fetch(`${server.baseURL}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...auth(CAROL) },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, stream: true }),
  });
  assert.equal(stream.status, 200);
  const reader = stream.body.getReader();
  await reader.read(); // the stream has started and holds carol's one slot until it ends
  const second = await fetch(`${server.baseURL}/v1/models`, { headers: auth(CAROL) });
  assert.equal(second.status, 429);
  assert.equal((await second.json()).error.code, 'tenant_max_concurrent');
  assert.equal((await fetch(`${server.baseURL}/v1/models`, { headers: auth(BOB) })).status, 200);
  while (!(await reader.read()).done);
  await waitFor(async () => (await fetch(`${server.baseURL}/v1/models`, { headers: auth(CAROL) })).status === 200, 5000,
    'carol\'s slot to come back');
});

test('SIGHUP re-reads the file: a new key works; a broken file keeps the old keys', async () => {
  assert.equal((await fetch(`${server.baseURL}/v1/models`, { headers: auth(DAVE) })).status, 401);
  writeFileSync(keysFile, `${KEYS}${DAVE} dave\n`);
  server.proc.kill('SIGHUP');
  await waitFor(async () => (await fetch(`${server.baseURL}/v1/models`, { headers: auth(DAVE) })).status === 200, 5000,
    'the new key');
  assert.equal(cached(await complete(DAVE)), 0, 'the new tenant has a namespace of its own');

  writeFileSync(keysFile, `${ALICE} alice\nthis-line-is-broken\n`);
  server.proc.kill('SIGHUP');
  await waitFor(() => /not reloaded.*line 2/.test(server.stdout() + server.stderr()), 5000, 'the reload error');
  for (const key of [ALICE, BOB, DAVE]) {
    assert.equal((await fetch(`${server.baseURL}/v1/models`, { headers: auth(key) })).status, 200, key);
  }
});

test('the disk tier keeps tenants apart across a restart', async () => {
  const disk = path.join(dir, 'kv');
  const prompt = 'The family recipe book: flour, eggs, sugar and a pinch of salt, stirred slowly by grandmother. '.repeat(3);
  const run = async (fn) => {
    const s = await startServer(['--api-keys', keysFile, '--kv-disk', disk, '--kv-disk-load', 'always']);
    try {
      return await fn(s);
    } finally {
      assert.equal((await s.stop()).code, 0);
    }
  };
  const send = (s, key, extra = {}) =>
    s.client(key).completions.create({ prompt, max_tokens: 2, temperature: 0, cache_salt: 'household', ...extra });
  writeFileSync(keysFile, KEYS);
  await run(async (s) => {
    assert.equal(cached(await send(s, ALICE)), 0);
    await waitFor(async () => (await metrics(s, auth(ALICE)))['hearth_kv_tier_queued_writes{tier="disk"}'] === 0 &&
      (await metrics(s, auth(ALICE)))['hearth_kv_tier_writes_total{tier="disk"}'] > 0, 10000, 'the disk writes');
  });
  await run(async (s) => {
    const list = async (key) => (await (await fetch(`${s.baseURL}/v1/cache?cache_salt=household`, { headers: auth(key) })).json());
    assert.ok((await list(ALICE)).disk_prefixes.some((p) => p.text.includes('recipe')), 'alice sees her entries on disk');
    assert.deepEqual((await list(BOB)).disk_prefixes, [], 'bob sees none of them');
    assert.equal(cached(await send(s, BOB)), 0, 'bob does not load alice\'s blocks');
    const mine = await send(s, ALICE_2);
    assert.ok(cached(mine) >= 32, `alice loads hers from disk (${cached(mine)})`);
  });
  const open = await startServer(['--kv-disk', disk, '--kv-disk-load', 'always']);
  try {
    const r = await open.client().completions.create({ prompt, max_tokens: 2, temperature: 0, cache_salt: 'household' });
    assert.equal(cached(r), 0, 'a server without --api-keys cannot read a tenant\'s entries');
  } finally {
    assert.equal((await open.stop()).code, 0);
  }
});

test('several models: the front checks the key and each model keeps tenants apart', async () => {
  const other = path.join(dir, 'stories-b.gguf');
  symlinkSync(MODEL, other);
  writeFileSync(keysFile, KEYS);
  const s = await startServer(['--api-keys', keysFile], {}, { models: [MODEL, other] });
  try {
    const send = (key, model) =>
      s.client(key).completions.create({ model, prompt: STORY, max_tokens: 2, temperature: 0 });
    for (const model of ['stories260K', 'stories-b']) {
      assert.equal(cached(await send(ALICE, model)), 0);
      assert.ok(cached(await send(ALICE_2, model)) >= 32, model);
      assert.equal(cached(await send(BOB, model)), 0, model);
    }
    await assert.rejects(send('sk-nobody-0123456789', 'stories-b'), { status: 401 });
    const am = await metrics(s, auth(ALICE));
    assert.ok(am['hearth_tenant_requests_total{model="stories-b",tenant="alice"}'] >= 2, JSON.stringify(am));
    assert.ok(!Object.keys(am).some((k) => k.includes('tenant="bob"')));
    const list = await (await fetch(`${s.baseURL}/v1/cache?model=stories-b`, { headers: auth(BOB) })).json();
    assert.ok(list.prefixes.length > 0 && list.prefixes.every((p) => !p.pinned));
  } finally {
    assert.equal((await s.stop()).code, 0);
  }
});

test('a bad keys file, and --api-key beside --api-keys, are refused at start', () => {
  const run = (args, env = {}) =>
    spawnSync(BIN, ['serve', '-m', MODEL, '--port', '0', '--kv-disk', 'off', ...args], {
      encoding: 'utf8',
      env: { ...process.env, ...env },
      timeout: 30000,
    });
  const bad = path.join(dir, 'bad');
  for (const [text, message] of [
    [`${ALICE} alice\n${BOB} bob rate=5\n`, /bad line 2: unknown field 'rate=5'/],
    [`${ALICE} alice\n\nshort bob\n`, /bad line 3: the key is shorter than 8/],
    [`${ALICE} alice\n${ALICE} bob\n`, /bad line 2: the same key is already given on line 1/],
    [`${ALICE} al/ice\n`, /bad line 1: the tenant name/],
    [`${ALICE} carol max_concurrent=0\n`, /bad line 1: max_concurrent must be/],
    ['# nothing\n', /no keys/],
  ]) {
    writeFileSync(bad, text);
    const r = run(['--api-keys', bad]);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, message);
  }
  const both = run(['--api-keys', keysFile, '--api-key', 'sk-single-0123456789']);
  assert.equal(both.status, 1);
  assert.match(both.stderr, /--api-keys and --api-key/);
  const env = run(['--api-keys', keysFile], { HEARTH_API_KEY: 'sk-single-0123456789' });
  assert.equal(env.status, 1);
  assert.match(env.stderr, /HEARTH_API_KEY/);
});
