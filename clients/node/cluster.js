'use strict';
// Checks idserver with cluster-enabled yes through the cluster clients of
// ioredis (Cluster) and node-redis (createCluster), on their defaults,
// given the one node's address: GETID arrives as an exact string, MGETID
// as strings, and INCR and GET of 100 keys (spread over the slots) route
// and count.
//
// Usage: node cluster.js ioredis|redis host:port (../cluster_test.go runs
// it). Prints what it did and exits 1 on the first failure.
const [lib, addr] = process.argv.slice(2);
const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];

async function withClient(fn) {
  if (lib === 'ioredis') {
    const { Cluster } = require('ioredis');
    const c = new Cluster([{ host, port }]);
    try {
      return await fn((...args) => c.call(...args));
    } finally {
      c.disconnect();
    }
  }
  const { createCluster } = require('redis');
  const c = createCluster({ rootNodes: [{ url: `redis://${addr}` }] });
  c.on('error', (e) => console.error('client error', e));
  await c.connect();
  try {
    // A keyless command goes to any node; a key names its slot's.
    return await fn((...args) => {
      const key = ['incr', 'get'].includes(args[0].toLowerCase()) ? args[1] : undefined;
      return c.sendCommand(key, false, args);
    });
  } finally {
    await c.close();
  }
}

async function main() {
  await withClient(async (call) => {
    const id = await call('GETID');
    if (typeof id !== 'string' || !/^[0-9]+$/.test(id)) throw new Error(`GETID: ${typeof id} ${id}, want a string of digits`);
    const ids = await call('MGETID', '5');
    if (ids.length !== 5 || ids.some((x) => typeof x !== 'string')) throw new Error(`MGETID 5: ${ids}`);
    for (let i = 1; i < ids.length; i++) {
      if (BigInt(ids[i]) <= BigInt(ids[i - 1])) throw new Error(`MGETID not increasing: ${ids}`);
    }
    if (BigInt(ids[0]) <= BigInt(id)) throw new Error(`MGETID ${ids[0]} not above GETID ${id}`);
    const prefix = `${lib}:${Date.now()}:`;
    for (let i = 0; i < 100; i++) {
      for (const want of [1, 2]) {
        const got = await call('INCR', prefix + i);
        if (Number(got) !== want) throw new Error(`INCR ${prefix + i}: ${got}, want ${want}`);
      }
      const got = await call('GET', prefix + i);
      if (String(got) !== '2') throw new Error(`GET ${prefix + i}: ${got}, want 2`);
    }
    console.log(`${lib} cluster: GETID ${id}, MGETID ${ids.length}, INCR/GET on 100 keys ok`);
  });
}

const timer = setTimeout(() => { console.error('timed out'); process.exit(1); }, 100000);
main().then(() => { clearTimeout(timer); }, (e) => { console.error(e); process.exit(1); });
