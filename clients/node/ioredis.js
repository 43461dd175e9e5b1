'use strict';
// Checks idserver through ioredis on its defaults: RESP3, and integer
// replies turned into JavaScript Numbers, which lose the low bits of an ID
// above 2^53. ioredis announces itself with CLIENT SETINFO LIB-NAME
// ioredis, and idserver answers such a client with IDs as strings; every
// ID here must arrive as one.
//
// Usage: node ioredis.js host:port (../node_test.go runs it). Prints one
// line per check and exits 1 if any failed.
const { inspect } = require('node:util');
const Redis = require('ioredis');

// The ID commands, written once so every check sends the same ones.
const getid = () => ['GETID'];
const mgetid = (n) => ['MGETID', String(n)];

// N is how many GETIDs check 1 pipelines: far more than one socket read,
// so replies to the same pipeline arrive in many pieces.
const N = 100000;

// ECHO's argument has a CRLF and non-ASCII text: a bulk string must come
// back byte for byte, not be cut at the line end.
const ECHO = 'héllo\r\nwörld';

const MIN_ID = 1n << 53n;
const MAX_ID = (1n << 63n) - 1n;

// id returns the ID one reply carries. A Number fails even when it looks
// right: above 2^53 it has already been rounded.
function id(reply, what) {
  if (typeof reply !== 'string') {
    throw new Error(`${what}: reply is a ${typeof reply} (${show(reply)}), want a string`);
  }
  if (!/^[0-9]+$/.test(reply)) {
    throw new Error(`${what}: reply ${show(reply)} is not a decimal ID`);
  }
  const v = BigInt(reply);
  if (v <= MIN_ID || v > MAX_ID) {
    throw new Error(`${what}: ${reply} is not in (2^53, 2^63)`);
  }
  return v;
}

// increasing checks that ids are distinct and rise in the order sent.
function increasing(ids, what) {
  const seen = new Set();
  ids.forEach((v, i) => {
    if (seen.has(v)) throw new Error(`${what}: #${i} ${v} was already returned`);
    seen.add(v);
    if (i > 0 && v <= ids[i - 1]) {
      throw new Error(`${what}: #${i} ${v} is not above #${i - 1} ${ids[i - 1]}`);
    }
  });
}

// list checks that reply is an array of n elements.
function list(reply, n, what) {
  if (!Array.isArray(reply) || reply.length !== n) {
    throw new Error(`${what}: reply ${show(reply)}, want an array of ${n}`);
  }
  return reply;
}

// same checks a reply that is not an ID.
function same(got, want, what) {
  if (got !== want) throw new Error(`${what}: reply ${show(got)}, want ${show(want)}`);
}

// rejects waits for promise and checks that it failed with an error
// whose message contains text; it returns the error.
async function rejects(promise, text, what) {
  let value;
  try {
    value = await promise;
  } catch (err) {
    if (!String(err && err.message).includes(text)) {
      throw new Error(`${what}: ${show(err)}, want one containing ${show(text)}`);
    }
    return err;
  }
  throw new Error(`${what}: reply ${show(value)}, want an error containing ${show(text)}`);
}

// replies unwraps the [error, reply] pairs of a pipeline or transaction.
function replies(pairs, what) {
  return pairs.map(([err, reply], i) => {
    if (err) throw new Error(`${what}: reply #${i} is an ${show(err)}`);
    return reply;
  });
}

// show writes a reply for a message; an error reply is shown by its text.
function show(v) {
  if (v instanceof Error) return `error ${JSON.stringify(v.message)}`;
  return inspect(v, { breakLength: Infinity, maxArrayLength: 5, maxStringLength: 80 });
}

const checks = [
  [`GETID x${N} pipelined`, async (r) => {
    const p = r.pipeline();
    for (let i = 0; i < N; i++) p.call(...getid());
    const got = replies(await p.exec(), 'pipeline');
    increasing(got.map((reply, i) => id(reply, `GETID #${i}`)), 'GETIDs');
  }],

  ['MGETID 10', async (r) => {
    const got = list(await r.call(...mgetid(10)), 10, 'MGETID 10');
    increasing(got.map((reply, i) => id(reply, `MGETID 10 element #${i}`)), 'MGETID 10');
  }],

  ['pipeline GETID, MGETID 3, PING, ECHO', async (r) => {
    const [one, three, pong, echo] = replies(
      await r.pipeline().call(...getid()).call(...mgetid(3)).ping().echo(ECHO).exec(), 'pipeline');
    const ids = [id(one, 'GETID'), ...list(three, 3, 'MGETID 3').map((reply, i) => id(reply, `MGETID 3 element #${i}`))];
    increasing(ids, 'IDs of the pipeline');
    same(pong, 'PONG', 'PING');
    same(echo, ECHO, 'ECHO');
  }],

  ['MULTI, GETID, GETID, MGETID 2, EXEC', async (r) => {
    const [a, b, two] = replies(
      await r.multi().call(...getid()).call(...getid()).call(...mgetid(2)).exec(), 'EXEC');
    const ids = [id(a, 'EXEC reply #0'), id(b, 'EXEC reply #1'),
      ...list(two, 2, 'EXEC reply #2 (MGETID 2)').map((reply, i) => id(reply, `MGETID 2 element #${i}`))];
    increasing(ids, 'IDs of the transaction');
  }],

  // Redis discards a transaction with a command it refused to queue, and
  // ioredis rejects exec() with EXEC's EXECABORT error.
  ['MULTI with an unknown command', async (r) => {
    await rejects(r.multi().call(...getid()).call('NOSUCHCMD').exec(), 'EXECABORT', 'MULTI, GETID, NOSUCHCMD, EXEC');
    id(await r.call(...getid()), 'GETID after the discarded transaction');
  }],

  ['error reply, then GETID', async (r) => {
    await rejects(r.call(...mgetid(0)), 'out of range', 'MGETID 0');
    id(await r.call(...getid()), 'GETID after the error');
  }],
];

async function main() {
  const addr = process.argv[2] || '';
  const colon = addr.lastIndexOf(':');
  if (colon < 1) {
    console.log('usage: node ioredis.js host:port');
    process.exit(2);
  }
  const [host, port] = [addr.slice(0, colon), Number(addr.slice(colon + 1))];

  // ioredis retries a refused connection for ever by default: stop well
  // before the Go test's own timeout, naming the check that hung.
  let current, lost;
  setTimeout(() => {
    console.log(`FAIL ${current}: no answer after 100s${lost ? ` (connection: ${lost.message})` : ''}`);
    process.exit(1);
  }, 100000).unref();

  let failed = 0;
  const start = performance.now();
  for (const [name, check] of checks) {
    current = name;
    // A fresh client per check: one failure cannot leave the next with
    // replies out of step, and every check sees the connect handshake.
    const r = new Redis(port, host);
    lost = undefined;
    r.on('error', (err) => { lost = err; });
    const t = performance.now();
    try {
      await check(r);
      console.log(`ok   ${name} (${Math.round(performance.now() - t)} ms)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name}: ${err.message}${lost ? ` (connection: ${lost.message})` : ''}`);
    }
    r.disconnect();
  }
  console.log(`ioredis ${require('ioredis/package.json').version}: ${checks.length - failed} of ${checks.length} checks passed in ${Math.round(performance.now() - start)} ms`);
  process.exit(failed ? 1 : 0);
}

main();
