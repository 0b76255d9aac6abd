// The OpenAI surface of hearth serve through the official openai client: completions and chat, streaming and
// not, greedy golden text, exact prefix-cache counts, every error status, /v1/models, /health, /metrics.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { GOLDEN_64, MODEL_ID, collectStream, idleAndNoBlocksUsed, metrics, startServer, tokenize } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer(['--max-body-bytes', '64KiB']);
  client = server.client();
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, 'hearth serve exits 0 on SIGTERM');
});

const salt = () => `t-${Math.random().toString(36).slice(2)}`;

describe('completions', () => {
  test('greedy non-streaming matches the reference text', async () => {
    const r = await client.completions.create({
      model: MODEL_ID,
      prompt: 'Once upon a time',
      max_tokens: 64,
      temperature: 0,
    });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].text, GOLDEN_64);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.prompt_tokens, 5);
    assert.equal(r.usage.completion_tokens, 64);
    assert.equal(r.usage.total_tokens, 69);
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
    for (const k of ['reused_tokens', 'computed_prompt_tokens', 'reuse_stopped_at', 'prefill_ms', 'ttft_ms']) {
      assert.equal(typeof r.usage.hearth[k], 'number', k);
    }
  });

  test('streamed text equals non-streamed text at temperature 0, with usage at the end', async () => {
    const stream = await client.completions.create({
      model: MODEL_ID,
      prompt: 'Once upon a time',
      max_tokens: 64,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const s = await collectStream(stream);
    assert.equal(s.text, GOLDEN_64);
    assert.equal(s.finish, 'length');
    assert.ok(s.chunks > 10);
    assert.equal(s.usage.completion_tokens, 64);
    assert.equal(typeof s.usage.prompt_tokens_details.cached_tokens, 'number');
  });

  test('stop strings end the text before the match', async () => {
    const r = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stop: ['Lily'] });
    assert.equal(r.choices[0].text, ', there was a little girl named ');
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  test('seeded sampling is reproducible', async () => {
    const req = { model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 24, temperature: 0.9, top_p: 0.9, seed: 42 };
    const a = await client.completions.create(req);
    const b = await client.completions.create(req);
    assert.equal(a.choices[0].text, b.choices[0].text);
  });
});

describe('chat', () => {
  const messages = [
    { role: 'system', content: 'You tell short stories.' },
    { role: 'user', content: 'Tell me about a cat.' },
  ];

  test('non-streaming and streaming agree at temperature 0', async () => {
    const r = await client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 40, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.ok(r.choices[0].message.content.length > 0);
    assert.ok(r.usage.prompt_tokens > 10);
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');

    const stream = await client.chat.completions.create({
      model: MODEL_ID,
      messages,
      max_completion_tokens: 40,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const s = await collectStream(stream);
    assert.equal(s.text, r.choices[0].message.content);
    assert.equal(s.finish, r.choices[0].finish_reason);
    assert.equal(s.usage.completion_tokens, r.usage.completion_tokens);
    // The same conversation again reuses its prompt.
    assert.ok(s.usage.prompt_tokens_details.cached_tokens > 0);
  });

  test('a second conversation sharing a long system prompt reuses it', async () => {
    const system = { role: 'system', content: 'House rules: be kind, share toys, and tidy up after playing. '.repeat(4) };
    const s = salt();
    const a = await client.chat.completions.create({
      messages: [system, { role: 'user', content: 'Who is Tom?' }],
      max_tokens: 4,
      temperature: 0,
      cache_salt: s,
    });
    assert.equal(a.usage.prompt_tokens_details.cached_tokens, 0);
    const b = await client.chat.completions.create({
      messages: [system, { role: 'user', content: 'Where is the park?' }],
      max_tokens: 4,
      temperature: 0,
      cache_salt: s,
    });
    assert.ok(b.usage.prompt_tokens_details.cached_tokens >= 48, JSON.stringify(b.usage));
    assert.equal(b.usage.hearth.reused_tokens, b.usage.prompt_tokens_details.cached_tokens);
    assert.equal(b.usage.hearth.computed_prompt_tokens, b.usage.prompt_tokens - b.usage.prompt_tokens_details.cached_tokens);
  });
});

describe('prefix cache counts', () => {
  const text =
    'Once upon a time, there was a little dog named Max. Max liked to run in the big green park with his ' +
    'friend Sue. One day they found a shiny red ball under a tree and played until the sun went down.';

  test('exact cached_tokens for full-block, partial-block and fully cached prompts', async () => {
    const p = await tokenize(server, text);
    assert.ok(p.length >= 60, `prompt has ${p.length} tokens`);
    const extra = await tokenize(server, ' The end of the story was happy.', false);
    const other = await tokenize(server, ' Then a big cat came by and said hello.', false);
    const s = salt();
    const run = async (prompt) =>
      (await client.completions.create({ prompt, max_tokens: 1, temperature: 0, cache_salt: s })).usage;

    const a = await run(p);
    assert.equal(a.prompt_tokens, p.length);
    assert.equal(a.prompt_tokens_details.cached_tokens, 0);
    const fullBlocks = Math.floor(p.length / 16) * 16;

    // Shares all of A's prompt: every full block of it, and the tokens of its partly filled last block (copied).
    const b = await run([...p, ...extra]);
    assert.equal(b.prompt_tokens_details.cached_tokens, p.length);
    assert.equal(b.hearth.reuse_stopped_at, p.length);
    assert.equal(b.hearth.copied_tokens, p.length - fullBlocks);
    assert.equal(b.hearth.computed_prompt_tokens, extra.length);

    // Diverges inside block 3 (token 50): token-granular reuse copies the 2 matching slots.
    const c = await run([...p.slice(0, 50), ...other]);
    assert.equal(c.prompt_tokens_details.cached_tokens, 50);
    assert.equal(c.hearth.copied_tokens, 2);

    // A prompt that is entirely cached still computes its last token.
    const d = await run(p.slice(0, 48));
    assert.equal(d.prompt_tokens_details.cached_tokens, 47);

    // The text prompt (= p) again: B's blocks cover it, up to prompt_len - 1 (the last token is computed).
    const e = await run(text);
    assert.equal(e.prompt_tokens_details.cached_tokens, p.length - 1);
  });

  test('cache_salt isolates tenants and cache_prompt=false disables reuse', async () => {
    const p = await tokenize(server, text);
    const s1 = salt();
    const run = async (extra) =>
      (await client.completions.create({ prompt: p, max_tokens: 1, temperature: 0, ...extra })).usage;
    await run({ cache_salt: s1 });
    assert.equal((await run({ cache_salt: salt() })).prompt_tokens_details.cached_tokens, 0);
    const off = await run({ cache_salt: s1, cache_prompt: false });
    assert.equal(off.prompt_tokens_details.cached_tokens, 0);
    assert.equal(off.hearth.cache, 'off');
    assert.equal((await run({ cache_salt: s1 })).prompt_tokens_details.cached_tokens, p.length - 1);
  });

  test('pin_prefix reports the pinned tokens', async () => {
    const p = await tokenize(server, text);
    const r = await client.completions.create({
      prompt: p,
      max_tokens: 1,
      temperature: 0,
      cache_salt: salt(),
      hearth: { pin_prefix: true },
    });
    assert.equal(r.usage.hearth.pinned_tokens, Math.floor(p.length / 16) * 16);
    assert.equal(r.usage.hearth.pin_error, null);
  });
});

describe('errors', () => {
  const expectStatus = async (promise, status, pattern) => {
    await assert.rejects(promise, (err) => {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.equal(err.status, status, err.message);
      if (pattern) assert.match(err.message, pattern);
      assert.ok(err.error && typeof err.error.message === 'string', 'an OpenAI error object');
      return true;
    });
  };

  test('missing, empty and mistyped fields are 400s', async () => {
    await expectStatus(client.chat.completions.create({ model: MODEL_ID }), 400, /'messages' is required/);
    await expectStatus(client.chat.completions.create({ messages: [] }), 400, /at least one message/);
    await expectStatus(client.chat.completions.create({ messages: 'hi' }), 400, /'messages' must be an array/);
    await expectStatus(client.chat.completions.create({ messages: [{ role: 'user', content: 5 }] }), 400, /content/);
    await expectStatus(client.completions.create({ model: MODEL_ID }), 400, /'prompt' is required/);
    await expectStatus(client.completions.create({ prompt: 'x', temperature: 'hot' }), 400, /temperature/);
    await expectStatus(client.completions.create({ prompt: 'x', n: 17 }), 400, /maximum 16/);
  });

  test('max_tokens <= 0 is a 400 (beyond the context it is clamped: max_tokens.test.mjs)', async () => {
    await expectStatus(client.completions.create({ prompt: 'x', max_tokens: 0 }), 400, /max_tokens/);
    await expectStatus(client.completions.create({ prompt: 'x', max_tokens: -3 }), 400, /max_tokens/);
  });

  test('a prompt longer than the context is a 400 with the numbers', async () => {
    const tokens = Array.from({ length: 600 }, (_, i) => 300 + (i % 100));
    await expectStatus(client.completions.create({ prompt: tokens, max_tokens: 1 }), 400, /600 tokens.*512/);
  });

  test('any model name is served by the one model, and the response names it (see models.test.mjs)', async () => {
    const r = await client.completions.create({ model: 'gpt-17', prompt: 'x', max_tokens: 1 });
    assert.equal(r.model, MODEL_ID);
  });

  test('a body over --max-body-bytes is a 413', async () => {
    await expectStatus(client.completions.create({ prompt: 'a '.repeat(40000), max_tokens: 1 }), 413, /limit/);
  });

  test('a chunked request body is read within --max-body-bytes, and refused with 413 past it', async () => {
    const chunked = (parts) =>
      new ReadableStream({
        start(c) {
          for (const p of parts) c.enqueue(new TextEncoder().encode(p));
          c.close();
        },
      });
    const url = `${server.baseURL}/v1/completions`;
    const ok = await fetch(url, { method: 'POST', body: chunked(['{"prompt": "Once",', ' "max_tokens": 2}']), duplex: 'half' });
    assert.equal(ok.status, 200);
    assert.equal((await ok.json()).usage.completion_tokens, 2);
    // 80 KiB in 1 KiB chunks against a 64 KiB limit: refused as soon as the limit is crossed.
    const big = ['{"prompt": "', ...Array.from({ length: 80 }, () => 'a'.repeat(1024)), '"}'];
    const res = await fetch(url, { method: 'POST', body: chunked(big), duplex: 'half' });
    assert.equal(res.status, 413);
    assert.equal((await res.json()).error.code, 'request_too_large');
  });

  test('malformed JSON is a 400 error object', async () => {
    const res = await fetch(`${server.baseURL}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"messages": [',
    });
    assert.equal(res.status, 400);
    const body = await res.json();
    assert.match(body.error.message, /not valid JSON/);
    assert.equal(body.error.type, 'invalid_request_error');
    assert.ok('param' in body.error && 'code' in body.error);
  });

  test('an unknown route is a 404 error object', async () => {
    const res = await fetch(`${server.baseURL}/v1/nothing`);
    assert.equal(res.status, 404);
    assert.match((await res.json()).error.message, /unknown endpoint/);
  });
});

describe('models, health, metrics', () => {
  test('/v1/models lists the served model', async () => {
    const list = await client.models.list();
    assert.deepEqual(
      list.data.map((m) => m.id),
      [MODEL_ID],
    );
    assert.equal((await client.models.retrieve(MODEL_ID)).id, MODEL_ID);
  });

  test('/health answers ok', async () => {
    const res = await fetch(`${server.baseURL}/health`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok' });
  });

  test('/metrics is Prometheus text with cache, KV, request and error series', async () => {
    const res = await fetch(`${server.baseURL}/metrics`);
    assert.match(res.headers.get('content-type'), /text\/plain/);
    const text = await res.text();
    for (const name of [
      'hearth_prefix_cache_queried_tokens_total',
      'hearth_prefix_cache_hit_tokens_total',
      'hearth_kv_blocks',
      'hearth_kv_bytes',
      'hearth_kv_evictions_total',
      'hearth_preemptions_total',
      'hearth_requests_running',
      'hearth_requests_waiting',
      'hearth_time_to_first_token_seconds',
      'hearth_request_duration_seconds',
      'hearth_prefill_tokens_total',
      'hearth_decode_tokens_total',
      'hearth_http_errors_total',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
    }
    const m = await idleAndNoBlocksUsed(server);
    assert.ok(m['hearth_prefix_cache_hit_tokens_total'] > 0);
    assert.ok(m['hearth_decode_tokens_total'] > 0);
    assert.ok(m['hearth_time_to_first_token_seconds_count'] > 0);
    assert.ok(m['hearth_http_errors_total{code="400"}'] > 0);
  });
});
