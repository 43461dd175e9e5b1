"""A cluster driver (the protocol is e2e/clusterdriver_test.go's): redis-py's
RedisCluster on its defaults, given one node's address (IDSERVER_SEED), INCRs
random keys k0..k{IDSERVER_KEYS-1} and asks GETID and MGETID 5 from
IDSERVER_WORKERS threads sharing the client, writing every reply and error
to IDSERVER_OUT until stdin ends.

GETID and MGETID name no key: they go to a node redis-py picks
(target_nodes), as in cluster.py. Timestamps are time.time_ns(), the wall
clock in ns: nothing to round.

Usage: python3 clusterdriver.py (run by e2e's TestRedisClusterOverEtcd)."""
import faulthandler
import os
import random
import signal
import sys
import threading
import time

from redis.cluster import RedisCluster

host, port = os.environ["IDSERVER_SEED"].rsplit(":", 1)
keys = int(os.environ["IDSERVER_KEYS"])
workers = int(os.environ.get("IDSERVER_WORKERS", "4"))
out = open(os.environ["IDSERVER_OUT"], "w")
lock = threading.Lock()
stop = threading.Event()


def emit(line):
    with lock:
        out.write(line + "\n")


def failed(cmd, sent, e):
    msg = " ".join(("%s: %s" % (type(e).__name__, e)).split())
    emit("err %s %d %d %s" % (cmd, sent, time.time_ns(), msg))
    time.sleep(0.01)


def connect():
    """The client, once the seed node answers its CLUSTER SLOTS (the
    constructor asks it), or None if stdin ended first."""
    while not stop.is_set():
        sent = time.time_ns()
        try:
            return RedisCluster(host=host, port=int(port))
        except Exception as e:  # a node down at start: try again, as an app would
            failed("CONNECT", sent, e)
            time.sleep(0.1)
    return None


def worker(rc, rnd):
    while not stop.is_set():
        r = rnd.randrange(8)
        cmd = "GETID" if r == 0 else "MGETID" if r == 1 else "INCR"
        sent = time.time_ns()
        try:
            if cmd == "INCR":
                key = "k%d" % rnd.randrange(keys)
                v = rc.incr(key)
                emit("incr %s %d %d %d" % (key, sent, time.time_ns(), v))
                continue
            if cmd == "GETID":
                ids = [rc.execute_command("GETID", target_nodes=RedisCluster.RANDOM)]
            else:
                ids = rc.execute_command("MGETID", 5, target_nodes=RedisCluster.RANDOM)
            recv = time.time_ns()
            for i in ids:
                emit("id %d %d %d" % (sent, recv, int(i)))
        except Exception as e:  # the client's own retries are done: note it, go on
            failed(cmd, sent, e)


def main():
    faulthandler.register(signal.SIGUSR1)  # kill -USR1: every thread's stack on stderr
    threads = []

    def run():
        rc = connect()
        if rc is None:
            return
        for n in range(workers):
            t = threading.Thread(target=worker, args=(rc, random.Random()), daemon=True)
            t.start()
            threads.append(t)

    starter = threading.Thread(target=run, daemon=True)
    starter.start()
    # The test closes stdin to stop the driver; a test that died closes it too.
    sys.stdin.buffer.read()
    stop.set()
    # A request to a node that answers nothing may never end (redis-py has
    # no socket timeout by default): wait a while, then leave it.
    deadline = time.monotonic() + 5
    starter.join(max(0, deadline - time.monotonic()))
    for t in list(threads):
        t.join(max(0, deadline - time.monotonic()))
    with lock:  # a worker still running writes no more
        out.flush()
        os.fsync(out.fileno())
        os._exit(0)


main()
