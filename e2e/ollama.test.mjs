// The Ollama API with the official `ollama` JavaScript client against a real `hearth serve` on stories260K: list,
// show, ps, version; generate and chat whole and streamed, with greedy output equal to the OpenAI routes' for the
// same prompt; format "json" and a JSON schema; a second request reusing the prefix (prompt_eval_count shows it);
// num_ctx; tools in the messages; bad bodies as Ollama's {"error"} with a 400 naming the field; /api/embed on a chat
// model a 400 (e2e/embeddings.test.mjs serves an embedding model); the API key as "Authorization: Bearer"; several
// models behind the router.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Ollama } from 'ollama';
import { MODEL, MODEL_ID, metrics, startServer, waitFor } from './helpers.mjs';

let server;
let ollama;
let openai;
before(async () => {
  server = await startServer();
  ollama = new Ollama({ host: server.baseURL });
  openai = server.client();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

const GREEDY = { temperature: 0, num_predict: 24 };

async function post(path, body, headers = {}) {
  const res = await fetch(`${server.baseURL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, type: res.headers.get('content-type'), body: await res.json() };
}

test('list, ps, show and version', async () => {
  const list = await ollama.list();
  assert.equal(list.models.length, 1);
  assert.equal(list.models[0].name, `${MODEL_ID}:latest`);
  assert.equal(list.models[0].details.format, 'gguf');
  assert.ok(list.models[0].size > 0);
  // The file's facts: its architecture, parameter count, file type, fingerprint and modification time.
  const { details, digest, modified_at } = list.models[0];
  assert.equal(details.family, 'llama');
  assert.deepEqual(details.families, ['llama']);
  assert.match(details.parameter_size, /^\d+(\.\d)?K$/);
  assert.match(details.quantization_level, /^(F32|F16|Q\w+)$/);
  assert.match(digest, /^[0-9a-f]{64}$/);
  assert.equal(new Date(modified_at).getTime(), Math.floor(statSync(MODEL).mtimeMs / 1000) * 1000);
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, `${MODEL_ID}:latest`);
  assert.equal(ps.models[0].context_length, 512);
  assert.equal(ps.models[0].size_vram, 0);
  const show = await ollama.show({ model: `${MODEL_ID}:latest` });
  assert.equal(show.model_info['general.context_length'], 512);
  assert.equal(show.model_info['general.architecture'], 'llama');
  assert.equal(show.model_info['llama.context_length'], 512);
  assert.equal(show.details.family, 'llama');
  assert.ok(show.capabilities.includes('completion'));
  assert.match(show.template, /fallback/);
  const version = await ollama.version();
  assert.match(version.version, /^\d+\.\d+\.\d+$/);
  // With one model and lenient names (the default), any name is the served model, as on the OpenAI routes.
  assert.equal((await ollama.show({ model: 'llama3.2' })).model_info['hearth.model_id'], MODEL_ID);
});

test('generate (raw) equals /v1/completions greedy, whole and streamed', async () => {
  const prompt = 'Once upon a time';
  const whole = await ollama.generate({ model: MODEL_ID, prompt, raw: true, stream: false, options: GREEDY });
  const ref = await openai.completions.create({ model: MODEL_ID, prompt, max_tokens: 24, temperature: 0 });
  assert.equal(whole.response, ref.choices[0].text);
  assert.equal(whole.done, true);
  assert.equal(whole.done_reason, 'length');
  assert.equal(whole.eval_count, 24);
  assert.equal(whole.prompt_eval_count + whole.hearth.cached_tokens, ref.usage.prompt_tokens);
  for (const k of ['total_duration', 'prompt_eval_duration', 'eval_duration']) {
    assert.ok(Number.isInteger(whole[k]) && whole[k] > 0, `${k}: ${whole[k]}`);
  }
  assert.ok(whole.total_duration >= whole.eval_duration);
  assert.equal(whole.load_duration, 0);
  assert.ok(Array.isArray(whole.context) && whole.context.length === ref.usage.prompt_tokens + 24);

  let text = '';
  let last;
  for await (const part of await ollama.generate({ model: MODEL_ID, prompt, raw: true, stream: true, options: GREEDY })) {
    if (!part.done) text += part.response;
    last = part;
  }
  assert.equal(text + last.response, whole.response);
  assert.equal(last.done, true);
  assert.equal(last.eval_count, 24);
});

test('repeat_penalty, repeat_last_n and min_p are applied, as on the OpenAI route', async () => {
  const prompt = 'Once upon a time';
  const LONGER = { ...GREEDY, num_predict: 48 };
  const plain = await ollama.generate({ model: MODEL_ID, prompt, raw: true, stream: false, options: LONGER });
  const options = { ...LONGER, repeat_penalty: 1.5, repeat_last_n: 64, min_p: 0.05 };
  const penalized = await ollama.generate({ model: MODEL_ID, prompt, raw: true, stream: false, options });
  // stories260K's greedy story comes back to "play" and "She" within 48 tokens; a penalty of 1.5 changes it.
  assert.notEqual(penalized.response, plain.response);
  const ref = await openai.completions.create({
    model: MODEL_ID,
    prompt,
    max_tokens: 48,
    temperature: 0,
    repeat_penalty: 1.5,
    repeat_last_n: 64,
    min_p: 0.05,
  });
  assert.equal(penalized.response, ref.choices[0].text);
  // A window of 0 turns the penalty off.
  const off = await ollama.generate({ model: MODEL_ID, prompt, raw: true, stream: false, options: { ...options, repeat_last_n: 0 } });
  assert.equal(off.response, plain.response);
});

test('generate through the template equals the OpenAI chat route for one user message', async () => {
  const prompt = 'Tell me about a dog.';
  const gen = await ollama.generate({ model: MODEL_ID, prompt, stream: false, options: GREEDY });
  const ref = await openai.chat.completions.create({
    model: MODEL_ID,
    messages: [{ role: 'user', content: prompt }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(gen.response, ref.choices[0].message.content);
});

test('chat equals /v1/chat/completions greedy, whole and streamed', async () => {
  const messages = [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Tell me a story about a cat.' },
  ];
  const whole = await ollama.chat({ model: MODEL_ID, messages, stream: false, options: GREEDY });
  const ref = await openai.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 24, temperature: 0 });
  assert.equal(whole.message.role, 'assistant');
  assert.equal(whole.message.content, ref.choices[0].message.content);
  assert.equal(whole.done_reason, 'length');
  assert.equal(whole.eval_count, ref.usage.completion_tokens);

  let text = '';
  let pieces = 0;
  let last;
  for await (const part of await ollama.chat({ model: MODEL_ID, messages, stream: true, options: GREEDY })) {
    text += part.message.content;
    pieces += 1;
    last = part;
  }
  assert.ok(pieces > 2, `${pieces} pieces`);
  assert.equal(text, whole.message.content);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'length');
  assert.equal(last.eval_count, 24);
});

test('the raw stream is NDJSON by default', async () => {
  const res = await fetch(`${server.baseURL}/api/chat`, {
    method: 'POST',
    body: JSON.stringify({ model: MODEL_ID, messages: [{ role: 'user', content: 'Hi' }], options: { num_predict: 4 } }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /application\/x-ndjson/);
  const lines = (await res.text()).split('\n').filter((l) => l !== '');
  const parsed = lines.map((l) => JSON.parse(l));
  assert.equal(parsed.at(-1).done, true);
  assert.ok(parsed.slice(0, -1).every((p) => p.done === false && p.message.role === 'assistant'));
});

test('a second request with the same prefix evaluates only the rest', async () => {
  const system = `House rules ${randomUUID()}. The cat may sleep on the bed. Tom feeds the dog at seven. Sue waters ` +
    'the garden when the sun is low. Nobody plays loud music after nine.';
  const ask = (q) =>
    ollama.chat({
      model: MODEL_ID,
      stream: false,
      messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
      options: { temperature: 0, num_predict: 4 },
    });
  const first = await ask('Who feeds the dog?');
  const second = await ask('Who waters the garden?');
  const total = (r) => r.prompt_eval_count + r.hearth.cached_tokens;
  assert.ok(first.prompt_eval_count > 40, JSON.stringify(first));
  assert.ok(second.hearth.cached_tokens > 40, JSON.stringify(second));
  assert.ok(second.prompt_eval_count < first.prompt_eval_count - 40, `${second.prompt_eval_count} vs ${first.prompt_eval_count}`);
  assert.equal(total(first), first.hearth.prompt_tokens);
  assert.ok(total(second) > 0);
});

test('a conversation\'s next turn reuses the previous answer, and /metrics counts the Ollama routes', async () => {
  const messages = [{ role: 'user', content: `Tell me about ${randomUUID()}.` }];
  const first = await ollama.chat({ model: MODEL_ID, messages, stream: false, options: { temperature: 0, num_predict: 20 } });
  messages.push(first.message, { role: 'user', content: 'And then?' });
  const second = await ollama.chat({ model: MODEL_ID, messages, stream: false, options: { temperature: 0, num_predict: 4 } });
  // Everything up to the end of the first answer is cached (the answer's own ids, through the answer memory).
  assert.ok(second.hearth.cached_tokens >= first.hearth.prompt_tokens + first.eval_count - 2, JSON.stringify([first, second]));
  const m = await metrics(server);
  assert.ok(m['hearth_requests_total{endpoint="ollama_chat",finish_reason="length"}'] >= 2);
  assert.ok(m['hearth_answer_memory_prompts_total'] >= 1);
});

test('format "json" and a JSON schema constrain the answer', async () => {
  const json = await ollama.chat({
    model: MODEL_ID,
    messages: [{ role: 'user', content: 'Describe a cat as JSON.' }],
    format: 'json',
    stream: false,
    options: { temperature: 0, num_predict: 40 },
  });
  assert.equal(typeof JSON.parse(json.message.content), 'object');
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer' } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  let text = '';
  for await (const part of await ollama.generate({
    model: MODEL_ID,
    prompt: 'A cat:',
    format: schema,
    stream: true,
    options: { temperature: 0, num_predict: 40 },
  })) {
    text += part.response;
  }
  const value = JSON.parse(text);
  assert.equal(typeof value.name, 'string');
  assert.ok(Number.isInteger(value.age));
});

test('num_ctx: a larger one is clamped to the model, a smaller one bounds the prompt and the answer', async () => {
  const big = await ollama.generate({ model: MODEL_ID, prompt: 'Once', raw: true, stream: false, options: { temperature: 0, num_predict: 4, num_ctx: 131072 } });
  assert.equal(big.eval_count, 4);
  const small = await ollama.generate({ model: MODEL_ID, prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_ctx: 8 } });
  assert.equal(small.done_reason, 'length');
  assert.equal(small.prompt_eval_count + small.hearth.cached_tokens + small.eval_count, 8);
  await assert.rejects(
    ollama.generate({ model: MODEL_ID, prompt: 'Once upon a time there was a dog', raw: true, stream: false, options: { num_ctx: 4 } }),
    (e) => e.status_code === 400 && /num_ctx/.test(e.message),
  );
});

test('tools, assistant tool_calls and tool results go through the template', async () => {
  const tools = [{
    type: 'function',
    function: { name: 'lights_on', description: 'Turn a light on', parameters: { type: 'object', properties: { room: { type: 'string' } }, required: ['room'] } },
  }];
  const r = await ollama.chat({
    model: MODEL_ID,
    stream: false,
    tools,
    messages: [
      { role: 'user', content: 'Light the kitchen.' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'lights_on', arguments: { room: 'kitchen' } } }] },
      { role: 'tool', content: 'ok', tool_name: 'lights_on' },
    ],
    options: { temperature: 0, num_predict: 6 },
  });
  assert.equal(r.done, true);
  assert.equal(typeof r.message.content, 'string');
});

test('an answer in the tool-call format comes back as message.tool_calls, whole and streamed', async () => {
  // stories260K never calls a tool by itself; a format schema makes it write one in the fallback format's JSON.
  const tools = [{ type: 'function', function: { name: 'lights_on', parameters: { type: 'object', properties: { room: { type: 'string' } } } } }];
  const format = {
    type: 'object',
    properties: {
      name: { const: 'lights_on' },
      arguments: { type: 'object', properties: { room: { type: 'string', maxLength: 8 } }, required: ['room'], additionalProperties: false },
    },
    required: ['name', 'arguments'],
    additionalProperties: false,
  };
  const body = { model: MODEL_ID, tools, format, messages: [{ role: 'user', content: 'Light the kitchen.' }], options: { temperature: 0, num_predict: 60 } };
  const whole = await ollama.chat({ ...body, stream: false });
  assert.equal(whole.message.tool_calls.length, 1, JSON.stringify(whole.message));
  assert.equal(whole.message.tool_calls[0].function.name, 'lights_on');
  assert.equal(typeof whole.message.tool_calls[0].function.arguments.room, 'string');
  assert.equal(whole.message.content, '');
  let content = '';
  const calls = [];
  let last;
  for await (const part of await ollama.chat({ ...body, stream: true })) {
    content += part.message.content;
    calls.push(...(part.message.tool_calls ?? []));
    last = part;
  }
  assert.equal(content, '');
  assert.deepEqual(calls, whole.message.tool_calls);
  assert.equal(last.done, true);
});

test('a load-only request answers done_reason "load"', async () => {
  const r = await post('/api/generate', { model: MODEL_ID });
  assert.equal(r.status, 200);
  assert.equal(r.body.done, true);
  assert.equal(r.body.done_reason, 'load');
});

test('bad bodies are 400s in Ollama\'s shape, naming the field', async () => {
  const cases = [
    ['{"model": ', /JSON/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { min_p: 1.5 } }, /options\.min_p/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { repeat_penalty: 0 } }, /options\.repeat_penalty/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { tfs_z: 0.9 } }, /options\.tfs_z/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { mirostat: 2 } }, /options\.mirostat/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { no_such: 1 } }, /options\.no_such/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x', images: ['aGk='] }] }, /images/],
    [{ model: MODEL_ID, messages: [{ role: 'robot', content: 'x' }] }, /role/],
    [{ model: MODEL_ID, messages: 'hello' }, /messages/],
    [{ model: MODEL_ID, messages: [], unknown_field: true }, /unknown_field/],
    [{ messages: [{ role: 'user', content: 'x' }] }, /model/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], format: 'xml' }, /format/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { temperature: 'hot' } }, /temperature/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], keep_alive: [] }, /keep_alive/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], think: true }, /thinking/],
    [{ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], logprobs: true }, /logprobs/],
  ];
  for (const [body, pattern] of cases) {
    const r = await post('/api/chat', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.deepEqual(Object.keys(r.body), ['error'], JSON.stringify(r.body));
    assert.match(r.body.error, pattern, JSON.stringify(body));
  }
  for (const [body, pattern] of [
    [{ model: MODEL_ID, prompt: 'x', suffix: 'y' }, /suffix/],
    [{ model: MODEL_ID, prompt: 'x', template: '{{ .Prompt }}' }, /template/],
    [{ model: MODEL_ID, prompt: 'x', raw: true, system: 'y' }, /system/],
    [{ model: MODEL_ID, prompt: 'x', context: ['a'] }, /context/],
  ]) {
    const r = await post('/api/generate', body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.match(r.body.error, pattern);
  }
  await assert.rejects(
    ollama.chat({ model: MODEL_ID, messages: [{ role: 'user', content: 'x' }], options: { typical_p: 0.5 } }),
    (e) => e.status_code === 400 && /typical_p/.test(e.message),
  );
  const unknown = await fetch(`${server.baseURL}/api/pull`, { method: 'POST', body: '{}' });
  assert.equal(unknown.status, 404);
  assert.ok((await unknown.json()).error);
  const wrongMethod = await fetch(`${server.baseURL}/api/chat`);
  assert.equal(wrongMethod.status, 405);
  assert.match((await wrongMethod.json()).error, /GET/);
  // Every body crossing the socket is bounded: over --max-body-bytes (4 MiB) is a 413, still in Ollama's shape.
  const huge = await post('/api/chat', JSON.stringify({ model: MODEL_ID, messages: [{ role: 'user', content: 'x'.repeat(5 << 20) }] }));
  assert.equal(huge.status, 413);
  assert.deepEqual(Object.keys(huge.body), ['error']);
});

test('/api/embed on a chat model is a 400 saying it is not an embedding model and how to pool it', async () => {
  const r = await post('/api/embed', { model: MODEL_ID, input: 'hi' });
  assert.equal(r.status, 400);
  assert.match(r.body.error, /not an embedding model.*--pooling/);
  await assert.rejects(ollama.embed({ model: MODEL_ID, input: 'hi' }), (e) => e.status_code === 400);
});

test('the context of a generate continues the exchange', async () => {
  const first = await ollama.generate({ model: MODEL_ID, prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_predict: 8 } });
  const next = await ollama.generate({ model: MODEL_ID, prompt: ' The end.', raw: true, context: first.context, stream: false, options: { temperature: 0, num_predict: 4 } });
  assert.ok(next.hearth.cached_tokens >= first.context.length - 16, JSON.stringify(next));
  assert.ok(next.context.length > first.context.length);
});

test('with --api-key the Ollama routes take Authorization: Bearer', async () => {
  const keyed = await startServer(['--api-key', 'sekret']);
  try {
    const bad = new Ollama({ host: keyed.baseURL });
    await assert.rejects(bad.list(), (e) => e.status_code === 401);
    const refused = await fetch(`${keyed.baseURL}/api/tags`, { headers: { Authorization: 'Bearer wrong' } });
    assert.equal(refused.status, 401);
    assert.deepEqual(Object.keys(await refused.json()), ['error']);
    const good = new Ollama({ host: keyed.baseURL, headers: { Authorization: 'Bearer sekret' } });
    assert.equal((await good.list()).models.length, 1);
    const r = await good.generate({ model: MODEL_ID, prompt: 'Once', raw: true, stream: false, options: { num_predict: 2 } });
    assert.equal(r.eval_count, 2);
  } finally {
    await keyed.stop();
  }
});

test('several models: the router lists them, routes chat by "name:latest", and answers in Ollama\'s shape', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'hearth-ollama-'));
  symlinkSync(MODEL, path.join(dir, 'a-stories.gguf'));
  symlinkSync(MODEL, path.join(dir, 'b-stories.gguf'));
  const several = await startServer(['--models', dir, '--kv-memory', '4MiB'], {}, { models: [] });
  try {
    const client = new Ollama({ host: several.baseURL });
    assert.deepEqual((await client.list()).models.map((m) => m.name), ['a-stories:latest', 'b-stories:latest']);
    assert.deepEqual((await client.ps()).models, []);
    const r = await client.generate({ model: 'b-stories:latest', prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_predict: 24 } });
    const ref = await ollama.generate({ model: MODEL_ID, prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_predict: 24 } });
    assert.equal(r.response, ref.response);
    assert.equal(r.model, 'b-stories:latest');
    const ps = (await client.ps()).models;
    assert.deepEqual(ps.map((m) => m.name), ['b-stories:latest']);
    assert.ok(ps[0].size > 0 && ps[0].context_length === 512);
    assert.equal((await client.show({ model: 'a-stories' })).model_info['general.context_length'], 512);
    assert.match((await client.version()).version, /^\d+\.\d+\.\d+$/);
    await assert.rejects(client.chat({ model: 'llama3.2', messages: [{ role: 'user', content: 'x' }] }), (e) => e.status_code === 404 && /llama3\.2/.test(e.message));
    await assert.rejects(client.show({ model: 'llama3.2' }), (e) => e.status_code === 404);
    const bad = await fetch(`${several.baseURL}/api/chat`, { method: 'POST', body: '{"model": ' });
    assert.equal(bad.status, 400);
    assert.ok(typeof (await bad.json()).error === 'string');
    await assert.rejects(client.embed({ model: 'a-stories', input: 'x' }), (e) => e.status_code === 400 && /not an embedding model/.test(e.message));

    // keep_alive sets the model's keep-alive under the budget: -1 keeps it, 0 unloads it once idle.
    await client.chat({ model: 'a-stories', messages: [{ role: 'user', content: 'Hi' }], stream: false, keep_alive: -1, options: { num_predict: 2 } });
    const kept = (await client.ps()).models.find((m) => m.name === 'a-stories:latest');
    assert.ok(new Date(kept.expires_at).getFullYear() > 2100, kept.expires_at);
    const five = (await client.ps()).models.find((m) => m.name === 'b-stories:latest');
    assert.ok(new Date(five.expires_at) - Date.now() > 60000, five.expires_at); // --keep-alive's default, 5 minutes
    await client.generate({ model: 'b-stories', prompt: 'Once', raw: true, stream: false, keep_alive: 0, options: { num_predict: 2 } });
    await waitFor(async () => !(await client.ps()).models.some((m) => m.name === 'b-stories:latest'), 10000, 'b-stories unloaded');
    assert.deepEqual((await client.ps()).models.map((m) => m.name), ['a-stories:latest']);
    await assert.rejects(client.chat({ model: 'a-stories', messages: [], keep_alive: 'soon' }), (e) => e.status_code === 400 && /keep_alive/.test(e.message));
  } finally {
    assert.equal((await several.stop()).code, 0);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--ollama-port serves the same routes on a second port', async () => {
  const two = await startServer(['--ollama-port', '0']);
  try {
    const m = two.stdout().match(/Ollama's\) on http:\/\/[^:]+:(\d+)/);
    assert.ok(m, two.stdout());
    const port = Number(m[1]);
    assert.notEqual(port, two.port);
    const client = new Ollama({ host: `http://127.0.0.1:${port}` });
    assert.equal((await client.list()).models[0].name, `${MODEL_ID}:latest`);
    const a = await client.generate({ model: MODEL_ID, prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_predict: 8 } });
    const b = await new Ollama({ host: two.baseURL }).generate({ model: MODEL_ID, prompt: 'Once upon a time', raw: true, stream: false, options: { temperature: 0, num_predict: 8 } });
    assert.equal(a.response, b.response);
    assert.ok(b.hearth.cached_tokens > 0, 'one engine and cache behind both ports');
  } finally {
    assert.equal((await two.stop()).code, 0);
  }
});
