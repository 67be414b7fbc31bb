package retrieval

// porterStem returns the stem of a lower-case ASCII word by Martin Porter's
// 1980 algorithm, as in his reference C implementation (with the later
// "bli"→"ble" and "logi"→"log" rules). Words of one or two letters are left
// as they are.
func porterStem(word string) string {
	if len(word) <= 2 {
		return word
	}
	s := porter{b: []byte(word), k: len(word) - 1}
	s.step1ab()
	if s.k > 0 {
		s.step1c()
		s.step2()
		s.step3()
		s.step4()
		s.step5()
	}
	return string(s.b[:s.k+1])
}

type porter struct {
	b    []byte
	k, j int // b[0..k] is the word; j marks the end of the stem in a suffix test
}

// cons reports whether b[i] is a consonant.
func (p *porter) cons(i int) bool {
	switch p.b[i] {
	case 'a', 'e', 'i', 'o', 'u':
		return false
	case 'y':
		return i == 0 || !p.cons(i-1)
	}
	return true
}

// m measures b[0..j] as [C](VC)^m[V]: the number of times a consonant
// follows a vowel.
func (p *porter) m() int {
	n := 0
	prev := p.cons(0)
	for i := 1; i <= p.j; i++ {
		c := p.cons(i)
		if c && !prev {
			n++
		}
		prev = c
	}
	return n
}

// vowelInStem reports whether b[0..j] has a vowel.
func (p *porter) vowelInStem() bool {
	for i := 0; i <= p.j; i++ {
		if !p.cons(i) {
			return true
		}
	}
	return false
}

// doublec reports whether b[j-1..j] is a double consonant.
func (p *porter) doublec(j int) bool {
	return j >= 1 && p.b[j] == p.b[j-1] && p.cons(j)
}

// cvc reports whether b[i-2..i] is consonant-vowel-consonant and the last
// consonant is not w, x or y.
func (p *porter) cvc(i int) bool {
	if i < 2 || !p.cons(i) || p.cons(i-1) || !p.cons(i-2) {
		return false
	}
	switch p.b[i] {
	case 'w', 'x', 'y':
		return false
	}
	return true
}

// ends reports whether b[0..k] ends with s, setting j to the end of the stem.
func (p *porter) ends(s string) bool {
	n := len(s)
	if n > p.k+1 || string(p.b[p.k-n+1:p.k+1]) != s {
		return false
	}
	p.j = p.k - n
	return true
}

// setTo replaces b[j+1..k] with s.
func (p *porter) setTo(s string) {
	p.b = append(p.b[:p.j+1], s...)
	p.k = p.j + len(s)
}

func (p *porter) r(s string) {
	if p.m() > 0 {
		p.setTo(s)
	}
}

func (p *porter) step1ab() {
	if p.b[p.k] == 's' {
		switch {
		case p.ends("sses"):
			p.k -= 2
		case p.ends("ies"):
			p.setTo("i")
		case p.b[p.k-1] != 's':
			p.k--
		}
	}
	if p.ends("eed") {
		if p.m() > 0 {
			p.k--
		}
	} else if (p.ends("ed") || p.ends("ing")) && p.vowelInStem() {
		p.k = p.j
		switch {
		case p.ends("at"):
			p.setTo("ate")
		case p.ends("bl"):
			p.setTo("ble")
		case p.ends("iz"):
			p.setTo("ize")
		case p.doublec(p.k):
			p.k--
			switch p.b[p.k] {
			case 'l', 's', 'z':
				p.k++
			}
		default:
			p.j = p.k
			if p.m() == 1 && p.cvc(p.k) {
				p.setTo("e")
			}
		}
	}
	p.b = p.b[:p.k+1]
}

func (p *porter) step1c() {
	if p.ends("y") && p.vowelInStem() {
		p.b[p.k] = 'i'
	}
}

func (p *porter) try(pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if p.ends(pairs[i]) {
			p.r(pairs[i+1])
			return
		}
	}
}

func (p *porter) step2() {
	if p.k < 1 {
		return
	}
	switch p.b[p.k-1] {
	case 'a':
		p.try("ational", "ate", "tional", "tion")
	case 'c':
		p.try("enci", "ence", "anci", "ance")
	case 'e':
		p.try("izer", "ize")
	case 'l':
		p.try("bli", "ble", "alli", "al", "entli", "ent", "eli", "e", "ousli", "ous")
	case 'o':
		p.try("ization", "ize", "ation", "ate", "ator", "ate")
	case 's':
		p.try("alism", "al", "iveness", "ive", "fulness", "ful", "ousness", "ous")
	case 't':
		p.try("aliti", "al", "iviti", "ive", "biliti", "ble")
	case 'g':
		p.try("logi", "log")
	}
}

func (p *porter) step3() {
	switch p.b[p.k] {
	case 'e':
		p.try("icate", "ic", "ative", "", "alize", "al")
	case 'i':
		p.try("iciti", "ic")
	case 'l':
		p.try("ical", "ic", "ful", "")
	case 's':
		p.try("ness", "")
	}
}

func (p *porter) step4() {
	if p.k < 1 {
		return
	}
	matched := false
	any := func(suffixes ...string) bool {
		for _, s := range suffixes {
			if p.ends(s) {
				return true
			}
		}
		return false
	}
	switch p.b[p.k-1] {
	case 'a':
		matched = any("al")
	case 'c':
		matched = any("ance", "ence")
	case 'e':
		matched = any("er")
	case 'i':
		matched = any("ic")
	case 'l':
		matched = any("able", "ible")
	case 'n':
		matched = any("ant", "ement", "ment", "ent")
	case 'o':
		if p.ends("ion") && p.j >= 0 && (p.b[p.j] == 's' || p.b[p.j] == 't') {
			matched = true
		} else {
			matched = any("ou")
		}
	case 's':
		matched = any("ism")
	case 't':
		matched = any("ate", "iti")
	case 'u':
		matched = any("ous")
	case 'v':
		matched = any("ive")
	case 'z':
		matched = any("ize")
	}
	if matched && p.m() > 1 {
		p.k = p.j
		p.b = p.b[:p.k+1]
	}
}

func (p *porter) step5() {
	p.j = p.k
	if p.b[p.k] == 'e' {
		a := p.m()
		if a > 1 || a == 1 && !p.cvc(p.k-1) {
			p.k--
		}
	}
	if p.b[p.k] == 'l' && p.doublec(p.k) && p.m() > 1 {
		p.k--
	}
	p.b = p.b[:p.k+1]
}
