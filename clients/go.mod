module github.com/idserver/idserver/clients

go 1.26.8

require (
	github.com/go-redis/redis/v8 v8.11.5
	github.com/gomodule/redigo v1.9.3
	github.com/idserver/idserver v0.0.0-00010101000000-000000000000
	github.com/mediocregopher/radix/v4 v4.1.4
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	github.com/valkey-io/valkey-go v1.0.79
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/tilinna/clock v1.0.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/idserver/idserver => ../
