package fastjson

// FieldEquals answers json.<name> == want, name being fs's first field
// (fs is made of that one name), for v, the doc's bytes, from the last
// member of that name's raw bytes: no value decoded or boxed. ok is
// false, and equal meaningless, when the doc is not a JSON object it
// accepted, or is parsed whole already: the caller then evaluates the
// comparison on Value (and so reports its errors). Otherwise equal is
// true when that member is a string equal to want, false when it is
// another type or absent (nil == "x" is false), as encoding/json's
// decoding of the whole value would compare.
func (d *Doc) FieldEquals(v []byte, fs *FieldSet, want string) (equal, ok bool) {
	if !d.valid || !d.object || d.err != nil || d.parsed {
		return false, false
	}
	var raw []byte
	if d.narrowPlain(fs) {
		for s := d.memberSpans(); len(s) >= 4; s = s[4:] {
			if fs.tokens[0].is(v, int(s[0]), int(s[1])) {
				raw = v[s[2]:s[3]] // the last one wins
			}
		}
	} else {
		d.eachMember(v, func(name, value []byte) {
			if fs.index(name) == 0 {
				raw = value // the last one wins
			}
		})
	}
	if len(raw) == 0 || raw[0] != '"' {
		return false, true // absent, or not a string
	}
	dec := decoder{b: raw} // the bytes themselves unless escaped or not UTF-8
	return dec.str() == want, true
}
