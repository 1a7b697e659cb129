package realkafka

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultVersion is the Apache Kafka version the launcher runs unless
// FENCEPOST_KAFKA_VERSION names another. Any KRaft release from 3.7 on
// starts with the same configuration (static controller.quorum.voters,
// storage formatted with StorageTool, log4j2 from an XML file); the
// suite is run on 3.7, 3.9 and 4.x (docs/testing.md, "Versions tested").
const DefaultVersion = "4.1.1"

// VersionEnv names the environment variable that overrides DefaultVersion.
const VersionEnv = "FENCEPOST_KAFKA_VERSION"

//go:embed pom.xml
var pom []byte

// Version returns the Kafka version to run: $FENCEPOST_KAFKA_VERSION, or
// DefaultVersion.
func Version() string {
	if v := strings.TrimSpace(os.Getenv(VersionEnv)); v != "" {
		return v
	}
	return DefaultVersion
}

// CacheDir returns the folder that holds one folder of jars per Kafka
// version: $XDG_CACHE_HOME/fencepost, or ~/.cache/fencepost.
func CacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "fencepost"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find a cache folder: set XDG_CACHE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "fencepost"), nil
}

// Classpath returns the Java classpath of Kafka version's broker (a
// folder wildcard, "DIR/*"). The first call on a machine runs Maven to
// copy the broker's jars and their runtime dependencies into
// cacheDir/kafka-VERSION; later calls find them there. Concurrent callers
// (two test binaries) wait for each other through a file lock. progress,
// if not nil, gets one line when Maven runs and one when it is done.
func Classpath(ctx context.Context, version, cacheDir string, progress func(string)) (string, error) {
	dir := filepath.Join(cacheDir, "kafka-"+version)
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return filepath.Join(dir, "*"), nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create the Kafka jar cache %s: %w", cacheDir, err)
	}
	lock, err := os.OpenFile(filepath.Join(cacheDir, "kafka-"+version+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock the Kafka jar cache: %w", err)
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return "", err
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(done); err == nil { // another process fetched them meanwhile
		return filepath.Join(dir, "*"), nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("mvn not found on PATH: the real-Kafka suite needs Maven (and Java 17+) to fetch the broker's jars from the Maven registry")
	}
	tmp, err := os.MkdirTemp(cacheDir, "fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), pom, 0o644); err != nil {
		return "", err
	}
	jars := filepath.Join(tmp, "jars")
	if progress != nil {
		progress(fmt.Sprintf("fetching Apache Kafka %s with Maven into %s (once per machine)", version, dir))
	}
	began := time.Now()
	cmd := exec.CommandContext(ctx, "mvn", "-B", "--no-transfer-progress", "-f", filepath.Join(tmp, "pom.xml"),
		"-Dkafka.version="+version, "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+jars)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcAttr(cmd)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn could not fetch org.apache.kafka:kafka_2.13:%s (check the version exists in the Maven registry and that the registry is reachable): %w\n%s",
			version, err, tail(out.String(), 30))
	}
	if _, err := os.Stat(filepath.Join(jars, "kafka_2.13-"+version+".jar")); err != nil {
		return "", fmt.Errorf("mvn ran but kafka_2.13-%s.jar is not in %s\n%s", version, jars, tail(out.String(), 30))
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(jars, dir); err != nil {
		return "", fmt.Errorf("move the fetched jars into the cache: %w", err)
	}
	if err := os.WriteFile(done, []byte(version+"\n"), 0o644); err != nil {
		return "", err
	}
	if progress != nil {
		progress(fmt.Sprintf("fetched Apache Kafka %s in %v", version, time.Since(began).Round(100*time.Millisecond)))
	}
	return filepath.Join(dir, "*"), nil
}

// flock takes an exclusive lock on f, polling so that ctx can end the
// wait.
func flock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("lock the Kafka jar cache: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for another process fetching the Kafka jars: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
