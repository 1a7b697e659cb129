package pipeline

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// stateDir is a run's hold on its state directory: a lock (one process
// per directory) and the process id kept in it.
type stateDir struct {
	lock io.Closer
	// processID names this instance across restarts on the same disk
	// (the file process-id in the directory): the transactional id
	// follows it when the member has no group_instance_id.
	id string
}

var processIDPattern = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

// holdStateDir creates dir if needed, locks it and reads (or writes) its
// process id. It fails, naming the fix, when another process holds the
// directory.
func holdStateDir(dir string) (*stateDir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state.dir %s: %w (check the path and its permissions)", dir, err)
	}
	lock, err := vfs.Default.Lock(filepath.Join(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("state.dir %s is held by another process (%v): give each processor instance a state.dir of its own", dir, err)
	}
	id, err := processID(dir)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return &stateDir{lock: lock, id: id}, nil
}

// processID reads dir/process-id, writing a new random one when the file
// is missing.
func processID(dir string) (string, error) {
	path := filepath.Join(dir, "process-id")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !processIDPattern.MatchString(id) {
			return "", fmt.Errorf("state.dir: %s holds %q, not a process id (remove the file to have a new one written)", path, id)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("state.dir: reading %s: %w", path, err)
	}
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	id := hex.EncodeToString(raw)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("state.dir: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("state.dir: writing %s: %w", path, err)
	}
	return id, nil
}

// release unlocks the directory.
func (s *stateDir) release() {
	if s != nil {
		_ = s.lock.Close()
	}
}

// processID is the directory's process id, "" without a directory.
func (s *stateDir) processID() string {
	if s == nil {
		return ""
	}
	return s.id
}
