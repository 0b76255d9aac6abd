// The Redis tier end to end: two Hearth servers share one real redis-server (a free loopback port, no persistence);
// a prompt computed on A is served on B from Redis (usage.hearth.tiers.redis > 0) with output identical to a cold
// run; Redis stopped mid-run only makes B recompute (the request succeeds, the metrics count it); rediss:// is
// refused with a message naming the missing TLS. Skipped only when redis-server is not installed.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { BIN, MODEL, metrics, startServer, waitFor } from './helpers.mjs';

const REDIS = ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p));
const root = mkdtempSync(path.join(os.tmpdir(), `hearth-redis-${process.pid}-`));
after(() => rmSync(root, { recursive: true, force: true }));

const HOUSE_RULES =
  'Once upon a time, there was a little house. ' +
  'In the little house lived a mom, a dad, a girl named Lily and a boy named Tom. '.repeat(6) +
  'Every morning Lily fed the cat and Tom fed the dog. '.repeat(3);

async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startRedis(port) {
  const proc = spawn(REDIS, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', root], {
    stdio: 'ignore',
  });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  await waitFor(
    () =>
      new Promise((resolve) => {
        const c = net.connect(port, '127.0.0.1', () => {
          c.write('PING\r\n');
        });
        c.on('data', (d) => {
          c.destroy();
          resolve(d.toString().startsWith('+PONG'));
        });
        c.on('error', () => resolve(false));
      }),
    10000,
    'redis-server to answer',
  );
  return {
    async stop() {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

async function complete(server, prompt) {
  return server.client().completions.create({ prompt, max_tokens: 24, temperature: 0 });
}

test('a prompt computed on A is served on B from Redis, identical to a cold run', { skip: !REDIS && 'redis-server is not installed' }, async () => {
  const port = await freePort();
  const redis = await startRedis(port);
  const url = `redis://127.0.0.1:${port}`;
  const a = await startServer(['--kv-redis', url, '--kv-redis-load', 'always']);
  const b = await startServer(['--kv-redis', url, '--kv-redis-load', 'always']);
  const coldServer = await startServer([]);
  try {
    const cold = await complete(coldServer, HOUSE_RULES);
    const onA = await complete(a, HOUSE_RULES);
    assert.equal(onA.choices[0].text, cold.choices[0].text);
    // A's write-through is asynchronous; B learns A's blocks from the hearth:kv-events stream.
    const written = await waitFor(async () => {
      const m = await metrics(a);
      return m.hearth_kv_redis_queued_writes === 0 && m.hearth_kv_redis_writes_total > 0 ? m.hearth_kv_redis_writes_total : 0;
    }, 10000, 'A to write its blocks to Redis');
    await waitFor(async () => (await metrics(b)).hearth_kv_redis_known_keys >= written, 10000, 'B to read the KV events');

    const onB = await complete(b, HOUSE_RULES);
    const h = onB.usage.hearth;
    assert.ok(h.tiers.redis > 0, `B loaded nothing from Redis: ${JSON.stringify(h)}`);
    assert.equal(h.tiers.redis, onB.usage.prompt_tokens_details.cached_tokens);
    assert.equal(h.tiers.ram, 0);
    assert.equal(h.tiers.disk, 0);
    assert.equal(h.tier_load.tier, 'redis');
    assert.equal(onB.choices[0].text, cold.choices[0].text);
    const mb = await metrics(b);
    assert.ok(mb.hearth_kv_redis_loads_total > 0);
    assert.equal(mb.hearth_kv_redis_connected, 1);
    assert.equal(mb.hearth_kv_redis_corrupt_removed_total, 0);

    // Redis stops: B still answers (recomputing a prompt it has not seen), and counts the failure.
    await redis.stop();
    const other = 'Lily and Tom went to the park. ' + HOUSE_RULES;
    const coldOther = await complete(coldServer, other);
    const down = await complete(b, other);
    assert.equal(down.choices[0].text, coldOther.choices[0].text);
    await waitFor(async () => {
      const m = await metrics(b);
      return m.hearth_kv_redis_connected === 0 && m.hearth_kv_redis_errors_total + m.hearth_kv_redis_timeouts_total > 0;
    }, 10000, 'B to count Redis as down');
  } finally {
    await Promise.all([a.stop(), b.stop(), coldServer.stop()]);
    await redis.stop().catch(() => {});
  }
});

test('rediss:// is refused with a message naming the missing TLS', () => {
  let out = '';
  try {
    execFileSync(BIN, ['serve', '-m', MODEL, '--port', '0', '--kv-disk', 'off', '--kv-redis', 'rediss://cache.lan:6380'], {
      stdio: 'pipe',
      timeout: 30000,
    });
  } catch (e) {
    out = String(e.stderr);
  }
  assert.match(out, /hiredis 0\.14 has no TLS/);
  assert.match(out, /tunnel/);
});
