<?php
// The checks phpredis.php and predis.php run, each library through an
// adapter (an object with the methods below), on one client:
//
//   connect()            connects on the library's defaults, or throws
//   pipeline($cmds)      sends the commands pipelined, returns the replies
//   call($cmd)           sends one command, returns its reply
//   multi($cmds)         MULTI, the commands, EXEC through the library's
//                        transaction API; returns EXEC's replies
//   error($cmd)          sends a command that must fail, returns the error
//                        text (throws if it did not fail)
//
// A command is an array, its name first. Both libraries keep a reply's RESP
// type: an integer reply is a PHP int, a bulk string a PHP string (see each
// adapter for where that could blur), so GETID's replies are checked with
// is_int and MGETID's with is_string: "123" and 123 are told apart.

const EPOCH_MS = 1420041600000;
const TIME_SHIFT = 21;
const SHARD_BITS = 9;
const RANDOM_BITS = 10;
// How far DECODEID's time may be from this machine's clock: generous, as the
// server borrows ahead when a millisecond is used up.
const DRIFT_MS = 10 * 60 * 1000;

class CheckFailed extends Exception
{
}

function show($v)
{
    return str_replace("\n", ' ', var_export($v, true));
}

// int_id returns a GETID reply, which must be an integer reply: a PHP int.
function int_id($what, $reply)
{
    if (!is_int($reply) || $reply <= 0) {
        throw new CheckFailed("$what = " . show($reply) . ' (' . gettype($reply) . '), want a positive int');
    }
    return $reply;
}

// bulk_ids returns the IDs of MGETID's array of n bulk strings. PHP ints
// are 64 bits: an ID fits.
function bulk_ids($what, $reply, $n)
{
    if (!is_array($reply) || count($reply) !== $n) {
        throw new CheckFailed("$what = " . show($reply) . ", want an array of $n");
    }
    $ids = array();
    foreach (array_values($reply) as $i => $b) {
        if (!is_string($b) || !preg_match('/\A[1-9][0-9]{0,18}\z/', $b)) {
            throw new CheckFailed("$what element #$i = " . show($b) . ', want a decimal string');
        }
        $ids[] = intval($b);
    }
    return $ids;
}

// Strictly increasing in the order received also means distinct.
function want_increasing($what, array $ids)
{
    for ($i = 1; $i < count($ids); $i++) {
        if ($ids[$i] <= $ids[$i - 1]) {
            throw new CheckFailed("$what: ID #$i = {$ids[$i]}, not above {$ids[$i - 1]}");
        }
    }
}

function checks()
{
    return array(
        'connect' => function ($a) {
            $a->connect();
        },

        'GETID exact' => function ($a) {
            $prev = 0;
            for ($round = 0; $round < 100; $round++) {
                $replies = $a->pipeline(array_fill(0, 1000, array('GETID')));
                if (!is_array($replies) || count($replies) !== 1000) {
                    throw new CheckFailed("round $round: " . (is_array($replies) ? count($replies) : show($replies)) . ' replies, want 1000');
                }
                foreach (array_values($replies) as $i => $reply) {
                    $n = $round * 1000 + $i;
                    $id = int_id("GETID #$n", $reply);
                    if ($id <= $prev) {
                        throw new CheckFailed("GETID #$n = $id, not above $prev");
                    }
                    $prev = $id;
                }
            }
        },

        'MGETID 10' => function ($a) {
            want_increasing('MGETID 10', bulk_ids('MGETID 10', $a->call(array('MGETID', '10')), 10));
        },

        'MULTI, GETID, GETID, MGETID 2, EXEC' => function ($a) {
            $replies = $a->multi(array(array('GETID'), array('GETID'), array('MGETID', '2')));
            if (!is_array($replies) || count($replies) !== 3) {
                throw new CheckFailed('EXEC = ' . show($replies) . ', want 3 replies');
            }
            $replies = array_values($replies);
            want_increasing('GETID, GETID, MGETID 2', array_merge(
                array(int_id('EXEC reply #0', $replies[0]), int_id('EXEC reply #1', $replies[1])),
                bulk_ids('EXEC reply #2 (MGETID 2)', $replies[2], 2)
            ));
        },

        // DECODEID replies with a map, which RESP2 writes as an array of
        // name, value pairs in cmdDecodeID's order.
        'DECODEID of a fresh GETID' => function ($a) {
            $id = int_id('GETID', $a->call(array('GETID')));
            $reply = $a->call(array('DECODEID', (string) $id));
            if (!is_array($reply) || count($reply) !== 10) {
                throw new CheckFailed('DECODEID = ' . show($reply) . ', want an array of 10');
            }
            $reply = array_values($reply);
            $f = array();
            $names = array();
            for ($i = 0; $i < 10; $i += 2) {
                $names[] = $reply[$i];
                $f[$reply[$i]] = $reply[$i + 1];
            }
            if ($names !== array('unix-ms', 'time', 'server-id', 'shard', 'random')) {
                throw new CheckFailed('DECODEID field names ' . show($names));
            }
            foreach (array('unix-ms', 'server-id', 'shard', 'random') as $k) {
                if (!is_int($f[$k])) {
                    throw new CheckFailed("DECODEID $k = " . show($f[$k]) . ', want an int');
                }
            }
            $want = ($id >> TIME_SHIFT) + EPOCH_MS;
            if ($f['unix-ms'] !== $want) {
                throw new CheckFailed("DECODEID unix-ms {$f['unix-ms']}, want $want ((id >> 21) + epoch)");
            }
            $drift = $f['unix-ms'] - (int) round(microtime(true) * 1000);
            if (abs($drift) > DRIFT_MS) {
                throw new CheckFailed("DECODEID unix-ms {$f['unix-ms']} is $drift ms from this machine's clock");
            }
            $time = gmdate('Y-m-d\TH:i:s', intdiv($want, 1000)) . sprintf('.%03dZ', $want % 1000);
            if ($f['time'] !== $time) {
                throw new CheckFailed('DECODEID time ' . show($f['time']) . ', want ' . show($time));
            }
            $low = ($f['server-id'] << (SHARD_BITS + RANDOM_BITS)) | ($f['shard'] << RANDOM_BITS) | $f['random'];
            $lowWant = $id & ((1 << TIME_SHIFT) - 1);
            if ($low !== $lowWant) {
                throw new CheckFailed("DECODEID server-id, shard and random make $low, want the ID's low 21 bits $lowWant");
            }
        },

        'MGETID 0 is an error, then GETID' => function ($a) {
            $err = $a->error(array('MGETID', '0'));
            if (strpos($err, 'out of range') === false) {
                throw new CheckFailed('MGETID 0 failed with ' . show($err) . ', want "out of range"');
            }
            int_id('GETID after the error', $a->call(array('GETID')));
        },
    );
}

// run runs every check with adapter $a against $argv's address, prints a
// line for each and exits 1 if any failed.
function run($a, array $argv)
{
    if (count($argv) !== 2) {
        fwrite(STDERR, "usage: php {$argv[0]} HOST:PORT\n");
        exit(2);
    }
    $failed = false;
    $connected = false;
    foreach (checks() as $name => $check) {
        if ($name !== 'connect' && !$connected) {
            echo "FAIL $name: no connection\n";
            continue;
        }
        $t0 = microtime(true);
        try {
            $check($a);
            printf("ok %s (%.0f ms)\n", $name, (microtime(true) - $t0) * 1000);
            $connected = true;
        } catch (Throwable $e) { // any exception is a failed check, not a crash
            $failed = true;
            echo "FAIL $name: " . get_class($e) . ': ' . $e->getMessage() . "\n";
        }
    }
    exit($failed ? 1 : 0);
}
