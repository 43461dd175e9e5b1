'use strict';
// What ioredis.js and node-redis.js share: the ID commands, the checks of
// a reply, and run, which runs each script's checks on fresh clients and
// reports them. Each script keeps its library's own calls.
const { inspect } = require('node:util');

// The ID commands, written once so every check sends the same ones.
const getid = () => ['GETID'];
const mgetid = (n) => ['MGETID', String(n)];

// N is how many GETIDs check 1 pipelines, sent at once: far more than one
// socket read, so replies to the same pipeline arrive in many pieces.
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

// message is an error's text. A node-redis multi() that fails raises a
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

// run runs checks, a list of [name, async (client) => {...}], against the
// host:port given on the command line, prints one line per check and a
// summary naming lib, and exits 1 if any check failed (2 on bad usage).
// open(addr) makes a client, connect(client), if given, connects it, and
// close(client) drops it.
async function run({ lib, usage, checks, open, connect, close }) {
  const addr = process.argv[2] || '';
  if (addr.lastIndexOf(':') < 1) {
    console.log(`usage: ${usage}`);
    process.exit(2);
  }

  // Both libraries reconnect for ever by default, ioredis even to a
  // refused connection: stop well before the Go test's own timeout,
  // naming the check that hung.
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
    const c = open(addr);
    // Without a listener, node-redis's error event would end the process.
    lost = undefined;
    c.on('error', (err) => { lost = err; });
    const t = performance.now();
    try {
      if (connect) await connect(c);
      await check(c);
      console.log(`ok   ${name} (${Math.round(performance.now() - t)} ms)`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name}: ${message(err)}${lost ? ` (connection: ${lost.message})` : ''}`);
    }
    close(c);
  }
  console.log(`${lib}: ${checks.length - failed} of ${checks.length} checks passed in ${Math.round(performance.now() - start)} ms`);
  process.exit(failed ? 1 : 0);
}

module.exports = { getid, mgetid, N, ECHO, id, increasing, list, same, rejects, show, run };
