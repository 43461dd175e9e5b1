//go:build !linux

package sequence

import bolt "go.etcd.io/bbolt"

func unmapResident(db *bolt.DB) {}
