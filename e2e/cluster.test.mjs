// Several Hearth servers behind HAProxy (Debian's haproxy 2.6 with its Lua), started by scripts/cluster.sh on
// loopback with a redis-server as their shared KV tier: routing by prompt prefix keeps the household's hit rate at a
// single server's, round-robin (a plain balancer, no shared tier) loses it, and a server killed mid-stream is taken
// out while every other request keeps succeeding. e2e/redis.test.mjs covers the Redis tier itself.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { BIN, MODEL, startServer, waitFor } from './helpers.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLUSTER = path.join(repoRoot, 'scripts/cluster.sh');
const have = (cmd) => {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const skip = have('haproxy') && have('redis-server') ? false
  : 'haproxy or redis-server is not installed (scripts/install-deps.sh installs both)';

const dirs = [];
after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

// A base port whose next `count` ports are all free on loopback.
async function freePorts(count) {
  const free = (port) =>
    new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
  for (let tries = 0; tries < 50; tries++) {
    const base = 20000 + Math.floor(Math.random() * 40000);
    let ok = true;
    for (let p = base; p < base + count && ok; p++) ok = await free(p);
    if (ok) return base;
  }
  throw new Error('no free port range');
}

const SERVE_ARGS = ['-m', MODEL, '-t', '1', '--kv-memory', '32MiB'];

async function startCluster({ policy = 'prefix', servers = 3, redis = 'off', prefixChars = 120 } = {}) {
  const dir = mkdtempSync(path.join(tmpdir(), 'hearth-cluster-'));
  dirs.push(dir);
  const port = await freePorts(servers + 2);
  const args = ['start', '--servers', `${servers}`, '--port', `${port}`, '--redis-port', `${port + servers + 1}`,
    '--redis', redis, '--policy', policy, '--prefix-chars', `${prefixChars}`, '--dir', dir, '--', ...SERVE_ARGS];
  execFileSync(CLUSTER, args, { env: { ...process.env, HEARTH_BIN: BIN }, stdio: 'pipe', timeout: 180000 });
  return {
    dir,
    port,
    baseURL: `http://127.0.0.1:${port}`,
    serverURL: (n) => `http://127.0.0.1:${port + n}`,
    stop: () => execFileSync(CLUSTER, ['stop', '--dir', dir], { stdio: 'pipe', timeout: 60000 }),
  };
}

// `hearth bench household` against `baseURL`: 4 users x 3 turns sharing a ~40-token stories260K prefix (~160 characters; the routing key reads 120
// ). Returns the run's overall prefix hit rate.
function household(baseURL) {
  const args = ['bench', 'household', '--url', baseURL, '--users', '4', '--turns', '3', '--prefix-tokens', '40',
    '--question-tokens', '8', '--max-tokens', '8', '--json', '-'];
  return new Promise((resolve, reject) => {
    const proc = spawn(BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    proc.stdout.on('data', (d) => (out += d));
    proc.stderr.on('data', (d) => (err += d));
    proc.on('close', (code) => {
      if (code !== 0) return reject(new Error(`bench exited ${code}: ${err}`));
      const run = JSON.parse(out).runs[0];
      assert.deepEqual(run.overall.errors, {}, err);
      resolve(run.overall.prefix_hit_rate);
    });
  });
}

async function chat(baseURL, system, user, extra = {}) {
  const res = await fetch(`${baseURL}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      max_tokens: 8,
      temperature: 0,
      ...extra,
    }),
  });
  return { status: res.status, server: res.headers.get('x-hearth-server'), body: res.status === 200 ? await res.json() : await res.text() };
}

// HAProxy's view of each server: { hearth1: 'UP' | 'DOWN', ... } (its stats socket, "show stat").
function serverStates(dir) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(path.join(dir, 'haproxy.sock'));
    let out = '';
    sock.on('data', (d) => (out += d));
    sock.on('error', reject);
    sock.on('end', () => {
      const lines = out.trim().split('\n');
      const header = lines[0].replace(/^# /, '').split(',');
      const states = {};
      for (const line of lines.slice(1)) {
        const f = line.split(',');
        if (f[header.indexOf('pxname')] === 'hearth_prefix' && f[header.indexOf('svname')].startsWith('hearth')) {
          states[f[header.indexOf('svname')]] = f[header.indexOf('status')];
        }
      }
      resolve(states);
    });
    sock.write('show stat\n');
  });
}

test('through HAProxy, routing by prefix keeps a single server\'s hit rate and round-robin loses it', { skip, timeout: 600000 }, async () => {
  const single = await startServer(SERVE_ARGS.slice(2));
  const singleHit = await household(single.baseURL);
  assert.equal((await single.stop()).code, 0);

  const byPrefix = await startCluster({ policy: 'prefix', redis: 'on' });
  const prefixHit = await household(byPrefix.baseURL);
  byPrefix.stop();

  const roundRobin = await startCluster({ policy: 'roundrobin' });
  const rrHit = await household(roundRobin.baseURL);
  roundRobin.stop();

  console.log(`household hit rate: single server ${(100 * singleHit).toFixed(1)}%, 3 servers by prefix ` +
    `${(100 * prefixHit).toFixed(1)}%, 3 servers round-robin ${(100 * rrHit).toFixed(1)}%`);
  assert.ok(singleHit > 0.3, `single server hit rate ${singleHit}`);
  assert.ok(Math.abs(prefixHit - singleHit) <= 0.05, `by prefix ${prefixHit} vs single ${singleHit}`);
  assert.ok(rrHit < prefixHit - 0.05, `round-robin ${rrHit} vs by prefix ${prefixHit}`);
});

test('the same prefix always reaches the same server, and different prefixes spread', { skip, timeout: 300000 }, async () => {
  const cluster = await startCluster({ policy: 'prefix', prefixChars: 64 });
  try {
    const seen = new Set();
    for (let h = 0; h < 12; h++) {
      const system = `Household ${h} has its own rules about lamps, doors and the cat, written down long ago.`;
      const first = await chat(cluster.baseURL, system, 'What about the lamp?');
      const second = await chat(cluster.baseURL, system, 'And the door?');
      assert.equal(first.status, 200, first.body);
      assert.equal(second.server, first.server, `household ${h}: ${first.server} then ${second.server}`);
      assert.ok(second.body.usage.prompt_tokens_details.cached_tokens > 0, `household ${h} missed on its server`);
      seen.add(first.server);
    }
    assert.ok(seen.size >= 2, `12 prefixes all went to ${[...seen]}`);
  } finally {
    cluster.stop();
  }
});

test('a server killed mid-stream is taken out and every other request keeps succeeding', { skip, timeout: 300000 }, async () => {
  const cluster = await startCluster({ policy: 'prefix', prefixChars: 64, redis: 'on' });
  try {
    const system = 'The story of the house that never forgot a single prompt, told in full, every night.';
    const res = await fetch(`${cluster.baseURL}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [{ role: 'system', content: system }, { role: 'user', content: 'Tell it.' }],
        max_tokens: 400,
        temperature: 1,
        stream: true,
      }),
    });
    assert.equal(res.status, 200);
    const victim = res.headers.get('x-hearth-server');
    const n = Number(victim.replace('hearth', ''));
    const reader = res.body.getReader();
    await reader.read(); // the first chunk is here: the answer is being streamed
    const pid = Number(execFileSync('cat', [path.join(cluster.dir, `hearth${n}.pid`)], { encoding: 'utf8' }));
    process.kill(pid, 'SIGKILL');
    // The broken stream ends (an error or an early end), never hangs.
    const drained = (async () => {
      try {
        for (;;) if ((await reader.read()).done) return 'ended';
      } catch {
        return 'errored';
      }
    })();
    const outcome = await Promise.race([drained, new Promise((r) => setTimeout(() => r('hung'), 20000))]);
    assert.notEqual(outcome, 'hung');

    // Requests sent right away (before the health check notices) still succeed: a refused connection is retried on
    // another server.
    for (let h = 0; h < 8; h++) {
      const r = await chat(cluster.baseURL, `Household ${h} keeps its own rules for the garden and the garage.`, 'Hi?');
      assert.equal(r.status, 200, `request ${h}: ${r.status} ${r.body}`);
    }
    await waitFor(async () => (await serverStates(cluster.dir))[victim] === 'DOWN', 15000, `${victim} marked DOWN`);
    // The victim's own prefix now goes to a live server and succeeds there.
    for (let i = 0; i < 4; i++) {
      const r = await chat(cluster.baseURL, system, `Again ${i}.`);
      assert.equal(r.status, 200, r.body);
      assert.notEqual(r.server, victim);
    }
    // The others stay in (a loaded machine may fail one check of two: "UP 1/2" is still in).
    const states = await serverStates(cluster.dir);
    assert.equal(Object.values(states).filter((s) => s.startsWith('UP')).length, 2, JSON.stringify(states));
  } finally {
    cluster.stop();
  }
});
