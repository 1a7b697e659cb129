//go:build unix

package main

import (
	"fmt"
	"strconv"

	"github.com/fencepost-dev/fencepost/internal/partitioner"
)

// The data of `statebench stages`: one topic of JSON click events keyed
// by user, read by both jobs (the windowed count and the join), and a
// compacted table of users, keyed the same way. Everything follows from
// the event's index, so the driver knows what each job must output
// without keeping the events.

// eventsSpec says what the events topic holds.
type eventsSpec struct {
	records    int   // events (the closing records come on top)
	users      int   // users in the table: u000000..; the events' users are 10% more, whose records an inner join drops
	partitions int   // of the events and the table, keys placed by murmur2
	rate       int   // events per second of event time
	start      int64 // event time of the first event, epoch ms
	lateEvery  int   // every lateEvery-th event is lateBy behind (0: none)
	lateBy     int64 // ms
	jitter     int64 // every event is up to this many ms behind its place (within the grace: never late by it alone)
}

// defaultStart is the event time of the first event: 2026-12-01T00:00:00Z.
const defaultStart = 1796083200000

// closeAfter is how far past the last event the closing records are:
// far enough that every window of the events has closed (an hour), near
// enough for fencepost's max_future (24 hours).
const closeAfter = 3600_000

// streamUsers is how many users the events are spread over.
func (s eventsSpec) streamUsers() int { return s.users + s.users/10 }

// mix is a 64-bit mixer (splitmix64's finalizer): the events' users and
// jitter follow from their index, in no order.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func userKey(u int) string { return fmt.Sprintf("u%06d", u) }

// user is event i's user.
func (s eventsSpec) user(i int) int { return int(mix(uint64(i)) % uint64(s.streamUsers())) }

// time is event i's event time (also its record timestamp).
func (s eventsSpec) time(i int) int64 {
	t := s.start + int64(i)*1000/int64(s.rate)
	if s.jitter > 0 {
		t -= int64(mix(uint64(i)^0x5bd1e995) % uint64(s.jitter))
	}
	if s.lateEvery > 0 && i%s.lateEvery == s.lateEvery-1 {
		t -= s.lateBy
	}
	return t
}

// event is event i: its key, JSON value, event time and partition.
func (s eventsSpec) event(i int) (key, value []byte, ts int64, partition int32) {
	u := s.user(i)
	key = []byte(userKey(u))
	ts = s.time(i)
	value = fmt.Appendf(make([]byte, 0, 80), `{"id":%d,"user":"%s","page":"/p/%d","ts":%d}`, i, key, mix(uint64(i))>>40%500, ts)
	return key, value, ts, partitioner.Murmur2(key, s.partitions)
}

// closer is the last record of partition p: an hour of event time past
// every event, so that every window of the events has closed (Kafka
// Streams and fencepost close windows on the stream time of a partition).
// Its key is in no table and its own window never closes, so neither job
// outputs anything for it.
func (s eventsSpec) closer(p int) (key, value []byte, ts int64) {
	for n := 0; ; n++ {
		k := "~close-" + strconv.Itoa(p) + "-" + strconv.Itoa(n)
		if int(partitioner.Murmur2([]byte(k), s.partitions)) == p {
			key = []byte(k)
			break
		}
	}
	ts = s.start + int64(s.records)*1000/int64(s.rate) + closeAfter
	value = fmt.Appendf(nil, `{"id":%d,"user":"%s","page":"/close","ts":%d}`, s.records+p, key, ts)
	return key, value, ts
}

// tableTime is the record timestamp of every table row: before every
// event, so that Kafka Streams, which processes a task's records in
// timestamp order, has the table loaded before the events it joins.
func (s eventsSpec) tableTime() int64 { return s.start - closeAfter }

// row is user u's table row.
func row(u int) (key, value []byte) {
	key = []byte(userKey(u))
	tiers := [...]string{"free", "plus", "pro"}
	countries := [...]string{"DE", "FR", "US", "JP", "BR", "IN"}
	value = fmt.Appendf(nil, `{"user":"%s","name":"user %d","country":"%s","tier":"%s","since":"2024-%02d-01"}`,
		key, u, countries[u%len(countries)], tiers[u%len(tiers)], 1+u%12)
	return key, value
}

// winKey is one window of one key.
type winKey struct {
	key   string
	start int64 // epoch ms
}

// expectedWindows returns the count of every window the windowed count
// must output (tumbling windows of size ms, grace ms): each partition's
// events in offset order, a window closing once the partition's stream
// time (the highest event time seen, this record's included) reaches its
// end plus the grace, a record whose window has closed dropped, as both
// engines do. It also returns how many events were dropped as late.
func (s eventsSpec) expectedWindows(size, grace int64) (map[winKey]int64, int) {
	stream := make([]int64, s.partitions)
	for p := range stream {
		stream[p] = -1 << 62
	}
	counts := make(map[winKey]int64)
	late := 0
	for i := range s.records {
		key, _, ts, p := s.event(i)
		stream[p] = max(stream[p], ts)
		start := ts - ((ts%size)+size)%size
		if start+size+grace <= stream[p] {
			late++
			continue
		}
		counts[winKey{string(key), start}]++
	}
	return counts, late
}

// expectedJoined returns how many events an inner join with the table
// outputs: those of the table's users.
func (s eventsSpec) expectedJoined() int {
	n := 0
	for i := range s.records {
		if s.user(i) < s.users {
			n++
		}
	}
	return n
}
