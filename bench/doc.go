// Package bench measures this processor against its peers on the same
// in-process broker and the same data, in the same run (these machines are
// shared and noisy, so only ratios measured together mean anything).
//
//	go test ./bench -run '^$' -bench Consume -benchtime 1x
//
// See README.md in this folder for the figures and how to read them.
package bench
