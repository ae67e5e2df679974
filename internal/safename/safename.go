// Package safename checks the plain names talkops uses as path elements and labels (run
// ids, rubric ids, sandbox ids): letters, digits, '.', '_' and '-', starting with a letter
// or digit.
//
// A loop rather than a regexp: `[A-Za-z0-9._-]{0,63}` compiles to 64 copies of the class,
// about 30 KB built at every start of the binary whether or not a name is checked.
package safename

// Valid reports whether s is 1 to maxLen ASCII letters, digits, '.', '_' or '-', starting
// with a letter or digit: what `^[A-Za-z0-9][A-Za-z0-9._-]{0,maxLen-1}$` matches.
func Valid(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
