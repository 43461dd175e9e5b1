'use strict';
// Decodes idserver's PUBLICID strings with the npm sqids package, a Sqids
// implementation of another language than idserver's: without
// public-id-key they must be exactly Sqids, for the server's alphabet and
// minimum length. Each string must decode to its number, sqids must
// encode the number to the same string, and PRIVATEID must read sqids'
// string back. sqids 0.3.0 takes numbers up to 2^53-1 (JavaScript's safe
// integers); ioredis reads PRIVATEID's integers as strings
// (stringNumbers: its own parsing reads 2^53-1 as 2^53).
//
// Usage: node sqids.js host:port alphabet min-length n [n ...]
// (../node_test.go runs it). Exits 1 on the first mismatch.
const Redis = require('ioredis');
const Sqids = require('sqids').default;

async function main() {
  const [addr, alphabet, minLength, ...nums] = process.argv.slice(2);
  const colon = addr.lastIndexOf(':');
  const r = new Redis(Number(addr.slice(colon + 1)), addr.slice(0, colon), { maxRetriesPerRequest: 1, stringNumbers: true });
  const sqids = new Sqids({ alphabet, minLength: Number(minLength) });
  try {
    const one = await r.call('PUBLICID', nums[0]);
    const all = await r.call('PUBLICID', ...nums);
    if (all[0] !== one) throw new Error(`PUBLICID ${nums[0]} alone gives ${one}, in an array ${all[0]}`);
    for (let i = 0; i < nums.length; i++) {
      const n = Number(nums[i]);
      const got = sqids.decode(all[i]);
      if (got.length !== 1 || got[0] !== n) throw new Error(`sqids decodes PUBLICID ${n} = ${all[i]} as [${got}]`);
      const enc = sqids.encode([n]);
      if (enc !== all[i]) throw new Error(`sqids encodes ${n} as ${enc}, PUBLICID as ${all[i]}`);
      const back = await r.call('PRIVATEID', enc);
      if (back !== nums[i]) throw new Error(`PRIVATEID ${enc} = ${back}, want ${n}`);
    }
    console.log(`sqids ${require('sqids/package.json').version}: ${nums.length} PUBLICID strings decoded (alphabet ${alphabet}, min length ${minLength})`);
  } finally {
    r.disconnect();
  }
}

main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
