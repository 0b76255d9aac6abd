#!/usr/bin/env python3
"""Hearth cluster simulator: prefix-cache hit rate and prefill work saved as servers are added, per routing policy.

    python3 bench/cluster-sim/sim.py [--servers 1,2,4,8,16] [--markdown] [--seed 1]

Replays two traces against K simulated servers:
  household   `hearth bench household`'s shape: 4 users x 3 turns sharing a 2,000-token prefix, 16-token questions,
              64-token answers; each turn resends the whole conversation (prefix, earlier questions and answers).
  many        many households: 256 household prefixes of 500-3,000 tokens, picked by a Zipf law (s = 1.1), each
              request a conversation of 1-6 turns; 2,000 conversations, arriving interleaved.
and three policies:
  round-robin         each request to the next server (what a plain load balancer does)
  prefix-hash         a consistent-hash ring (64 virtual nodes per server) keyed on the tenant and the first 512
                      tokens of the prompt: deploy/haproxy/hearth_prefix.lua's HEARTH_PREFIX_CHARS=2048 at ~4
                      characters per token
  prefix-hash+redis   the same, with a shared tier below every server: a block any server computed can be loaded
                      by another (docs/cluster.md)
  round-robin+redis   round-robin with the shared tier (the balancer knows nothing; Redis does the sharing)

Each server is a prefix cache of 16-token blocks keyed by their chain (a block's key names its whole prefix, as
Hearth's SHA-256 chain does), evicting the least recently used block, with a capacity of --server-tokens (default
65,536: 2 GiB of f16 KV on a 1B Llama-shaped model). The shared tier holds --redis-tokens (default 16x that), also
LRU. A request reuses the longest chain of blocks its server holds, then (with Redis) the longest continuation Redis
holds, and computes the rest; every block it computes or loads enters its server's cache and Redis.

Reported per K and policy: hit rate (prompt tokens reused from the server's own cache / prompt tokens), Redis share
(prompt tokens loaded from the shared tier / prompt tokens), prefill saved (reused + loaded over prompt tokens), and
the busiest server's share of the computed tokens (1/K is an even spread).

Where the assumptions end: requests run one after another (no two requests compute the same prefix at once, which
Hearth dedupes on one server but not across servers); a load from Redis costs nothing here (it costs a network
read, which the server only chooses when it beats recomputing); reuse is block-granular (Hearth also reuses the
tokens of a partial block); a server that fails, and the remapping that follows, is not simulated.
"""

import argparse
import bisect
import collections
import hashlib
import random

BLOCK = 16
PREFIX_KEY_TOKENS = 512


class LruBlocks:
    """A block cache: chain keys, least recently used evicted first."""

    def __init__(self, capacity_blocks):
        self.capacity = capacity_blocks
        self.blocks = collections.OrderedDict()

    def __contains__(self, key):
        return key in self.blocks

    def touch(self, key):
        self.blocks.move_to_end(key)

    def add(self, key):
        if key in self.blocks:
            self.blocks.move_to_end(key)
            return
        self.blocks[key] = True
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)


def chain_keys(tokens):
    """The chain key of every full block of `tokens` (a block's key names its whole prefix)."""
    keys, parent = [], 0
    for b in range(len(tokens) // BLOCK):
        parent = hash((parent, tuple(tokens[b * BLOCK:(b + 1) * BLOCK])))
        keys.append(parent)
    return keys


class Ring:
    """Consistent hashing with virtual nodes, as HAProxy's `hash-type consistent`."""

    def __init__(self, servers, vnodes=64):
        points = []
        for s in range(servers):
            for v in range(vnodes):
                h = int.from_bytes(hashlib.sha256(f"{s}/{v}".encode()).digest()[:8], "big")
                points.append((h, s))
        points.sort()
        self.hashes = [p[0] for p in points]
        self.servers = [p[1] for p in points]

    def server_of(self, key_bytes):
        h = int.from_bytes(hashlib.sha256(key_bytes).digest()[:8], "big")
        i = bisect.bisect(self.hashes, h) % len(self.hashes)
        return self.servers[i]


def household_trace(seed):
    """`hearth bench household`'s defaults: users take turns, each turn resends the conversation so far."""
    rng = random.Random(seed)
    vocab = 50000
    prefix = [rng.randrange(vocab) for _ in range(2000)]
    convs = [list(prefix) for _ in range(4)]
    trace = []
    for _ in range(3):
        for u in range(4):
            convs[u] += [rng.randrange(vocab) for _ in range(16)]
            trace.append(("household", list(convs[u])))
            convs[u] += [rng.randrange(vocab) for _ in range(64)]  # the answer, part of the next turn's prompt
    return trace


def many_trace(seed, households=256, conversations=2000):
    rng = random.Random(seed)
    vocab = 50000
    prefixes = [[rng.randrange(vocab) for _ in range(rng.randrange(500, 3001))] for _ in range(households)]
    weights = [1.0 / (r + 1) ** 1.1 for r in range(households)]
    active, trace, started = [], [], 0
    while started < conversations or active:
        if started < conversations and (len(active) < 32 or not active):
            h = rng.choices(range(households), weights)[0]
            active.append({"tenant": f"house{h}", "tokens": list(prefixes[h]), "turns": rng.randrange(1, 7)})
            started += 1
            continue
        conv = active[rng.randrange(len(active))]
        conv["tokens"] += [rng.randrange(vocab) for _ in range(rng.randrange(8, 65))]
        trace.append((conv["tenant"], list(conv["tokens"])))
        conv["tokens"] += [rng.randrange(vocab) for _ in range(rng.randrange(16, 257))]
        conv["turns"] -= 1
        if conv["turns"] == 0:
            active.remove(conv)
    return trace


def simulate(trace, servers, policy, server_tokens, redis_tokens):
    caches = [LruBlocks(server_tokens // BLOCK) for _ in range(servers)]
    redis = LruBlocks(redis_tokens // BLOCK) if policy.endswith("+redis") else None
    ring = Ring(servers)
    computed = [0] * servers
    prompt = reused = loaded = 0
    for i, (tenant, tokens) in enumerate(trace):
        if policy.startswith("round-robin"):
            s = i % servers
        else:
            head = tokens[:PREFIX_KEY_TOKENS]
            s = ring.server_of(tenant.encode() + b"\0" + b",".join(str(t).encode() for t in head))
        keys = chain_keys(tokens)
        cache = caches[s]
        hit = 0
        while hit < len(keys) and keys[hit] in cache:
            cache.touch(keys[hit])
            hit += 1
        from_redis = 0
        if redis is not None:
            while hit + from_redis < len(keys) and keys[hit + from_redis] in redis:
                redis.touch(keys[hit + from_redis])
                from_redis += 1
        for k in keys:
            cache.add(k)
            if redis is not None:
                redis.add(k)
        prompt += len(tokens)
        reused += hit * BLOCK
        loaded += from_redis * BLOCK
        computed[s] += len(tokens) - (hit + from_redis) * BLOCK
    total_computed = max(1, sum(computed))
    return {
        "hit": reused / prompt,
        "redis": loaded / prompt,
        "saved": (reused + loaded) / prompt,
        "busiest": max(computed) / total_computed,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--servers", default="1,2,4,8,16")
    ap.add_argument("--server-tokens", type=int, default=65536)
    ap.add_argument("--redis-tokens", type=int, default=16 * 65536)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = ap.parse_args()
    ks = [int(k) for k in args.servers.split(",")]
    policies = ["round-robin", "prefix-hash", "prefix-hash+redis", "round-robin+redis"]
    traces = [("household (4 users x 3 turns, one 2,000-token prefix)", household_trace(args.seed)),
              ("many households (256 Zipf prefixes, 2,000 conversations)", many_trace(args.seed))]
    for name, trace in traces:
        print(f"\n{name}: {len(trace)} requests, {sum(len(t) for _, t in trace)} prompt tokens\n")
        if args.markdown:
            print("| K | " + " | ".join(policies) + " |")
            print("|---:|" + "---|" * len(policies))
        for k in ks:
            cells = []
            for p in policies:
                r = simulate(trace, k, p, args.server_tokens, args.redis_tokens)
                cell = f"hit {100 * r['hit']:.1f}%"
                if p.endswith("+redis"):
                    cell += f" + redis {100 * r['redis']:.1f}%"
                cell += f", saved {100 * r['saved']:.1f}%, busiest {100 * r['busiest']:.0f}%"
                cells.append(cell)
            if args.markdown:
                print(f"| {k} | " + " | ".join(cells) + " |")
            else:
                print(f"K={k:<3}" + "".join(f"\n  {p:<18} {c}" for p, c in zip(policies, cells)))


if __name__ == "__main__":
    main()
