'use strict';
// A cluster driver (the protocol is e2e/clusterdriver_test.go's): ioredis's
// Cluster, node-redis's createCluster or Valkey GLIDE's GlideClusterClient,
// on their defaults, given one node's address (IDSERVER_SEED), INCR random
// keys k0..k{IDSERVER_KEYS-1} and ask GETID and MGETID 5 with
// IDSERVER_WORKERS requests in flight, writing every reply and error to
// IDSERVER_OUT until stdin ends.
//
// Usage: node clusterdriver.js ioredis|redis|glide (run by e2e's
// TestRedisClusterOverEtcd).
//
// Timestamps: Date.now() counts whole ms, so the wall clock is read once,
// between two readings of process.hrtime.bigint() (monotonic, in ns), and
// every later time is that anchor plus the monotonic time since: a sent
// time from the later reading and the anchor's lower bound (rounded down),
// a received time from the earlier reading plus the ms Date.now() may have
// cut off (rounded up). The real-time oracle thus never sees a request
// sent later, or a reply received earlier, than it was.
const fs = require('fs');

const lib = process.argv[2];
const seed = process.env.IDSERVER_SEED;
const keys = Number(process.env.IDSERVER_KEYS);
const workers = Number(process.env.IDSERVER_WORKERS || 4);
const outPath = process.env.IDSERVER_OUT;
if (!['ioredis', 'redis', 'glide'].includes(lib) || !seed || !(keys > 0) || !outPath) {
  console.error('usage: IDSERVER_SEED=host:port IDSERVER_KEYS=n IDSERVER_OUT=path [IDSERVER_WORKERS=4] node clusterdriver.js ioredis|redis|glide');
  process.exit(2);
}
const colon = seed.lastIndexOf(':');
const host = seed.slice(0, colon);
const port = Number(seed.slice(colon + 1));

const hr0 = process.hrtime.bigint();
const wallMs = BigInt(Date.now());
const hr1 = process.hrtime.bigint();
const sentNow = () => wallMs * 1000000n + (process.hrtime.bigint() - hr1);
const recvNow = () => (wallMs + 1n) * 1000000n + (process.hrtime.bigint() - hr0);

const out = fs.openSync(outPath, 'w');
let lines = [];
function emit(line) {
  lines.push(line);
  if (lines.length >= 1000) flush();
}
function flush() {
  if (lines.length > 0) fs.writeSync(out, lines.join('\n') + '\n');
  lines = [];
}
setInterval(flush, 200).unref();

// clientErrors counts the errors a client reports beside its replies (an
// event, not a request's failure): node-redis crashes the process on an
// 'error' event nobody listens to.
let clientErrors = 0;

// open connects the library's cluster client and returns its calls:
// incr(key) to a Number (exact below 2^53, where these counters stay),
// ids(n) to IDs as strings (GETID for n 1), close().
async function open() {
  if (lib === 'ioredis') {
    const { Cluster } = require('ioredis');
    const c = new Cluster([{ host, port }]);
    c.on('error', () => clientErrors++);
    return {
      incr: (key) => c.incr(key),
      ids: async (n) => (n === 1 ? [await c.call('GETID')] : await c.call('MGETID', String(n))),
      close: () => c.disconnect(),
    };
  }
  if (lib === 'redis') {
    const { createCluster } = require('redis');
    const c = createCluster({ rootNodes: [{ url: `redis://${seed}` }] });
    c.on('error', () => clientErrors++);
    await c.connect();
    return {
      incr: (key) => c.incr(key),
      // No key: node-redis sends it to a node of its choice.
      ids: async (n) => (n === 1 ? [await c.sendCommand(undefined, false, ['GETID'])] : await c.sendCommand(undefined, false, ['MGETID', String(n)])),
      close: () => c.close(),
    };
  }
  const { GlideClusterClient, Logger } = require('@valkey/valkey-glide');
  // GLIDE's core logs every failed request as a warning by default: a
  // node down makes thousands. Errors still show.
  Logger.setLoggerConfig('error');
  const c = await GlideClusterClient.createClient({ addresses: [{ host, port }] });
  return {
    incr: (key) => c.incr(key),
    // A command GLIDE does not know, without a route, goes to every
    // primary; an ID is asked of one node.
    ids: async (n) => (n === 1 ? [await c.customCommand(['GETID'], { route: 'randomNode' })] : await c.customCommand(['MGETID', String(n)], { route: 'randomNode' })),
    close: () => c.close(),
  };
}

let stopping = false;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function message(e) {
  return String((e && e.message) || e).replace(/\s+/g, ' ');
}

async function worker(client) {
  while (!stopping) {
    const r = Math.floor(Math.random() * 8);
    const cmd = r === 0 ? 'GETID' : r === 1 ? 'MGETID' : 'INCR';
    const key = `k${Math.floor(Math.random() * keys)}`;
    const sent = sentNow();
    try {
      if (cmd === 'INCR') {
        const v = await client.incr(key);
        emit(`incr ${key} ${sent} ${recvNow()} ${v}`);
        continue;
      }
      const ids = await client.ids(cmd === 'GETID' ? 1 : 5);
      const recv = recvNow();
      for (const id of ids) {
        // A Number would be rounded above 2^53: say so rather than write it.
        if (typeof id !== 'string') emit(`err ${cmd} ${sent} ${recv} inexact: a ${typeof id} ${id}`);
        else emit(`id ${sent} ${recv} ${id}`);
      }
    } catch (e) {
      emit(`err ${cmd} ${sent} ${recvNow()} ${message(e)}`);
      await sleep(10);
    }
  }
}

async function main() {
  let client;
  while (!client && !stopping) {
    const sent = sentNow();
    try {
      client = await open();
    } catch (e) {
      emit(`err CONNECT ${sent} ${recvNow()} ${message(e)}`);
      await sleep(100);
    }
  }
  const running = [];
  for (let i = 0; i < workers && client; i++) running.push(worker(client));
  await ended;
  // A request to a node that answers nothing may never end: wait a while.
  await Promise.race([Promise.all(running), sleep(5000)]);
  flush();
  fs.closeSync(out);
  if (clientErrors > 0) console.error(`${lib}: ${clientErrors} client error events`);
  process.exit(0);
}

// The test closes stdin to stop it; a test that died closes it too.
const ended = new Promise((resolve) => {
  const end = () => {
    stopping = true;
    resolve();
  };
  process.stdin.on('end', end);
  process.stdin.on('error', end);
  process.stdin.resume();
});

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
