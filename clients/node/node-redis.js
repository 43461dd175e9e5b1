'use strict';
// Checks idserver through node-redis (npm package redis) on its defaults:
// RESP3, and integer replies turned into JavaScript Numbers, which lose
// the low bits of an ID above 2^53. node-redis announces itself with
// CLIENT SETINFO LIB-NAME node-redis, and idserver answers such a client
// with IDs as strings; every ID here must arrive as one.
//
// Usage: node node-redis.js host:port (../node_test.go runs it). Prints
// one line per check and exits 1 if any failed.
const { createClient } = require('redis');
const { getid, mgetid, N, ECHO, id, increasing, list, same, rejects, show, run } = require('./checks');

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

run({
  lib: `node-redis ${require('redis/package.json').version}`,
  usage: 'node node-redis.js host:port',
  checks,
  open: (addr) => createClient({ url: `redis://${addr}` }),
  connect: (c) => c.connect(),
  close: (c) => c.destroy(),
});
