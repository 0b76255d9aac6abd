// Disconnects and load: a dropped stream is aborted and frees its blocks; 32 concurrent streaming clients all get
// complete, correct answers while /health keeps answering; no blocks leak.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { GOLDEN_64, collectStream, idleAndNoBlocksUsed, metrics, startServer } from './helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = server.client();
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

test('a client that drops a stream after the first chunk aborts its request', async () => {
  const before = await metrics(server);
  // Background load keeps the engine busy, so the dropped stream is still generating when the server notices.
  const background = Array.from({ length: 12 }, () =>
    client.completions.create({ prompt: 'Once upon a time', max_tokens: 480, temperature: 0, hearth: { ignore_eos: true } }),
  );
  const stream = await client.completions.create({
    prompt: 'Once upon a time',
    max_tokens: 480,
    temperature: 0,
    stream: true,
    hearth: { ignore_eos: true },
  });
  for await (const chunk of stream) {
    assert.ok(chunk.choices.length > 0);
    break; // leaving the loop aborts the HTTP request
  }
  for (const r of await Promise.all(background)) assert.equal(r.usage.completion_tokens, 480);
  const m = await idleAndNoBlocksUsed(server);
  const aborted = (x) => x['hearth_requests_total{endpoint="completions",finish_reason="abort"}'] ?? 0;
  assert.equal(aborted(m), aborted(before) + 1, 'the request ended as aborted');
  assert.equal(m['hearth_client_disconnects_total'], before['hearth_client_disconnects_total'] + 1);
  assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
});

test('32 concurrent streaming clients all complete correctly; /health answers throughout', async () => {
  const chatMessages = (i) => [{ role: 'user', content: `Tell a story about friend number ${i % 4}.` }];
  // References, one request at a time.
  const chatRef = [];
  for (let i = 0; i < 4; i++) {
    const r = await client.chat.completions.create({ messages: chatMessages(i), max_tokens: 48, temperature: 0 });
    chatRef.push(r.choices[0].message.content);
  }

  let healthChecks = 0;
  let healthFailures = 0;
  let running = true;
  const healthLoop = (async () => {
    while (running) {
      const t0 = Date.now();
      const res = await fetch(`${server.baseURL}/health`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
      healthChecks++;
      if (!res || res.status !== 200 || Date.now() - t0 > 2000) healthFailures++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const clients = Array.from({ length: 32 }, async (_, i) => {
    if (i % 2 === 0) {
      const s = await collectStream(
        await client.completions.create({ prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stream: true }),
      );
      assert.equal(s.text, GOLDEN_64, `client ${i}`);
      assert.equal(s.finish, 'length');
    } else {
      const s = await collectStream(
        await client.chat.completions.create({
          messages: chatMessages(i),
          max_tokens: 48,
          temperature: 0,
          stream: true,
          stream_options: { include_usage: true },
        }),
      );
      assert.equal(s.text, chatRef[i % 4], `client ${i}`);
      assert.ok(s.usage && s.usage.completion_tokens > 0);
    }
  });
  const results = await Promise.allSettled(clients);
  running = false;
  await healthLoop;
  const failures = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
  assert.deepEqual(failures, []);
  assert.ok(healthChecks >= 1);
  assert.equal(healthFailures, 0);
  const m = await idleAndNoBlocksUsed(server);
  assert.equal(m['hearth_requests_waiting'], 0);
});
