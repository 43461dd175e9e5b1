'use strict';
// Checks idserver through Valkey GLIDE (npm @valkey/valkey-glide, a
// native core shared with GLIDE's Python, Java and Go clients) on its
// defaults (the checks are in checks.js). GLIDE turns integer replies
// into JavaScript Numbers, which lose the low bits of an ID above 2^53;
// it announces itself with CLIENT SETINFO LIB-NAME GlideJS, and idserver
// must answer it with IDs as strings. It connects only to a primary: INFO
// REPLICATION must say role:master.
//
// Usage: node glide.js host:port (../node_test.go runs it). Prints one
// line per check and exits 1 if any failed.
const { GlideClient, Batch, Logger } = require('@valkey/valkey-glide');
const { run, version } = require('./checks');

// GLIDE's core logs every error reply as a warning by default; the checks
// make some on purpose. Its errors (a failed connect) still show.
Logger.setLoggerConfig('error');

// queue adds cmds to a batch: atomic, a transaction (MULTI ... EXEC), or
// not, a pipeline.
function queue(atomic, cmds) {
  const b = new Batch(atomic);
  for (const args of cmds) b.customCommand(args);
  return b;
}

run({
  usage: 'node glide.js host:port',
  aliases: ['@valkey/valkey-glide'],
  adapter: (alias) => ({
    lib: `Valkey GLIDE ${version(alias)}`,
    // createClient connects before it resolves; GLIDE reports no
    // connection events.
    open: (addr) => {
      const colon = addr.lastIndexOf(':');
      // requestTimeout: GLIDE's default of 250 ms fails 100,000
      // pipelined GETIDs on a busy machine (under -race beside two CPU
      // hogs); the checks are of replies, not of latency.
      return GlideClient.createClient({ addresses: [{ host: addr.slice(0, colon), port: Number(addr.slice(colon + 1)) }], requestTimeout: 30000 });
    },
    close: (c) => c.close(),
    call: (c, args) => c.customCommand(args),
    // raiseOnError: exec rejects with the first error reply, of a
    // transaction the refusal, not EXEC's EXECABORT.
    pipeline: (c, cmds) => c.exec(queue(false, cmds), true),
    multi: (c, cmds) => c.exec(queue(true, cmds), true),
    refused: "unknown command 'NOSUCHCMD'",
    // No exactNumbers: GLIDE has no option to take integers as strings.
  }),
});
