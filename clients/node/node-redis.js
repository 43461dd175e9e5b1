'use strict';
// Checks idserver through node-redis (npm package redis) on its defaults:
// RESP3, and integer replies turned into JavaScript Numbers, which lose
// the low bits of an ID above 2^53. node-redis announces itself with
// CLIENT SETINFO LIB-NAME node-redis, and idserver answers such a client
// with IDs as strings; every ID here must arrive as one.
//
// Usage: node node-redis.js host:port (../node_test.go runs it). Prints
// one line per check and exits 1 if any failed.
const { inspect } = require('node:util');
const { createClient } = require('redis');

// The ID commands, written once so every check sends the same ones.
const getid = () => ['GETID'];
const mgetid = (n) => ['MGETID', String(n)];

// N is how many GETIDs check 1 sends at once: far more than one socket
// read, so replies to the same batch arrive in many pieces.
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
    if (!message(err).includes(text)) {
      throw new Error(`${what}: error ${JSON.stringify(message(err))}, want one containing ${show(text)}`);
    }
    return err;
  }
  throw new Error(`${what}: reply ${show(value)}, want an error containing ${show(text)}`);
}

// message is an error's text. A multi() that fails raises a
// MultiErrorReply, whose own message only counts the failed commands.
function message(err) {
  if (err && err.errorIndexes) {
    return `${err.message}: ${[...err.errors()].map((e, i) => `#${err.errorIndexes[i]} ${e.message}`).join('; ')}`;
  }
  return String(err && err.message);
}

// show writes a reply for a message; an error reply is shown by its text.
function show(v) {
  if (v instanceof Error) return `error ${JSON.stringify(v.message)}`;
  return inspect(v, { breakLength: Infinity, maxArrayLength: 5, maxStringLength: 80 });
}

const checks = [
  // Commands issued in the same tick are written together: node-redis
  // pipelines them by itself.
  [`GETID x${N} pipelined`, async (c) => {
    const got = await Promise.all(Array.from({ length: N }, () => c.sendCommand(getid())));
    increasing(got.map((reply, i) => id(reply, `GETID #${i}`)), 'GETIDs');
  }],

  ['MGETID 10', async (c) => {
    const got = list(await c.sendCommand(mgetid(10)), 10, 'MGETID 10');
    increasing(got.map((reply, i) => id(reply, `MGETID 10 element #${i}`)), 'MGETID 10');
  }],

  // execAsPipeline sends the queued commands without MULTI and EXEC.
  ['pipeline GETID, MGETID 3, PING, ECHO', async (c) => {
    const [one, three, pong, echo] = await c.multi()
      .sendCommand(getid()).sendCommand(mgetid(3)).ping().echo(ECHO).execAsPipeline();
    const ids = [id(one, 'GETID'), ...list(three, 3, 'MGETID 3').map((reply, i) => id(reply, `MGETID 3 element #${i}`))];
    increasing(ids, 'IDs of the pipeline');
    same(pong, 'PONG', 'PING');
    same(echo, ECHO, 'ECHO');
  }],

  ['MULTI, GETID, GETID, MGETID 2, EXEC', async (c) => {
    const [a, b, two] = list(await c.multi()
      .sendCommand(getid()).sendCommand(getid()).sendCommand(mgetid(2)).exec(), 3, 'EXEC');
    const ids = [id(a, 'EXEC reply #0'), id(b, 'EXEC reply #1'),
      ...list(two, 2, 'EXEC reply #2 (MGETID 2)').map((reply, i) => id(reply, `MGETID 2 element #${i}`))];
    increasing(ids, 'IDs of the transaction');
  }],

  // Redis discards a transaction with a command it refused to queue.
  // node-redis's exec() rejects with that refusal, the first failed reply
  // of the chain, and drops EXEC's EXECABORT (as against redis-server 7);
  // the same commands sent one by one show EXECABORT itself.
  ['MULTI with an unknown command', async (c) => {
    await rejects(c.multi().sendCommand(getid()).sendCommand(['NOSUCHCMD']).exec(),
      "unknown command 'NOSUCHCMD'", 'multi() GETID, NOSUCHCMD exec()');
    const [multi, queued, refused, exec] = await Promise.all(
      [['MULTI'], getid(), ['NOSUCHCMD'], ['EXEC']].map((args) => c.sendCommand(args).catch((err) => err)));
    same(multi, 'OK', 'MULTI, sent alone');
    same(queued, 'QUEUED', 'GETID after MULTI');
    if (!(refused instanceof Error)) throw new Error(`NOSUCHCMD after MULTI: ${show(refused)}, want an error`);
    if (!(exec instanceof Error) || !exec.message.includes('EXECABORT')) {
      throw new Error(`EXEC after NOSUCHCMD: ${show(exec)}, want an EXECABORT error`);
    }
    id(await c.sendCommand(getid()), 'GETID after the discarded transactions');
  }],

  ['error reply, then GETID', async (c) => {
    await rejects(c.sendCommand(mgetid(0)), 'out of range', 'MGETID 0');
    id(await c.sendCommand(getid()), 'GETID after the error');
  }],
];

async function main() {
  const addr = process.argv[2] || '';
  if (addr.lastIndexOf(':') < 1) {
    console.log('usage: node node-redis.js host:port');
    process.exit(2);
  }

  // node-redis reconnects for ever by default: stop well before the Go
  // test's own timeout, naming the check that hung.
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
    const c = createClient({ url: `redis://${addr}` });
    // Without a listener, node-redis's error event would end the process.
    lost = undefined;
    c.on('error', (err) => { lost = err; });
    const t = performance.now();
    try {
      await c.connect();
      await check(c);
      console.log(`ok   ${name} (${Math.round(performance.now() - t)} ms)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name}: ${message(err)}${lost ? ` (connection: ${lost.message})` : ''}`);
    }
    c.destroy();
  }
  console.log(`node-redis ${require('redis/package.json').version}: ${checks.length - failed} of ${checks.length} checks passed in ${Math.round(performance.now() - start)} ms`);
  process.exit(failed ? 1 : 0);
}

main();
