"""Checks idserver with a Python client on its defaults.

Usage: PYTHON check.py [--client NAME] [--resp N] HOST:PORT [CHECK ...]

Runs the named checks (all without names), each on a fresh client,
prints "ok NAME" or "FAIL NAME: why" for each, and exits 1 if any
failed. clients/python_test.go runs it with /usr/bin/python3, which sees
Debian's python3-redis 4.3.4, and with clients/python/.venv/bin/python,
which has PyPI's redis-py and valkey-py (requirements.txt). --client is
one of CLIENTS; --resp is the protocol the Connection check wants the
connection to be on (a client's default changes with its version).
"""

import argparse
import asyncio
import datetime
import importlib
import inspect
import sys
import time


def make_redis(host, port):
    import redis

    return redis.Redis(host=host, port=port)


def make_redis_resp2(host, port):
    """redis-py 5 and later take protocol=; 8 is on RESP3 without it."""
    import redis

    return redis.Redis(host=host, port=port, protocol=2)


def make_redis_asyncio(host, port):
    import redis.asyncio

    return Blocking(redis.asyncio.Redis(host=host, port=port))


def make_valkey(host, port):
    import valkey

    return valkey.Valkey(host=host, port=port)


def make_valkey_resp3(host, port):
    """valkey-py is on RESP2 unless given protocol=3."""
    import valkey

    return valkey.Valkey(host=host, port=port, protocol=3)


# CLIENTS maps --client to the module whose ResponseError the checks
# expect and a function that makes a client on its defaults.
CLIENTS = {
    "redis": ("redis", make_redis),
    "redis-resp2": ("redis", make_redis_resp2),
    "redis-asyncio": ("redis", make_redis_asyncio),
    "valkey": ("valkey", make_valkey),
    "valkey-resp3": ("valkey", make_valkey_resp3),
}

# ResponseError is the error class of the client's module, set by main.
ResponseError = None

# WANT_RESP is the protocol the client should be on (--resp): the
# Connection check wants it, and DecodeID wants a map only on RESP3.
WANT_RESP = None

# KEYS prefixes the sequence checks' keys, new to each run (set by main),
# as they want new keys to count from 1.
KEYS = "py:"


class Blocking:
    """Runs an asyncio client's calls to completion on one event loop, so
    that the checks read the same for it and for the others: the commands
    still go through the asyncio client's own connections, parser and
    pipelines. Pipelines it makes are wrapped too; inner is the client
    itself, for checks that use asyncio as an application does."""

    def __init__(self, inner, loop=None):
        self.inner = inner
        self.loop = loop or asyncio.new_event_loop()

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            v = attr(*args, **kwargs)
            # A pipeline is awaitable too (to itself): not a call to run.
            if v is self.inner:  # a pipeline's queued command, chained
                return self
            if hasattr(v, "execute") and hasattr(v, "execute_command"):
                return Blocking(v, self.loop)  # pipeline()
            if inspect.isawaitable(v):
                v = self.loop.run_until_complete(v)
            return v

        return call

    def close(self):
        self.loop.run_until_complete(self.inner.aclose())
        self.loop.close()


def want_increasing(what, ids):
    """Strictly increasing in the order received also means distinct."""
    for i in range(1, len(ids)):
        if ids[i] <= ids[i - 1]:
            raise AssertionError(
                "%s: ID #%d = %d, not above %d" % (what, i, ids[i], ids[i - 1])
            )


def int_id(what, reply):
    """A GETID reply must be an integer reply, which redis-py makes an int."""
    if type(reply) is not int or reply <= 0:
        raise AssertionError("%s = %r, want a positive int" % (what, reply))
    return reply


def bulk_ids(what, reply, n):
    """MGETID replies with bulk strings, which redis-py leaves as bytes."""
    if not isinstance(reply, list) or len(reply) != n:
        raise AssertionError("%s = %r, want a list of %d" % (what, reply, n))
    ids = []
    for b in reply:
        if not isinstance(b, bytes) or not b.isdigit():
            raise AssertionError("%s: element %r is not a decimal bytes" % (what, b))
        ids.append(int(b))
    return ids


def check_getid_exact(r):
    """100,000 GETIDs pipelined without MULTI, 1,000 per round trip."""
    total, batch = 100_000, 1_000
    prev = 0
    for sent in range(0, total, batch):
        p = r.pipeline(transaction=False)
        for _ in range(batch):
            p.execute_command("GETID")
        for i, reply in enumerate(p.execute()):
            got = int_id("GETID #%d" % (sent + i), reply)
            if got <= prev:
                raise AssertionError(
                    "GETID #%d = %d, not above %d" % (sent + i, got, prev)
                )
            prev = got


def check_mgetid(r):
    want_increasing("MGETID 10", bulk_ids("MGETID 10", r.execute_command("MGETID", 10), 10))


def check_mixed_pipeline(r):
    """ID commands between others, without MULTI: each reply in its place."""
    p = r.pipeline(transaction=False)
    p.execute_command("GETID")
    p.execute_command("MGETID", 3)
    p.ping()
    p.echo("hello")
    replies = p.execute()
    if len(replies) != 4:
        raise AssertionError("%d replies, want 4: %r" % (len(replies), replies))
    ids = [int_id("GETID", replies[0])] + bulk_ids("MGETID 3", replies[1], 3)
    want_increasing("GETID, MGETID 3", ids)
    if replies[2] is not True or replies[3] != b"hello":
        raise AssertionError("PING, ECHO hello = %r, %r" % (replies[2], replies[3]))


def check_transaction(r):
    """redis-py's default pipeline() wraps the commands in MULTI/EXEC."""
    p = r.pipeline()
    p.execute_command("GETID")
    p.execute_command("GETID")
    p.execute_command("MGETID", 2)
    replies = p.execute()
    if len(replies) != 3:
        raise AssertionError("EXEC gave %d replies, want 3: %r" % (len(replies), replies))
    ids = [int_id("GETID", replies[0]), int_id("GETID", replies[1])]
    want_increasing("GETID, GETID, MGETID 2", ids + bulk_ids("MGETID 2", replies[2], 2))


def check_transaction_abort(r):
    """An unknown command queued makes EXEC refuse it all (EXECABORT);
    redis-py then raises the queued command's own error. The name must
    be in it: an error about MULTI or EXEC means no transaction at all."""
    p = r.pipeline(transaction=True)
    p.execute_command("GETID")
    p.execute_command("NOSUCHCOMMAND")
    try:
        replies = p.execute()
    except ResponseError as e:
        if "NOSUCHCOMMAND" not in str(e) and "EXECABORT" not in str(e):
            raise AssertionError("raised %r, want the error about NOSUCHCOMMAND" % str(e))
    else:
        raise AssertionError("gave %r, want a ResponseError" % (replies,))
    int_id("GETID after the abort", r.execute_command("GETID"))


def check_error_reply(r):
    """MGETID 0 is refused, and the connection, back in the pool, works."""
    try:
        reply = r.execute_command("MGETID", 0)
    except ResponseError as e:
        if "out of range" not in str(e):
            raise AssertionError("MGETID 0 raised %r, want \"out of range\"" % str(e))
    else:
        raise AssertionError("MGETID 0 = %r, want a ResponseError" % (reply,))
    int_id("GETID after the error", r.execute_command("GETID"))


def raises(what, call, text):
    """call must raise redis-py's ResponseError with text in it."""
    try:
        reply = call()
    except ResponseError as e:
        if text not in str(e):
            raise AssertionError("%s raised %r, want %r in it" % (what, str(e), text))
    else:
        raise AssertionError("%s = %r, want a ResponseError" % (what, reply))


def want(what, got, expected):
    if type(got) is not type(expected) or got != expected:
        raise AssertionError("%s = %r, want %r" % (what, got, expected))


def check_sequences(r):
    """A new key counts from 1; SET only up; DEL refused; INCR gives an
    int, GET and MGET bytes, as against Redis."""
    k, none = KEYS + "Sequences:k", KEYS + "Sequences:none"
    want("incr of a new key", r.incr(k), 1)
    want("incr", r.incr(k), 2)
    want("incrby 10", r.incrby(k, 10), 12)
    want("get", r.get(k), b"12")
    want("get of an unknown key", r.get(none), None)
    want("set 100", r.set(k, 100), True)
    want("incr after set 100", r.incr(k), 101)
    raises("set 50", lambda: r.set(k, 50), 'sequences only go up: "%s" is at 101' % k)
    want("setnx of a key that exists", r.setnx(k, 500), False)
    raises("delete", lambda: r.delete(k), "DEL is refused: sequences never go back")
    want("exists of a key and an unknown one", r.exists(k, none), 1)
    want("type", r.type(k), b"string")
    want("mget", r.mget(k, none), [b"101", None])


def check_sequence_pipeline(r):
    """100 INCRs of a new key in one pipeline without MULTI: 1 to 100."""
    p = r.pipeline(transaction=False)
    for _ in range(100):
        p.incr(KEYS + "SequencePipeline")
    want("100 pipelined incr", p.execute(), list(range(1, 101)))


def check_sequence_transaction(r):
    """The default pipeline() is MULTI/EXEC: INCR, INCRBY 5 and GET of a
    new key give 1, 6 and b"6". A SET in it is refused (not allowed
    inside a transaction), which discards the INCR before it too."""
    k = KEYS + "SequenceTransaction"
    want("pipeline() incr, incrby 5, get", r.pipeline().incr(k).incrby(k, 5).get(k).execute(), [1, 6, b"6"])
    raises("pipeline() incr, set", lambda: r.pipeline().incr(k).set(k, 100).execute(),
           "Command not allowed inside a transaction")
    want("get after the discarded transaction", r.get(k), b"6")


# The layout of a server on its defaults (idgen.DefaultLayout and
# DefaultEpoch): ms since EPOCH_MS above bit 21, then 2 bits of
# server-id, 9 of shard and 10 random.
EPOCH_MS = 1420041600000
TIME_SHIFT, SHARD_BITS, RANDOM_BITS = 21, 9, 10

# DRIFT_MS is how far an ID's time may be from this machine's clock:
# generous, as the server borrows ahead and a busy machine answers late.
DRIFT_MS = 10 * 60 * 1000


def check_decode_id(r):
    """DECODEID of a fresh GETID: its fields in order (name, value pairs
    in RESP2; in RESP3 a map, which the client makes a dict), a time that
    is the ID's own ((id >> 21) ms past the epoch) and near the clock, and
    lower fields that make up the rest of the ID."""
    v = int_id("GETID", r.execute_command("GETID"))
    reply = r.execute_command("DECODEID", v)
    if WANT_RESP == 3 and isinstance(reply, dict):
        pairs = list(reply.items())
    elif WANT_RESP == 2 and isinstance(reply, list) and len(reply) == 10:
        pairs = list(zip(reply[0::2], reply[1::2]))
    else:
        raise AssertionError("DECODEID = %r, want %s" % (reply, "a dict" if WANT_RESP == 3 else "a list of 10"))
    want("DECODEID field names", [k for k, _ in pairs],
         [b"unix-ms", b"time", b"server-id", b"shard", b"random"])
    f = {k.decode(): x for k, x in pairs}
    for k in ("unix-ms", "server-id", "shard", "random"):
        if type(f[k]) is not int:
            raise AssertionError("DECODEID %s = %r, want an int" % (k, f[k]))
    want("DECODEID unix-ms", f["unix-ms"], (v >> TIME_SHIFT) + EPOCH_MS)
    drift = f["unix-ms"] - time.time() * 1000
    if abs(drift) > DRIFT_MS:
        raise AssertionError("DECODEID unix-ms %d is %d ms from this machine's clock" % (f["unix-ms"], drift))
    t = datetime.datetime.fromtimestamp(f["unix-ms"] // 1000, datetime.timezone.utc)
    want("DECODEID time", f["time"], b"%s.%03dZ" % (t.strftime("%Y-%m-%dT%H:%M:%S").encode(), f["unix-ms"] % 1000))
    low = f["server-id"] << (SHARD_BITS + RANDOM_BITS) | f["shard"] << RANDOM_BITS | f["random"]
    want("DECODEID server-id, shard and random", low, v & ((1 << TIME_SHIFT) - 1))


def check_connection(r):
    """CLIENT INFO of the client's own connection says it is on WANT_RESP
    (after HELLO 3, for RESP3) and gets GETID as an integer."""
    info = r.client_info()
    got = (str(info.get("resp")).strip(), str(info.get("getid-reply")).strip())
    want("CLIENT INFO resp and getid-reply", got, (str(WANT_RESP), "integer"))


def check_concurrent(r):
    """The asyncio client as an application uses it: 50 tasks on its
    pool, 20 GETIDs each, at once; the 1,000 IDs are distinct."""
    if not isinstance(r, Blocking):
        raise AssertionError("Concurrent is for --client redis-asyncio")

    async def task():
        return [await r.inner.execute_command("GETID") for _ in range(20)]

    async def run():
        return await asyncio.gather(*(task() for _ in range(50)))

    ids = [int_id("GETID", v) for got in r.loop.run_until_complete(run()) for v in got]
    want("distinct IDs of 50 tasks x 20 GETIDs", len(set(ids)), 1000)


CHECKS = {
    "Connection": check_connection,
    "GetIDExact": check_getid_exact,
    "MGetID": check_mgetid,
    "DecodeID": check_decode_id,
    "MixedPipeline": check_mixed_pipeline,
    "Transaction": check_transaction,
    "TransactionAbort": check_transaction_abort,
    "ErrorReply": check_error_reply,
    "Sequences": check_sequences,
    "SequencePipeline": check_sequence_pipeline,
    "SequenceTransaction": check_sequence_transaction,
    "Concurrent": check_concurrent,
}


def main(argv):
    global ResponseError, WANT_RESP, KEYS
    ap = argparse.ArgumentParser(prog="check.py")
    ap.add_argument("--client", choices=CLIENTS, default="redis")
    ap.add_argument("--resp", type=int, default=2)
    ap.add_argument("addr", metavar="HOST:PORT")
    ap.add_argument("checks", nargs="*", metavar="CHECK", help=" ".join(CHECKS))
    args = ap.parse_args(argv[1:])
    module, make = CLIENTS[args.client]
    lib = importlib.import_module(module)
    ResponseError, WANT_RESP = lib.ResponseError, args.resp
    KEYS = "py:%s:%d:" % (args.client, time.time_ns())
    print("%s %s, --client %s" % (module, lib.__version__, args.client))
    host, _, port = args.addr.rpartition(":")
    failed = False
    for name in args.checks or [n for n in CHECKS if n != "Concurrent"]:
        if name not in CHECKS:
            sys.exit("unknown check %r; known: %s" % (name, ", ".join(CHECKS)))
        r = make(host, int(port))
        try:
            CHECKS[name](r)
            print("ok", name)
        except Exception as e:  # any exception is a failed check, not a crash
            failed = True
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
        finally:
            r.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv)
