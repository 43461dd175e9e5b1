package slots

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/idserver/idserver/internal/atomicfile"
)

// IDFile is the name of the file in dir that keeps the node's ID.
const IDFile = "idserver.node-id"

// LoadID returns the node ID kept in dir, making and keeping a new one on
// the first start: a node keeps its ID across restarts, as Redis keeps it
// in nodes.conf, so that clients and the other nodes know it again. The
// file is written whole or not at all (atomicfile.Write).
func LoadID(dir string) (string, error) {
	path := filepath.Join(dir, IDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !ValidID(id) {
			return "", fmt.Errorf("node id file %s holds %q, not 40 hex digits (remove it to make a new id)", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 20)
	rand.Read(raw) // never fails (crypto/rand)
	id := hex.EncodeToString(raw)
	if err := atomicfile.Write(path, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("keep node id: %w", err)
	}
	return id, nil
}
