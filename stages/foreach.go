package stages

// ForEach is the loop most stages are: it calls fn for every record of
// in, in order. fn passes the records it makes of r to emit (none: r is
// dropped; r itself: r passes unchanged) or returns an error that fails r
// alone; wrap it with Permanent when retrying cannot help. ForEach
// returns what Process should: the emitted records, or, if any record
// failed, a *RecordErrors holding the failures and the other records'
// outputs (so only the failed records are retried). fn must not keep
// emit after it returns.
func ForEach(in []Record, fn func(r *Record, emit func(Record)) error) ([]Record, error) {
	var re RecordErrors
	re.Out = make([]Record, 0, len(in))
	cur := 0
	emit := func(r Record) { re.Emit(cur, r) }
	for i := range in {
		cur = i
		if err := fn(&in[i], emit); err != nil {
			re.Fail(i, err)
		}
	}
	if re.Failed() {
		return nil, &re
	}
	return re.Out, nil
}
