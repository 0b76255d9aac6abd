// Clients on another base URL or origin: the routes without /v1 (/chat/completions, /completions, /models,
// /responses, /messages ...) answer exactly as their /v1 routes, with the official openai client on a base URL
// lacking /v1; and CORS with --allow-origin, through real fetch() requests: preflights, the header on answers
// (streamed, errors), nothing for other origins or without the flag, and a bad origin refused at start.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { MODEL_ID, startServer } from './helpers.mjs';

const KEY = 'sk-paths-cors-0123456789';
const APP = 'http://app.example:5173';
let server; // --api-key, --allow-origin APP (twice, with another origin)
let plain; // no flag
let any; // --allow-origin '*'
before(async () => {
  [server, plain, any] = await Promise.all([
    startServer(['--api-key', KEY, '--allow-origin', APP, '--allow-origin', 'https://other.example/']),
    startServer(),
    startServer(['--allow-origin', '*']),
  ]);
});
after(async () => {
  for (const s of [server, plain, any]) assert.equal((await s.stop()).code, 0);
});

const auth = { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' };

test('the openai client with a base URL without /v1 gets what the /v1 routes give', async () => {
  const bare = new OpenAI({ apiKey: KEY, baseURL: server.baseURL, maxRetries: 0, timeout: 30000 });
  const v1 = server.client(KEY);
  const chat = { model: MODEL_ID, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 8, temperature: 0 };
  const a = await bare.chat.completions.create(chat);
  const b = await v1.chat.completions.create(chat);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  assert.equal(a.usage.completion_tokens, 8);
  const c = await bare.completions.create({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  const d = await v1.completions.create({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0 });
  assert.equal(c.choices[0].text, d.choices[0].text);
  assert.deepEqual((await bare.models.list()).data.map((m) => m.id), (await v1.models.list()).data.map((m) => m.id));
  assert.equal((await bare.models.retrieve(MODEL_ID)).id, MODEL_ID);
  const r = await bare.responses.create({ input: 'Once upon a time', max_output_tokens: 8, temperature: 0 });
  const r1 = await v1.responses.create({ input: 'Once upon a time', max_output_tokens: 8, temperature: 0 });
  assert.equal(r.output_text, r1.output_text);
  assert.equal(r.status, r1.status);
  assert.equal((await bare.responses.retrieve(r.id)).id, r.id);
  const stream = await bare.chat.completions.create({ ...chat, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assert.equal(text, b.choices[0].message.content);
});

test('/messages answers as /v1/messages, errors in Anthropic shape; other paths stay 404', async () => {
  const body = { model: MODEL_ID, max_tokens: 6, temperature: 0, messages: [{ role: 'user', content: 'Hello' }] };
  const post = (path, b) => fetch(server.baseURL + path, { method: 'POST', headers: auth, body: JSON.stringify(b) });
  const a = await (await post('/messages', body)).json();
  const b = await (await post('/v1/messages', body)).json();
  assert.equal(a.type, 'message');
  assert.deepEqual(a.content, b.content);
  const bad = await post('/messages', { messages: [] });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).type, 'error'); // Anthropic's shape, as on /v1/messages
  const unauthorized = await fetch(`${server.baseURL}/messages`, { method: 'POST', body: '{}' });
  assert.equal(unauthorized.status, 401);
  assert.equal((await unauthorized.json()).type, 'error');
  for (const path of ['/embeddings/x', '/v2/chat/completions', '/chat', '/stats']) {
    const res = await fetch(server.baseURL + path, { headers: auth });
    assert.equal(res.status, 404, path);
  }
});

test('a preflight from an allowed origin is a 204 with the methods, headers and max age, before the key', async () => {
  const res = await fetch(`${server.baseURL}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: {
      Origin: APP,
      'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'authorization, content-type, x-stainless-os',
    },
  });
  assert.equal(res.status, 204);
  assert.equal(res.headers.get('access-control-allow-origin'), APP);
  assert.match(res.headers.get('access-control-allow-methods'), /POST/);
  assert.match(res.headers.get('access-control-allow-methods'), /GET/);
  assert.equal(res.headers.get('access-control-allow-headers'), 'authorization, content-type, x-stainless-os');
  assert.equal(res.headers.get('access-control-max-age'), '86400');
  assert.equal(res.headers.get('vary'), 'Origin');
  // The second origin, given with a trailing slash.
  const other = await fetch(`${server.baseURL}/messages`, {
    method: 'OPTIONS',
    headers: { Origin: 'https://other.example', 'Access-Control-Request-Method': 'POST' },
  });
  assert.equal(other.status, 204);
  assert.equal(other.headers.get('access-control-allow-origin'), 'https://other.example');
});

test('answers to an allowed origin carry Access-Control-Allow-Origin: whole, streamed and errors', async () => {
  const headers = { ...auth, Origin: APP };
  const body = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 };
  const whole = await fetch(`${server.baseURL}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify(body) });
  assert.equal(whole.status, 200);
  assert.equal(whole.headers.get('access-control-allow-origin'), APP);
  assert.equal(whole.headers.get('vary'), 'Origin');
  await whole.json();
  const streamed = await fetch(`${server.baseURL}/chat/completions`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(streamed.status, 200);
  assert.equal(streamed.headers.get('access-control-allow-origin'), APP);
  assert.match(await streamed.text(), /\[DONE\]/);
  const models = await fetch(`${server.baseURL}/v1/models`, { headers });
  assert.equal(models.headers.get('access-control-allow-origin'), APP);
  // The app can read why it was refused.
  const refused = await fetch(`${server.baseURL}/v1/models`, { headers: { Origin: APP } });
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get('access-control-allow-origin'), APP);
});

test('no CORS headers for another origin, nor without the flag; OPTIONS then reaches the routes', async () => {
  const evil = { ...auth, Origin: 'http://evil.example' };
  const res = await fetch(`${server.baseURL}/v1/models`, { headers: evil });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('access-control-allow-origin'), null);
  const pre = await fetch(`${server.baseURL}/v1/models`, {
    method: 'OPTIONS',
    headers: { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'GET' },
  });
  assert.notEqual(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), null);
  assert.equal(pre.headers.get('access-control-allow-methods'), null);
  const plainPre = await fetch(`${plain.baseURL}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: APP, 'Access-Control-Request-Method': 'POST' },
  });
  assert.equal(plainPre.status, 405);
  assert.equal(plainPre.headers.get('access-control-allow-origin'), null);
  const plainGet = await fetch(`${plain.baseURL}/v1/models`, { headers: { Origin: APP } });
  assert.equal(plainGet.status, 200);
  assert.equal(plainGet.headers.get('access-control-allow-origin'), null);
});

test("--allow-origin '*' allows any origin, without Vary", async () => {
  const res = await fetch(`${any.baseURL}/v1/models`, { headers: { Origin: 'http://anything.example' } });
  assert.equal(res.headers.get('access-control-allow-origin'), '*');
  assert.equal(res.headers.get('vary'), null);
  const pre = await fetch(`${any.baseURL}/v1/completions`, {
    method: 'OPTIONS',
    headers: { Origin: 'null', 'Access-Control-Request-Method': 'POST' },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), '*');
  assert.equal(pre.headers.get('access-control-allow-headers'), 'Authorization, Content-Type, x-api-key');
  // A request without Origin (not from a browser) gets no CORS header.
  assert.equal((await fetch(`${any.baseURL}/v1/models`)).headers.get('access-control-allow-origin'), null);
});

test('errors the transport answers before any route carry CORS too: a head too large, a body too large', async () => {
  // 16 KiB heads at most: the Origin may be unread, which '*' still answers.
  const big = await fetch(`${any.baseURL}/v1/models`, {
    headers: { Origin: 'http://anything.example', 'X-Filler': 'a'.repeat(20000) },
  });
  assert.equal(big.status, 431);
  assert.equal(big.headers.get('access-control-allow-origin'), '*');
  await big.text();
  // A body over --max-body-bytes: the head was read, so the listed origin is answered.
  const body = await fetch(`${server.baseURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...auth, Origin: APP },
    body: 'x'.repeat(5 << 20),
  }).catch((e) => e);
  if (!(body instanceof Error)) {
    assert.equal(body.status, 413);
    assert.equal(body.headers.get('access-control-allow-origin'), APP);
  }
});

test('a bad --allow-origin stops the start, naming the value', async () => {
  for (const [value, why] of [
    ['localhost:5173', /no scheme/],
    ['ftp://x.example', /http or https/],
    ['http://x.example/app', /no path/],
  ]) {
    await assert.rejects(startServer(['--allow-origin', value]), (err) => {
      assert.match(err.message, new RegExp(`--allow-origin '${value.replace(/[/.]/g, '\\$&')}'`));
      assert.match(err.message, why);
      return true;
    });
  }
});
