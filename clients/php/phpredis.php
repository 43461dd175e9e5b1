<?php
// Checks idserver with phpredis (the PHP extension, Debian php-redis 5.3.7)
// on its defaults.
//
// Usage: php phpredis.php HOST:PORT
//
// Prints "ok NAME" or "FAIL NAME: why" for each check of checks.php and
// exits 1 if any failed. clients/scripts_test.go runs it.
//
// rawCommand sends any command. phpredis decodes a reply by its RESP type:
// an integer reply becomes a PHP int, a bulk string a PHP string (with no
// serializer set, the default), so is_int is exact. An error reply is not
// thrown: the call returns false and getLastError() has the text.
require __DIR__ . '/checks.php';

class PhpRedisAdapter
{
    private $host;
    private $port;
    private $r;

    public function __construct($addr)
    {
        $i = strrpos($addr, ':');
        $this->host = substr($addr, 0, $i);
        $this->port = (int) substr($addr, $i + 1);
        $this->r = new Redis();
    }

    // connect is phpredis's connect (it throws RedisException when refused),
    // and PING, which phpredis 5 answers with true.
    public function connect()
    {
        if ($this->r->connect($this->host, $this->port) !== true) {
            throw new CheckFailed("connect({$this->host}, {$this->port}) failed");
        }
        $pong = $this->r->ping();
        if ($pong !== true) {
            throw new CheckFailed('PING = ' . show($pong) . ', want true');
        }
    }

    // pipeline is phpredis's pipeline mode: the commands are buffered and
    // sent at exec().
    public function pipeline(array $cmds)
    {
        $this->r->pipeline();
        foreach ($cmds as $cmd) {
            $this->r->rawCommand(...$cmd);
        }
        return $this->r->exec();
    }

    public function call(array $cmd)
    {
        $this->r->clearLastError();
        $reply = $this->r->rawCommand(...$cmd);
        if ($reply === false && $this->r->getLastError() !== null) {
            throw new CheckFailed("{$cmd[0]}: error " . show($this->r->getLastError()));
        }
        return $reply;
    }

    // multi is phpredis's multi() mode (Redis::MULTI, its default): MULTI
    // is sent at once, each command is queued by the server, exec() sends
    // EXEC and returns its replies.
    public function multi(array $cmds)
    {
        $this->r->multi();
        foreach ($cmds as $cmd) {
            $this->r->rawCommand(...$cmd);
        }
        return $this->r->exec();
    }

    public function error(array $cmd)
    {
        $this->r->clearLastError();
        $reply = $this->r->rawCommand(...$cmd);
        if ($reply !== false || $this->r->getLastError() === null) {
            throw new CheckFailed("{$cmd[0]} = " . show($reply) . ', want an error (false and getLastError())');
        }
        return $this->r->getLastError();
    }
}

run(new PhpRedisAdapter($argv[1] ?? ''), $argv);
