// Bounded request preparation: the worst body per field (an enum of 600k values, 5,000 tools, deep and wide
// schemas, a huge logit_bias, long stop lists, a prompt of one 4 MB word, half a million messages), on both
// dialects. Each is answered (a 400 naming its limit, or a normal answer) within its compute budget, alone; and 8 at
// a time, the worst of them together, while /health and a normal completion keep answering within their usual time.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { BIN, startServer } from './helpers.mjs';

const MAX_BODY = 4 << 20;
// Compute budget per request alone, in ms. The issue asks for 100 ms of compute; parsing a 4 MiB JSON body alone is
// most of that on a slow 2-core CI machine, so the bound is checked with room (a stall was 27 s before).
// scripts/test.sh runs this suite against the AddressSanitizer build too, several times slower: the bounds scale.
const SLOWER = /asan/.test(BIN) ? 10 : 1;
const ALONE_MS = 2000 * SLOWER;  // measured 118-180 ms for the 4 MiB enum alone; room for a loaded CI machine


// The largest n whose body (made by make(n)) stays under the body limit, by doubling then bisection.
function largest(make) {
  let lo = 1;
  let hi = 2;
  while (JSON.stringify(make(hi)).length < MAX_BODY - 1024) hi *= 2;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (JSON.stringify(make(mid)).length < MAX_BODY - 1024) lo = mid;
    else hi = mid;
  }
  return make(lo);
}

const chat = (extra) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, temperature: 0, ...extra });
const schemaFormat = (schema) => ({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));
// Nested objects: `depth` levels of `width` properties named by `name`.
const wide = (depth, width, name) =>
  depth === 0 ? { type: 'string' } : { type: 'object', properties: Object.fromEntries(range(width, (i) => [name(i), wide(depth - 1, width, name)])) };
const deepItems = (depth) => (depth === 0 ? { type: 'string' } : { type: 'array', items: deepItems(depth - 1) });
const deepProps = (depth, name) => (depth === 0 ? { type: 'string' } : { type: 'object', properties: { [name]: deepProps(depth - 1, name) } });

// name -> { path, body, status (the expected HTTP status), param (the 400's param, when refused) }.
const WORST = {
  'enum of 600k values': {
    path: '/v1/chat/completions',
    body: largest((n) => chat(schemaFormat({ enum: range(n, (i) => i) }))),
    status: 400,
    param: 'response_format.json_schema.schema',
  },
  'enum of 600k values behind 7 repeated type names': {
    path: '/v1/chat/completions',
    body: largest((n) => chat(schemaFormat({ type: range(n, () => 'integer'), enum: range(n, (i) => i) }))),
    status: 400,
    param: 'response_format.json_schema.schema',
  },
  'enum of 2M equal values': {
    path: '/v1/chat/completions',
    body: largest((n) => chat(schemaFormat({ enum: range(n, () => 1) }))),
    status: 200,
  },
  '5,000 tools': {
    path: '/v1/chat/completions',
    body: chat({ tools: range(5000, (i) => ({ type: 'function', function: { name: `f${i}`, parameters: { type: 'object', properties: { a: { type: 'string' } } } } })) }),
    status: 400,
    param: 'tools',
  },
  'deep schema (250 levels of items)': {
    path: '/v1/chat/completions',
    body: chat(schemaFormat(deepItems(250))),
    status: 200,
  },
  'deep schema with long property names': {
    path: '/v1/chat/completions',
    body: chat(schemaFormat(deepProps(120, 'k'.repeat(30000)))),
    status: 200,
  },
  'wide schema (3 levels of 41 properties: 70k nodes)': {
    path: '/v1/chat/completions',
    body: chat(schemaFormat(wide(3, 41, (i) => `p${i}`))),
    status: 400,
    param: 'response_format.json_schema.schema',
  },
  'huge logit_bias': {
    path: '/v1/chat/completions',
    body: largest((n) => chat({ logit_bias: Object.fromEntries(range(n, (i) => [String(i), 1])) })),
    status: 400,
    param: 'logit_bias',
  },
  'long stop list': {
    path: '/v1/chat/completions',
    body: largest((n) => chat({ stop: range(n, (i) => `s${i}`) })),
    status: 400,
    param: 'stop',
  },
  'long stop strings': {
    path: '/v1/chat/completions',
    body: chat({ stop: range(16, () => 'a'.repeat(250000)) }),
    status: 400,
    param: 'stop',
  },
  'a prompt of one 4 MB word': {
    path: '/v1/completions',
    body: { prompt: 'a'.repeat(MAX_BODY - 1024), max_tokens: 1 },
    status: 400,
    param: 'prompt',
  },
  'half a million messages': {
    path: '/v1/chat/completions',
    body: largest((n) => ({ messages: range(n, () => ({ role: 'user', content: '' })), max_tokens: 1 })),
    status: 400,
  },
  'messages: enum of 600k values in a tool': {
    path: '/v1/messages',
    body: largest((n) => ({
      model: 'm',
      max_tokens: 1,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ name: 'f', input_schema: { type: 'object', properties: { a: { enum: range(n, (i) => i) } } } }],
      tool_choice: { type: 'any' },
    })),
    status: 400,
  },
  'messages: 5,000 tools': {
    path: '/v1/messages',
    body: { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], tools: range(5000, (i) => ({ name: `f${i}`, input_schema: { type: 'object' } })) },
    status: 400,
  },
  'messages: long stop_sequences': {
    path: '/v1/messages',
    body: { model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'hi' }], stop_sequences: range(16, () => 'a'.repeat(250000)) },
    status: 400,
  },
  'tokenize: one 4 MB word': {
    path: '/tokenize',
    body: { content: 'a'.repeat(MAX_BODY - 1024) },
    status: 200,
  },
};
for (const w of Object.values(WORST)) w.text = JSON.stringify(w.body);

// The server's CPU time so far (user + system, /proc/PID/stat), in ms: the compute a request alone cost, which a
// machine loaded with other work does not inflate as it does the wall time.
const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
const cpuMs = (pid) => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;  // utime, stime: fields 14 and 15 of the whole line
};

const send = async (w) => {
  const t0 = performance.now();
  const cpu0 = cpuMs(server.proc.pid);
  const res = await fetch(`${server.baseURL}${w.path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: w.text });
  const body = await res.json();
  return { status: res.status, body, ms: performance.now() - t0, cpu_ms: cpuMs(server.proc.pid) - cpu0 };
};

// A separate process (this one is busy writing 4 MiB bodies) that polls /health every 20 ms and sends a normal
// completion every 10th round until stopped; resolves with the worst time of each.
const probe = (baseURL) => {
  const script = `
    let checks = 0, failures = 0, worst = 0, completions = [], running = true;
    process.stdin.on('data', () => { running = false; });
    const complete = async () => {
      const t0 = Date.now();
      const res = await fetch('${baseURL}/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 }) }).catch(() => null);
      const body = res && (await res.json());
      if (!body || body.usage?.completion_tokens !== 8) failures++;
      return Date.now() - t0;
    };
    (async () => {
      await fetch('${baseURL}/health').catch(() => null);
      const usual = [];
      for (let i = 0; i < 5; i++) usual.push(await complete());
      process.stdout.write('ready\\n');
      for (let round = 0; running; round++) {
        const t0 = Date.now();
        const res = await fetch('${baseURL}/health').catch(() => null);
        checks++;
        if (!res || res.status !== 200) failures++;
        worst = Math.max(worst, Date.now() - t0);
        if (round % 10 === 9) completions.push(await complete());
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(JSON.stringify({ checks, failures, worst_ms: worst, usual_ms: Math.max(...usual), completions_ms: completions }));
      process.exit(0);
    })();`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  const ready = new Promise((resolve) => child.stdout.on('data', (d) => ((out += d), out.includes('ready') && resolve())));
  const done = new Promise((resolve) => child.on('exit', () => resolve(JSON.parse(out.slice(out.indexOf('\n') + 1)))));
  return { ready, stop: () => (child.stdin.write('stop\n'), done) };
};

// The hook runs as soon as it is registered, so it comes after the bodies above: building them holds the event loop
// for seconds, which would otherwise run into the server's start.
let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  assert.equal((await server?.stop())?.code, 0);
});

test('the worst body per field is answered within its compute budget, with its limit named', async () => {
  const results = [];
  for (const [name, w] of Object.entries(WORST)) {
    const r = await send(w);
    console.log(`# ${name}: ${(w.text.length / 1048576).toFixed(2)} MiB -> ${r.status} in ${r.ms.toFixed(0)} ms (CPU ${r.cpu_ms.toFixed(0)} ms)${r.status === 400 ? `: ${(r.body.error.message ?? '').slice(0, 110)}` : ''}`);
    results.push([name, w, r]);
  }
  for (const [name, w, r] of results) {
    assert.equal(r.status, w.status, `${name}: ${JSON.stringify(r.body).slice(0, 300)}`);
    if (w.param) assert.equal(r.body.error.param, w.param, name);
    // The budget is on the server's compute; the wall time only has to show nothing waited on something else.
    assert.ok(r.cpu_ms < ALONE_MS, `${name} took ${r.cpu_ms.toFixed(0)} ms of CPU`);
    assert.ok(r.ms < 5 * ALONE_MS, `${name} took ${r.ms.toFixed(0)} ms`);
  }
});

test('8 worst bodies at a time: /health and a normal completion keep their usual time', async () => {
  const watch = probe(server.baseURL);
  await watch.ready;
  const worst = Object.values(WORST);
  for (let round = 0; round < worst.length; round += 2) {
    // 8 hostile requests in flight: two fields, four copies each.
    const batch = [worst[round], worst[(round + 1) % worst.length]].flatMap((w) => [w, w, w, w]);
    for (const [i, r] of (await Promise.all(batch.map(send))).entries()) assert.equal(r.status, batch[i].status);
  }
  const p = await watch.stop();
  console.log(`# normal completion: usual ${p.usual_ms} ms, under load ${p.completions_ms.join(' ')} ms; /health: ${p.checks} checks, worst ${p.worst_ms} ms`);
  assert.equal(p.failures, 0);
  assert.ok(p.completions_ms.length >= 3, 'completions ran while the load did');
  // Bounds with room for a loaded CI machine (2 cores shared with other jobs): the stall they guard against held
  // /health and completions for minutes (216 s with 8 enum bodies), and here they measure 2-46 ms.
  assert.ok(p.worst_ms < 750 * SLOWER, `/health took ${p.worst_ms} ms`);
  assert.ok(Math.max(...p.completions_ms) < p.usual_ms + 1000 * SLOWER, `a normal completion took ${Math.max(...p.completions_ms)} ms`);
});
