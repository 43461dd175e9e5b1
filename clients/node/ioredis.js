'use strict';
// Checks idserver through ioredis, or its fork iovalkey, on its defaults
// (the checks are in checks.js). Every version turns integer replies into
// JavaScript Numbers, which lose the low bits of an ID above 2^53, and
// idserver must answer each with IDs as strings: ioredis 5.8 and later
// announce themselves with CLIENT SETINFO LIB-NAME ioredis; ioredis 4 and
// 5.0-5.7 and iovalkey 0.4 name nobody, and begin with their ready check,
// a bare lowercase info.
//
// Usage: node ioredis.js [alias] host:port, alias one of the npm aliases
// below (../node_test.go runs it). Prints one line per check and exits 1
// if any failed.
const { run, version, show } = require('./checks');

// The versions package.json pins, by the npm alias each is installed as.
// ioredis 4.31 has call too (and its send_command alias), on clients,
// pipelines and transactions, as 5 and 6 do: one adapter fits all.
const aliases = ['ioredis', 'ioredis4', 'ioredis53', 'ioredis57', 'iovalkey04'];

// replies unwraps the [error, reply] pairs of a pipeline or transaction.
function replies(pairs, what) {
  return pairs.map(([err, reply], i) => {
    if (err) throw new Error(`${what}: reply #${i} is an ${show(err)}`);
    return reply;
  });
}

// queue adds cmds to a pipeline or transaction and runs it.
async function queue(p, cmds, what) {
  for (const args of cmds) p.call(...args);
  return replies(await p.exec(), what);
}

run({
  usage: 'node ioredis.js [alias] host:port',
  aliases,
  adapter: (alias) => {
    const Redis = require(alias);
    return {
      lib: `${alias.startsWith('iovalkey') ? 'iovalkey' : 'ioredis'} ${version(alias)} (npm ${alias})`,
      open: (addr, lost, opts) => {
        const colon = addr.lastIndexOf(':');
        const r = new Redis(Number(addr.slice(colon + 1)), addr.slice(0, colon),
          opts.exactNumbers ? { stringNumbers: true } : {});
        r.on('error', lost);
        return r;
      },
      close: (r) => r.disconnect(),
      call: (r, args) => r.call(...args),
      pipeline: (r, cmds) => queue(r.pipeline(), cmds, 'pipeline'),
      // exec rejects with EXEC's EXECABORT when Redis refused to queue a
      // command.
      multi: (r, cmds) => queue(r.multi(), cmds, 'EXEC'),
      refused: 'EXECABORT',
      // Every version: integer replies as strings.
      exactNumbers: 'stringNumbers: true',
    };
  },
});
