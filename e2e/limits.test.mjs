// Hardening against a real hearth serve: bodies nested 70k-150k levels deep are 400s and the server
// keeps serving; wrong /tokenize types and out-of-range /v1/kv/plan inputs are 400s naming the field.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startServer } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

// JSON.stringify would recurse as deeply as the body nests, so these bodies are built as text.
const nestedObjects = (n) => '{"a":'.repeat(n - 1) + '{}' + '}'.repeat(n - 1);
const nestedArrays = (n) => '['.repeat(n) + ']'.repeat(n);

async function post(path, body) {
  const res = await fetch(server.baseURL + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  return { status: res.status, body: await res.json() };
}

const deepBodies = {
  'chat: 70k objects in a message': [
    '/v1/chat/completions',
    `{"messages":[{"role":"user","content":"hi","extra":${nestedObjects(70000)}}],"max_tokens":1}`,
  ],
  'chat: 150k arrays in tools': [
    '/v1/chat/completions',
    `{"messages":[{"role":"user","content":"hi"}],"tools":${nestedArrays(150000)},"max_tokens":1}`,
  ],
  'completions: 100k arrays in the prompt': ['/v1/completions', `{"prompt":${nestedArrays(100000)},"max_tokens":1}`],
  'cache/explain: 70k objects in a message': [
    '/v1/cache/explain',
    `{"messages":[{"role":"user","content":"hi","extra":${nestedObjects(70000)}}]}`,
  ],
  'tokenize: 100k arrays': ['/tokenize', `{"content":"hi","x":${nestedArrays(100000)}}`],
};

for (const [name, [path, body]] of Object.entries(deepBodies)) {
  test(`a deeply nested body is a 400 and the server stays up (${name})`, async () => {
    assert.ok(body.length < 1 << 20, 'under the default body limit');
    const r = await post(path, body);
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /nests deeper than 256/);
    assert.equal(r.body.error.code, 'json_too_deep');
    const health = await fetch(`${server.baseURL}/health`);
    assert.equal(health.status, 200);
  });
}

test('after the deep bodies the server still completes a request', async () => {
  const r = await server.client().completions.create({ prompt: 'Once upon a time', max_tokens: 2, temperature: 0 });
  assert.equal(r.usage.completion_tokens, 2);
});

test('/tokenize with a wrongly typed flag is a 400 naming it', async () => {
  for (const [body, param] of [
    [{ content: 'hi', add_special: 'yes' }, 'add_special'],
    [{ content: 'hi', parse_special: 1 }, 'parse_special'],
    [{ content: 7 }, 'content'],
  ]) {
    const r = await post('/tokenize', JSON.stringify(body));
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param);
    assert.match(r.body.error.message, new RegExp(param));
  }
});

test('/v1/kv/plan refuses out-of-range ctx and users with the numbers', async () => {
  for (const [query, param, part] of [
    ['ctx=2147483647&users=2147483647', 'ctx', '2147483647'],
    ['ctx=99999999999999999999', 'ctx', '99999999999999999999'],
    ['users=2147483647', 'users', '2147483647'],
    ['ctx=0', 'ctx', 'outside'],
  ]) {
    const res = await fetch(`${server.baseURL}/v1/kv/plan?${query}`);
    assert.equal(res.status, 400, query);
    const body = await res.json();
    assert.equal(body.error.param, param, query);
    assert.ok(body.error.message.includes(part), body.error.message);
  }
  const ok = await (await fetch(`${server.baseURL}/v1/kv/plan?ctx=16777216&users=1048576`)).json();
  assert.ok(ok.plan.dtypes.length > 0);
  for (const row of ok.plan.dtypes) assert.ok(row.kv_bytes > 0, JSON.stringify(row));
});
