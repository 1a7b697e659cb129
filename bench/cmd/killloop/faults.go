//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencepost-dev/fencepost/bench/internal/childproc"
)

// brokerPhase is the phase (see tally.byPhase) from a broker kill to the
// next restart.
const brokerPhase = -1

// zombie is one pause of -mode zombie: which instance slept, how the group
// looked when it woke, and what its log says it did after waking.
type zombie struct {
	name, log string
	members   int    // members of the group when it woke; -1 unknown
	state     string // the group's state then
	from, to  int64  // the part of its log written from its waking to the next pause (or the end)

	// from its log (see readLog)
	rewound       int      // partitions reset with reason transaction_aborted
	lost          bool     // the member reported its partitions lost
	commitRefused int      // commits refused: the generation ended, or the transaction aborted at commit
	causes        []string // distinct reasons given, in order
}

// pauseInstance stops v with SIGSTOP for -pause, then wakes it with
// SIGCONT. Before waking it, it asks the group how many members it has:
// fewer than the instances shows the paused one was removed.
func (m *measurement) pauseInstance(ctx context.Context, adm *kadm.Client, v *instance) (*zombie, error) {
	z := &zombie{name: v.Name, log: v.Log, members: -1}
	v.Signal(syscall.SIGSTOP)
	select {
	case <-ctx.Done():
		v.Signal(syscall.SIGCONT)
		return nil, ctx.Err()
	case <-time.After(m.o.pause):
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	gs, err := adm.DescribeGroups(dctx, group)
	cancel()
	if err == nil {
		if g, ok := gs[group]; ok && g.Err == nil {
			z.members, z.state = len(g.Members), g.State
		}
	}
	z.from = fileSize(v.Log) // it wrote nothing while stopped
	v.Signal(syscall.SIGCONT)
	return z, nil
}

// membersText is the group's membership when the zombie woke.
func (z *zombie) membersText() string {
	if z.members < 0 {
		return "? members (DescribeGroups failed)"
	}
	return fmt.Sprintf("%d members (%s)", z.members, z.state)
}

// aborted reports whether the zombie's log shows its transaction aborted
// (or, at least-once, its commit refused or its partitions lost) after
// it woke.
func (z *zombie) aborted() bool { return z.rewound > 0 || z.commitRefused > 0 }

// The processor's log lines (zap's console encoding: time, level,
// message, JSON fields) the zombie analysis looks for.
var (
	reResetAborted = regexp.MustCompile(`partition reset\t.*"reason": "transaction_aborted"`)
	reCause        = regexp.MustCompile(`"(?:cause|error)": "((?:[^"\\]|\\.)*)"`)
	commitRefused  = []string{
		"transaction aborted at commit",             // the store aborted it: a refused TxnOffsetCommit or EndTxn
		"commit fenced: the group generation ended", // at-least-once: OffsetCommit refused
	}
	partitionsLost = "consumer group: partitions lost"
)

// readLog fills in what the zombie logged between z.from and z.to.
func (z *zombie) readLog() error {
	f, err := os.Open(z.log)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(z.from, io.SeekStart); err != nil {
		return err
	}
	n := z.to - z.from
	if z.to <= 0 {
		n = 1 << 30 // to the end
	}
	data, err := io.ReadAll(io.LimitReader(f, n))
	if err != nil {
		return err
	}
	cause := func(line string) {
		c := reCause.FindStringSubmatch(line)
		if c == nil {
			return
		}
		text, err := strconv.Unquote(`"` + c[1] + `"`)
		if err != nil {
			text = c[1]
		}
		if !slices.Contains(z.causes, text) {
			z.causes = append(z.causes, text)
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case reResetAborted.MatchString(line):
			z.rewound++
			cause(line)
		case strings.Contains(line, partitionsLost):
			z.lost = true
			cause(line)
		case slices.ContainsFunc(commitRefused, func(s string) bool { return strings.Contains(line, s) }):
			z.commitRefused++
			cause(line)
		}
	}
	return nil
}

// summary is one line about what the zombie did after waking.
func (z *zombie) summary() string {
	var did []string
	if z.lost {
		did = append(did, "its member reported its partitions lost")
	}
	if z.commitRefused > 0 {
		did = append(did, fmt.Sprintf("%d commits refused", z.commitRefused))
	}
	if z.rewound > 0 {
		did = append(did, fmt.Sprintf("aborted its transaction: %d partitions rewound (transaction_aborted)", z.rewound))
	}
	if len(did) == 0 {
		did = append(did, "nothing about its partitions or a commit in its log")
	}
	s := fmt.Sprintf("%s woke to a group of %s; %s", z.name, z.membersText(), strings.Join(did, "; "))
	if len(z.causes) > 0 {
		s += "; because: " + strings.Join(z.causes, " | ")
	}
	return s
}

// fileSize is the size of the file at path (0 if it cannot tell).
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// brokerKill is what -kill-broker did.
type brokerKill struct {
	node  int32
	roles []string      // what the node was when it was killed
	down  time.Duration // from SIGKILL until it served again
}

// name says what was killed.
func (bk *brokerKill) name() string {
	if bk.node < 0 {
		return "the embedded broker"
	}
	return fmt.Sprintf("node %d", bk.node)
}

// reTxnID finds the transactional id in a processor's log.
var reTxnID = regexp.MustCompile(`"transactional_id": "([^"]+)"`)

// killBroker SIGKILLs one Apache Kafka node (the transaction coordinator
// of the first instance's producer with exactly_once, else the leader of
// partition 0 of "out"), waits -interval while records flow, and restarts
// it.
func (m *measurement) killBroker(ctx context.Context, adm *kadm.Client, inst []*instance, sleep func(time.Duration) error) (*brokerKill, error) {
	if m.embedded != nil {
		return m.restartEmbedded(ctx, sleep)
	}
	if m.cluster == nil {
		return nil, errors.New("-kill-broker: no Apache Kafka cluster of this run to kill a node of")
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	roles := map[int32][]string{}
	victim := int32(-1)
	if m.o.guarantee == "exactly_once" {
		data, _ := os.ReadFile(inst[0].Log)
		if id := reTxnID.FindSubmatch(data); id != nil {
			if c, ok := adm.FindTxnCoordinators(qctx, string(id[1]))[string(id[1])]; ok && c.Err == nil {
				victim = c.NodeID
				roles[c.NodeID] = append(roles[c.NodeID], "transaction coordinator of "+inst[0].Name)
			}
		}
	}
	if c, ok := adm.FindGroupCoordinators(qctx, group)[group]; ok && c.Err == nil {
		roles[c.NodeID] = append(roles[c.NodeID], "group coordinator")
	}
	md, err := adm.Metadata(qctx, inputT, outputT)
	if err != nil {
		return nil, fmt.Errorf("-kill-broker: metadata: %w", err)
	}
	for _, t := range []string{outputT, inputT} {
		ps := md.Topics[t].Partitions
		for _, p := range ps.Sorted() {
			if p.Err == nil {
				roles[p.Leader] = append(roles[p.Leader], fmt.Sprintf("leader of %s/%d", t, p.Partition))
			}
		}
		if p, ok := ps[0]; ok && p.Err == nil && victim < 0 {
			victim = p.Leader
		}
	}
	if victim < 0 {
		return nil, fmt.Errorf("-kill-broker: no leader of %s/0 known", outputT)
	}
	bk := &brokerKill{node: victim, roles: roles[victim]}
	began := time.Now()
	if err := m.cluster.Kill(victim); err != nil {
		return nil, fmt.Errorf("-kill-broker: %w", err)
	}
	m.logf("broker node %d (%s) killed", victim, strings.Join(bk.roles, ", "))
	if err := sleep(m.o.interval); err != nil {
		return nil, err
	}
	if err := m.cluster.Restart(ctx, victim); err != nil {
		return nil, fmt.Errorf("-kill-broker: restarting node %d: %w", victim, err)
	}
	bk.down = time.Since(began)
	m.logf("broker node %d serves again after %v", victim, bk.down.Round(10*time.Millisecond))
	return bk, nil
}

// restartEmbedded SIGKILLs the embedded broker process (all its nodes),
// waits -interval, and starts it again on the same ports and data: on
// restart it aborts every transaction that was open and bumps its
// producer's epoch.
func (m *measurement) restartEmbedded(ctx context.Context, sleep func(time.Duration) error) (*brokerKill, error) {
	e := m.embedded
	bk := &brokerKill{node: -1, roles: []string{"every node of the embedded broker"}}
	began := time.Now()
	if !e.proc.Stop(syscall.SIGKILL, 10*time.Second) {
		return nil, errors.New("-kill-broker: the embedded broker did not die within 10s of SIGKILL")
	}
	m.logf("embedded broker killed")
	if err := sleep(m.o.interval); err != nil {
		return nil, err
	}
	e.runs++
	proc, err := m.procs.Start(m.dir, fmt.Sprintf("broker-%d", e.runs), e.bin, e.args...)
	if err != nil {
		return nil, err
	}
	if _, err := childproc.WaitBootstrap(ctx, proc, 60*time.Second); err != nil {
		return nil, fmt.Errorf("-kill-broker: restarting the embedded broker: %w (see %s)", err, proc.Log)
	}
	e.proc = proc
	bk.down = time.Since(began)
	m.logf("embedded broker serves again after %v", bk.down.Round(10*time.Millisecond))
	return bk, nil
}
