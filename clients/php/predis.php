<?php
// Checks idserver with Predis (Debian php-predis 1.1.10, also installed as
// php-nrk-predis) on its defaults.
//
// Usage: php predis.php HOST:PORT
//
// Prints "ok NAME" or "FAIL NAME: why" for each check of checks.php and
// exits 1 if any failed. clients/scripts_test.go runs it.
//
// Predis knows commands by name from its server profile, and GETID is not
// one: one-off commands go through Client::executeRaw, and inside a
// pipeline or a transaction as Predis\Command\RawCommand objects through
// executeCommand, the same raw command executeRaw builds. A RawCommand
// leaves replies as the connection decodes them: an integer reply becomes a
// PHP int (StreamConnection keeps the text only if (int) would change it,
// which a 64-bit PHP never needs for an ID), a bulk string a PHP string; so
// is_int is exact here. executeRaw does not throw on an error reply: it
// returns the error's text and sets its $error argument.
require __DIR__ . '/checks.php';
require 'Predis/autoload.php';

use Predis\Command\RawCommand;

class PredisAdapter
{
    private $client;

    public function __construct($addr)
    {
        $this->client = new Predis\Client('tcp://' . $addr);
    }

    // connect is Client::connect (Predis otherwise connects on the first
    // command), then PING, which Predis answers with its 'PONG' status.
    public function connect()
    {
        $this->client->connect();
        if (!$this->client->isConnected()) {
            throw new CheckFailed('not connected after connect()');
        }
        $pong = $this->client->executeRaw(array('PING'), $error);
        if ($error || $pong !== 'PONG') {
            throw new CheckFailed('PING = ' . show($pong) . ', want PONG');
        }
    }

    // pipeline is Client::pipeline: the commands are buffered and written
    // together by execute(), then the replies read.
    public function pipeline(array $cmds)
    {
        return $this->client->pipeline(function ($pipe) use ($cmds) {
            foreach ($cmds as $cmd) {
                $pipe->executeCommand(new RawCommand($cmd));
            }
        });
    }

    public function call(array $cmd)
    {
        $reply = $this->client->executeRaw($cmd, $error);
        if ($error) {
            throw new CheckFailed("{$cmd[0]}: error " . show($reply));
        }
        return $reply;
    }

    // multi is Client::transaction: MULTI, each command (which must be
    // answered QUEUED), EXEC, whose replies it returns.
    public function multi(array $cmds)
    {
        return $this->client->transaction(function ($tx) use ($cmds) {
            foreach ($cmds as $cmd) {
                $tx->executeCommand(new RawCommand($cmd));
            }
        });
    }

    public function error(array $cmd)
    {
        $reply = $this->client->executeRaw($cmd, $error);
        if (!$error) {
            throw new CheckFailed("{$cmd[0]} = " . show($reply) . ', want an error');
        }
        return $reply;
    }
}

run(new PredisAdapter($argv[1] ?? ''), $argv);
