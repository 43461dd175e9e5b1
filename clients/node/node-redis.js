'use strict';
// Checks idserver through node-redis (npm package redis) on its defaults
// (the checks are in checks.js). Every version turns integer replies into
// JavaScript Numbers, which lose the low bits of an ID above 2^53, and
// idserver must answer each with IDs as strings: node-redis 4.6 and later
// announce themselves with CLIENT SETINFO LIB-NAME node-redis; node-redis
// 3 names nobody, and begins with its ready check, a bare lowercase info.
//
// Usage: node node-redis.js [alias] host:port, alias one of the npm
// aliases below (../node_test.go runs it). Prints one line per check and
// exits 1 if any failed.
const { run, version, show } = require('./checks');

// The versions package.json pins, by the npm alias each is installed as.
const aliases = ['redis', 'redis4', 'redis3'];

// ok checks the replies of a pipeline: node-redis puts an error reply in
// place of its reply.
function ok(replies, what) {
  replies.forEach((reply, i) => {
    if (reply instanceof Error) throw new Error(`${what}: reply #${i} is an ${show(reply)}`);
  });
  return replies;
}

// promised is the adapter of node-redis 4 and later: promises, a client
// that connect() connects, and multi() for transactions and pipelines.
function promised(alias) {
  // RESP_TYPES (node-redis 5 and later) maps a reply type to a decoding;
  // node-redis 4 has no way to take integers as strings.
  const { createClient, RESP_TYPES } = require(alias);
  const exact = RESP_TYPES && { commandOptions: { typeMapping: { [RESP_TYPES.NUMBER]: String } } };
  const queue = (m, cmds) => {
    for (const args of cmds) m.addCommand(args);
    return m;
  };
  return {
    open: (addr, lost, opts) => {
      const c = createClient({ url: `redis://${addr}`, ...(opts.exactNumbers && exact) });
      // Without a listener, node-redis's error event would end the process.
      c.on('error', lost);
      return c;
    },
    connect: (c) => c.connect(),
    // node-redis 4 has no destroy; its disconnect does the same.
    close: (c) => (c.destroy ? c.destroy() : c.disconnect().catch(() => {})),
    call: (c, args) => c.sendCommand(args),
    // execAsPipeline sends the queued commands without MULTI and EXEC.
    pipeline: async (c, cmds) => ok(await queue(c.multi(), cmds).execAsPipeline(), 'pipeline'),
    multi: (c, cmds) => queue(c.multi(), cmds).exec(),
    // node-redis 4's exec() rejects with EXEC's EXECABORT; 5 and later
    // reject with the refusal, the first failed reply of the chain, and
    // drop EXECABORT (as against redis-server 7).
    refused: version(alias).startsWith('4.') ? 'EXECABORT' : "unknown command 'NOSUCHCMD'",
    exactNumbers: exact && 'typeMapping { [RESP_TYPES.NUMBER]: String }',
  };
}

// callbacks is the adapter of node-redis 3: callbacks, a client that
// connects by itself (queueing commands until its ready check is
// answered), send_command for one command, and batch() and multi() for
// pipelines and transactions, which only take the commands node-redis
// knows: addCommand teaches it idserver's.
function callbacks(alias) {
  const redis = require(alias);
  const queue = (m, cmds) => {
    for (const [name, ...args] of cmds) {
      redis.addCommand(name.toLowerCase());
      m[name.toLowerCase()](args);
    }
    return new Promise((resolve, reject) => m.exec((err, replies) => (err ? reject(err) : resolve(replies))));
  };
  return {
    open: (addr, lost, opts) => {
      const colon = addr.lastIndexOf(':');
      const c = redis.createClient({
        host: addr.slice(0, colon), port: Number(addr.slice(colon + 1)),
        ...(opts.exactNumbers && { string_numbers: true }),
      });
      c.on('error', lost);
      return c;
    },
    close: (c) => c.end(true),
    call: (c, [name, ...args]) => new Promise((resolve, reject) =>
      c.send_command(name, args, (err, reply) => (err ? reject(err) : resolve(reply)))),
    pipeline: async (c, cmds) => ok(await queue(c.batch(), cmds), 'pipeline'),
    // exec's error is EXEC's EXECABORT.
    multi: (c, cmds) => queue(c.multi(), cmds),
    refused: 'EXECABORT',
    exactNumbers: 'string_numbers: true',
  };
}

run({
  usage: 'node node-redis.js [alias] host:port',
  aliases,
  adapter: (alias) => ({
    lib: `node-redis ${version(alias)} (npm ${alias})`,
    ...(version(alias).startsWith('3.') ? callbacks(alias) : promised(alias)),
  }),
});
