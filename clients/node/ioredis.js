'use strict';
// Checks idserver through ioredis on its defaults: RESP3, and integer
// replies turned into JavaScript Numbers, which lose the low bits of an ID
// above 2^53. ioredis announces itself with CLIENT SETINFO LIB-NAME
// ioredis, and idserver answers such a client with IDs as strings; every
// ID here must arrive as one.
//
// Usage: node ioredis.js host:port (../node_test.go runs it). Prints one
// line per check and exits 1 if any failed.
const Redis = require('ioredis');
const { getid, mgetid, N, ECHO, id, increasing, list, same, rejects, show, run } = require('./checks');

// replies unwraps the [error, reply] pairs of a pipeline or transaction.
function replies(pairs, what) {
  return pairs.map(([err, reply], i) => {
    if (err) throw new Error(`${what}: reply #${i} is an ${show(err)}`);
    return reply;
  });
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

run({
  lib: `ioredis ${require('ioredis/package.json').version}`,
  usage: 'node ioredis.js host:port',
  checks,
  open: (addr) => {
    const colon = addr.lastIndexOf(':');
    return new Redis(Number(addr.slice(colon + 1)), addr.slice(0, colon));
  },
  close: (r) => r.disconnect(),
});
