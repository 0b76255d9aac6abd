// Hostile clients against the Beast transport: a non-streaming client that leaves aborts its request; slow heads
// are cut at the header deadline and never hold up others; the connection cap answers 503; an oversized head is a
// 431; 256 concurrent streams (a third dropped at random) are served by a handful of threads, with no failed
// request and no leaked block.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { idleAndNoBlocksUsed, metrics, startServer, waitFor } from './helpers.mjs';

let server;
before(async () => {
  server = await startServer(['--header-timeout', '1', '--max-connections', '400', '--max-queue', '512']);
});
after(async () => {
  assert.equal((await server.stop()).code, 0);
});

const post = (path, body, opts = {}) =>
  fetch(`${server.baseURL}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...opts,
  });

// A raw TCP connection that has sent `bytes`; resolves with it once connected.
const rawConnection = (bytes = '') =>
  new Promise((resolve, reject) => {
    const s = net.connect(server.port, '127.0.0.1', () => {
      if (bytes) s.write(bytes);
      resolve(s);
    });
    s.on('error', reject);
  });
const closed = (socket) => new Promise((resolve) => (socket.destroyed ? resolve() : socket.on('close', resolve)));
const readAll = (socket) =>
  new Promise((resolve) => {
    let data = '';
    socket.on('data', (d) => (data += d));
    socket.on('close', () => resolve(data));
  });
// Polls /health every 20 ms from a separate process (this one is busy with the load it makes) until stopped;
// resolves with { checks, failures, worst_ms }.
const healthProbe = (baseURL) => {
  const script = `
    let checks = 0, failures = 0, worst = 0, running = true;
    process.stdin.on('data', () => { running = false; });
    (async () => {
      await fetch('${baseURL}/health').catch(() => null);  // warm-up: the first fetch of a process sets up its client
      while (running) {
        const t0 = Date.now();
        const res = await fetch('${baseURL}/health').catch(() => null);
        checks++;
        if (!res || res.status !== 200) failures++;
        worst = Math.max(worst, Date.now() - t0);
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(JSON.stringify({ checks, failures, worst_ms: worst }));
      process.exit(0);
    })();`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const done = new Promise((resolve) => child.on('exit', () => resolve(JSON.parse(out))));
  return { stop: () => (child.stdin.write('stop\n'), done) };
};
const threads = () => Number(/Threads:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.proc.pid}/status`, 'utf8'))[1]);

test('a non-streaming client that disconnects aborts its request within a step, counted as a disconnect', async () => {
  const before = await metrics(server);
  // Background load slows every request down, so this one is still generating when its client leaves.
  const long = { prompt: 'Once upon a time', max_tokens: 480, temperature: 0, hearth: { ignore_eos: true } };
  const background = Array.from({ length: 12 }, () => post('/v1/completions', long).then((r) => r.json()));
  const controller = new AbortController();
  const pending = post(
    '/v1/completions',
    { prompt: 'Once upon a time', max_tokens: 480, temperature: 0, hearth: { ignore_eos: true } },
    { signal: controller.signal },
  ).catch((e) => e);
  await waitFor(async () => (await metrics(server))['hearth_decode_tokens_total'] > before['hearth_decode_tokens_total'] + 200, 20000, 'generation under way');
  controller.abort();
  assert.ok((await pending) instanceof Error);
  for (const r of await Promise.all(background)) assert.equal(r.usage.completion_tokens, 480);
  const m = await idleAndNoBlocksUsed(server);
  assert.equal(m['hearth_client_disconnects_total'], before['hearth_client_disconnects_total'] + 1);
  const aborted = (x) => x['hearth_requests_total{endpoint="completions",finish_reason="abort"}'] ?? 0;
  assert.equal(aborted(m), aborted(before) + 1);
  assert.ok(m['hearth_decode_tokens_total'] - before['hearth_decode_tokens_total'] < 13 * 480, 'it stopped early');
});

test('300 slowloris connections are cut at the header deadline and a normal request is served meanwhile', async () => {
  const slow = await Promise.all(Array.from({ length: 300 }, () => rawConnection('POST /v1/completions HTTP/1.1\r\nHost: x\r\n')));
  const t0 = Date.now();
  const res = await post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).usage.completion_tokens, 4);
  console.log(`# a normal request with 300 slowloris connections open took ${Date.now() - t0} ms`);
  await Promise.all(slow.map(closed)); // --header-timeout 1: the server closes every one of them
  assert.equal((await fetch(`${server.baseURL}/health`)).status, 200);
});

test('a request head beyond the limit is a 431 error object', async () => {
  const res = await fetch(`${server.baseURL}/health`, { headers: { 'x-big': 'a'.repeat(20000) } });
  assert.equal(res.status, 431);
  assert.equal((await res.json()).error.code, 'header_too_large');
});

test('a Content-Length beyond --max-body-bytes is refused at once, before the body is sent', async () => {
  const s = await rawConnection('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n0123456789');
  const reply = await readAll(s);
  assert.match(reply, /^HTTP\/1\.1 413 /);
  assert.match(reply, /request_too_large/);
});

test('256 concurrent streams, a third dropped at random: no failure, no leaked block, few threads', async () => {
  const before = await metrics(server);
  let maxThreads = 0;
  let running = true;
  const probe = healthProbe(server.baseURL);
  const watcher = (async () => {
    while (running) {
      maxThreads = Math.max(maxThreads, threads());
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  let dropped = 0;
  const one = async (i) => {
    const drop = i % 3 === 0;
    const controller = new AbortController();
    const res = await post(
      '/v1/completions',
      { prompt: `Once upon a time ${i % 7}`, max_tokens: 24, temperature: 0, stream: true },
      { signal: controller.signal },
    );
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
      if (drop && text.includes('data: {')) {
        dropped++;
        controller.abort();
        return;
      }
    }
    assert.ok(text.endsWith('data: [DONE]\n\n'), `stream ${i} ended properly`);
  };
  await Promise.all(Array.from({ length: 256 }, (_, i) => one(i).catch((e) => (e.name === 'AbortError' ? null : Promise.reject(e)))));
  running = false;
  await watcher;
  const health = await probe.stop();
  const m = await idleAndNoBlocksUsed(server);
  assert.equal(m['hearth_http_errors_total{code="500"}'] ?? 0, before['hearth_http_errors_total{code="500"}'] ?? 0);
  assert.ok(dropped > 0);
  console.log(`# 256 streams: ${maxThreads} threads at most, ${dropped} dropped, /health ${JSON.stringify(health)}`);
  assert.ok(maxThreads < 64, `a thread per stream would be 256+; saw ${maxThreads}`);
  assert.equal(health.failures, 0, '/health answered 200 throughout');
  assert.ok(health.checks > 0);
});

test('the connection cap answers 503 to one connection too many', async () => {
  const capped = await startServer(['--max-connections', '4']);
  try {
    const idle = await Promise.all(Array.from({ length: 4 }, () => new Promise((resolve) => {
      const s = net.connect(capped.port, '127.0.0.1', () => resolve(s));
    })));
    await new Promise((r) => setTimeout(r, 100)); // the server has accepted them
    const res = await fetch(`${capped.baseURL}/health`);
    assert.equal(res.status, 503);
    assert.match((await res.json()).error.message, /too many open connections/);
    idle.forEach((s) => s.destroy());
    await waitFor(async () => (await fetch(`${capped.baseURL}/health`)).status === 200, 5000, 'room again');
  } finally {
    assert.equal((await capped.stop()).code, 0);
  }
});
