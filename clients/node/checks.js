'use strict';
// The checks every Node client runs against idserver, written once, and
// run, which runs them through one library's adapter and reports them.
// ioredis.js, node-redis.js and glide.js only adapt their libraries' calls
// (see run for what an adapter provides); no check lives there.
const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const { inspect } = require('node:util');

// The ID commands, written once so every check sends the same ones.
const getid = () => ['GETID'];
const mgetid = (n) => ['MGETID', String(n)];
const decodeid = (id) => ['DECODEID', String(id)];

// N is how many GETIDs the first check pipelines, sent at once: far more
// than one socket read, so replies to the same pipeline arrive in many
// pieces.
const N = 100000;

// ECHO's argument has a CRLF and non-ASCII text: a bulk string must come
// back byte for byte, not be cut at the line end.
const ECHO = 'héllo\r\nwörld';

const MIN_ID = 1n << 53n;
const MAX_ID = (1n << 63n) - 1n;

// The layout of the IDs of a server on its defaults (idgen.DefaultLayout
// and DefaultEpoch): 42 bits of ms since EPOCH_MS, then 2 bits of
// server-id, 9 of shard and 10 random.
const EPOCH_MS = 1420041600000n;
const TIME_SHIFT = 21n;
const SHARD_BITS = 9n;
const RANDOM_BITS = 10n;

// DRIFT_MS is how far DECODEID's time may be from this machine's clock:
// generous, as the server borrows ahead when a millisecond is used up and
// a busy machine is slow to answer.
const DRIFT_MS = 10 * 60 * 1000;

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

// ids returns the IDs of an array reply of n IDs, MGETID's.
function ids(reply, n, what) {
  return list(reply, n, what).map((r, i) => id(r, `${what} element #${i}`));
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

// sameAll checks an array reply, element by element.
function sameAll(got, want, what) {
  list(got, want.length, what).forEach((v, i) => same(v, want[i], `${what} #${i}`));
}

// int returns a small integer field: a Number that is a safe integer, or
// a decimal string.
function int(v, what) {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'string' && /^[0-9]+$/.test(v)) return BigInt(v);
  throw new Error(`${what}: ${show(v)} is not a non-negative integer`);
}

// fields returns the name -> value pairs of a map reply as the library
// gives it: RESP2's flat array, a Map or an object (RESP3), or GLIDE's
// array of {key, value}.
function fields(reply, what) {
  let pairs;
  if (reply instanceof Map) {
    pairs = [...reply.entries()];
  } else if (Array.isArray(reply) && reply.every((e) => e && typeof e === 'object' && 'key' in e && 'value' in e)) {
    pairs = reply.map((e) => [e.key, e.value]);
  } else if (Array.isArray(reply) && reply.length % 2 === 0) {
    pairs = [];
    for (let i = 0; i < reply.length; i += 2) pairs.push([reply[i], reply[i + 1]]);
  } else if (reply && typeof reply === 'object' && !Array.isArray(reply)) {
    pairs = Object.entries(reply);
  } else {
    throw new Error(`${what}: reply ${show(reply)} is not a map`);
  }
  return pairs.map(([k, v]) => [String(k), v]);
}

// decoded checks DECODEID's reply for v, an ID just issued: the fields in
// cmdDecodeID's order, a time that is the ID's own (id >> 21 ms past the
// epoch) and near this machine's clock, and the lower fields that make up
// the rest of the ID.
function decoded(reply, v, what) {
  const pairs = fields(reply, what);
  same(pairs.map(([k]) => k).join(' '), 'unix-ms time server-id shard random', `${what} field names`);
  const f = Object.fromEntries(pairs);
  const ms = int(f['unix-ms'], `${what} unix-ms`);
  const want = (v >> TIME_SHIFT) + EPOCH_MS;
  if (ms !== want) throw new Error(`${what}: unix-ms ${ms}, want ${want} ((id >> 21) + ${EPOCH_MS})`);
  const drift = Number(ms) - Date.now();
  if (Math.abs(drift) > DRIFT_MS) throw new Error(`${what}: unix-ms ${ms} is ${drift} ms from this machine's clock`);
  same(f.time, new Date(Number(ms)).toISOString(), `${what} time`);
  const low = (int(f['server-id'], `${what} server-id`) << (SHARD_BITS + RANDOM_BITS)) |
    (int(f.shard, `${what} shard`) << RANDOM_BITS) | int(f.random, `${what} random`);
  const lowWant = v & ((1n << TIME_SHIFT) - 1n);
  if (low !== lowWant) {
    throw new Error(`${what}: server-id, shard and random make ${low}, want the ID's low 21 bits ${lowWant}`);
  }
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
  if (err && typeof err.errors === 'function' && err.errorIndexes) {
    return `${err.message}: ${[...err.errors()].map((e, i) => `#${err.errorIndexes[i]} ${e.message}`).join('; ')}`;
  }
  return String(err && err.message);
}

// show writes a reply for a message; an error reply is shown by its text.
function show(v) {
  if (v instanceof Error) return `error ${JSON.stringify(v.message)}`;
  return inspect(v, { breakLength: Infinity, maxArrayLength: 5, maxStringLength: 80 });
}

// ABOVE is 2^53 + 1, where a sequence gets only if a user SETs it there:
// JavaScript Numbers are exact up to 2^53, and INCRs from 1 stay below.
const ABOVE = (1n << 53n) + 1n;

// checks are [name, async (a, c, another) => {...}]: a is the adapter, c
// its client, another(opts) a promise of one more client (see run). A
// check may return a note, printed with its result.
const checks = [
  [`GETID x${N} pipelined`, async (a, c) => {
    const got = await a.pipeline(c, Array.from({ length: N }, getid));
    increasing(list(got, N, 'pipeline').map((r, i) => id(r, `GETID #${i}`)), 'GETIDs');
  }],

  ['MGETID 10', async (a, c) => {
    increasing(ids(await a.call(c, mgetid(10)), 10, 'MGETID 10'), 'MGETID 10');
  }],

  ['pipeline GETID, MGETID 3, PING, ECHO', async (a, c) => {
    const [one, three, pong, echo] = list(
      await a.pipeline(c, [getid(), mgetid(3), ['PING'], ['ECHO', ECHO]]), 4, 'pipeline');
    increasing([id(one, 'GETID'), ...ids(three, 3, 'MGETID 3')], 'IDs of the pipeline');
    same(pong, 'PONG', 'PING');
    same(echo, ECHO, 'ECHO');
  }],

  ['MULTI, GETID, GETID, MGETID 2, EXEC', async (a, c) => {
    const [x, y, two] = list(await a.multi(c, [getid(), getid(), mgetid(2)]), 3, 'EXEC');
    increasing([id(x, 'EXEC reply #0'), id(y, 'EXEC reply #1'), ...ids(two, 2, 'EXEC reply #2 (MGETID 2)')],
      'IDs of the transaction');
  }],

  // Redis discards a transaction with a command it refused to queue. The
  // libraries report it each in its way (a.refused: EXEC's EXECABORT, or
  // the refusal itself); sent one by one, the same commands show each
  // reply, EXEC's error too (GLIDE keeps only its text, "Transaction
  // discarded ...", not the EXECABORT code).
  ['MULTI with an unknown command', async (a, c) => {
    await rejects(a.multi(c, [getid(), ['NOSUCHCMD']]), a.refused, 'MULTI, GETID, NOSUCHCMD, EXEC');
    const [multi, queued, refused, exec] = await Promise.all(
      [['MULTI'], getid(), ['NOSUCHCMD'], ['EXEC']].map((args) => a.call(c, args).catch((err) => err)));
    same(multi, 'OK', 'MULTI, sent alone');
    same(queued, 'QUEUED', 'GETID after MULTI');
    if (!(refused instanceof Error)) throw new Error(`NOSUCHCMD after MULTI: ${show(refused)}, want an error`);
    if (!(exec instanceof Error) || !exec.message.includes('Transaction discarded')) {
      throw new Error(`EXEC after NOSUCHCMD: ${show(exec)}, want the EXECABORT error`);
    }
    id(await a.call(c, getid()), 'GETID after the discarded transactions');
  }],

  ['DECODEID of a fresh GETID', async (a, c) => {
    const v = id(await a.call(c, getid()), 'GETID');
    decoded(await a.call(c, decodeid(v)), v, `DECODEID ${v}`);
  }],

  ['error reply, then GETID', async (a, c) => {
    await rejects(a.call(c, mgetid(0)), 'out of range', 'MGETID 0');
    id(await a.call(c, getid()), 'GETID after the error');
  }],

  // Sequences: a new key counts from 1, INCR's reply an integer (a
  // Number, exact this low), GET's a string, SET only up, DEL refused.
  ['INCR, INCRBY, GET, SET, DEL, EXISTS, TYPE, MGET', async (a, c) => {
    const k = 'js:seq', none = 'js:none';
    const call = (...args) => a.call(c, args);
    same(await call('INCR', k), 1, 'INCR of a new key');
    same(await call('INCR', k), 2, 'INCR');
    same(await call('INCRBY', k, '10'), 12, 'INCRBY 10');
    same(await call('GET', k), '12', 'GET');
    same(await call('GET', none), null, 'GET of an unknown key');
    same(await call('SET', k, '100'), 'OK', 'SET 100');
    same(await call('INCR', k), 101, 'INCR after SET 100');
    await rejects(call('SET', k, '50'), `sequences only go up: "${k}" is at 101`, 'SET 50');
    await rejects(call('DEL', k), 'DEL is refused: sequences never go back', 'DEL');
    same(await call('EXISTS', k, none), 1, 'EXISTS');
    same(await call('TYPE', k), 'string', 'TYPE');
    sameAll(await call('MGET', k, none), ['101', null], 'MGET');
  }],

  ['pipeline of 100 INCRs', async (a, c) => {
    sameAll(await a.pipeline(c, Array.from({ length: 100 }, () => ['INCR', 'js:pipeline'])),
      Array.from({ length: 100 }, (_, i) => i + 1), 'pipeline');
  }],

  ['MULTI, INCR, INCRBY 5, GET, EXEC', async (a, c) => {
    const k = 'js:multi';
    sameAll(await a.multi(c, [['INCR', k], ['INCRBY', k, '5'], ['GET', k]]), [1, 6, '6'], 'EXEC');
  }],

  // Above 2^53 the library's Number is the nearest double: 2^53+3 comes
  // as 2^53+4, the same Number as the next INCR's, as it does from
  // Redis. GET's string stays exact, and so does INCR's reply on a
  // client that asks for numbers as strings (a.exactNumbers, where the
  // library can).
  ['INCR above 2^53', async (a, c, another) => {
    const k = 'js:above';
    same(await a.call(c, ['SET', k, String(ABOVE)]), 'OK', `SET ${ABOVE}`);
    const got = [];
    for (let i = 0; i < 3; i++) got.push(await a.call(c, ['INCR', k]));
    sameAll(got, [Number(ABOVE + 1n), Number(ABOVE + 2n), Number(ABOVE + 3n)], 'three INCRs');
    same(got[1], got[2], 'INCRs 2^53+3 and 2^53+4 as Numbers');
    same(await a.call(c, ['GET', k]), String(ABOVE + 3n), 'GET');
    let note = `INCRs of 2^53+2..4 gave ${got.map(show).join(', ')}`;
    if (!a.exactNumbers) return `${note}; no option for exact integers`;
    const exact = await another({ exactNumbers: true });
    same(await a.call(exact, ['INCR', k]), String(ABOVE + 4n), `INCR with ${a.exactNumbers}`);
    return `${note}; with ${a.exactNumbers}, '${ABOVE + 4n}'`;
  }],
];

// run runs the checks through one library against a server, and exits 1
// if any failed (2 on bad usage). The command line is [alias] host:port:
// alias is one of aliases, the npm names (npm aliases) of the library's
// versions that package.json pins, the first being the default.
// adapter(alias) returns the library's adapter:
//   lib: the library and its version, for the report;
//   open(addr, lost, opts): a client of host:port on the library's
//     defaults, or a promise of one; lost(err) is told of connection
//     errors;
//   connect(c): if given, connects it;
//   close(c): drops it;
//   call(c, args): a promise of one command's reply;
//   pipeline(c, cmds), multi(c, cmds): a promise of the replies of cmds
//     (lists of args) sent as a pipeline, or as MULTI ... EXEC; either
//     rejects if a reply is an error;
//   refused: the text of multi's error when a command was refused;
//   exactNumbers: if the library can give integer replies as exact
//     strings, the option that does, which open(addr, lost, opts) sets
//     when opts.exactNumbers.
async function run({ usage, aliases, adapter }) {
  const argv = process.argv.slice(2);
  const [alias, addr] = argv.length === 1 ? [aliases[0], argv[0]] : argv;
  if (argv.length < 1 || argv.length > 2 || !aliases.includes(alias) || addr.lastIndexOf(':') < 1) {
    console.log(`usage: ${usage} (alias: ${aliases.join(', ')}; default ${aliases[0]})`);
    process.exit(2);
  }
  const a = adapter(alias);

  // The libraries reconnect for ever by default, ioredis even to a
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
    lost = undefined;
    const t = performance.now();
    // A fresh client per check: one failure cannot leave the next with
    // replies out of step, and every check sees the connect handshake.
    const clients = [];
    const open = async (opts) => {
      const c = await a.open(addr, (err) => { lost = err; }, opts);
      clients.push(c);
      if (a.connect) await a.connect(c);
      return c;
    };
    try {
      const note = await check(a, await open({}), open);
      console.log(`ok   ${name} (${Math.round(performance.now() - t)} ms)${note ? `: ${note}` : ''}`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${name}: ${message(err)}${lost && lost !== err ? ` (connection: ${lost.message})` : ''}`);
    }
    clients.forEach((c) => a.close(c));
  }
  console.log(`${a.lib}: ${checks.length - failed} of ${checks.length} checks passed in ${Math.round(performance.now() - start)} ms`);
  process.exit(failed ? 1 : 0);
}

// version is the version of the package an alias installed (read from
// the file: GLIDE's exports hide its package.json from require).
function version(alias) {
  return JSON.parse(readFileSync(join(__dirname, 'node_modules', alias, 'package.json'), 'utf8')).version;
}

module.exports = { run, version, show };
